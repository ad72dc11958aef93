package attach

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/inflight"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// Defaults for the zero values of Config.
const (
	DefaultPrefix            = "/agui/"
	DefaultHeartbeatInterval = 15 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultMaxImportBytes    = 64 << 20
	DefaultRetry             = 2 * time.Second
	DefaultFollowPoll        = time.Second
	DefaultClientQueueBytes  = 16 << 20
)

// Config configures a Handler. Threads is required.
type Config struct {
	// Threads is the thread domain the endpoints serve: store, route, identity, compaction,
	// stopping runs. Live tails need its store to implement recorder.Follower.
	Threads *thread.Service
	// Logger receives structured logs. nil: discard.
	Logger *slog.Logger
	// Prefix is the path under which the endpoints are served. Default DefaultPrefix.
	Prefix string
	// HeartbeatInterval is the silence after which an SSE comment is written. Default
	// DefaultHeartbeatInterval; negative disables.
	HeartbeatInterval time.Duration
	// ClientQueueBytes bounds the bytes queued for one attacher of a live run, as for the
	// client that started it (package live): an attacher that falls further behind is dropped
	// with live.ErrSlowClient and resumes. Default DefaultClientQueueBytes.
	ClientQueueBytes int
	// WriteTimeout bounds each write to a client; a client that does not read is dropped.
	// Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Retry is the reconnection delay hinted to EventSource clients. Default DefaultRetry.
	Retry time.Duration
	// TakeOver lets the thread and run attach streams of HTTP/1.1 clients take their
	// connection over once the headers are sent: the handler returns and the stream goes on,
	// on a goroutine of the Handler's own (see Wait), with no buffer or goroutine of
	// net/http's. A client that went away is then found by the next write, the heartbeat at
	// the latest, so it applies only while HeartbeatInterval is on. A stream that ends cleanly
	// hands its connection back to the server when it has a keepalive.Listener; otherwise the
	// headers say Connection: close.
	TakeOver bool
	// FollowPoll is how often a ?follow=1 thread attach checks for the thread's next run.
	// Default DefaultFollowPoll.
	FollowPoll time.Duration
	// MaxImportBytes bounds an import document. Default DefaultMaxImportBytes.
	MaxImportBytes int64
	// StoreTimeout bounds each store wait that decides an answer before streaming goes on
	// (AGUI_STORE_TIMEOUT): the reads an event stream makes before its first byte (the access
	// check, the head run, the cursor check, the prelude), so a store that does not answer in
	// time gets 503 StoreUnavailable instead of a stream, and each store read of the bulk
	// export (one index page, one thread). A stream's whole length is not bounded: the live
	// tail after the first byte waits for the store (with heartbeats). The proxy bounds the
	// other, non-stream requests as a whole. Zero: unbounded.
	StoreTimeout time.Duration
	// Metrics observes attached streams and preludes. nil: none.
	Metrics Metrics
}

// Metrics observes the attach endpoints. Implementations must be safe for concurrent use.
type Metrics interface {
	// StreamStarted and StreamEnded bracket each SSE stream; kind is "thread", "run" or
	// "resume".
	StreamStarted(kind string)
	StreamEnded(kind string)
	// Resumed counts a reconnection with an event id, exact or answered with full history.
	Resumed(exact bool)
	// Prelude observes the time to build and send a prelude.
	Prelude(kind string, d time.Duration)
	// ThreadDeleted counts a deleted thread.
	ThreadDeleted()
	// ThreadsListed counts the threads a listing or bulk export returned.
	ThreadsListed(n int)
}

type nopMetrics struct{}

func (nopMetrics) StreamStarted(string)          {}
func (nopMetrics) StreamEnded(string)            {}
func (nopMetrics) Resumed(bool)                  {}
func (nopMetrics) Prelude(string, time.Duration) {}
func (nopMetrics) ThreadDeleted()                {}
func (nopMetrics) ThreadsListed(int)             {}

// Handler serves the attach, resume and history endpoints. Create it with New. It is safe for
// concurrent use. Each stream runs on its request's goroutine, except those that took their
// connection over (Config.TakeOver), which run on one goroutine each that the Handler owns
// (Wait); the shared store followers belong to the thread service's live registry.
type Handler struct {
	cfg      Config
	log      *slog.Logger
	threads  *thread.Service
	store    recorder.Store
	follower recorder.Follower
	mux      *http.ServeMux
	streams  inflight.Counter // the streams running on their own goroutine (finish)
}

// New returns a Handler for cfg.
func New(cfg Config) (*Handler, error) {
	if cfg.Threads == nil {
		return nil, errors.New("attach: Config.Threads is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("attach: Prefix %q must start and end with /", cfg.Prefix)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.ClientQueueBytes <= 0 {
		cfg.ClientQueueBytes = DefaultClientQueueBytes
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.FollowPoll <= 0 {
		cfg.FollowPoll = DefaultFollowPoll
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	if cfg.MaxImportBytes <= 0 {
		cfg.MaxImportBytes = DefaultMaxImportBytes
	}
	h := &Handler{cfg: cfg, log: cfg.Logger, threads: cfg.Threads, store: cfg.Threads.Store(), mux: http.NewServeMux()}
	h.follower, _ = h.store.(recorder.Follower)
	p := cfg.Prefix
	h.mux.HandleFunc("GET "+p+"threads", h.serveList)
	h.mux.HandleFunc("DELETE "+p+"threads/{thread}", h.serveDelete)
	h.mux.HandleFunc("GET "+p+"export", h.serveBulkExport)
	h.mux.HandleFunc("GET "+p+"threads/{thread}/events", h.serveThreadEvents)
	h.mux.HandleFunc("GET "+p+"threads/{thread}/runs/{run}/events", h.serveRunEvents)
	h.mux.HandleFunc("GET "+p+"threads/{thread}", h.serveThread)
	h.mux.HandleFunc("GET "+p+"threads/{thread}/runs", h.serveRuns)
	h.mux.HandleFunc("GET "+p+"threads/{thread}/export", h.serveExport)
	h.mux.HandleFunc("POST "+p+"threads/{thread}/import", h.serveImport)
	h.mux.HandleFunc("POST "+p+"threads/{thread}/runs/{run}/stop", h.serveStop)
	h.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, r, h.log, problem.ErrNoSuchEndpoint)
	})
	return h, nil
}

// Prefix returns the path prefix the handler serves.
func (h *Handler) Prefix() string { return h.cfg.Prefix }

// ServeHTTP routes the attach endpoints (see the package documentation).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Problem codes specific to the attach endpoints (the table is internal/problem's).
const (
	CodeUnrecoverablePosition = problem.CodeUnrecoverablePosition
	CodeInvalidEventID        = problem.CodeInvalidEventID
	CodeThreadNotEmpty        = problem.CodeThreadNotEmpty
	CodeInvalidImport         = problem.CodeInvalidImport
	CodeRunNotRunning         = problem.CodeRunNotRunning
)

// writeErr answers err as a problem and logs it once.
func writeErr(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	problem.Respond(w, r, log, err)
}

// setupCtx returns ctx bounded by StoreTimeout, for the store reads before a stream's first
// byte; the deadline's cause is problem.ErrStoreTimeout (answered 503 StoreUnavailable).
func (h *Handler) setupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.cfg.StoreTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, h.cfg.StoreTimeout, problem.ErrStoreTimeout)
}

// access is thread.Service.Access for the request's caller.
func (h *Handler) access(ctx context.Context, r *http.Request, threadID string) (recorder.Thread, error) {
	owner, err := h.threads.Owner(r)
	if err != nil {
		return recorder.Thread{}, err
	}
	return h.threads.Access(ctx, owner, threadID)
}

// accessRun is thread.Service.AccessRun for the request's caller and the {thread} and {run}
// of its path.
func (h *Handler) accessRun(ctx context.Context, r *http.Request) (recorder.Thread, recorder.Run, error) {
	owner, err := h.threads.Owner(r)
	if err != nil {
		return recorder.Thread{}, recorder.Run{}, err
	}
	th, run, err := h.threads.AccessRun(ctx, owner, r.PathValue("thread"), r.PathValue("run"))
	return th, h.streaming(run), err
}

// run reads a run's metadata, as streaming has it.
func (h *Handler) run(ctx context.Context, threadID, runID string) (recorder.Run, error) {
	run, err := h.store.Run(ctx, threadID, runID)
	return h.streaming(run), err
}

// streaming returns run with the status running while this process still streams it, though
// the store records its end: a response the pump keeps after its RUN_FINISHED
// (proxy.AfterTerminalKeep) is followed live by the attachers and resumes served here until
// the response ends, and can be stopped. (Another replica follows it from the store: it sees
// the run end at that RUN_FINISHED.)
func (h *Handler) streaming(run recorder.Run) recorder.Run {
	if run.RunID != "" && run.Status != recorder.StatusRunning && h.threads.Live().Streaming(run.ThreadID, run.RunID) {
		run.Status = recorder.StatusRunning
	}
	return run
}

// storeErr hides every store error that is not a sentinel behind problem.ErrStoreUnavailable.
func storeErr(err error) error { return problem.StoreErr(err) }

var _ http.Handler = (*Handler)(nil)
