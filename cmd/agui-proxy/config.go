package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/agui-proxy/agui-proxy/hydrate"
)

// config is the proxy's whole configuration, read from the environment. Each field's desc tag
// is its documentation: `agui-proxy -h` prints it and the README table is generated from it.
type config struct {
	Upstream              string        `env:"AGUI_UPSTREAM" envDefault:"http://127.0.0.1:8000" desc:"URL of the AG-UI agent to proxy"`
	Listen                string        `env:"AGUI_LISTEN" envDefault:"127.0.0.1:8080" desc:"address the proxy listens on"`
	Route                 string        `env:"AGUI_ROUTE" envDefault:"default" desc:"name of the route (room) threads are bound to, with AGUI_UPSTREAM"`
	Routes                string        `env:"AGUI_ROUTES" desc:"several agents by path prefix instead of AGUI_UPSTREAM: /agents/a=http://a:8000,/agents/b=http://b:9000; each prefix is a route (room) with its attach endpoints under <prefix>/agui/"`
	RedisURL              string        `env:"AGUI_REDIS_URL" desc:"redis:// URL of the Redis store; empty keeps everything in memory (single process, lost on restart) unless AGUI_STORE_PATH is set"`
	StorePath             string        `env:"AGUI_STORE_PATH" desc:"directory of the embedded durable store (one bbolt file; one process at a time): history survives restarts without Redis. Not with AGUI_REDIS_URL"`
	MemoryMaxBytes        int64         `env:"AGUI_MEMORY_MAX_BYTES" envDefault:"1073741824" desc:"bound of the in-memory store: above it the least recently written threads without a running run are evicted whole (metric agui_proxy_store_evictions_total); 0: no bound"`
	RedisPrefix           string        `env:"AGUI_REDIS_PREFIX" envDefault:"agui" desc:"prefix of every Redis key"`
	RetentionTTL          time.Duration `env:"AGUI_RETENTION_TTL" envDefault:"0s" desc:"how long a thread's records live after its last write (0: forever)"`
	CompactAfter          time.Duration `env:"AGUI_COMPACT_AFTER" envDefault:"0s" desc:"compaction at rest: a run ended longer ago than this has its events replaced by their merged form (each message's and tool call's deltas joined; metric agui_proxy_store_compactions_total); prelude, history, ?run= and export stay the same, a resume from an event id inside such a run gets the full history with resume_failed. 0: off"`
	RetentionMaxEvents    int64         `env:"AGUI_RETENTION_MAX_EVENTS" envDefault:"0" desc:"events kept per run, oldest trimmed first (0: all)"`
	Durability            string        `env:"AGUI_DURABILITY" envDefault:"async" desc:"async: forward at once, record in the background; sync: forward an event only once it is stored"`
	RecorderBuffer        int           `env:"AGUI_RECORDER_BUFFER" envDefault:"16384" desc:"events that may wait for the store, across the runs of one route (each route has its own recorder); when full, runs are slowed to the store's pace. A store stall of buffer / event rate is absorbed without slowing anyone (16,384 at 10,000 events/s: 1.6 s); an agent faster than the store streams that far behind it"`
	RecorderBufferBytes   int64         `env:"AGUI_RECORDER_BUFFER_BYTES" envDefault:"268435456" desc:"bytes of events that may wait for the store, across the runs of one route: full by bytes, as by AGUI_RECORDER_BUFFER, runs are slowed to the store's pace (an agent streaming large events no longer fills memory with AGUI_RECORDER_BUFFER of them); one event larger than this is taken alone"`
	RecorderLinger        time.Duration `env:"AGUI_RECORDER_LINGER" envDefault:"10ms" desc:"least time between two store writes of the recorder while no run waits on the store: events gather into fewer, larger round trips (at 9,900 streams: half the round trips, a lower p99 and time to first event; 1 stream at 1 ms: a third less proxy CPU and half the Redis commands per event than at 2ms); a run's end and sync durability are not delayed; events reach the store, and attachers on other replicas, up to this much later. 0: write as soon as the previous write is done"`
	RecorderBusyLinger    time.Duration `env:"AGUI_RECORDER_BUSY_LINGER" envDefault:"10ms" desc:"AGUI_RECORDER_LINGER while many runs stream at once: after a store write that carried the events of 8 runs or more, the next one waits this long (writes are large anyway then; at 100 streams: -11% proxy CPU per event, a third fewer Redis commands, against a 2ms linger). Not above AGUI_RECORDER_LINGER (the defaults: both 10ms), or 0: AGUI_RECORDER_LINGER always; it matters where AGUI_RECORDER_LINGER is set shorter (events on other replicas sooner while few runs stream); at most 1s"`
	RecorderLanes         int           `env:"AGUI_RECORDER_LANES" envDefault:"0" desc:"store writes the recorder has in flight at once: the runs are spread over this many lanes by thread, each with its own queue (an even share of AGUI_RECORDER_BUFFER) and batch, so one round trip does not hold every run (2,000 streams at 20 ms on Redis: p50 0.3 s against 2.5 s with one). 0: 4, and 1 on the disk store (its transactions are serialized); at most 64"`
	CheckpointMemory      int64         `env:"AGUI_CHECKPOINT_MEMORY" envDefault:"67108864" desc:"bytes of recorded events kept, over all running runs, so each run's checkpoint at its end is built from them instead of reading the run back from the store (a run that does not fit is read back); a run keeps what each event does not share with the one before it, about 5 KB for a 60-event answer; 0: keep none"`
	RecorderFullWait      time.Duration `env:"AGUI_RECORDER_FULL_WAIT" envDefault:"10s" desc:"how long runs wait for room in a full recorder buffer while the store makes no progress (down or hung) before events are dropped and the run marked with a gap; negative: drop at once"`
	IdentityHeader        string        `env:"AGUI_IDENTITY_HEADER" desc:"trusted header naming the caller (set by your auth gateway); threads are owned by it. Empty: single-tenant"`
	RequireIdentity       string        `env:"AGUI_REQUIRE_IDENTITY" desc:"with AGUI_IDENTITY_HEADER: true (the default then) answers every request without an identity 401, false forwards those that are not runs to the agent untouched"`
	TrustedProxies        string        `env:"AGUI_TRUSTED_PROXIES" desc:"comma-separated CIDRs allowed to set the identity header (empty: any peer)"`
	MaxBodyBytes          int64         `env:"AGUI_MAX_BODY_BYTES" envDefault:"10485760" desc:"largest run request body (413 above)"`
	MaxEventBytes         int           `env:"AGUI_MAX_EVENT_BYTES" envDefault:"10485760" desc:"largest SSE event from the agent (the run ends with RUN_ERROR FRAME_TOO_LARGE above)"`
	MaxRunBytes           int64         `env:"AGUI_MAX_RUN_BYTES" envDefault:"268435456" desc:"most bytes of events the agent may send in one run (the run ends with RUN_ERROR RUN_TOO_LARGE above): a run's checkpoint, export and resume read it whole; negative: no limit"`
	MaxRunDuration        time.Duration `env:"AGUI_MAX_RUN_DURATION" envDefault:"1h" desc:"longest a run may stream (RUN_ERROR RUN_TIMEOUT after)"`
	UpstreamHeaderTimeout time.Duration `env:"AGUI_UPSTREAM_HEADER_TIMEOUT" envDefault:"60s" desc:"wait for the agent's response headers (504 after)"`
	UpstreamIdleTimeout   time.Duration `env:"AGUI_UPSTREAM_IDLE_TIMEOUT" envDefault:"5m" desc:"silence from the agent that ends a run (RUN_ERROR UPSTREAM_IDLE); negative disables"`
	StoreTimeout          time.Duration `env:"AGUI_STORE_TIMEOUT" envDefault:"5s" desc:"longest a request waits on the store (a run start's creation and history read, history, runs, export, stop, and an event stream's reads before its first byte; for an import, each of its store calls, so its deadline grows with the document) before 503 StoreUnavailable"`
	ClientQueueBytes      int           `env:"AGUI_CLIENT_QUEUE_BYTES" envDefault:"16777216" desc:"bytes queued for one client before it is disconnected as too slow (it can resume); at least AGUI_MAX_BODY_BYTES and AGUI_MAX_EVENT_BYTES"`
	Heartbeat             time.Duration `env:"AGUI_HEARTBEAT" envDefault:"15s" desc:"silence after which a client stream gets an SSE comment; negative disables"`
	StreamKeepAlive       bool          `env:"AGUI_STREAM_KEEPALIVE" envDefault:"false" desc:"write event streams (a run's, an attach's) to HTTP/1.1 clients through net/http, keeping the connection for the client's next request; by default the proxy takes the connection over after the headers, and hands it back to the server at the stream's end for the client's next request: a run's events are written by the goroutine that reads them from the agent, an attach stream keeps one goroutine and no net/http buffer (about half the memory per stream)"`
	ReadHeaderTimeout     time.Duration `env:"AGUI_READ_HEADER_TIMEOUT" envDefault:"5s" desc:"server: time to read request headers"`
	BodyReadTimeout       time.Duration `env:"AGUI_BODY_READ_TIMEOUT" envDefault:"30s" desc:"time to read a run request's body (the server has no whole-request timeout: it would cut streams)"`
	IdleTimeout           time.Duration `env:"AGUI_IDLE_TIMEOUT" envDefault:"120s" desc:"server: keep-alive idle time (also of a connection a finished stream handed back)"`
	MaxHeaderBytes        int           `env:"AGUI_MAX_HEADER_BYTES" envDefault:"65536" desc:"server: largest request header block"`
	DrainTimeout          time.Duration `env:"AGUI_DRAIN_TIMEOUT" envDefault:"30s" desc:"on SIGTERM, how long runs in flight may continue before they are ended with RUN_ERROR INTERRUPTED"`
	AttachPrefix          string        `env:"AGUI_ATTACH_PREFIX" envDefault:"/agui/" desc:"path prefix of the attach, history and stop endpoints (not proxied)"`
	AttachWriteTimeout    time.Duration `env:"AGUI_ATTACH_WRITE_TIMEOUT" envDefault:"10s" desc:"longest one write to an attached client may take; a client that does not read is dropped (it can resume)"`
	AttachRetry           time.Duration `env:"AGUI_ATTACH_RETRY" envDefault:"2s" desc:"reconnection delay hinted to EventSource clients of the attach streams (the SSE retry field)"`
	AttachFollowPoll      time.Duration `env:"AGUI_ATTACH_FOLLOW_POLL" envDefault:"1s" desc:"how often a ?follow=1 thread attach checks for the thread's next run"`
	MaxImportBytes        int64         `env:"AGUI_MAX_IMPORT_BYTES" envDefault:"67108864" desc:"largest thread import document (413 above)"`
	LeaseInterval         time.Duration `env:"AGUI_LEASE_INTERVAL" envDefault:"2s" desc:"how often a replica renews the lease of each run it pumps; another replica ends a run as interrupted once its lease (3 intervals) expired more than one interval ago"`
	AllowConcurrentRuns   bool          `env:"AGUI_ALLOW_CONCURRENT_RUNS" envDefault:"false" desc:"allow a new run on a thread whose latest run is still running (default: 409 ThreadBusy)"`
	Hydrate               string        `env:"AGUI_HYDRATE" envDefault:"missing" desc:"off: the agent gets the request as sent; missing: when a run continuing a thread lacks messages the branch holds (a reload, a second device), the agent gets the branch's messages, then the new ones, and the branch's state if the request's is empty; always: messages and state rebuilt from the store for every run"`
	Inspector             bool          `env:"AGUI_INSPECTOR" envDefault:"false" desc:"serve the thread inspector page at <attach prefix>ui/ (per route under its prefix); it reads only the attach endpoints, with the caller's identity"`
	Record                bool          `env:"AGUI_RECORD" envDefault:"true" desc:"false forwards runs without storing events (no attach or resume): for measuring the recorder's cost"`
	Metrics               bool          `env:"AGUI_METRICS" envDefault:"true" desc:"serve Prometheus metrics at /metrics"`
	PprofListen           string        `env:"AGUI_PPROF_LISTEN" desc:"address of a separate listener serving net/http/pprof (empty: off); keep it private"`
	GCHeapFloor           int64         `env:"AGUI_GC_HEAP_FLOOR" envDefault:"67108864" desc:"bytes the Go garbage collector's heap goal does not go below when GOGC is not set: while little is live (few streams), AGUI_GC_PERCENT alone would collect every few megabytes; above the floor it paces alone (100 streams: 8% less CPU per event, peak RSS 35 -> 59 MB; a thread of 1,000 runs: 112 collections, not 2,400). 0: no floor"`
	GCPercent             int           `env:"AGUI_GC_PERCENT" envDefault:"50" desc:"the Go garbage collector's target (GOGC) when GOGC is not set: the heap may grow this many percent above what is live before a collection. Most of a stream's memory is its share of that headroom: at 4,000 streams 50 holds 46 KiB per stream against 58 KiB with Go's default 100, for the same CPU within noise; higher trades memory for fewer collections. 1..1000"`
	LogLevel              string        `env:"AGUI_LOG_LEVEL" envDefault:"info" desc:"debug, info, warn or error"`
	LogFormat             string        `env:"AGUI_LOG_FORMAT" envDefault:"text" desc:"text or json"`

	// The Redis topology and connection settings: redisconfig.go.
	RedisClusterAddrs     string        `env:"AGUI_REDIS_CLUSTER_ADDRS" desc:"Redis Cluster instead of AGUI_REDIS_URL: comma-separated seed addresses host:port,host:port"`
	RedisSentinelAddrs    string        `env:"AGUI_REDIS_SENTINEL_ADDRS" desc:"Redis Sentinel instead of AGUI_REDIS_URL: comma-separated sentinel addresses host:port,host:port (with AGUI_REDIS_SENTINEL_MASTER)"`
	RedisSentinelMaster   string        `env:"AGUI_REDIS_SENTINEL_MASTER" desc:"name of the master the sentinels watch"`
	RedisSentinelPassword string        `env:"AGUI_REDIS_SENTINEL_PASSWORD" desc:"password of the sentinels (the data nodes use AGUI_REDIS_PASSWORD)"`
	RedisUsername         string        `env:"AGUI_REDIS_USERNAME" desc:"Redis ACL user, all topologies (replaces the URL's)"`
	RedisPassword         string        `env:"AGUI_REDIS_PASSWORD" desc:"Redis password, all topologies (replaces the URL's)"`
	RedisTLS              bool          `env:"AGUI_REDIS_TLS" envDefault:"false" desc:"TLS to Redis, all topologies (rediss:// turns it on for a URL)"`
	RedisTLSCA            string        `env:"AGUI_REDIS_TLS_CA_FILE" desc:"PEM file of the CA that signed the Redis servers' certificates (empty: system roots)"`
	RedisDB               int           `env:"AGUI_REDIS_DB" envDefault:"0" desc:"Redis database number, single server and Sentinel (Cluster has only 0); replaces the URL's when not 0"`
	RedisWaitReplicas     int           `env:"AGUI_REDIS_WAIT_REPLICAS" envDefault:"0" desc:"with AGUI_DURABILITY=sync: an event counts as stored only once this many replicas have it (WAIT after each write); 0: the master's memory"`
	RedisWaitTimeout      time.Duration `env:"AGUI_REDIS_WAIT_TIMEOUT" envDefault:"1s" desc:"longest a write waits for AGUI_REDIS_WAIT_REPLICAS (then it is retried)"`
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
		return cfg, envErrors(err)
	}
	return cfg, cfg.validate()
}

func (c config) validate() error {
	var errs []error
	if _, err := c.routes(); err != nil {
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
	if c.RecorderBuffer <= 0 || c.RecorderBufferBytes <= 0 {
		errs = append(errs, fmt.Errorf("AGUI_RECORDER_BUFFER (%d) and AGUI_RECORDER_BUFFER_BYTES (%d) must be positive", c.RecorderBuffer, c.RecorderBufferBytes))
	}
	if c.MaxRunBytes == 0 {
		errs = append(errs, errors.New("AGUI_MAX_RUN_BYTES is 0: set a positive bound, or a negative value for none"))
	}
	if c.CheckpointMemory < 0 {
		errs = append(errs, fmt.Errorf("AGUI_CHECKPOINT_MEMORY %d is negative", c.CheckpointMemory))
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
		errs = append(errs, fmt.Errorf("AGUI_COMPACT_AFTER %s is negative", c.CompactAfter))
	}
	if c.GCHeapFloor < 0 || c.GCHeapFloor > 1<<40 {
		errs = append(errs, fmt.Errorf("AGUI_GC_HEAP_FLOOR %d is outside 0..1 TiB", c.GCHeapFloor))
	}
	if c.GCPercent < 1 || c.GCPercent > 1000 {
		errs = append(errs, fmt.Errorf("AGUI_GC_PERCENT %d is outside 1..1000", c.GCPercent))
	}
	if c.MemoryMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("AGUI_MEMORY_MAX_BYTES %d is negative", c.MemoryMaxBytes))
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
				return nil, fmt.Errorf("AGUI_TRUSTED_PROXIES: %q is not a CIDR or address", s)
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

// configVar documents one environment variable.
type configVar struct{ Name, Default, Desc string }

// configVars lists every variable of config in declaration order.
func configVars() []configVar {
	t := reflect.TypeFor[config]()
	vars := make([]configVar, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		vars = append(vars, configVar{Name: f.Tag.Get("env"), Default: f.Tag.Get("envDefault"), Desc: f.Tag.Get("desc")})
	}
	return vars
}

// printUsage writes the -h text: the commands and every variable with its default.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `agui-proxy: durable, resumable AG-UI streams in front of any agent.

Usage:
  agui-proxy              run the proxy (configured by the environment variables below)
  agui-proxy compact      compact AG-UI events: JSON array or NDJSON on stdin, result on stdout
                          (agui-proxy compact -h for its flags)
`+backupUsage+`
Environment:
`)
	for _, v := range configVars() {
		def := v.Default
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  %-30s %s\n  %-30s default: %s\n", v.Name, v.Desc, "", def)
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
			return nil, fmt.Errorf("%s: %q is not an http(s) URL", name, v)
		}
		return u, nil
	}
	if strings.TrimSpace(c.Routes) == "" {
		u, err := parseURL("AGUI_UPSTREAM", c.Upstream)
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
			return nil, fmt.Errorf("AGUI_ROUTES: %q is not /prefix=http://agent", item)
		}
		if seen[prefix] {
			return nil, fmt.Errorf("AGUI_ROUTES: prefix %q appears twice", prefix)
		}
		seen[prefix] = true
		u, err := parseURL("AGUI_ROUTES", strings.TrimSpace(target))
		if err != nil {
			return nil, err
		}
		out = append(out, route{name: prefix, prefix: prefix, upstream: u})
	}
	return out, nil
}
