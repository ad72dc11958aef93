package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agui-proxy/agui-proxy/panics"
)

// Live tail defaults (RedisConfig.FollowBlock and the tail client).
const (
	// DefaultFollowBlock is how long the tail goroutine's XREAD blocks: never 0 (go-redis sets
	// no socket deadline for BLOCK 0 and a cancelled context does not interrupt it), and the
	// longest a new follower of a stream nobody else follows waits for its first live event
	// when the wake-up (CLIENT UNBLOCK) races with the read.
	DefaultFollowBlock = time.Second
	// DefaultFollowPoll is RedisConfig.FollowPoll's default: on a Redis Cluster without
	// sharded pub/sub a live event reaches a follower at most this long after it was stored
	// (plus the read itself).
	DefaultFollowPoll = 10 * time.Millisecond
	// tailGrace is added to the block for the socket deadline of the XREAD, so a Redis that
	// stops answering (frozen, network down) is noticed after block+tailGrace.
	tailGrace = time.Second
	// tailReadCount is the COUNT of the XREAD: at most this many entries per stream per read.
	tailReadCount = 512
	// followPage is the largest XRANGE a follower does to catch up before it joins the tail.
	followPage = 512
	// tailMaxBackoff caps the wait between reads while Redis is unreachable.
	tailMaxBackoff = 2 * time.Second
)

// tailOptions derives the tail client's options from the store's: two connections (one
// blocked in XREAD, one for CLIENT UNBLOCK), no go-redis retries (the tail loop retries with
// its own backoff), context deadlines applied to the socket.
func tailOptions(o redis.Options) redis.Options {
	o.PoolSize, o.MaxActiveConns, o.MinIdleConns, o.MaxIdleConns = 2, 2, 0, 2
	o.PipelinePoolSize = -1 // pipelines (the status checks) share those two connections
	o.MaxRetries = -1
	o.ContextTimeoutEnabled = true
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultRedisTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultRedisTimeout
	}
	if o.ClientName == "" {
		o.ClientName = "agui-proxy-tail"
	} else {
		o.ClientName += "-tail"
	}
	return o
}

// Follow implements Follower. It reads the stored events after afterSeq with XRANGE on the
// reader pool (in pages of at most followPage; later pages are read by Next), then joins the
// store's one tail goroutine at the last seq it read. That goroutine reads the streams a
// subscriber connection per master announced (see the package documentation; a single
// server without sharded pub/sub: every followed stream with one XREAD BLOCK) from the
// lowest position of their followers and hands each entry to every follower whose position is
// below it, so no event is lost or repeated between the catch-up and the live part. A followed run that stays quiet for FollowBlock has its metadata read:
// not running and nothing left to deliver ends the subscription with io.EOF; metadata gone,
// replaced (another epoch) or events lost end it with an error wrapping ErrRunNotFound.
// While Redis is unreachable the tail retries with backoff and followers keep waiting.
func (s *RedisStore) Follow(ctx context.Context, threadID, runID string, afterSeq int64) (Subscription, error) {
	k, err := keysFor(s.prefix, threadID, runID)
	if err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	afterSeq = max(afterSeq, 0)
	var meta *redis.SliceCmd
	var thread *redis.IntCmd
	var rng *redis.XMessageSliceCmd
	var packed *redis.StringCmd
	page := min(followPage, s.followQueue)
	// The metadata is read before the events: a run seen ended here has all its events in
	// the stream when the XRANGE runs.
	if _, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HMGet(ctx, k.run, "epoch", "status", "last")
		thread = p.Exists(ctx, k.thread)
		rng = p.XRangeN(ctx, k.events, seqID(afterSeq+1), "+", int64(page))
		packed = p.Get(ctx, k.packed)
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, scriptError(err, fmt.Sprintf("following run %q in thread %q", runID, threadID))
	}
	m := meta.Val()
	epoch := str(m[0])
	if epoch == "" {
		if thread.Val() == 0 {
			return nil, fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)
		}
		return nil, fmt.Errorf("run %q in thread %q: %w", runID, threadID, ErrRunNotFound)
	}
	last, _ := strconv.ParseInt(str(m[2]), 10, 64)
	sub := &redisSub{s: s, threadID: threadID, runID: runID, k: k, epoch: epoch, fed: afterSeq, notify: make(chan struct{})}
	msgs := rng.Val()
	if b := packed.Val(); len(msgs) == 0 && b != "" && RunStatus(str(m[1])) != StatusRunning {
		// Compacted at rest: every event is in the packed value.
		evs, err := unpackEvents(nil, []byte(b), afterSeq, 0)
		if err != nil {
			return nil, fmt.Errorf("following run %q in thread %q: %w", runID, threadID, err)
		}
		for _, e := range evs {
			sub.queue = append(sub.queue, queued{seq: e.Seq, typ: e.Type, frame: string(e.Frame)})
			sub.fed = e.Seq
		}
		sub.end = io.EOF
		return sub, nil
	}
	if len(msgs) == 0 && last > afterSeq {
		if n, err := s.r.Exists(ctx, k.events).Result(); err == nil && n == 0 {
			return nil, fmt.Errorf("events of run %q in thread %q were lost: %w", runID, threadID, ErrRunNotFound)
		}
	}
	if err := sub.take(msgs); err != nil {
		return nil, err
	}
	switch {
	case len(msgs) == page:
		sub.paging = true // more history: Next reads it before joining the tail
	case RunStatus(str(m[1])) != StatusRunning:
		sub.end = io.EOF // every stored event is in the queue
	default:
		if err := s.join(sub); err != nil {
			return nil, err
		}
	}
	return sub, nil
}

// seqID is the stream entry id of seq.
func seqID(seq int64) string { return strconv.FormatInt(seq, 10) + "-0" }

// join registers sub with the tail goroutine, starting it on first use.
func (s *RedisStore) join(sub *redisSub) error {
	s.tailMu.Lock()
	if s.closed.Load() {
		s.tailMu.Unlock()
		return ErrClosed
	}
	if s.tail == nil {
		s.tail = newTailer(s)
	}
	t := s.tail
	s.tailMu.Unlock()
	t.add(sub)
	return nil
}

// TailPoolStats returns the statistics of the live tail's connection pool, or nil before the
// first Follow started it.
func (s *RedisStore) TailPoolStats() *redis.PoolStats {
	s.tailMu.Lock()
	defer s.tailMu.Unlock()
	if s.tail == nil {
		return nil
	}
	if s.tail.cc != nil {
		return s.tail.cc.PoolStats()
	}
	return s.tail.c.PoolStats()
}

// queued is one event in a subscription's queue; the frame stays a string (as go-redis
// returned it) until Next converts it, so each caller gets its own bytes.
type queued struct {
	seq   int64
	typ   string
	frame string
}

// redisSub is a RedisStore Subscription. Next is meant for one goroutine at a time; Close may
// be called from any. Lock order: tailer.mu before redisSub.mu.
type redisSub struct {
	s               *RedisStore
	threadID, runID string
	k               runKeys
	epoch           string

	mu         sync.Mutex
	queue      []queued
	fed        int64 // seq of the last event queued (or the start position)
	paging     bool  // history left to read with XRANGE before joining the tail
	registered bool  // known to the tail goroutine
	end        error // delivered once the queue is drained (ErrClosed: at once)
	closed     bool
	notify     chan struct{} // closed and replaced when the queue or end changes
}

// take queues history entries read with XRANGE. The caller holds sub.mu, or sub is not
// shared yet.
func (sub *redisSub) take(msgs []redis.XMessage) error {
	for _, m := range msgs {
		err := decodeEntry(m, sub.fed, func(seq int64, t, f string) {
			sub.queue = append(sub.queue, queued{seq: seq, typ: t, frame: f})
			sub.fed = seq
		})
		if err != nil {
			return fmt.Errorf("following run %q in thread %q: %w", sub.runID, sub.threadID, err)
		}
	}
	return nil
}

// wake releases a waiting Next. sub.mu must be held.
func (sub *redisSub) wake() {
	close(sub.notify)
	sub.notify = make(chan struct{})
}

// finish sets the subscription's end unless it has one. sub.mu must be held.
func (sub *redisSub) finish(err error) {
	if sub.end == nil {
		sub.end = err
		sub.wake()
	}
}

// Next implements Subscription.
func (sub *redisSub) Next(ctx context.Context) (Event, error) {
	for {
		sub.mu.Lock()
		if sub.closed || sub.s.closed.Load() {
			sub.mu.Unlock()
			return Event{}, ErrClosed
		}
		if len(sub.queue) > 0 {
			q := sub.queue[0]
			sub.queue[0] = queued{}
			sub.queue = sub.queue[1:]
			if len(sub.queue) == 0 {
				sub.queue = nil
			}
			sub.mu.Unlock()
			return Event{Seq: q.seq, Type: q.typ, Frame: []byte(q.frame)}, nil
		}
		if sub.end != nil {
			err := sub.end
			sub.mu.Unlock()
			return Event{}, err
		}
		if sub.paging {
			from := sub.fed
			sub.mu.Unlock()
			if err := sub.page(ctx, from); err != nil {
				return Event{}, err
			}
			continue
		}
		wait := sub.notify
		sub.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// page reads the next page of history after from; a short page joins the tail.
func (sub *redisSub) page(ctx context.Context, from int64) error {
	s := sub.s
	limit := min(followPage, s.followQueue)
	msgs, err := s.r.XRangeN(ctx, sub.k.events, seqID(from+1), "+", int64(limit)).Result()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return scriptError(err, fmt.Sprintf("following run %q in thread %q", sub.runID, sub.threadID))
	}
	sub.mu.Lock()
	if sub.closed || sub.fed != from {
		sub.mu.Unlock()
		return nil
	}
	err = sub.take(msgs)
	join := err == nil && len(msgs) < limit
	if join {
		sub.paging = false
	}
	sub.mu.Unlock()
	if err != nil {
		return err
	}
	if join {
		return s.join(sub)
	}
	return nil
}

// Close implements Subscription.
func (sub *redisSub) Close() error {
	sub.mu.Lock()
	if sub.closed {
		sub.mu.Unlock()
		return nil
	}
	sub.closed = true
	sub.queue = nil
	sub.wake()
	registered := sub.registered
	sub.mu.Unlock()
	if registered {
		sub.s.tailMu.Lock()
		t := sub.s.tail
		sub.s.tailMu.Unlock()
		if t != nil {
			t.remove(sub)
		}
	}
	return nil
}

// tailer is a RedisStore's one live reader, fanning entries out to their followers' queues:
// notified by one subscriber connection per master (Redis 7, see redis_follow_cluster.go), or
// on a single server without sharded pub/sub a goroutine blocked in XREAD over every stream
// that has followers (run). cc is set on Cluster, c otherwise.
type tailer struct {
	s     *RedisStore
	c     *redis.Client        // single server or Sentinel
	cc    *redis.ClusterClient // Cluster
	block time.Duration
	poll  time.Duration // Cluster without sharded pub/sub: the pause after an empty read

	mu        sync.Mutex
	streams   map[string]*tailStream // by events key
	inflight  map[string]int64       // the position each stream is being read from (nil between reads)
	unblocked bool                   // a CLIENT UNBLOCK was sent during the current read
	wakeup    chan struct{}          // buffered 1: a stream joined while none was followed

	// The notified tail (redis_follow_cluster.go), guarded by mu.
	bells   map[string]*bell // by master address
	due     map[string]bool  // events keys to read in the next round
	regroup bool             // re-check every stream's master before the next round
	noBells bool             // the servers lack SSUBSCRIBE: every stream is read every round

	connID atomic.Int64 // CLIENT ID of the connection in XREAD (0: none)
	stop   chan struct{}
	done   chan struct{}
}

// tailStream is one followed stream.
type tailStream struct {
	threadID, runID string
	k               runKeys
	subs            map[*redisSub]struct{}
	lastEvent       time.Time // last time entries arrived
	lastCheck       time.Time // last metadata read (zero: due now)
	slot            uint16    // Cluster: the hash slot of k.events
	bell            *bell     // Cluster: the subscriber connection it is subscribed on (nil: none)
}

func newTailer(s *RedisStore) *tailer {
	t := &tailer{
		s: s, block: s.followBlock, poll: s.followPoll,
		streams: map[string]*tailStream{}, wakeup: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
		bells: map[string]*bell{}, due: map[string]bool{},
	}
	switch c := s.spec.client(s.tailOpts).(type) {
	case *redis.ClusterClient:
		t.cc = c
		go t.runCluster()
	case *redis.Client:
		t.c = c
		go func() {
			if t.shardedPubSub() {
				t.runCluster()
			} else {
				t.run()
			}
		}()
	}
	return t
}

// add registers sub at its position. If the running XREAD does not cover that position, it
// is interrupted (CLIENT UNBLOCK) so the next read starts low enough.
func (t *tailer) add(sub *redisSub) {
	t.mu.Lock()
	ts := t.streams[sub.k.events]
	if ts == nil {
		ts = &tailStream{threadID: sub.threadID, runID: sub.runID, k: sub.k, subs: map[*redisSub]struct{}{}, slot: keySlot(sub.k.events)}
		t.streams[sub.k.events] = ts
	}
	sub.mu.Lock()
	if sub.closed {
		sub.mu.Unlock()
		t.mu.Unlock()
		return
	}
	if t.stopping() { // Close already ended the followers it knew
		sub.finish(ErrClosed)
		sub.mu.Unlock()
		t.mu.Unlock()
		return
	}
	sub.registered = true
	fed := sub.fed
	sub.mu.Unlock()
	ts.subs[sub] = struct{}{}
	ts.lastCheck = time.Time{} // read the run's status soon: it may have ended already
	t.due[sub.k.events] = true // notified tail: the next round reads it from this follower's position
	sp, reading := t.inflight[sub.k.events]
	unblock := t.inflight != nil && (!reading || fed < sp) && !t.unblocked
	if unblock {
		t.unblocked = true
	}
	t.mu.Unlock()
	select {
	case t.wakeup <- struct{}{}:
	default:
	}
	if id := t.connID.Load(); unblock && id != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), t.block)
		t.c.ClientUnblock(ctx, id) // best effort: at worst the stream joins after one block
		cancel()
	}
}

// remove unregisters sub.
func (t *tailer) remove(sub *redisSub) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drop(sub)
}

// drop unregisters sub. t.mu must be held.
func (t *tailer) drop(sub *redisSub) {
	ts := t.streams[sub.k.events]
	if ts == nil {
		return
	}
	delete(ts.subs, sub)
	if len(ts.subs) == 0 {
		delete(t.streams, sub.k.events)
	}
}

// end finishes sub with err and unregisters it. t.mu must be held.
func (t *tailer) end(sub *redisSub, err error) {
	sub.mu.Lock()
	sub.finish(err)
	sub.mu.Unlock()
	t.drop(sub)
}

// close stops the goroutine, ends every follower with ErrClosed and closes the pool.
func (t *tailer) close() error {
	close(t.stop)
	if id := t.connID.Load(); id != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), t.block)
		t.c.ClientUnblock(ctx, id)
		cancel()
	}
	<-t.done
	t.mu.Lock()
	for _, ts := range t.streams {
		for sub := range ts.subs {
			t.end(sub, ErrClosed)
		}
	}
	t.mu.Unlock()
	if t.cc != nil {
		return t.cc.Close()
	}
	return t.c.Close()
}

func (t *tailer) stopping() bool {
	select {
	case <-t.stop:
		return true
	default:
		return false
	}
}

// run is the tail loop on a single server or Sentinel: snapshot the followed streams, XREAD them from the lowest position
// of their followers, hand the entries out, read the status of quiet runs; on a Redis error
// drop the connection and retry with backoff.
func (t *tailer) run() {
	defer close(t.done)
	var conn *redis.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	backoff, failing := time.Duration(0), false
	fail := func(err error) bool {
		t.connID.Store(0)
		if conn != nil {
			conn.Close()
			conn = nil
		}
		if t.stopping() {
			return false
		}
		if !failing {
			t.s.log.Warn("recorder: live tail cannot read Redis; retrying", "err", err)
			failing = true
		}
		backoff = min(max(2*backoff, 50*time.Millisecond), tailMaxBackoff)
		select {
		case <-time.After(backoff):
			return true
		case <-t.stop:
			return false
		}
	}
	for !t.stopping() {
		keys, sps := t.snapshot()
		if len(keys) == 0 {
			select {
			case <-t.wakeup:
				continue
			case <-t.stop:
				return
			}
		}
		if conn == nil {
			conn = t.c.Conn()
			ctx, cancel := context.WithTimeout(context.Background(), t.block+tailGrace)
			id, err := conn.ClientID(ctx).Result()
			cancel()
			if err != nil {
				t.endRead()
				if !fail(err) {
					return
				}
				continue
			}
			t.connID.Store(id)
		}
		args := make([]string, 0, 2*len(keys))
		args = append(args, keys...)
		for _, k := range keys {
			args = append(args, seqID(sps[k]))
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.block+tailGrace)
		res, err := conn.XRead(ctx, &redis.XReadArgs{Streams: args, Count: tailReadCount, Block: t.block}).Result()
		cancel()
		t.endRead()
		if err != nil && !errors.Is(err, redis.Nil) {
			if !fail(err) {
				return
			}
			continue
		}
		if failing { // said before the entries are handed out: a reader of the log sees it first
			t.s.log.Info("recorder: live tail reads Redis again")
			failing = false
		}
		if err := t.dispatch(conn, res, sps); err != nil {
			if !fail(err) {
				return
			}
			continue
		}
		if err := t.checkQuiet(conn); err != nil {
			if !fail(err) {
				return
			}
			continue
		}
		if failing {
			t.s.log.Info("recorder: live tail reads Redis again")
			failing = false
		}
		backoff = 0
	}
}

// tailCmdable is what dispatch and checkQuiet need: the tail's connection (single server,
// Sentinel) or the tail's cluster client.
type tailCmdable interface {
	HGet(ctx context.Context, key, field string) *redis.StringCmd
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// pause waits for the poll interval, a newly joined stream, or the stop; false on stop.
func (t *tailer) pause() bool {
	timer := time.NewTimer(t.poll)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.wakeup:
	case <-t.stop:
		return false
	}
	return true
}

// snapshot returns the followed streams and, for each, the lowest position of its followers
// (the XREAD starts after it); it records them as in flight.
func (t *tailer) snapshot() ([]string, map[string]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.streams) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(t.streams))
	sps := make(map[string]int64, len(t.streams))
	for key, ts := range t.streams {
		keys = append(keys, key)
		sps[key] = ts.lowestFed()
	}
	t.inflight, t.unblocked = sps, false
	return keys, sps
}

// lowestFed returns the lowest seq fed to the stream's subscribers: the tail reads after it.
// t.mu is held.
func (ts *tailStream) lowestFed() int64 {
	first := true
	var low int64
	for sub := range ts.subs {
		sub.mu.Lock()
		if first || sub.fed < low {
			low, first = sub.fed, false
		}
		sub.mu.Unlock()
	}
	return low
}

// endRead marks the end of a read.
func (t *tailer) endRead() {
	t.mu.Lock()
	t.inflight = nil
	t.mu.Unlock()
}

// dispatch hands the entries of one XREAD to the followers. A follower gets an entry when it
// was at or above the read's start position when the read began (so the reply holds every
// entry after its position) and has not got it yet. Entries missing between a follower's
// position and the reply's first entry are either a recorded gap (delivered across) or were
// trimmed by MaxEventsPerRun before the tail read them (ErrSlowSubscriber).
func (t *tailer) dispatch(conn tailCmdable, res []redis.XStream, sps map[string]int64) error {
	var gapsOf map[string][]Gap
	for _, st := range res {
		if len(st.Messages) == 0 {
			continue
		}
		first, err := entryFirst(st.Messages[0])
		if err == nil && first > sps[st.Stream]+1 {
			if gapsOf == nil {
				gapsOf = map[string][]Gap{}
			}
			t.mu.Lock()
			ts := t.streams[st.Stream]
			t.mu.Unlock()
			if ts == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), t.block+tailGrace)
			text, err := conn.HGet(ctx, ts.k.run, "gaps").Result()
			cancel()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			gapsOf[st.Stream], _ = parseGaps(text)
		}
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, st := range res {
		ts := t.streams[st.Stream]
		if ts == nil || len(st.Messages) == 0 {
			continue
		}
		t.dispatchStream(ts, st, sps[st.Stream], gapsOf[st.Stream], now)
	}
	return nil
}

// dispatchStream hands one stream's entries of a read (after position sp) to its followers.
// t.mu is held. A panic here ends only this stream's followers, with the *panics.Error (their
// clients resume from their last event id); the tail goes on for every other stream.
func (t *tailer) dispatchStream(ts *tailStream, st redis.XStream, sp int64, gaps []Gap, now time.Time) {
	defer func() {
		if v := recover(); v != nil {
			err := panics.Recovered(panics.Tail, v, t.s.log, slog.String("thread_id", ts.threadID), slog.String("run_id", ts.runID))
			for sub := range ts.subs {
				t.end(sub, fmt.Errorf("following run %q in thread %q: %w", ts.runID, ts.threadID, err))
			}
		}
	}()
	panics.Probe(panics.Tail, ts.threadID)
	entries := make([]queued, 0, len(st.Messages))
	for _, m := range st.Messages {
		err := decodeEntry(m, 0, func(seq int64, typ, f string) {
			entries = append(entries, queued{seq: seq, typ: typ, frame: f})
		})
		if err != nil {
			for sub := range ts.subs {
				t.end(sub, fmt.Errorf("following run %q in thread %q: %w", ts.runID, ts.threadID, err))
			}
			return
		}
	}
	ts.lastEvent = now
	for sub := range ts.subs {
		if err := t.feed(sub, sp, entries, gaps); err != nil {
			t.end(sub, err)
		}
	}
}

// feed appends to sub's queue the entries after its position. t.mu is held.
func (t *tailer) feed(sub *redisSub, sp int64, entries []queued, gaps []Gap) error {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.closed || sub.end != nil || sub.fed < sp {
		return nil // closed, ended, or joined below this read: the next read covers it
	}
	added := false
	for i, e := range entries {
		if e.seq <= sub.fed {
			continue
		}
		// Only before the reply's first entry can events be missing for another reason than
		// a recorded gap: the reply itself is contiguous in the stream.
		if i == 0 && e.seq > sub.fed+1 && !covered(gaps, sub.fed+1, e.seq-1) {
			return fmt.Errorf("following run %q in thread %q: events %d..%d were trimmed before they were read: %w",
				sub.runID, sub.threadID, sub.fed+1, e.seq-1, ErrSlowSubscriber)
		}
		if len(sub.queue) >= sub.s.followQueue {
			if added {
				sub.wake()
			}
			return fmt.Errorf("following run %q in thread %q: %d events queued (bound %d): %w",
				sub.runID, sub.threadID, len(sub.queue), sub.s.followQueue, ErrSlowSubscriber)
		}
		sub.queue = append(sub.queue, e)
		sub.fed = e.seq
		added = true
	}
	if added {
		sub.wake()
	}
	return nil
}

// covered reports whether every seq in [from, to] lies in one of gaps.
func covered(gaps []Gap, from, to int64) bool {
	for from <= to {
		moved := false
		for _, g := range gaps {
			if g.From <= from && from <= g.To {
				from, moved = g.To+1, true
			}
		}
		if !moved {
			return false
		}
	}
	return true
}

// checkQuiet reads the metadata of the followed runs that received nothing for half a block
// (and were not checked for as long), in one pipeline, and ends the followers whose run
// ended (io.EOF once they have everything) or lost its data (ErrRunNotFound).
func (t *tailer) checkQuiet(conn tailCmdable) error {
	now := time.Now()
	quiet := t.block / 2
	t.mu.Lock()
	var due []*tailStream
	for _, ts := range t.streams {
		if ts.lastCheck.IsZero() || (now.Sub(ts.lastCheck) >= quiet && now.Sub(ts.lastEvent) >= quiet) {
			due = append(due, ts)
		}
	}
	t.mu.Unlock()
	if len(due) == 0 {
		return nil
	}
	metas := make([]*redis.SliceCmd, len(due))
	exists := make([]*redis.IntCmd, len(due))
	ctx, cancel := context.WithTimeout(context.Background(), t.block+tailGrace)
	defer cancel()
	if _, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, ts := range due {
			metas[i] = p.HMGet(ctx, ts.k.run, "epoch", "status", "last")
			exists[i] = p.Exists(ctx, ts.k.events)
		}
		return nil
	}); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, ts := range due {
		if t.streams[ts.k.events] != ts {
			continue // every follower left meanwhile
		}
		ts.lastCheck = now
		m := metas[i].Val()
		epoch, status := str(m[0]), RunStatus(str(m[1]))
		last, _ := strconv.ParseInt(str(m[2]), 10, 64)
		for sub := range ts.subs {
			sub.mu.Lock()
			fed, subEpoch := sub.fed, sub.epoch
			sub.mu.Unlock()
			switch {
			case epoch == "" || epoch != subEpoch:
				t.end(sub, fmt.Errorf("run %q in thread %q was removed or replaced while followed: %w", ts.runID, ts.threadID, ErrRunNotFound))
			case last > fed && exists[i].Val() == 0:
				t.end(sub, fmt.Errorf("events of run %q in thread %q were lost while followed: %w", ts.runID, ts.threadID, ErrRunNotFound))
			case status != StatusRunning && fed >= last:
				t.end(sub, io.EOF)
			case last > fed:
				// Stored beyond what this follower got, and quiet: a notification can be
				// missed (a slot moving, a subscriber reconnecting); read the stream again.
				t.due[ts.k.events] = true
			}
		}
	}
	return nil
}

// RenewLease implements Leaser: one call of lease.lua, which writes only while the run is
// running.
func (s *RedisStore) RenewLease(ctx context.Context, threadID, runID, node string, until time.Time) (bool, error) {
	k, err := s.runKey(threadID, runID)
	if err != nil {
		return false, err
	}
	if err := s.check(); err != nil {
		return false, err
	}
	// Renewals of many runs share pipelines (the proxy renews its runs concurrently).
	keys, args := []string{k}, []any{node, leaseMs(until)}
	var cmd *redis.Cmd
	answered, err := s.co.do(ctx, func(p redis.Pipeliner) { cmd = leaseScript.EvalSha(ctx, p, keys, args...) })
	if answered && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = leaseScript.Run(ctx, s.r, keys, args...)
	}
	var n int64
	if answered {
		n, err = cmd.Int64()
	}
	if err != nil {
		return false, scriptError(err, fmt.Sprintf("renewing the lease of run %q in thread %q", runID, threadID))
	}
	return n == 1, nil
}

// renewLeasesChunk bounds the runs renewed by one renew_leases.lua call, so one call never
// blocks Redis for long (about 1 µs per run).
const renewLeasesChunk = 256

// RenewLeases implements BatchLeaser: renew_leases.lua over chunks of up to renewLeasesChunk
// runs (on Cluster, each chunk within one slot), all in one pipeline.
func (s *RedisStore) RenewLeases(ctx context.Context, node string, until time.Time, runs []RunRef) ([]LeaseOutcome, error) {
	keys := make([]string, len(runs))
	all := make([]int, len(runs))
	for i, r := range runs {
		k, err := s.runKey(r.ThreadID, r.RunID)
		if err != nil {
			return nil, err
		}
		keys[i], all[i] = k, i
	}
	if len(runs) == 0 {
		return nil, nil
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	chunks := s.callGroups(keys, all, renewLeasesChunk)
	args := []any{node, leaseMs(until)}
	run := func(eval bool) ([]redis.Cmder, error) {
		return s.w.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range chunks {
				ks := make([]string, len(c))
				for j, i := range c {
					ks[j] = keys[i]
				}
				if eval {
					renewLeasesScript.Eval(ctx, p, ks, args...)
				} else {
					renewLeasesScript.EvalSha(ctx, p, ks, args...)
				}
			}
			return nil
		})
	}
	cmds, err := run(false)
	if err != nil && hasNoScript(cmds) {
		cmds, err = run(true)
	}
	if err != nil {
		return nil, scriptError(err, fmt.Sprintf("renewing the leases of %d runs", len(runs)))
	}
	out := make([]LeaseOutcome, len(runs))
	for ci, c := range chunks {
		res, err := cmds[ci].(*redis.Cmd).Int64Slice()
		if err != nil || len(res) != len(c) {
			return nil, fmt.Errorf("renewing the leases of %d runs: unexpected reply %v (%v)", len(runs), res, err)
		}
		for j, i := range c {
			switch res[j] {
			case 1:
				out[i] = LeaseStop
			case -1:
				out[i] = LeaseNoRun
			}
		}
	}
	return out, nil
}

// RequestStop implements Leaser: stop.lua sets the run's stop flag while it is running.
func (s *RedisStore) RequestStop(ctx context.Context, threadID, runID string) error {
	k, err := keysFor(s.prefix, threadID, runID)
	if err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	err = stopScript.Run(ctx, s.r, []string{k.run}).Err()
	return scriptError(err, fmt.Sprintf("requesting run %q in thread %q to stop", runID, threadID))
}

// leaseMs is a lease expiry as stored in the run hash (0: none).
func leaseMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

var (
	_ Follower    = (*RedisStore)(nil)
	_ Leaser      = (*RedisStore)(nil)
	_ BatchLeaser = (*RedisStore)(nil)
)
