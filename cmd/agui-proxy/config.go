package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/agui-proxy/agui-proxy/hydrate"
)

// config is the proxy's whole configuration, read from the environment. Each field's tags
// document it: group and help (one short line) make `agui-proxy -h`, doc the full text of
// docs/configuration.md (generated: go test ./cmd/agui-proxy -update).
type config struct {
	// Agent and listener
	Upstream     string `env:"AGUI_UPSTREAM" envDefault:"http://127.0.0.1:8000" doc:"URL of the AG-UI agent to proxy" group:"Agent and listener" help:"URL of the AG-UI agent"`
	Listen       string `env:"AGUI_LISTEN" envDefault:"127.0.0.1:8080" doc:"address the proxy listens on" group:"Agent and listener" help:"host:port the proxy listens on"`
	Route        string `env:"AGUI_ROUTE" envDefault:"default" doc:"name of the route (room) threads are bound to, with AGUI_UPSTREAM" group:"Agent and listener" help:"route (room) name of AGUI_UPSTREAM's threads"`
	Routes       string `env:"AGUI_ROUTES" doc:"several agents by path prefix instead of AGUI_UPSTREAM: /agents/a=http://a:8000,/agents/b=http://b:9000; each prefix is a route (room) with its attach endpoints under <prefix>/agui/" group:"Agent and listener" help:"several agents by prefix: /a=http://a:8000,/b=..."`
	AttachPrefix string `env:"AGUI_ATTACH_PREFIX" envDefault:"/agui/" doc:"path prefix of the attach, history and stop endpoints (not proxied)" group:"Agent and listener" help:"path of the history, attach and stop endpoints"`
	Inspector    bool   `env:"AGUI_INSPECTOR" envDefault:"false" doc:"serve the thread inspector page at <attach prefix>ui/ (per route under its prefix); it reads only the attach endpoints, with the caller's identity" group:"Agent and listener" help:"true: the inspector page at <attach prefix>ui/"`
	Metrics      bool   `env:"AGUI_METRICS" envDefault:"true" doc:"serve Prometheus metrics at /metrics" group:"Agent and listener" help:"Prometheus metrics at /metrics"`
	PprofListen  string `env:"AGUI_PPROF_LISTEN" doc:"address of a separate listener serving net/http/pprof (empty: off); keep it private" group:"Agent and listener" help:"host:port of a private pprof listener"`

	// Store
	RedisURL           string        `env:"AGUI_REDIS_URL" doc:"redis:// URL of the Redis store; empty keeps everything in memory (single process, lost on restart) unless AGUI_STORE_PATH is set" group:"Store" help:"redis:// URL of the shared Redis store"`
	StorePath          string        `env:"AGUI_STORE_PATH" doc:"directory of the embedded durable store (one bbolt file; one process at a time): history survives restarts without Redis. Not with AGUI_REDIS_URL" group:"Store" help:"directory of the one-process disk store"`
	MemoryMaxBytes     int64         `env:"AGUI_MEMORY_MAX_BYTES" envDefault:"1073741824" doc:"bound of the in-memory store: above it the least recently written threads without a running run are evicted whole (metric agui_proxy_store_evictions_total); 0: no bound" group:"Store" help:"in-memory store bound (older threads evicted)"`
	RedisPrefix        string        `env:"AGUI_REDIS_PREFIX" envDefault:"agui" doc:"prefix of every Redis key" group:"Store" help:"prefix of every Redis key"`
	RetentionTTL       time.Duration `env:"AGUI_RETENTION_TTL" envDefault:"0s" doc:"how long a thread's records live after its last write (0: forever)" group:"Store" help:"how long a thread lives after its last write"`
	CompactAfter       time.Duration `env:"AGUI_COMPACT_AFTER" envDefault:"0s" doc:"compaction at rest: a run ended longer ago than this has its events replaced by their merged form (each message's and tool call's deltas joined; metric agui_proxy_store_compactions_total); prelude, history, ?run= and export stay the same, a resume from an event id inside such a run gets the full history with resume_failed. 0: off" group:"Store" help:"compact runs ended longer ago than this (0: off)"`
	RetentionMaxEvents int64         `env:"AGUI_RETENTION_MAX_EVENTS" envDefault:"0" doc:"events kept per run, oldest trimmed first (0: all)" group:"Store" help:"events kept per run (0: all)"`
	Durability         string        `env:"AGUI_DURABILITY" envDefault:"async" doc:"async: forward at once, record in the background; sync: forward an event only once it is stored" group:"Store" help:"async or sync (forward only once stored)"`
	Record             bool          `env:"AGUI_RECORD" envDefault:"true" doc:"false forwards runs without storing events (no attach or resume): for measuring the recorder's cost" group:"Store" help:"false: forward runs without recording them"`

	// Recorder tuning
	RecorderBuffer      int           `env:"AGUI_RECORDER_BUFFER" envDefault:"0" doc:"events that may wait for the store, across the runs of one route (each route has its own recorder); when full, runs are slowed to the store's pace. A store stall of buffer / event rate is absorbed without slowing anyone (16,384 at 10,000 events/s: 1.6 s); an agent faster than the store streams that far behind it. 0: 16,384, and 131,072 on the disk store (a commit there costs about a page per run whatever its events, so the buffer must hold what streams in during one)" group:"Recorder tuning" help:"events that may wait for the store (0: automatic)"`
	RecorderBufferBytes int64         `env:"AGUI_RECORDER_BUFFER_BYTES" envDefault:"268435456" doc:"bytes of events that may wait for the store, across the runs of one route: full by bytes, as by AGUI_RECORDER_BUFFER, runs are slowed to the store's pace (an agent streaming large events no longer fills memory with AGUI_RECORDER_BUFFER of them); one event larger than this is taken alone" group:"Recorder tuning" help:"bytes that may wait for the store, per route"`
	RecorderLinger      time.Duration `env:"AGUI_RECORDER_LINGER" envDefault:"10ms" doc:"least time between two store writes of the recorder while no run waits on the store: events gather into fewer, larger round trips (fewer round trips and less CPU per event under load; docs/benchmarks.md); a run's end and sync durability are not delayed; events reach the store, and attachers on other replicas, up to this much later. 0: write as soon as the previous write is done" group:"Recorder tuning" help:"least time between two store writes"`
	RecorderBusyLinger  time.Duration `env:"AGUI_RECORDER_BUSY_LINGER" envDefault:"10ms" doc:"AGUI_RECORDER_LINGER while many runs stream at once: after a store write that carried the events of 8 runs or more, the next one waits this long (writes are large anyway then). Not above AGUI_RECORDER_LINGER (the defaults: both 10ms), or 0: AGUI_RECORDER_LINGER always; it matters where AGUI_RECORDER_LINGER is set shorter (events on other replicas sooner while few runs stream); at most 1s" group:"Recorder tuning" help:"the linger while 8 runs or more stream"`
	RecorderLanes       int           `env:"AGUI_RECORDER_LANES" envDefault:"0" doc:"store writes the recorder has in flight at once: the runs are spread over this many lanes by thread, each with its own queue (an even share of AGUI_RECORDER_BUFFER) and batch, so one round trip does not hold every run. 0: 4, and 1 on the disk store (its transactions are serialized); at most 64" group:"Recorder tuning" help:"store writes in flight at once (0: automatic)"`
	CheckpointMemory    int64         `env:"AGUI_CHECKPOINT_MEMORY" envDefault:"67108864" doc:"bytes of recorded events kept, over all running runs, so each run's checkpoint at its end is built from them instead of reading the run back from the store (a run that does not fit is read back); a run keeps what each event does not share with the one before it, about 5 KB for a 60-event answer; 0: keep none" group:"Recorder tuning" help:"bytes of events kept to build run checkpoints"`
	RecorderFullWait    time.Duration `env:"AGUI_RECORDER_FULL_WAIT" envDefault:"10s" doc:"how long runs wait for room in a full recorder buffer while the store makes no progress (down or hung) before events are dropped and the run marked with a gap; negative: drop at once" group:"Recorder tuning" help:"wait on a stuck store before dropping events"`

	// Identity
	IdentityHeader  string `env:"AGUI_IDENTITY_HEADER" doc:"trusted header naming the caller (set by your auth gateway); threads are owned by it. Empty: single-tenant" group:"Identity" help:"trusted header naming the caller (multi-tenant)"`
	RequireIdentity string `env:"AGUI_REQUIRE_IDENTITY" doc:"with AGUI_IDENTITY_HEADER: true (the default then) answers every request without an identity 401, false forwards those that are not runs to the agent untouched" group:"Identity" help:"false: non-run requests may come without one"`
	TrustedProxies  string `env:"AGUI_TRUSTED_PROXIES" doc:"comma-separated CIDRs allowed to set the identity header (empty: any peer)" group:"Identity" help:"CIDRs allowed to set the identity header"`

	// Runs and limits
	MaxBodyBytes          int64         `env:"AGUI_MAX_BODY_BYTES" envDefault:"10485760" doc:"largest run request body (413 above)" group:"Runs and limits" help:"largest run request body (413 above)"`
	MaxEventBytes         int           `env:"AGUI_MAX_EVENT_BYTES" envDefault:"10485760" doc:"largest SSE event from the agent (the run ends with RUN_ERROR FRAME_TOO_LARGE above)" group:"Runs and limits" help:"largest event from the agent"`
	MaxRunBytes           int64         `env:"AGUI_MAX_RUN_BYTES" envDefault:"268435456" doc:"most bytes of events the agent may send in one run (the run ends with RUN_ERROR RUN_TOO_LARGE above): a run's checkpoint, export and resume read it whole; negative: no limit" group:"Runs and limits" help:"most bytes of events in one run (negative: none)"`
	MaxRunDuration        time.Duration `env:"AGUI_MAX_RUN_DURATION" envDefault:"1h" doc:"longest a run may stream (RUN_ERROR RUN_TIMEOUT after)" group:"Runs and limits" help:"longest a run may stream"`
	UpstreamHeaderTimeout time.Duration `env:"AGUI_UPSTREAM_HEADER_TIMEOUT" envDefault:"60s" doc:"wait for the agent's response headers (504 after)" group:"Runs and limits" help:"wait for the agent's response headers"`
	UpstreamIdleTimeout   time.Duration `env:"AGUI_UPSTREAM_IDLE_TIMEOUT" envDefault:"5m" doc:"silence from the agent that ends a run (RUN_ERROR UPSTREAM_IDLE); negative disables" group:"Runs and limits" help:"agent silence that ends a run"`
	StoreTimeout          time.Duration `env:"AGUI_STORE_TIMEOUT" envDefault:"5s" doc:"longest a request waits on the store (a run start's creation and history read, history, runs, export, stop, and an event stream's reads before its first byte; for an import, each of its store calls, so its deadline grows with the document) before 503 StoreUnavailable" group:"Runs and limits" help:"longest a request waits on the store (503 after)"`
	ClientQueueBytes      int           `env:"AGUI_CLIENT_QUEUE_BYTES" envDefault:"16777216" doc:"bytes queued for one client before it is disconnected as too slow (it can resume); at least AGUI_MAX_BODY_BYTES and AGUI_MAX_EVENT_BYTES" group:"Runs and limits" help:"bytes queued for a slow client before it is cut"`
	Heartbeat             time.Duration `env:"AGUI_HEARTBEAT" envDefault:"15s" doc:"silence after which a client stream gets an SSE comment; negative disables" group:"Runs and limits" help:"silence after which a stream gets a comment"`
	AllowConcurrentRuns   bool          `env:"AGUI_ALLOW_CONCURRENT_RUNS" envDefault:"false" doc:"allow a new run on a thread whose latest run is still running (default: 409 ThreadBusy)" group:"Runs and limits" help:"allow a run while the thread's last one runs"`
	Hydrate               string        `env:"AGUI_HYDRATE" envDefault:"missing" doc:"off: the agent gets the request as sent; missing: when a run continuing a thread lacks messages the branch holds (a reload, a second device), the agent gets the branch's messages, then the new ones, and the branch's state if the request's is empty; always: messages and state rebuilt from the store for every run" group:"Runs and limits" help:"off, missing or always: send the agent the history"`
	StopEnding            string        `env:"AGUI_STOP_ENDING" envDefault:"cancelled" doc:"how a run stopped on request (POST .../stop) ends: cancelled closes what the agent left open and sends RUN_FINISHED with outcome cancelled (AG-UI 1.0; the run's status is cancelled); error sends RUN_ERROR code CANCELLED (before 1.0), for consumers that validate the older outcome set, such as @copilotkit/runtime 1.75.0. Per route: /agents/a=error,cancelled (a route named by its AGUI_ROUTES prefix or AGUI_ROUTE; an item without a route is the others' value)" group:"Runs and limits" help:"a stop's ending: cancelled (1.0) or error"`
	AfterTerminal         string        `env:"AGUI_AFTER_TERMINAL" envDefault:"keep" doc:"events an agent sends after RUN_FINISHED in the same response (TanStack AI does, after each model call): keep forwards and records them as sent, one run ending at the response's last terminal event; refuse ends the run at its first terminal event and drops what follows (counted and logged). Events after a RUN_ERROR are refused either way. Per route as AGUI_STOP_ENDING" group:"Runs and limits" help:"events after RUN_FINISHED: keep or refuse"`
	Lineage               string        `env:"AGUI_LINEAGE" envDefault:"parentRunId" doc:"where RUN_STARTED gets the run's branch lineage (the run it continues): parentRunId fills RUN_STARTED.parentRunId when the agent's has none; metadata writes it to RUN_STARTED.metadata[\"agui-proxy\"].parentRunId and leaves parentRunId to the agent (AG-UI 1.0: the run that spawned this one). Per route as AGUI_STOP_ENDING" group:"Runs and limits" help:"lineage in parentRunId or metadata"`
	MaxImportBytes        int64         `env:"AGUI_MAX_IMPORT_BYTES" envDefault:"67108864" doc:"largest thread import document (413 above)" group:"Runs and limits" help:"largest thread import document"`
	LeaseInterval         time.Duration `env:"AGUI_LEASE_INTERVAL" envDefault:"2s" doc:"how often a replica renews the lease of each run it pumps; another replica ends a run as interrupted once its lease (3 intervals) expired more than one interval ago" group:"Runs and limits" help:"lease renewal of each run a replica pumps"`

	// Server
	StreamKeepAlive    bool          `env:"AGUI_STREAM_KEEPALIVE" envDefault:"false" doc:"write event streams (a run's, an attach's) to HTTP/1.1 clients through net/http, keeping the connection for the client's next request; by default the proxy takes the connection over after the headers, and hands it back to the server at the stream's end for the client's next request: a run's events are written by the goroutine that reads them from the agent, an attach stream keeps one goroutine and no net/http buffer (about half the memory per stream)" group:"Server" help:"write streams through net/http (more memory)"`
	ReadHeaderTimeout  time.Duration `env:"AGUI_READ_HEADER_TIMEOUT" envDefault:"5s" doc:"server: time to read request headers" group:"Server" help:"time to read request headers"`
	BodyReadTimeout    time.Duration `env:"AGUI_BODY_READ_TIMEOUT" envDefault:"30s" doc:"time to read a run request's body (the server has no whole-request timeout: it would cut streams)" group:"Server" help:"time to read a run request's body"`
	IdleTimeout        time.Duration `env:"AGUI_IDLE_TIMEOUT" envDefault:"120s" doc:"server: keep-alive idle time (also of a connection a finished stream handed back)" group:"Server" help:"keep-alive idle time"`
	MaxHeaderBytes     int           `env:"AGUI_MAX_HEADER_BYTES" envDefault:"65536" doc:"server: largest request header block" group:"Server" help:"largest request header block"`
	DrainTimeout       time.Duration `env:"AGUI_DRAIN_TIMEOUT" envDefault:"30s" doc:"on SIGTERM, how long runs in flight may continue before they are ended with RUN_ERROR INTERRUPTED" group:"Server" help:"on SIGTERM, how long runs may go on"`
	AttachWriteTimeout time.Duration `env:"AGUI_ATTACH_WRITE_TIMEOUT" envDefault:"10s" doc:"longest one write to an attached client may take; a client that does not read is dropped (it can resume)" group:"Server" help:"longest one write to an attached client"`
	AttachRetry        time.Duration `env:"AGUI_ATTACH_RETRY" envDefault:"2s" doc:"reconnection delay hinted to EventSource clients of the attach streams (the SSE retry field)" group:"Server" help:"reconnection delay hinted to EventSource"`
	AttachFollowPoll   time.Duration `env:"AGUI_ATTACH_FOLLOW_POLL" envDefault:"1s" doc:"how often a ?follow=1 thread attach checks for the thread's next run" group:"Server" help:"how often ?follow=1 looks for the next run"`

	// Process
	GCHeapFloor int64  `env:"AGUI_GC_HEAP_FLOOR" envDefault:"67108864" doc:"bytes the Go garbage collector's heap goal does not go below when GOGC is not set: while little is live (few streams), AGUI_GC_PERCENT alone would collect every few megabytes; above the floor it paces alone. 0: no floor" group:"Process" help:"heap goal floor of the garbage collector"`
	GCPercent   int    `env:"AGUI_GC_PERCENT" envDefault:"50" doc:"the Go garbage collector's target (GOGC) when GOGC is not set: the heap may grow this many percent above what is live before a collection. Most of a stream's memory is its share of that headroom (docs/benchmarks.md); higher trades memory for fewer collections. 1..1000" group:"Process" help:"the collector's GOGC when GOGC is not set"`
	LogLevel    string `env:"AGUI_LOG_LEVEL" envDefault:"info" doc:"debug, info, warn or error" group:"Process" help:"debug, info, warn or error"`
	LogFormat   string `env:"AGUI_LOG_FORMAT" envDefault:"text" doc:"text or json" group:"Process" help:"text or json"`

	// Redis topology and connection
	RedisClusterAddrs     string        `env:"AGUI_REDIS_CLUSTER_ADDRS" doc:"Redis Cluster instead of AGUI_REDIS_URL: comma-separated seed addresses host:port,host:port" group:"Redis topology and connection" help:"Redis Cluster seeds host:port,host:port"`
	RedisSentinelAddrs    string        `env:"AGUI_REDIS_SENTINEL_ADDRS" doc:"Redis Sentinel instead of AGUI_REDIS_URL: comma-separated sentinel addresses host:port,host:port (with AGUI_REDIS_SENTINEL_MASTER)" group:"Redis topology and connection" help:"Redis Sentinel addresses host:port,host:port"`
	RedisSentinelMaster   string        `env:"AGUI_REDIS_SENTINEL_MASTER" doc:"name of the master the sentinels watch" group:"Redis topology and connection" help:"name of the master the sentinels watch"`
	RedisSentinelPassword string        `env:"AGUI_REDIS_SENTINEL_PASSWORD" doc:"password of the sentinels (the data nodes use AGUI_REDIS_PASSWORD)" group:"Redis topology and connection" help:"password of the sentinels"`
	RedisUsername         string        `env:"AGUI_REDIS_USERNAME" doc:"Redis ACL user, all topologies (replaces the URL's)" group:"Redis topology and connection" help:"Redis ACL user (replaces the URL's)"`
	RedisPassword         string        `env:"AGUI_REDIS_PASSWORD" doc:"Redis password, all topologies (replaces the URL's)" group:"Redis topology and connection" help:"Redis password (replaces the URL's)"`
	RedisTLS              bool          `env:"AGUI_REDIS_TLS" envDefault:"false" doc:"TLS to Redis, all topologies (rediss:// turns it on for a URL)" group:"Redis topology and connection" help:"TLS to Redis (rediss:// turns it on)"`
	RedisTLSCA            string        `env:"AGUI_REDIS_TLS_CA_FILE" doc:"PEM file of the CA that signed the Redis servers' certificates (empty: system roots)" group:"Redis topology and connection" help:"PEM file of the Redis servers' CA"`
	RedisDB               int           `env:"AGUI_REDIS_DB" envDefault:"0" doc:"Redis database number, single server and Sentinel (Cluster has only 0); replaces the URL's when not 0" group:"Redis topology and connection" help:"Redis database number (not on Cluster)"`
	RedisWaitReplicas     int           `env:"AGUI_REDIS_WAIT_REPLICAS" envDefault:"0" doc:"with AGUI_DURABILITY=sync: an event counts as stored only once this many replicas have it (WAIT after each write); 0: the master's memory" group:"Redis topology and connection" help:"sync: replicas that must have each event"`
	RedisWaitTimeout      time.Duration `env:"AGUI_REDIS_WAIT_TIMEOUT" envDefault:"1s" doc:"longest a write waits for AGUI_REDIS_WAIT_REPLICAS (then it is retried)" group:"Redis topology and connection" help:"longest a write waits for those replicas"`
}

// loadConfig reads the configuration from environ (nil: the process environment) and
// validates it, reporting every problem at once.
func loadConfig(environ map[string]string) (config, error) {
	opts := env.Options{}
	if environ != nil {
		opts.Environment = environ
	}
	cfg, err := env.ParseAsWithOptions[config](opts)
	if err != nil {
		return cfg, envErrors(err, environ)
	}
	return cfg, cfg.validate()
}

func (c config) validate() error {
	var errs []error
	if _, err := c.routes(); err != nil {
		errs = append(errs, err)
	}
	if err := checkListen("AGUI_LISTEN", c.Listen); err != nil {
		errs = append(errs, err)
	}
	if c.PprofListen != "" {
		if err := checkListen("AGUI_PPROF_LISTEN", c.PprofListen); err != nil {
			errs = append(errs, err)
		}
	}
	if err := checkRedisURL(c.RedisURL); err != nil {
		errs = append(errs, err)
	}
	if int64(c.ClientQueueBytes) < c.MaxBodyBytes || c.ClientQueueBytes < c.MaxEventBytes {
		errs = append(errs, fmt.Errorf("AGUI_CLIENT_QUEUE_BYTES (%d) must be at least AGUI_MAX_BODY_BYTES (%d) and AGUI_MAX_EVENT_BYTES (%d): a run's first event carries its input, and a client must hold any event the agent may send",
			c.ClientQueueBytes, c.MaxBodyBytes, c.MaxEventBytes))
	}
	switch c.RequireIdentity {
	case "", "true", "false":
		if c.RequireIdentity != "" && c.IdentityHeader == "" {
			errs = append(errs, errors.New("AGUI_REQUIRE_IDENTITY needs AGUI_IDENTITY_HEADER"))
		}
	default:
		errs = append(errs, fmt.Errorf("AGUI_REQUIRE_IDENTITY %q is not true or false", c.RequireIdentity))
	}
	if _, err := hydrate.ParseMode(c.Hydrate); err != nil {
		errs = append(errs, fmt.Errorf("AGUI_HYDRATE: %w", err))
	}
	if c.Durability != "async" && c.Durability != "sync" {
		errs = append(errs, fmt.Errorf("AGUI_DURABILITY %q is not async or sync", c.Durability))
	}
	if _, err := c.routes(); err == nil {
		if _, err := c.routeSettings(); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := c.trustedProxies(); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("AGUI_LOG_FORMAT %q is not text or json", c.LogFormat))
	}
	if !strings.HasPrefix(c.AttachPrefix, "/") || !strings.HasSuffix(c.AttachPrefix, "/") || len(c.AttachPrefix) < 2 {
		errs = append(errs, fmt.Errorf("AGUI_ATTACH_PREFIX %q must start and end with / and not be /", c.AttachPrefix))
	}
	if c.RecorderBuffer < 0 || c.RecorderBufferBytes <= 0 {
		errs = append(errs, fmt.Errorf("AGUI_RECORDER_BUFFER (%d) must not be negative and AGUI_RECORDER_BUFFER_BYTES (%d) must be positive", c.RecorderBuffer, c.RecorderBufferBytes))
	}
	if c.MaxRunBytes == 0 {
		errs = append(errs, errors.New("AGUI_MAX_RUN_BYTES is 0: set a positive bound, or a negative value for none"))
	}
	if c.CheckpointMemory < 0 {
		errs = append(errs, fmt.Errorf("AGUI_CHECKPOINT_MEMORY=%d: want 0 or more bytes", c.CheckpointMemory))
	}
	if c.RecorderLinger < 0 || c.RecorderLinger > time.Second {
		errs = append(errs, fmt.Errorf("AGUI_RECORDER_LINGER %s is outside 0s..1s", c.RecorderLinger))
	}
	if c.RecorderBusyLinger < 0 || c.RecorderBusyLinger > time.Second {
		errs = append(errs, fmt.Errorf("AGUI_RECORDER_BUSY_LINGER %s is outside 0s..1s", c.RecorderBusyLinger))
	}
	if c.RecorderLanes < 0 || c.RecorderLanes > 64 {
		errs = append(errs, fmt.Errorf("AGUI_RECORDER_LANES %d is outside 0..64", c.RecorderLanes))
	}
	if c.CompactAfter < 0 {
		errs = append(errs, fmt.Errorf("AGUI_COMPACT_AFTER=%s: want 0 (off) or a positive duration such as 24h", c.CompactAfter))
	}
	if c.GCHeapFloor < 0 || c.GCHeapFloor > 1<<40 {
		errs = append(errs, fmt.Errorf("AGUI_GC_HEAP_FLOOR %d is outside 0..1 TiB", c.GCHeapFloor))
	}
	if c.GCPercent < 1 || c.GCPercent > 1000 {
		errs = append(errs, fmt.Errorf("AGUI_GC_PERCENT %d is outside 1..1000", c.GCPercent))
	}
	if c.MemoryMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("AGUI_MEMORY_MAX_BYTES=%d: want 0 (no bound) or more bytes", c.MemoryMaxBytes))
	}
	if c.redisEnabled() && c.StorePath != "" {
		errs = append(errs, errors.New("AGUI_STORE_PATH and a Redis store (AGUI_REDIS_URL, AGUI_REDIS_CLUSTER_ADDRS or AGUI_REDIS_SENTINEL_ADDRS) are both set: choose one store"))
	}
	if _, err := c.redisConfig(); err != nil {
		errs = append(errs, err)
	}
	if strings.ContainsAny(c.RedisPrefix, "{} \t\r\n") || c.RedisPrefix == "" {
		errs = append(errs, fmt.Errorf("AGUI_REDIS_PREFIX %q must be non-empty without braces or spaces", c.RedisPrefix))
	}
	return errors.Join(errs...)
}

// perRoute parses a setting that may differ per route: a comma-separated list of items,
// each a value (for every route the list does not name) or route=value, where route is an
// AGUI_ROUTES prefix, or AGUI_ROUTE's name without AGUI_ROUTES. It returns each route's value
// by route name; def is the value of routes nothing names.
func (c config) perRoute(name, setting, def string, allowed ...string) (map[string]string, error) {
	routes, err := c.routes()
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, rt := range routes {
		known[rt.name] = true
	}
	named := map[string]string{}
	for item := range strings.SplitSeq(setting, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		key, value, hasKey := strings.Cut(item, "=")
		key, value = strings.TrimRight(strings.TrimSpace(key), "/"), strings.TrimSpace(value)
		if !hasKey {
			key, value = "", strings.TrimSpace(item)
		}
		if !slices.Contains(allowed, value) {
			return nil, fmt.Errorf("%s: %q is not one of %s", name, value, strings.Join(allowed, ", "))
		}
		if key != "" && !known[key] {
			return nil, fmt.Errorf("%s: %q names no route (the routes: %s)", name, key, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
		if _, dup := named[key]; dup {
			return nil, fmt.Errorf("%s: %q is given twice", name, cmp.Or(key, "the value for every route"))
		}
		named[key] = value
	}
	if v, ok := named[""]; ok {
		def = v
	}
	out := map[string]string{}
	for rt := range known {
		out[rt] = def
		if v, ok := named[rt]; ok {
			out[rt] = v
		}
	}
	return out, nil
}

// routeSettings are the settings of one route that may differ per route.
type routeSettings struct {
	stopEnding, afterTerminal, lineage string
}

// routeSettings returns each route's settings by route name.
func (c config) routeSettings() (map[string]routeSettings, error) {
	stop, err1 := c.perRoute("AGUI_STOP_ENDING", c.StopEnding, "cancelled", "cancelled", "error")
	after, err2 := c.perRoute("AGUI_AFTER_TERMINAL", c.AfterTerminal, "keep", "keep", "refuse")
	lineage, err3 := c.perRoute("AGUI_LINEAGE", c.Lineage, "parentRunId", "parentRunId", "metadata")
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	out := map[string]routeSettings{}
	for rt := range stop {
		out[rt] = routeSettings{stopEnding: stop[rt], afterTerminal: after[rt], lineage: lineage[rt]}
	}
	return out, nil
}

// checkListen checks that a listen address is host:port (the host may be empty: every
// interface), with the likely fix for a port alone or a URL.
func checkListen(name, v string) error {
	host, port, err := net.SplitHostPort(v)
	if err == nil && port != "" && !strings.Contains(host, "/") {
		if _, perr := strconv.ParseUint(port, 10, 16); perr == nil {
			return nil
		}
	}
	hint := ""
	switch {
	case isPort(v):
		hint = fmt.Sprintf(" (did you mean %q, this machine only, or %q, every interface?)", "127.0.0.1:"+v, ":"+v)
	case strings.Contains(v, "://"):
		if u, err := url.Parse(v); err == nil && u.Host != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", u.Host)
		}
	}
	return fmt.Errorf("%s=%q: want host:port such as 127.0.0.1:8080 or :8080%s", name, v, hint)
}

func isPort(s string) bool {
	n, err := strconv.ParseUint(s, 10, 16)
	return err == nil && n > 0
}

// checkRedisURL checks that AGUI_REDIS_URL, when set, is a redis://, rediss:// or unix:// URL.
func checkRedisURL(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err == nil && (u.Scheme == "redis" || u.Scheme == "rediss") && u.Host != "" || err == nil && u.Scheme == "unix" {
		return nil
	}
	hint := ""
	if !strings.Contains(v, "://") {
		hint = fmt.Sprintf(" (did you mean %q?)", "redis://"+v+"/0")
	}
	return fmt.Errorf("AGUI_REDIS_URL=%q: want a URL such as redis://127.0.0.1:6379/0 (rediss:// for TLS)%s", redactURL(v), hint)
}

func (c config) trustedProxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for s := range strings.SplitSeq(c.TrustedProxies, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			if a, aerr := netip.ParseAddr(s); aerr == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			} else {
				return nil, fmt.Errorf("AGUI_TRUSTED_PROXIES: %q: want a CIDR such as 10.0.0.0/8 or an address such as 10.0.0.1", s)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("AGUI_LOG_LEVEL %q is not debug, info, warn or error", s)
	}
	return l, nil
}

// configVar documents one environment variable: its group, its one-line help (agui-proxy -h)
// and its full documentation (docs/configuration.md).
type configVar struct{ Name, Default, Group, Help, Doc string }

// configVars lists every variable of config in declaration order (grouped).
func configVars() []configVar {
	t := reflect.TypeFor[config]()
	vars := make([]configVar, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		vars = append(vars, configVar{
			Name: f.Tag.Get("env"), Default: f.Tag.Get("envDefault"),
			Group: f.Tag.Get("group"), Help: f.Tag.Get("help"), Doc: f.Tag.Get("doc"),
		})
	}
	return vars
}

// usageHead is the start of agui-proxy -h: what it is and its commands.
const usageHead = `agui-proxy: durable, resumable AG-UI streams in front of any agent.

Usage:
  agui-proxy              run the proxy, configured by the environment variables below
  agui-proxy compact      compact AG-UI events: JSON array or NDJSON on stdin, result on stdout
                          (agui-proxy compact -h for its flags)
` + backupUsage + `  agui-proxy version      print the version, commit and Go version

Example: AGUI_UPSTREAM=http://127.0.0.1:8000 AGUI_LISTEN=127.0.0.1:8080 agui-proxy
`

// printUsage writes the -h text: the commands, then every variable with its default and one
// line of help, by group. The full text of each is in docs/configuration.md.
func printUsage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	fmt.Fprint(w, "\nEnvironment (NAME=default; every variable in full: docs/configuration.md):\n")
	group := ""
	for _, v := range configVars() {
		if v.Group != group {
			group = v.Group
			fmt.Fprintf(w, "\n%s:\n", group)
		}
		fmt.Fprintf(w, "  %-37s %s\n", v.Name+"="+v.Default, v.Help)
	}
}

// route is one upstream agent and the path prefix it is served under ("" for the root).
type route struct {
	name, prefix string
	upstream     *url.URL
}

// routes returns AGUI_ROUTES parsed, or the single AGUI_UPSTREAM route at the root.
func (c config) routes() ([]route, error) {
	parseURL := func(name, v string) (*url.URL, error) {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			hint := ""
			if !strings.Contains(v, "://") && v != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", "http://"+v)
			}
			return nil, fmt.Errorf("%s: want an http:// or https:// URL such as http://127.0.0.1:8000%s", name, hint)
		}
		return u, nil
	}
	if strings.TrimSpace(c.Routes) == "" {
		u, err := parseURL(fmt.Sprintf("AGUI_UPSTREAM=%q", c.Upstream), c.Upstream)
		if err != nil {
			return nil, err
		}
		return []route{{name: c.Route, upstream: u}}, nil
	}
	var out []route
	seen := map[string]bool{}
	for item := range strings.SplitSeq(c.Routes, ",") {
		item = strings.TrimSpace(item)
		prefix, target, ok := strings.Cut(item, "=")
		prefix = strings.TrimRight(strings.TrimSpace(prefix), "/")
		if !ok || !strings.HasPrefix(prefix, "/") || len(prefix) < 2 || strings.ContainsAny(prefix, " \t{}?#*") {
			return nil, fmt.Errorf("AGUI_ROUTES: %q: want /prefix=http://agent:8000 (comma-separated)", item)
		}
		if seen[prefix] {
			return nil, fmt.Errorf("AGUI_ROUTES: prefix %q appears twice", prefix)
		}
		seen[prefix] = true
		u, err := parseURL(fmt.Sprintf("AGUI_ROUTES: %q", item), strings.TrimSpace(target))
		if err != nil {
			return nil, err
		}
		out = append(out, route{name: prefix, prefix: prefix, upstream: u})
	}
	return out, nil
}
