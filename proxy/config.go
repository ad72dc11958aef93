package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/hydrate"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxBodyBytes          = 10 << 20
	DefaultMaxEventBytes         = 10 << 20
	DefaultMaxRunDuration        = time.Hour
	DefaultMaxRunBytes           = 256 << 20
	DefaultUpstreamHeaderTimeout = time.Minute
	DefaultUpstreamIdleTimeout   = 5 * time.Minute
	DefaultClientQueueBytes      = attach.DefaultClientQueueBytes
	DefaultHeartbeatInterval     = attach.DefaultHeartbeatInterval
	DefaultRoute                 = thread.DefaultRoute
	DefaultBodyReadTimeout       = 30 * time.Second
	DefaultAttachPrefix          = attach.DefaultPrefix
	DefaultAttachWriteTimeout    = attach.DefaultWriteTimeout
	DefaultAttachRetry           = attach.DefaultRetry
	DefaultAttachFollowPoll      = attach.DefaultFollowPoll
	DefaultMaxImportBytes        = attach.DefaultMaxImportBytes
	DefaultLeaseInterval         = 2 * time.Second
	DefaultStoreTimeout          = 5 * time.Second
	// DefaultCheckpointMemory is the default CheckpointMemory: 64 MiB. A run keeps only what
	// each event does not share with the one before it (thread.KeptEvents): the soak
	// profile's 60-event run keeps about 5 KB, so 64 MiB holds ~10,000 such streams; past it,
	// runs read their events back as they did without. Measured at 3,000 streams × 60 events
	// at 1 s on Redis: +8 KiB RSS per stream, proxy CPU -8% and Redis CPU -9% per event.
	DefaultCheckpointMemory = 64 << 20
)

// ErrInvalidConfig is wrapped by every error New returns for a bad Config.
var ErrInvalidConfig = errors.New("invalid proxy config")

// Config configures a Handler. Only Upstream is required; every other zero value means the
// default named in its comment.
type Config struct {
	// Upstream is the AG-UI agent endpoint. Request paths are joined to its path, as
	// httputil.ProxyRequest.SetURL does.
	Upstream *url.URL
	// Transport carries upstream requests. nil: a clone of http.DefaultTransport with
	// ResponseHeaderTimeout set. Do not use an http.Client timeout-like transport that limits
	// whole responses: runs stream for a long time.
	Transport http.RoundTripper
	// Store records threads, runs and events. nil: an in-memory store owned by the Handler
	// (closed by Shutdown). A Store passed in is not closed by the Handler.
	Store recorder.Store
	// Durability selects when an event is forwarded: DurabilityAsync (default) forwards at once
	// and records in the background; DurabilitySync forwards an event only after it is stored.
	Durability recorder.Durability
	// DisableRecording forwards and parses runs without storing their events (run metadata is
	// still kept). Attach and resume then have nothing to serve: it exists to measure what
	// recording costs.
	DisableRecording bool
	// RecorderBuffer bounds the events waiting to be stored across the runs of this Handler (one
	// route: every Handler has its own recorder.Writer). Zero: recorder.WriterConfig's default
	// (recorder.DefaultMaxBufferedEvents, or recorder.DefaultGroupCommitBufferedEvents on the
	// disk store).
	RecorderBuffer int
	// RecorderBufferBytes bounds the bytes of those events the same way (default
	// recorder.DefaultMaxBufferedBytes): a full buffer, by events or bytes, slows the runs.
	RecorderBufferBytes int64
	// RecorderFullWait is how long a run waits for room in a full recorder buffer while the
	// store makes no progress, before its events are dropped with a gap (zero:
	// recorder.DefaultFullWait; negative: drop at once). While the store keeps making
	// progress a fast agent is slowed to its pace and nothing is dropped.
	RecorderFullWait time.Duration
	// RecorderLinger is the least time between two store writes of the recorder while no run
	// waits on the store (recorder.WriterConfig.Linger): events gather into fewer, larger
	// round trips. A run's end and sync durability are not delayed by it. Zero:
	// recorder.DefaultLinger; negative: none (each write as soon as the previous one is done).
	RecorderLinger time.Duration
	// RecorderBusyLinger replaces RecorderLinger after a store write that carried the events
	// of recorder.BusyRuns runs or more (recorder.WriterConfig.BusyLinger): with many
	// concurrent runs the writes are large anyway, and a longer wait saves round trips and
	// per-run store work. Zero: recorder.DefaultBusyLinger; negative: none (RecorderLinger
	// always).
	RecorderBusyLinger time.Duration
	// RecorderLanes is how many store writes the recorder has in flight at once
	// (recorder.WriterConfig.Lanes): the runs are spread over that many lanes by thread, each
	// with its own queue and batch, so a store's round trip does not bound the rate of all
	// the runs. Zero: recorder.DefaultLanes, and one on the disk store (recorderLanes).
	RecorderLanes int
	// CheckpointMemory bounds the bytes of recorded events the proxy keeps, over all the runs
	// it pumps, so that a run's checkpoint at its end (stored before its terminal event is
	// sent) is built from the events it recorded instead of reading them back from the store.
	// A run that does not fit, or one of whose events the recorder dropped, is read back as
	// before. Zero: DefaultCheckpointMemory; negative: none kept (every run end reads its run
	// back).
	CheckpointMemory int64
	// Registerer receives the proxy's Prometheus collectors (agui_proxy_*). nil: no metrics.
	Registerer prometheus.Registerer
	// Logger receives structured logs. nil: discard.
	Logger *slog.Logger
	// Route names the route (room) this handler serves; each route has its own namespace of
	// thread ids (a thread id used through one route is unused through another). Default
	// DefaultRoute.
	Route string
	// IdentityHeader names a request header set by a trusted auth gateway that identifies the
	// caller; threads are owned by that identity, and other identities get 404. "" runs
	// single-tenant: every thread belongs to everyone who can reach the proxy.
	IdentityHeader string
	// AnonymousPassthrough, with IdentityHeader set, forwards requests that carry no identity
	// and are not runs to the agent untouched, as in single-tenant mode. false (default):
	// every request without an identity is answered 401 IdentityRequired, so the agent only
	// ever sees identified callers. Runs and the attach endpoints always need an identity.
	AnonymousPassthrough bool
	// TrustedProxies, when not empty, lists the peer networks allowed to set IdentityHeader;
	// from any other peer the header is removed and the request is anonymous.
	TrustedProxies []netip.Prefix
	// MaxBodyBytes limits run request bodies (413 above). Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyReadTimeout bounds reading a run request's body. Default DefaultBodyReadTimeout.
	// (Do not set http.Server.ReadTimeout in front of the proxy: once it passes, Go's server
	// cancels the request context of a response still streaming.)
	BodyReadTimeout time.Duration
	// MaxEventBytes limits one SSE frame from the upstream; a larger frame ends the run with
	// RUN_ERROR code FRAME_TOO_LARGE. Default DefaultMaxEventBytes.
	MaxEventBytes int
	// MaxRunBytes bounds the bytes of the events the agent sends in one run (their SSE frames):
	// the frame that passes it is neither forwarded nor recorded, and the run ends with
	// RUN_ERROR code RUN_TOO_LARGE. A run's checkpoint, export and resume read the run whole;
	// this keeps what they hold bounded. Default DefaultMaxRunBytes; negative: no limit.
	MaxRunBytes int64
	// MaxRunDuration bounds a run; at the limit the upstream request is cancelled and the run
	// ends with RUN_ERROR code RUN_TIMEOUT. Default DefaultMaxRunDuration.
	MaxRunDuration time.Duration
	// UpstreamHeaderTimeout bounds the wait for the upstream's response headers when Transport
	// is nil (504 after it; it is the Transport's ResponseHeaderTimeout). Default
	// DefaultUpstreamHeaderTimeout.
	UpstreamHeaderTimeout time.Duration
	// UpstreamIdleTimeout ends a run whose upstream sent no byte for this long (RUN_ERROR code
	// UPSTREAM_IDLE). Default DefaultUpstreamIdleTimeout; negative disables the watchdog.
	UpstreamIdleTimeout time.Duration
	// StoreTimeout bounds how long a request waits on the store before it is answered 503
	// StoreUnavailable: the reads that decide whether a run may start, the history, runs,
	// export, import and stop endpoints, and the reads of an event stream (thread and run
	// attach, a resume) before its first byte (a paused Redis answers nothing). A stream
	// that started waits for the store. Default DefaultStoreTimeout.
	StoreTimeout time.Duration
	// ClientQueueBytes bounds the bytes queued for one client; a client that falls further
	// behind is disconnected (it can resume) instead of slowing the run. A frame always fits
	// an empty queue, so a client is never dropped on its first frame. It must be at least
	// MaxBodyBytes (RUN_STARTED carries the run's input) and MaxEventBytes. Default
	// DefaultClientQueueBytes.
	ClientQueueBytes int
	// AttachPrefix is the path prefix of the attach, history and stop endpoints (package
	// attach); requests under it are not proxied. Default DefaultAttachPrefix.
	AttachPrefix string
	// AttachWriteTimeout bounds each write to an attached client, and to a run's client whose
	// connection the proxy took over (see StreamKeepAlive), once that client lags; one that
	// does not read is dropped (it can resume). Default DefaultAttachWriteTimeout.
	AttachWriteTimeout time.Duration
	// StreamKeepAlive writes the event streams (a run's to the client that started it, the
	// thread and run attach streams) through net/http, which keeps the client's connection
	// open for its next request. By default (false) the proxy takes an HTTP/1.1 client's
	// connection over once the response headers are sent: each event of a run is written to
	// the socket by the goroutine that reads it from the agent, without blocking, and an
	// attach stream goes on on one goroutine of its own (attach.Config.TakeOver); neither
	// holds a goroutine or buffer of net/http's (about half the memory of a stream, one
	// goroutine switch less per event; see docs/benchmarks.md). At the stream's end the
	// connection goes back to the server for the client's next request when the server has a
	// keepalive.Listener (cmd/agui-proxy's has); without one the response says Connection:
	// close and the client opens a new connection for its next request. HTTP/2 clients always go through
	// net/http, and attach streams only take over while HeartbeatInterval is on (a client
	// that left is found by the heartbeat's write).
	StreamKeepAlive bool
	// AttachRetry is the reconnection delay hinted to EventSource clients of the attach
	// streams (the SSE retry field). Default DefaultAttachRetry.
	AttachRetry time.Duration
	// AttachFollowPoll is how often a ?follow=1 thread attach checks for the thread's next run.
	// Default DefaultAttachFollowPoll.
	AttachFollowPoll time.Duration
	// MaxImportBytes bounds an import document. Default DefaultMaxImportBytes.
	MaxImportBytes int64
	// AllowConcurrentRuns lets a new run start on a thread whose latest run is still running.
	// false (default): such a POST gets 409 ThreadBusy.
	AllowConcurrentRuns bool
	// Hydrate says when a run request is rebuilt from the stored branch it continues before
	// the agent gets it (package hydrate): "" is hydrate.ModeMissing.
	Hydrate hydrate.Mode
	// Inspector serves the thread inspector page (package inspector) at AttachPrefix+"ui/".
	// Default false.
	Inspector bool
	// Compact configures the compaction of preludes and checkpoints.
	Compact compact.Options
	// Node names this process in run leases. Default: host name, pid and a random suffix.
	Node string
	// LeaseInterval is how often this process renews the lease of each run it pumps; a run
	// whose lease (3 intervals) expired is ended as interrupted by any replica that watches it.
	// Default DefaultLeaseInterval.
	LeaseInterval time.Duration
	// HeartbeatInterval is how long a client stream may stay silent before the proxy writes an
	// SSE comment to keep intermediaries from closing it. Default DefaultHeartbeatInterval;
	// negative disables heartbeats.
	HeartbeatInterval time.Duration
	// StopEnding is how a run stopped on request (POST .../stop) ends. "" is StopCancelled.
	StopEnding StopEnding
	// AfterTerminal is what becomes of the events an agent sends in the same response after
	// its RUN_FINISHED. "" is AfterTerminalKeep.
	AfterTerminal AfterTerminal
	// Lineage is where the proxy writes a run's branch lineage (the run it continues) on the
	// RUN_STARTED it forwards. "" is LineageParentRunID.
	Lineage Lineage
}

// StopEnding is how a run stopped on request ends (Config.StopEnding).
type StopEnding string

const (
	// StopCancelled ends a stopped run as AG-UI 1.0 does: the proxy closes what the agent
	// left open (tool calls, text and reasoning messages, reasoning spans, steps, subagents;
	// the most recently opened first), then sends RUN_FINISHED with outcome
	// {"type":"cancelled"}; the run is recorded with status "cancelled".
	StopCancelled StopEnding = "cancelled"
	// StopRunError ends a stopped run as before AG-UI 1.0: RUN_ERROR code CANCELLED, with
	// whatever was open left open; the run is recorded with status "error", detail
	// CANCELLED. For consumers that validate the older outcome set, such as
	// @copilotkit/runtime 1.75.0 with its own HttpAgent: its @ag-ui/core 0.0.59 schema knows
	// only the outcomes "success" and "interrupt", and fails a stream whose RUN_FINISHED says
	// "cancelled" (the runner of clients/copilotkit translates the ending and needs no such
	// route).
	StopRunError StopEnding = "error"
)

// AfterTerminal is what becomes of the events an agent sends after RUN_FINISHED in the same
// response (Config.AfterTerminal).
type AfterTerminal string

const (
	// AfterTerminalKeep keeps a response that goes on after its RUN_FINISHED whole, as one
	// run: every event is forwarded as sent and recorded, and the run ends at the response's
	// last terminal event (TanStack AI answers a server-tool turn with RUN_FINISHED after
	// each model call, and its own client reads on). Events after a RUN_ERROR are refused
	// either way.
	AfterTerminalKeep AfterTerminal = "keep"
	// AfterTerminalRefuse ends the run at its first terminal event: what follows is neither
	// forwarded nor recorded (counted in agui_proxy_upstream_irregular_events_total and
	// logged), the behaviour before continuations were kept.
	AfterTerminalRefuse AfterTerminal = "refuse"
)

// Lineage is where a run's branch lineage goes (Config.Lineage).
type Lineage string

const (
	// LineageParentRunID writes the run a run continues into RUN_STARTED.parentRunId when the
	// agent's RUN_STARTED has none (the serialization design's lineage).
	LineageParentRunID Lineage = "parentRunId"
	// LineageMetadata writes it into RUN_STARTED.metadata under MetadataKey, as
	// {"parentRunId": ...}, and leaves parentRunId to the agent: AG-UI 1.0 documents
	// parentRunId as the run that spawned this one (an agent invoking another agent), and a
	// 1.0 UI that nests spawned runs would otherwise nest every turn under the one before.
	LineageMetadata Lineage = "metadata"
)

// MetadataKey is the member of an event's metadata the proxy writes its annotations under
// (never "ag-ui", which the protocol reserves).
const MetadataKey = "agui-proxy"

// withDefaults returns c with zero values replaced and validates it.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Upstream == nil || c.Upstream.Scheme == "" || c.Upstream.Host == "" {
		errs = append(errs, errors.New("Upstream must be an absolute URL"))
	} else if c.Upstream.Scheme != "http" && c.Upstream.Scheme != "https" {
		errs = append(errs, fmt.Errorf("Upstream scheme %q is not http or https", c.Upstream.Scheme))
	}
	if c.Route == "" {
		c.Route = DefaultRoute
	}
	if strings.ContainsAny(c.Route, "\x00\r\n") {
		errs = append(errs, fmt.Errorf("Route %q holds control characters", c.Route))
	}
	if c.IdentityHeader != "" {
		if strings.ContainsAny(c.IdentityHeader, " \t\r\n:") {
			errs = append(errs, fmt.Errorf("IdentityHeader %q is not a header name", c.IdentityHeader))
		}
		c.IdentityHeader = http.CanonicalHeaderKey(c.IdentityHeader)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = DefaultMaxEventBytes
	}
	if c.MaxRunDuration == 0 {
		c.MaxRunDuration = DefaultMaxRunDuration
	}
	if c.MaxRunBytes == 0 {
		c.MaxRunBytes = DefaultMaxRunBytes
	}
	if c.UpstreamHeaderTimeout == 0 {
		c.UpstreamHeaderTimeout = DefaultUpstreamHeaderTimeout
	}
	if c.UpstreamIdleTimeout == 0 {
		c.UpstreamIdleTimeout = DefaultUpstreamIdleTimeout
	}
	if c.ClientQueueBytes == 0 {
		c.ClientQueueBytes = DefaultClientQueueBytes
	}
	if c.CheckpointMemory == 0 {
		c.CheckpointMemory = DefaultCheckpointMemory
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = DefaultStoreTimeout
	}
	if c.AttachPrefix == "" {
		c.AttachPrefix = DefaultAttachPrefix
	}
	if mode, err := hydrate.ParseMode(string(c.Hydrate)); err != nil {
		errs = append(errs, err)
	} else {
		c.Hydrate = mode
	}
	if c.LeaseInterval <= 0 {
		c.LeaseInterval = DefaultLeaseInterval
	}
	if c.Node == "" {
		host, _ := os.Hostname()
		c.Node = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), recorder.NewEpoch())
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	switch c.StopEnding {
	case "":
		c.StopEnding = StopCancelled
	case StopCancelled, StopRunError:
	default:
		errs = append(errs, fmt.Errorf("StopEnding %q is not %q or %q", c.StopEnding, StopCancelled, StopRunError))
	}
	switch c.AfterTerminal {
	case "":
		c.AfterTerminal = AfterTerminalKeep
	case AfterTerminalKeep, AfterTerminalRefuse:
	default:
		errs = append(errs, fmt.Errorf("AfterTerminal %q is not %q or %q", c.AfterTerminal, AfterTerminalKeep, AfterTerminalRefuse))
	}
	switch c.Lineage {
	case "":
		c.Lineage = LineageParentRunID
	case LineageParentRunID, LineageMetadata:
	default:
		errs = append(errs, fmt.Errorf("Lineage %q is not %q or %q", c.Lineage, LineageParentRunID, LineageMetadata))
	}
	for name, v := range map[string]int64{"MaxBodyBytes": c.MaxBodyBytes, "MaxEventBytes": int64(c.MaxEventBytes),
		"MaxRunDuration": int64(c.MaxRunDuration), "UpstreamHeaderTimeout": int64(c.UpstreamHeaderTimeout), "StoreTimeout": int64(c.StoreTimeout),
		"ClientQueueBytes": int64(c.ClientQueueBytes)} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s is negative", name))
		}
	}
	// Limits that contradict each other: a client would be dropped for a frame the proxy
	// accepted (a RUN_STARTED carrying a large input, a large event).
	if int64(c.ClientQueueBytes) < c.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("ClientQueueBytes (%d) is smaller than MaxBodyBytes (%d): RUN_STARTED carries the run's input", c.ClientQueueBytes, c.MaxBodyBytes))
	}
	if c.ClientQueueBytes < c.MaxEventBytes {
		errs = append(errs, fmt.Errorf("ClientQueueBytes (%d) is smaller than MaxEventBytes (%d)", c.ClientQueueBytes, c.MaxEventBytes))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return c, nil
}
