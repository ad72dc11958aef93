package recorder

import (
	"context"
	"crypto/tls"
	_ "embed" // Lua scripts
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/agui-proxy/agui-proxy/agui"
)

// Lua scripts, one per multi-key write; each file lists its KEYS and ARGV.
var (
	//go:embed create_run.lua
	createRunLua string
	//go:embed append.lua
	appendLua string
	//go:embed finish_run.lua
	finishRunLua string
	//go:embed delete_run.lua
	deleteRunLua string
	//go:embed write_checkpoints.lua
	writeCheckpointsLua string
	//go:embed lease.lua
	leaseLua string
	//go:embed renew_leases.lua
	renewLeasesLua string
	//go:embed stop.lua
	stopLua string
	//go:embed delete_thread.lua
	deleteThreadLua string

	createRunScript    = redis.NewScript(createRunLua)
	appendScript       = redis.NewScript(appendLua)
	finishRunScript    = redis.NewScript(finishRunLua)
	deleteRunScript    = redis.NewScript(deleteRunLua)
	writeCkptsScript   = redis.NewScript(writeCheckpointsLua)
	leaseScript        = redis.NewScript(leaseLua)
	renewLeasesScript  = redis.NewScript(renewLeasesLua)
	stopScript         = redis.NewScript(stopLua)
	deleteThreadScript = redis.NewScript(deleteThreadLua)
)

// Connection defaults of a RedisStore (see RedisConfig.Options).
const (
	// DefaultRedisTimeout is the read and write timeout of every Redis command. A hung Redis
	// is noticed after this long; the writer then buffers and retries.
	DefaultRedisTimeout = 2 * time.Second
	// DefaultRedisMaxRetries is how often go-redis re-sends a command after a network error or
	// timeout. Retries are safe for every write of this store: all of them are idempotent
	// scripts (append skips seqs already stored).
	DefaultRedisMaxRetries = 2
	// DefaultRedisPoolTimeout is how long a command waits for a free pool connection; shorter
	// than DefaultRedisTimeout so a pool exhausted by slow commands fails fast.
	DefaultRedisPoolTimeout = time.Second
	// DefaultRedisWritePoolSize is the size of the writer pool (Append, FinishRun). The Writer
	// issues one call at a time, so a few connections are plenty.
	DefaultRedisWritePoolSize = 4
)

// DefaultRedisReadPoolSize is the size of the pool used by every other method: 8 per CPU.
var DefaultRedisReadPoolSize = 8 * runtime.GOMAXPROCS(0)

// RedisConfig configures a RedisStore.
type RedisConfig struct {
	// URL is a redis:// or rediss:// URL (redis.ParseURL) of one server, e.g. the value of
	// AGUI_REDIS_URL. Ignored when Options is set. Exactly one of URL/Options, ClusterAddrs
	// and SentinelAddrs may be set.
	URL string
	// ClusterAddrs are seed addresses (host:port) of a Redis Cluster; the client learns the
	// other nodes and the slot map from them.
	ClusterAddrs []string
	// SentinelAddrs are the addresses (host:port) of the sentinels watching SentinelMaster;
	// the store talks to whichever server they name master and follows failovers.
	SentinelAddrs []string
	// SentinelMaster is the master's name in the sentinels' configuration.
	SentinelMaster string
	// SentinelPassword authenticates to the sentinels (the data nodes use Password).
	SentinelPassword string
	// Username and Password authenticate to the data nodes of every topology; with URL they
	// replace the URL's user info when set.
	Username, Password string
	// TLS, when set, is used for every connection to the data nodes (and sentinels); with URL
	// it replaces what the rediss:// scheme gave.
	TLS *tls.Config
	// DB selects the database (single server and Sentinel; Cluster has only 0). With URL it
	// replaces the URL's path when not zero.
	DB int
	// WaitReplicas, when above zero, makes every Append and FinishRun end with WAIT
	// WaitReplicas WaitTimeout on the connection that wrote: the call returns only once that
	// many replicas hold the write, or fails with ErrNotReplicated (the write stays in the
	// master and is retried). With Sync durability a client then sees an event only once it
	// is on a replica, so a master that dies right after cannot take it along. Costs one
	// replication round trip per call (see deploy/README.md, "Failover").
	WaitReplicas int
	// WaitTimeout bounds each WAIT (default DefaultWaitTimeout).
	WaitTimeout time.Duration
	// Prefix starts every key (default DefaultPrefix). It must not contain '{', '}',
	// whitespace or control characters (ErrInvalidPrefix).
	Prefix string
	// TTL removes a thread's keys TTL after its last write (each append refreshes the run's and
	// the thread's keys; creating or finishing a run refreshes all the thread's keys). Zero keeps
	// them forever.
	TTL time.Duration
	// MaxEventsPerRun trims each run's stream with XADD MAXLEN ~ (approximate: Redis trims at
	// whole stream nodes, so somewhat more may be kept). Zero keeps every event.
	MaxEventsPerRun int64
	// Options, when set, replaces both the URL and this package's connection defaults; it is
	// used as given for both pools (copied, then PoolSize is the caller's). Nil: URL parsed,
	// then ReadTimeout/WriteTimeout DefaultRedisTimeout, MaxRetries DefaultRedisMaxRetries,
	// PoolTimeout DefaultRedisPoolTimeout, ContextTimeoutEnabled, and two clients: one with
	// DefaultRedisWritePoolSize connections (plus as many for pipelines) for Append and
	// FinishRun, one with DefaultRedisReadPoolSize (plus as many) for everything else, each
	// with one idle connection kept warm and MaxActiveConns = PoolSize.
	Options *redis.Options
	// Logger receives warnings (data loss detected, configuration risks). Nil: discard.
	Logger *slog.Logger
	// FollowQueue bounds each live Subscription's queue (see Follow): events the store's tail
	// goroutine handed over and the subscriber has not read yet. Overflow ends the
	// subscription with ErrSlowSubscriber. Zero: DefaultFollowQueue.
	FollowQueue int
	// FollowBlock is how long the tail goroutine's XREAD blocks, and how long a followed run
	// stays quiet before its status is read to notice its end. Zero, or more than
	// DefaultFollowBlock: DefaultFollowBlock.
	FollowBlock time.Duration
	// FollowPoll is, on a Redis Cluster whose servers lack sharded pub/sub (Redis 6) only,
	// the pause of the live tail after a read that returned nothing: there the tail reads
	// every followed stream each round (one XREAD per followed hash slot per FollowPoll)
	// instead of waiting for notifications (see Follow). Zero, or more than FollowBlock:
	// DefaultFollowPoll.
	FollowPoll time.Duration
}

// RedisStore is the Store on Redis (Streams for events, hashes and lists for metadata). All
// multi-key writes are Lua scripts, so each is atomic; see the package documentation for the
// key layout. It holds two connection pools: one used only by Append and FinishRun (the
// recorder's path), one for everything else, so a storm of reads cannot starve recording.
// It also implements Leaser.
// It is safe for concurrent use. It implements Follower with one tail goroutine and a third,
// small pool of its own, both started by the first Follow and stopped by Close.
type RedisStore struct {
	prefix string
	ttlMs  int64
	maxLen int64
	w, r   redis.UniversalClient
	spec   clientSpec
	waitN  int   // WAIT this many replicas after each write (0: no WAIT)
	waitMs int64 // WAIT timeout
	// appendBySlot makes Append send one append.lua call per slot (Cluster); elsewhere one
	// call carries the runs of every thread.
	appendBySlot bool
	log          *slog.Logger
	closed       atomic.Bool
	nowFunc      func() time.Time

	followQueue int
	followBlock time.Duration
	followPoll  time.Duration
	tailOpts    redis.Options // the tail client's options (see newTailer)
	tailMu      sync.Mutex    // guards tail's creation and Close
	tail        *tailer       // nil until the first Follow
	// co coalesces the reads and creations of run starts into shared pipelines on r.
	co coalescer
	// errGen counts the failed appends: after one (a restart, a failover, a lost reply) no
	// run takes append.lua's fast path before a full write says where it stands.
	errGen atomic.Uint64
	// noSPublish is set once the server refused SPUBLISH (Redis 6): the plain fast path
	// stops sending it (the live tail then reads every followed stream, see tailer).
	noSPublish atomic.Bool
}

// redisMetaEvery is the longest a run streams on append.lua's fast path (its events only)
// before a full write brings its metadata up to date: the run hash's "last" and "updated",
// its lease (renewed by that write; with a lease, a third of its TTL when shorter: once per
// lease interval, so the lease loop renews the few runs whose write just missed it) and its
// keys' TTLs, and reads a stop asked from another replica. Full writes are most of Redis's
// work at many streams (at 2,000 streams at 20 ms, once per second per run: 22% of the runs'
// writes, and append.lua the largest share of Redis CPU); at 2 s and a third of the TTL,
// against 1 s and a sixth, Redis CPU per event fell from 5.0-5.1 to 3.5-3.8 us (same run, A
// B A B, on a busy machine).
const redisMetaEvery = 2 * time.Second

// NewRedisStore connects to Redis and checks it answers PING.
func NewRedisStore(ctx context.Context, cfg RedisConfig) (*RedisStore, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if err := validatePrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	if cfg.TTL < 0 || cfg.MaxEventsPerRun < 0 {
		return nil, fmt.Errorf("recorder: negative TTL %v or MaxEventsPerRun %d", cfg.TTL, cfg.MaxEventsPerRun)
	}
	if cfg.WaitReplicas < 0 || cfg.WaitTimeout < 0 {
		return nil, fmt.Errorf("recorder: negative WaitReplicas %d or WaitTimeout %v", cfg.WaitReplicas, cfg.WaitTimeout)
	}
	spec, err := parseTopology(cfg)
	if err != nil {
		return nil, err
	}
	wo, ro, to := spec.single, spec.single, spec.single
	if cfg.Options == nil {
		// go-redis keeps pipelines (Append, the reads) in a dedicated pool next to the main
		// one; both are bounded, so each client holds at most PoolSize + PipelinePoolSize
		// (per node on Cluster).
		wo.PoolSize, wo.MaxActiveConns, wo.PipelinePoolSize = DefaultRedisWritePoolSize, DefaultRedisWritePoolSize, DefaultRedisWritePoolSize
		ro.PoolSize, ro.MaxActiveConns, ro.PipelinePoolSize = DefaultRedisReadPoolSize, DefaultRedisReadPoolSize, DefaultRedisReadPoolSize
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &RedisStore{
		prefix:  cfg.Prefix,
		ttlMs:   cfg.TTL.Milliseconds(),
		maxLen:  cfg.MaxEventsPerRun,
		w:       spec.client(wo),
		r:       spec.client(ro),
		spec:    spec,
		waitN:   cfg.WaitReplicas,
		waitMs:  cfg.WaitTimeout.Milliseconds(),
		log:     log,
		nowFunc: time.Now,

		followQueue: cfg.FollowQueue,
		followBlock: cfg.FollowBlock,
		followPoll:  cfg.FollowPoll,
		tailOpts:    tailOptions(to),
	}
	s.co.c, s.co.bounded = s.r, ro.ContextTimeoutEnabled
	_, s.appendBySlot = s.w.(*redis.ClusterClient)
	if s.waitMs <= 0 {
		s.waitMs = DefaultWaitTimeout.Milliseconds()
	}
	if s.followQueue <= 0 {
		s.followQueue = DefaultFollowQueue
	}
	if s.followBlock <= 0 || s.followBlock > DefaultFollowBlock {
		s.followBlock = DefaultFollowBlock
	}
	if s.followPoll <= 0 || s.followPoll > s.followBlock {
		s.followPoll = min(DefaultFollowPoll, s.followBlock)
	}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// CheckConfig reads the server settings that decide what a crash or memory pressure can lose
// and logs a warning for each risky one: maxmemory-policy other than noeviction or volatile-*
// (events may be evicted), appendonly no (a restart loses everything since the last
// snapshot), and, with WaitReplicas, a master with fewer connected replicas than that (every
// write would fail with ErrNotReplicated). It returns the warnings it logged, each once. On
// Cluster every master is checked. A server that refuses CONFIG (managed Redis) gives one
// warning saying so, never an error.
func (s *RedisStore) CheckConfig(ctx context.Context) []string {
	var mu sync.Mutex
	var warnings []string
	seen := map[string]bool{}
	warn := func(node, msg string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		s.log.Warn(msg, append(args, "node", node)...)
		if !seen[msg] {
			seen[msg] = true
			warnings = append(warnings, msg)
		}
	}
	check := func(ctx context.Context, c redis.Cmdable, node string) {
		if s.waitN > 0 {
			repl, err := c.Info(ctx, "replication").Result()
			if err == nil && connectedReplicas(repl) < s.waitN {
				warn(node, "redis: a master has fewer connected replicas than AGUI_REDIS_WAIT_REPLICAS; writes will fail until they connect",
					"connected", connectedReplicas(repl), "wait_replicas", s.waitN)
			}
		}
		vals, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			warn(node, "redis: cannot read server configuration; check maxmemory-policy and appendonly by hand", "err", err)
			return
		}
		if p := vals["maxmemory-policy"]; p != "noeviction" && !strings.HasPrefix(p, "volatile-") {
			warn(node, "redis: maxmemory-policy lets Redis evict recorded events; use noeviction or volatile-* with a TTL", "maxmemory-policy", p)
		}
		if vals, err = c.ConfigGet(ctx, "appendonly").Result(); err != nil {
			warn(node, "redis: cannot read server configuration; check appendonly by hand", "err", err)
			return
		}
		if vals["appendonly"] != "yes" {
			warn(node, "redis: appendonly is off; a Redis restart loses every event written since the last snapshot", "appendonly", vals["appendonly"])
		}
	}
	cc, ok := s.r.(*redis.ClusterClient)
	if !ok {
		check(ctx, s.r, s.spec.topology.String())
		return warnings
	}
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		check(ctx, c, c.Options().Addr)
		return nil
	}); err != nil {
		warn("cluster", "redis: cannot reach every cluster master to check its configuration", "err", err)
	}
	return warnings
}

// connectedReplicas reads connected_slaves from INFO replication (-1 when absent).
func connectedReplicas(info string) int {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			n, err := strconv.Atoi(v)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// scriptError maps a script's error reply to the package's sentinels.
func scriptError(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case redis.HasErrorPrefix(err, "NOTHREAD"):
		return fmt.Errorf("%s: %w", what, ErrThreadNotFound)
	case redis.HasErrorPrefix(err, "ROOMMISMATCH"):
		return fmt.Errorf("%s: %w", what, ErrThreadRoomMismatch)
	case redis.HasErrorPrefix(err, "RUNEXISTS"):
		return fmt.Errorf("%s: %w", what, ErrRunAlreadyStarted)
	case redis.HasErrorPrefix(err, "NORUN"):
		return fmt.Errorf("%s: %w", what, ErrRunNotFound)
	case redis.HasErrorPrefix(err, "BUSY"):
		return fmt.Errorf("%s: %w", what, ErrThreadBusy)
	case errors.Is(err, redis.ErrClosed):
		return fmt.Errorf("%s: %w", what, ErrClosed)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (s *RedisStore) check() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (s *RedisStore) nowMs() int64 { return s.nowFunc().UnixMilli() }

// CreateRun implements Store.
func (s *RedisStore) CreateRun(ctx context.Context, run Run, opts CreateOptions) (Thread, error) {
	if err := validateRun(run); err != nil {
		return Thread{}, err
	}
	if err := s.check(); err != nil {
		return Thread{}, err
	}
	k, _ := keysFor(s.prefix, run.ThreadID, run.RunID)
	parentKey := k.run
	if run.ParentRunID != "" {
		parentKey = key(s.prefix, run.ThreadID, kindRun, run.ParentRunID)
	}
	// The index entry goes in the same pipeline (one round trip). It is written whatever the
	// script answers: an entry for a thread this owner does not hold (a refused run) is
	// dropped by ListThreads, which checks every entry against the thread's owner and route.
	// Concurrent creations share pipelines (EVALSHA); after a Redis restart emptied the script
	// cache the call is made alone with EVAL, which loads the script.
	now := opts.startTime(s.nowFunc()).UnixMilli()
	keys := []string{k.thread, k.runs, k.run, parentKey}
	args := []any{run.RunID, run.ParentRunID, run.Epoch, run.Owner, run.Route, now, s.ttlMs, k.base,
		run.Node, leaseMs(run.LeaseUntil), cleanTitle(run.Title),
		flag(opts.Exclusive), opts.LeaseGrace.Milliseconds(), flag(opts.ContinueLatest)}
	var cmd *redis.Cmd
	answered, err := s.co.do(ctx, func(p redis.Pipeliner) {
		cmd = createRunScript.EvalSha(ctx, p, keys, args...)
		s.queueIndexAdd(ctx, p, run.Owner, run.Route, run.ThreadID, now)
	})
	if answered && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		_, err = s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmd = createRunScript.Eval(ctx, p, keys, args...)
			s.queueIndexAdd(ctx, p, run.Owner, run.Route, run.ThreadID, now)
			return nil
		})
	}
	var res []any
	if answered {
		// The script's reply decides; an index write that failed is repaired by ListThreads.
		res, err = cmd.Slice()
		if errors.Is(err, redis.Nil) {
			err = nil
		}
	}
	if err != nil {
		err = scriptError(err, fmt.Sprintf("creating run %q in thread %q", run.RunID, run.ThreadID))
		if errors.Is(err, ErrRunAlreadyStarted) {
			return s.sameRun(ctx, run, err)
		}
		return Thread{}, err
	}
	if len(res) == 0 {
		return Thread{}, nil
	}
	if len(res) != 6 {
		return Thread{}, fmt.Errorf("creating run %q: unexpected script reply %v", run.RunID, res)
	}
	th := Thread{ID: run.ThreadID, Owner: str(res[0]), Route: str(res[1]), CreatedAt: msTime(str(res[2])), LatestRunID: str(res[3]), ParentEpoch: str(res[5])}
	if n, ok := res[4].(int64); ok {
		th.RunCount = int(n)
	}
	return th, nil
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sameRun answers a RUNEXISTS reply: when the stored run has run's epoch (epochs are random
// per creation), it is this very creation, applied by a first attempt whose reply was lost
// (go-redis re-sends a pipeline after a read timeout), and the creation succeeded; the thread
// is reported as the script saw it then (its latest run is the parent the script chose).
// Otherwise err stands.
func (s *RedisStore) sameRun(ctx context.Context, run Run, err error) (Thread, error) {
	got, rerr := s.Run(ctx, run.ThreadID, run.RunID)
	if rerr != nil || got.Epoch != run.Epoch {
		return Thread{}, err
	}
	return Thread{ID: run.ThreadID, Owner: got.Owner, Route: got.Route, LatestRunID: got.ParentRunID}, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func msTime(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// DeleteRun implements Store.
func (s *RedisStore) DeleteRun(ctx context.Context, threadID, runID string) error {
	k, err := keysFor(s.prefix, threadID, runID)
	if err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	err = deleteRunScript.Run(ctx, s.r, []string{k.thread, k.runs, k.run, k.events, k.checkpoint, k.packed}, runID).Err()
	return scriptError(err, fmt.Sprintf("deleting run %q in thread %q", runID, threadID))
}

// Append implements Store: one EVALSHA of append.lua per slot (per batch on a single server or
// Sentinel, per thread on Cluster), all in one pipeline (one round trip). The calls carry only
// what storing takes (the run's epoch and events); a run whose metadata is missing (lost with
// the store's data) is answered -2 and sent again, in a second round trip, with what re-creating
// it takes. After a Redis restart the script cache is empty: the pipeline is then sent again
// with EVAL, which is safe because the script skips seqs already stored.
func (s *RedisStore) Append(ctx context.Context, batches []Batch) error {
	return s.appendFinish(ctx, batches, nil, nil, nil)
}

// appendFinish implements appendFinisher: Append, and each run whose fins entry is not nil
// finished (FinishRun's rules) in the same script call, after its events, so a run's last
// events and its end take one round trip. fins is nil or as long as batches. With a lease,
// every running run that stores events has its lease renewed by the same call, and out (as
// long as batches) says for each batch whether its run's was, and whether it was asked to
// stop.
func (s *RedisStore) appendFinish(ctx context.Context, batches []Batch, fins []*finishOp, lease *appendLease, out []appendOutcome) error {
	keys := make([]string, 0, len(batches))
	for _, b := range batches {
		if rec := b.rec; rec != nil { // a Writer's: checked when opened, the key kept in it
			if rec.key == "" {
				rec.key = key(s.prefix, b.Run.ThreadID, kindRun, b.Run.RunID)
			}
			keys = append(keys, rec.key)
			continue
		}
		if err := validateRun(b.Run); err != nil {
			return err
		}
		keys = append(keys, key(s.prefix, b.Run.ThreadID, kindRun, b.Run.RunID)) // ids checked just above
	}
	if len(batches) == 0 {
		return nil
	}
	if err := s.check(); err != nil {
		return err
	}
	all := make([]int, len(batches))
	for i := range all {
		all[i] = i
	}
	missing, retry, err := s.appendCalls(ctx, batches, fins, keys, all, false, lease, out)
	if err == nil && len(retry) > 0 {
		// Runs whose plain fast path met a vanished stream or a retry: the full path says
		// what happened (second round trip).
		var more []int
		more, _, err = s.appendCalls(ctx, batches, fins, keys, retry, false, lease, out)
		missing = append(missing, more...)
	}
	if err == nil && len(missing) > 0 {
		_, _, err = s.appendCalls(ctx, batches, fins, keys, missing, true, lease, out)
	}
	return err
}

// callGroups splits which (indices into keys) into the key sets of script calls: on Cluster
// one group per slot (the keys of one call must share one), elsewhere one group; with max > 0
// no group holds more than max keys.
func (s *RedisStore) callGroups(keys []string, which []int, max int) [][]int {
	if !s.appendBySlot && (max <= 0 || len(which) <= max) {
		return [][]int{which} // one call: no slot map to build
	}
	var groups [][]int
	open := map[uint16]int{} // slot -> its group still taking keys (slot 0 for all off Cluster)
	for _, i := range which {
		var slot uint16
		if s.appendBySlot {
			slot = keySlot(keys[i])
		}
		g, ok := open[slot]
		if !ok || (max > 0 && len(groups[g]) == max) {
			g = len(groups)
			open[slot] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// runKey validates both ids and returns the run hash key.
func (s *RedisStore) runKey(threadID, runID string) (string, error) {
	if err := validateThreadKey(threadID); err != nil {
		return "", err
	}
	if err := agui.ValidateID("runId", runID); err != nil {
		return "", err
	}
	return key(s.prefix, threadID, kindRun, runID), nil
}

// appendCalls stores the batches listed in which (indices into batches and keys) with one
// append.lua call per slot, in one pipeline; full sends what re-creating a lost run takes;
// lease, when not nil, is renewed for the runs that store events (their outcomes in out). It
// returns the batches answered -2 (metadata missing, not sent in full).
func (s *RedisStore) appendCalls(ctx context.Context, batches []Batch, fins []*finishOp, keys []string, which []int, full bool, lease *appendLease, out []appendOutcome) (missing, retry []int, err error) {
	now := s.nowMs()
	fullFlag := 0
	if full {
		fullFlag = 1
	}
	node, untilMs := "", int64(0)
	if lease != nil {
		node, untilMs = lease.node, lease.untilMs
	}
	nowNs, errGen := time.Now().UnixNano(), s.errGen.Load()
	// A run's lease is renewed by its full writes: they come at least once per lease
	// interval (a third of the lease's TTL); the lease loop renews a run whose last one came
	// just before its previous round.
	every := int64(redisMetaEvery)
	if lease != nil {
		every = min(every, (lease.untilMs*int64(time.Millisecond)-nowNs)/3)
	}
	// fast says whether batches[i] takes append.lua's fast path: a Writer's run whose last
	// batch this store saw stored since its last error, whose events follow on from it, that
	// has no finish and whose metadata was written less than redisMetaEvery ago.
	fast := func(i int) bool {
		b := &batches[i]
		rec := b.rec
		return !full && rec != nil && len(b.Events) > 0 && (fins == nil || fins[i] == nil) &&
			rec.stored.last > 0 && rec.stored.errGen == errGen && b.Events[0].Seq == rec.stored.last+1 &&
			nowNs-rec.stored.fullAt < every
	}
	// modes[i]: batches[i] takes the fast path, in append.lua (Cluster, where a plain command
	// and a script call of one slot cannot share a call) or as plain commands (plain[i]):
	// an XADD NOMKSTREAM per entry and the SPUBLISH, without a script.
	modes, plain := make([]bool, len(batches)), make([]bool, len(batches))
	scripted := make([]int, 0, len(which))
	for _, i := range which {
		modes[i] = fast(i)
		if modes[i] && !s.appendBySlot {
			plain[i] = true
			continue
		}
		scripted = append(scripted, i)
	}
	groups := s.callGroups(keys, scripted, 0)
	if len(scripted) == 0 {
		groups = nil
	}
	// Each call is the whole command, EVALSHA sha numkeys keys... argv..., sent with Do: the
	// script helpers would copy every argument into a slice of their own.
	calls := make([][]any, len(groups), len(groups)+len(which))
	firstKeys := make([]string, len(groups), cap(calls))
	// Each sent run's events of the batch as stream entries (redis_entry.go):
	// entries[span[i][0]:span[i][1]] are batches[i]'s.
	nev := 0
	for _, i := range which {
		nev += len(batches[i].Events)
	}
	entries := make([]entry, 0, nev)
	span := make([][2]int, len(batches)) // set for which only: the others are not sent
	var packBuf []byte
	for _, i := range which {
		span[i][0] = len(entries)
		entries = appendEntries(entries, batches[i].Events, &packBuf)
		span[i][1] = len(entries)
	}
	for g, idx := range groups {
		n := 6
		for _, i := range idx {
			n += 5 + 4*(span[i][1]-span[i][0])
			if full {
				n += 5
			}
		}
		c := make([]any, 0, 3+len(idx)+n)
		c = append(c, "evalsha", appendScript.Hash(), len(idx))
		// Keys, epochs and events as pointers into keys and batches, which outlive the call:
		// boxing a string in an interface allocates, once per run of every batch.
		for _, i := range idx {
			c = append(c, &keys[i])
		}
		c = append(c, now, s.ttlMs, s.maxLen, fullFlag, node, untilMs)
		for _, i := range idx {
			b := &batches[i]
			if modes[i] {
				c = append(c, &b.Run.Epoch, "1")
			} else {
				c = append(c, &b.Run.Epoch, "0")
			}
			if full {
				created, status := b.recreated(s.nowFunc())
				c = append(c, b.Run.ParentRunID, b.Run.Owner, b.Run.Route, string(status), created.UnixMilli())
			}
			es := entries[span[i][0]:span[i][1]]
			c = append(c, len(es))
			for k := range es {
				e := &es[k] // pointers: boxing a value allocates, per entry
				if e.ev != nil {
					c = append(c, &e.last, &e.count, &e.ev.Type, (*frameArg)(&e.ev.Frame))
				} else {
					c = append(c, &e.last, &e.count, "", &e.packed)
				}
			}
			if fins != nil && fins[i] != nil {
				f := fins[i]
				c = append(c, string(f.status), f.detail, f.lastSeq)
			} else {
				c = append(c, "")
			}
		}
		calls[g] = c
		firstKeys[g] = keys[idx[0]]
	}
	// The plain fast path: plainAt[j] is the batch of calls[len(groups)+j] (-1: a SPUBLISH).
	var plainAt []int
	for _, i := range which {
		if !plain[i] {
			continue
		}
		rec := batches[i].rec
		if rec.stored.stream == "" {
			rec.stored.stream = key(s.prefix, batches[i].Run.ThreadID, kindEvents, batches[i].Run.RunID)
		}
		stream := &rec.stored.stream
		for k := span[i][0]; k < span[i][1]; k++ {
			e := &entries[k]
			id := strconv.FormatInt(e.last, 10) + "-0"
			if e.ev != nil {
				calls = append(calls, []any{"xadd", stream, "NOMKSTREAM", id, "t", &e.ev.Type, "f", (*frameArg)(&e.ev.Frame)})
			} else {
				calls = append(calls, []any{"xadd", stream, "NOMKSTREAM", id, "n", &e.count, "p", &e.packed})
			}
			firstKeys = append(firstKeys, *stream)
			plainAt = append(plainAt, i)
		}
		if !s.noSPublish.Load() {
			calls = append(calls, []any{"spublish", stream, &entries[span[i][1]-1].last})
			firstKeys = append(firstKeys, *stream)
			plainAt = append(plainAt, -1)
		}
	}
	run := func(eval bool) ([]redis.Cmder, error) {
		if eval { // the script cache is empty (a restart): send the script itself
			for _, c := range calls[:len(groups)] {
				c[0], c[1] = "eval", appendLua
			}
		}
		if len(calls) == 1 && s.waitN == 0 {
			cmd := s.w.Do(ctx, calls[0]...) // one call: no pipeline to set up
			return []redis.Cmder{cmd}, cmd.Err()
		}
		return s.writePipeline(ctx, firstKeys, func(p redis.Pipeliner, g int) {
			p.Do(ctx, calls[g]...)
		})
	}
	cmds, err := run(false)
	if err != nil && hasNoScript(cmds) {
		cmds, err = run(true)
	}
	// The plain fast path's refusals are answers: an XADD NOMKSTREAM of nil (the stream
	// vanished) or refused as not above the stream's last entry (a retry) sends the run down
	// append.lua's full path (retry), which tells what happened; a SPUBLISH unknown to the
	// server (Redis 6) is not sent again.
	if err != nil && len(cmds) == len(calls) && len(plainAt) > 0 {
		// err is the first failed command's, or the pipeline's own (ErrNotReplicated): the
		// latter stands whatever the commands answered.
		answered := false
		for _, c := range cmds {
			answered = answered || c.Err() == err
		}
		if answered {
			err = nil
		}
		for j, c := range cmds {
			e := c.Err()
			switch {
			case e == nil || err != nil:
			case j < len(groups):
				err = e
			case plainAt[j-len(groups)] == -1:
				if strings.Contains(strings.ToLower(e.Error()), "unknown command") {
					s.noSPublish.Store(true)
				}
			case errors.Is(e, redis.Nil) || strings.Contains(e.Error(), "equal or smaller"):
				if i := plainAt[j-len(groups)]; !slices.Contains(retry, i) {
					retry = append(retry, i)
				}
			default:
				err = e
			}
		}
	}
	if err != nil {
		s.errGen.Add(1)
		return nil, nil, scriptError(err, "appending events")
	}
	for j := len(groups); j < len(cmds); j++ {
		i := plainAt[j-len(groups)]
		if i < 0 || slices.Contains(retry, i) {
			continue
		}
		b := batches[i]
		b.rec.stored.last = max(b.rec.stored.last, b.Events[len(b.Events)-1].Seq)
	}
	for _, i := range retry {
		batches[i].rec.stored.last = 0 // the full path next
	}
	for g, c := range cmds[:len(groups)] {
		res, _ := c.(*redis.Cmd).Slice()
		for j, i := range groups[g] {
			if len(res) < 4*j+4 {
				break
			}
			b := batches[i]
			if out != nil {
				l, _ := res[4*j+3].(int64)
				out[i] = appendOutcome(l)
			}
			n, _ := res[4*j].(int64)
			if rec := b.rec; rec != nil {
				if n >= 0 && len(b.Events) > 0 {
					rec.stored.last = max(rec.stored.last, b.Events[len(b.Events)-1].Seq)
				} else if n < 0 {
					rec.stored.last = 0
				}
				if !modes[i] {
					rec.stored.fullAt, rec.stored.errGen = nowNs, errGen
				}
			}
			switch n {
			case -1:
				s.log.Warn("recorder: events for a run id now used by another run were dropped",
					"thread_id", b.Run.ThreadID, "run_id", b.Run.RunID, "epoch", b.Run.Epoch, "events", len(b.Events))
			case -2:
				missing = append(missing, i)
			}
			if r, _ := res[4*j+1].(int64); r == 1 {
				s.log.Warn("recorder: run metadata was missing in Redis (data loss); re-created it with a gap",
					"thread_id", b.Run.ThreadID, "run_id", b.Run.RunID)
			}
		}
	}
	return missing, retry, nil
}

// writePipeline sends n writes (queue(p, i) queues the i-th, whose first key is firstKeys[i])
// on the writer pool in one pipeline and returns their commands in order. With WaitReplicas
// each pipeline ends with WAIT on the connection that carried the writes (WAIT covers what
// that connection wrote): on Cluster that takes one pipeline per master owning the keys,
// and a MOVED reply fails the call, which the Writer retries. A WAIT answered by fewer
// replicas than required returns ErrNotReplicated.
func (s *RedisStore) writePipeline(ctx context.Context, firstKeys []string, queue func(p redis.Pipeliner, i int)) ([]redis.Cmder, error) {
	if s.waitN == 0 {
		return s.w.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range firstKeys {
				queue(p, i)
			}
			return nil
		})
	}
	type group struct {
		c       redis.Cmdable
		indices []int
	}
	var groups []*group
	if cc, ok := s.w.(*redis.ClusterClient); ok {
		byAddr := map[string]*group{}
		for i, k := range firstKeys {
			node, err := cc.MasterForKey(ctx, k)
			if err != nil {
				return nil, err
			}
			g := byAddr[node.Options().Addr]
			if g == nil {
				g = &group{c: node}
				byAddr[node.Options().Addr] = g
				groups = append(groups, g)
			}
			g.indices = append(g.indices, i)
		}
	} else {
		g := &group{c: s.w, indices: make([]int, len(firstKeys))}
		for i := range firstKeys {
			g.indices[i] = i
		}
		groups = []*group{g}
	}
	out := make([]redis.Cmder, len(firstKeys))
	var firstErr error
	for _, g := range groups {
		var wait *redis.IntCmd
		cmds, err := g.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range g.indices {
				queue(p, i)
			}
			wait = redis.NewIntCmd(ctx, "wait", s.waitN, s.waitMs)
			_ = p.Process(ctx, wait)
			return nil
		})
		for j, i := range g.indices {
			if j < len(cmds) {
				out[i] = cmds[j]
			}
		}
		if err == nil && wait.Val() < int64(s.waitN) {
			err = fmt.Errorf("%d of %d replicas acknowledged within %dms: %w", wait.Val(), s.waitN, s.waitMs, ErrNotReplicated)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		if cc, ok := s.w.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx)
		}
	}
	return out, firstErr
}

func hasNoScript(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if c != nil && redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			return true
		}
	}
	return false
}

// FinishRun implements Store.
func (s *RedisStore) FinishRun(ctx context.Context, threadID, runID string, status RunStatus, detail string, lastSeq int64) error {
	k, err := keysFor(s.prefix, threadID, runID)
	if err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	keys := []string{k.thread, k.runs, k.run, k.events}
	args := []any{string(status), detail, lastSeq, s.nowMs(), s.ttlMs, k.base}
	if s.waitN == 0 {
		err = finishRunScript.Run(ctx, s.w, keys, args...).Err()
	} else {
		run := func(eval bool) ([]redis.Cmder, error) {
			return s.writePipeline(ctx, keys[:1], func(p redis.Pipeliner, _ int) {
				if eval {
					finishRunScript.Eval(ctx, p, keys, args...)
				} else {
					finishRunScript.EvalSha(ctx, p, keys, args...)
				}
			})
		}
		var cmds []redis.Cmder
		if cmds, err = run(false); err != nil && hasNoScript(cmds) {
			_, err = run(true)
		}
	}
	return scriptError(err, fmt.Sprintf("finishing run %q in thread %q", runID, threadID))
}

// Thread implements Store.
func (s *RedisStore) Thread(ctx context.Context, threadID string) (Thread, error) {
	k, err := threadKeys(s.prefix, threadID)
	if err != nil {
		return Thread{}, err
	}
	if err := s.check(); err != nil {
		return Thread{}, err
	}
	var meta *redis.SliceCmd
	var count *redis.IntCmd
	var latest *redis.StringCmd
	_, err = s.co.do(ctx, func(p redis.Pipeliner) {
		meta = p.HMGet(ctx, k.thread, "owner", "route", "created", "title")
		count = p.LLen(ctx, k.runs)
		latest = p.LIndex(ctx, k.runs, -1)
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Thread{}, scriptError(err, fmt.Sprintf("reading thread %q", threadID))
	}
	v := meta.Val()
	if len(v) != 4 || v[0] == nil {
		return Thread{}, fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)
	}
	return Thread{
		ID: threadID, Owner: str(v[0]), Route: str(v[1]), CreatedAt: msTime(str(v[2])),
		LatestRunID: latest.Val(), RunCount: int(count.Val()), Title: str(v[3]),
	}, nil
}

// runRead holds the pipelined replies that make up one Run.
type runRead struct {
	meta   *redis.MapStringStringCmd
	first  *redis.XMessageSliceCmd
	top    *redis.XMessageSliceCmd // the last entry: append.lua's fast path leaves "last" behind
	packed *redis.IntCmd
}

func queueRunRead(ctx context.Context, p redis.Pipeliner, k runKeys) runRead {
	return runRead{meta: p.HGetAll(ctx, k.run), first: p.XRangeN(ctx, k.events, "-", "+", 1),
		top: p.XRevRangeN(ctx, k.events, "+", "-", 1), packed: p.Exists(ctx, k.packed)}
}

// decode builds the Run; ok is false when the run hash is missing.
func (rr runRead) decode(threadID, runID string) (Run, bool, error) {
	m := rr.meta.Val()
	if len(m) == 0 {
		return Run{}, false, nil
	}
	last, _ := strconv.ParseInt(m["last"], 10, 64)
	if top := rr.top.Val(); len(top) > 0 {
		if seq, err := streamSeq(top[0].ID); err == nil {
			last = max(last, seq)
		}
	}
	gaps, err := parseGaps(m["gaps"])
	if err != nil {
		return Run{}, true, fmt.Errorf("run %q in thread %q: %w", runID, threadID, err)
	}
	r := Run{
		ThreadID: threadID, RunID: runID, ParentRunID: m["parent"], Epoch: m["epoch"],
		Status: RunStatus(m["status"]), Detail: m["detail"], Route: m["route"], Owner: m["owner"],
		CreatedAt: msTime(m["created"]), UpdatedAt: msTime(m["updated"]), LastSeq: last, Gaps: gaps,
		Node: m["node"], LeaseUntil: msTime(m["lease"]), CompactedAt: msTime(m["compacted"]),
	}
	if first := rr.first.Val(); len(first) > 0 {
		r.FirstSeq, _ = entryFirst(first[0])
	} else if last > 0 && rr.packed.Val() > 0 {
		r.FirstSeq = 1 // compacted at rest: events 1..last in one packed value
	} else if last > 0 {
		// Events recorded but none left (the stream was lost): say so, never claim a whole run.
		r.Gaps, _ = parseGaps(formatGaps(addGap(gaps, 1, last)))
	}
	return r, true, nil
}

// streamSeq parses a stream entry id "<seq>-0" written by append.lua.
func streamSeq(id string) (int64, error) {
	s, ok := strings.CutSuffix(id, "-0")
	if !ok {
		return 0, fmt.Errorf("stream id %q is not <seq>-0", id)
	}
	seq, err := strconv.ParseInt(s, 10, 64)
	if err != nil || seq < 1 {
		return 0, fmt.Errorf("stream id %q is not <seq>-0", id)
	}
	return seq, nil
}

// Run implements Store.
func (s *RedisStore) Run(ctx context.Context, threadID, runID string) (Run, error) {
	k, err := keysFor(s.prefix, threadID, runID)
	if err != nil {
		return Run{}, err
	}
	if err := s.check(); err != nil {
		return Run{}, err
	}
	var rr runRead
	var thread *redis.IntCmd
	_, err = s.co.do(ctx, func(p redis.Pipeliner) {
		rr = queueRunRead(ctx, p, k)
		thread = p.Exists(ctx, k.thread)
	})
	if err != nil {
		return Run{}, scriptError(err, fmt.Sprintf("reading run %q in thread %q", runID, threadID))
	}
	r, ok, err := rr.decode(threadID, runID)
	switch {
	case err != nil:
		return Run{}, err
	case ok:
		return r, nil
	case thread.Val() == 0:
		return Run{}, fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)
	}
	return Run{}, fmt.Errorf("run %q in thread %q: %w", runID, threadID, ErrRunNotFound)
}

// Runs implements Store. Runs whose metadata expired or was lost are left out.
func (s *RedisStore) Runs(ctx context.Context, threadID string) ([]Run, error) {
	k, err := threadKeys(s.prefix, threadID)
	if err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	var ids *redis.StringSliceCmd
	var thread *redis.IntCmd
	if _, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		ids = p.LRange(ctx, k.runs, 0, -1)
		thread = p.Exists(ctx, k.thread)
		return nil
	}); err != nil {
		return nil, scriptError(err, fmt.Sprintf("reading runs of thread %q", threadID))
	}
	if thread.Val() == 0 {
		return nil, fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)
	}
	list := ids.Val()
	reads := make([]runRead, len(list))
	if len(list) > 0 {
		if _, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range list {
				rk, err := keysFor(s.prefix, threadID, id)
				if err != nil {
					return fmt.Errorf("run list of thread %q holds %w", threadID, err)
				}
				reads[i] = queueRunRead(ctx, p, rk)
			}
			return nil
		}); err != nil {
			return nil, scriptError(err, fmt.Sprintf("reading runs of thread %q", threadID))
		}
	}
	out := make([]Run, 0, len(list))
	for i, id := range list {
		r, ok, err := reads[i].decode(threadID, id)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// Events implements Store: one XRANGE from seq afterSeq+1 with COUNT limit.
func (s *RedisStore) Events(ctx context.Context, threadID, runID string, afterSeq int64, limit int) ([]Event, error) {
	k, err := keysFor(s.prefix, threadID, runID)
	if err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	if afterSeq < 0 {
		afterSeq = 0
	}
	start := strconv.FormatInt(afterSeq+1, 10) + "-0"
	var exists *redis.IntCmd
	var rng *redis.XMessageSliceCmd
	var packed *redis.StringCmd
	if _, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, k.run)
		if limit > 0 {
			rng = p.XRangeN(ctx, k.events, start, "+", int64(limit))
		} else {
			rng = p.XRange(ctx, k.events, start, "+")
		}
		packed = p.Get(ctx, k.packed)
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, scriptError(err, fmt.Sprintf("reading events of run %q in thread %q", runID, threadID))
	}
	if exists.Val() == 0 {
		return nil, fmt.Errorf("events of run %q in thread %q: %w", runID, threadID, ErrRunNotFound)
	}
	msgs := rng.Val()
	if b := packed.Val(); len(msgs) == 0 && b != "" {
		out, err := unpackEvents(nil, []byte(b), afterSeq, limit)
		if err != nil {
			return nil, fmt.Errorf("events of run %q in thread %q: %w", runID, threadID, err)
		}
		return out, nil
	}
	out := make([]Event, 0, len(msgs))
	for _, m := range msgs {
		err := decodeEntry(m, afterSeq, func(seq int64, t, f string) {
			if limit <= 0 || len(out) < limit {
				out = append(out, Event{Seq: seq, Type: t, Frame: frameOf(f)})
			}
		})
		if err != nil {
			return nil, fmt.Errorf("events of run %q in thread %q: %w", runID, threadID, err)
		}
	}
	return out, nil
}

// frameArg is a frame passed to go-redis by pointer (see appendCalls): go-redis writes a
// BinaryMarshaler's bytes as a bulk string, as it writes a []byte.
type frameArg []byte

// MarshalBinary returns the frame itself (no copy: go-redis writes it before the call returns).
func (f *frameArg) MarshalBinary() ([]byte, error) { return *f, nil }

// frameOf returns the bytes of a frame read from Redis without copying them: go-redis
// allocates every reply string afresh, nothing else refers to it, and a store's frames are
// never modified by their readers (Store.Events). Reading a run back (a checkpoint at each run
// end) otherwise copied every frame once more.
func frameOf(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// PutCheckpoint implements Store. Errors: ErrRunNotFound.
func (s *RedisStore) PutCheckpoint(ctx context.Context, threadID, runID string, data []byte) error {
	_, err := s.WriteCheckpoints(ctx, threadID, []CheckpointWrite{{RunID: runID, Data: data}})
	return err
}

// WriteCheckpoints implements Store: one write_checkpoints.lua call (the keys of one thread
// share its Cluster slot); an append is an APPEND, the run's TTL on the key as a put gives it.
func (s *RedisStore) WriteCheckpoints(ctx context.Context, threadID string, writes []CheckpointWrite) (int, error) {
	if len(writes) == 0 {
		return 0, nil
	}
	keys := make([]string, 0, 2*len(writes))
	args := make([]any, 1, 1+3*len(writes))
	args[0] = s.ttlMs
	for _, w := range writes {
		k, err := keysFor(s.prefix, threadID, w.RunID)
		if err != nil {
			return 0, err
		}
		keys = append(keys, k.run, k.checkpoint)
		mode := "put"
		if w.Append {
			mode = "append"
		}
		args = append(args, mode, w.Prefix, w.Data)
	}
	if err := s.check(); err != nil {
		return 0, err
	}
	res, err := writeCkptsScript.Run(ctx, s.r, keys, args...).Slice()
	if err != nil {
		return 0, scriptError(err, fmt.Sprintf("storing checkpoints in thread %q", threadID))
	}
	done, _ := res[0].(int64)
	code, _ := res[1].(string)
	if code == "" {
		return int(done), nil
	}
	w := writes[min(int(done), len(writes)-1)]
	what := fmt.Sprintf("storing checkpoint of run %q in thread %q", w.RunID, threadID)
	switch code {
	case "NORUN":
		return int(done), fmt.Errorf("%s: %w", what, ErrRunNotFound)
	case "NOCHECKPOINT":
		return int(done), fmt.Errorf("appending to the checkpoint of run %q in thread %q: %w", w.RunID, threadID, ErrNotFound)
	}
	return int(done), fmt.Errorf("%s: unexpected answer %q", what, code)
}

// Checkpoint implements Store.
func (s *RedisStore) Checkpoint(ctx context.Context, threadID, runID string) ([]byte, error) {
	k, err := keysFor(s.prefix, threadID, runID)
	if err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	b, err := s.r.Get(ctx, k.checkpoint).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("checkpoint of run %q in thread %q: %w", runID, threadID, ErrNotFound)
	}
	if err != nil {
		return nil, scriptError(err, fmt.Sprintf("reading checkpoint of run %q in thread %q", runID, threadID))
	}
	return b, nil
}

// Ping implements Store: both pools must reach Redis.
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := s.w.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("pinging redis (writer pool): %w", err)
	}
	if err := s.r.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("pinging redis (reader pool): %w", err)
	}
	return nil
}

// PoolStats returns the statistics of the writer pool (Append, FinishRun) and of the reader
// pool (everything else).
func (s *RedisStore) PoolStats() (writer, reader *redis.PoolStats) {
	return s.w.PoolStats(), s.r.PoolStats()
}

// Close implements Store: it stops the tail goroutine (its followers get ErrClosed) and
// closes the pools. Later calls return ErrClosed.
func (s *RedisStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.tailMu.Lock()
	t := s.tail
	s.tailMu.Unlock()
	var err error
	if t != nil {
		err = t.close()
	}
	return errors.Join(err, s.w.Close(), s.r.Close())
}

var _ Store = (*RedisStore)(nil)

// Topology returns how the store reaches Redis.
func (s *RedisStore) Topology() Topology { return s.spec.topology }
