package attach

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// Defaults for the zero values of Config.
const (
	DefaultPrefix            = "/agui/"
	DefaultHeartbeatInterval = 15 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultMaxImportBytes    = 64 << 20
	DefaultRetry             = 2 * time.Second
	DefaultLeaseGrace        = 2 * time.Second
	DefaultFollowPoll        = time.Second
)

// Config configures a Handler. Store is required.
type Config struct {
	// Store holds the threads. Live tails need it to implement recorder.Follower; crash
	// detection needs recorder.Leaser.
	Store recorder.Store
	// Logger receives structured logs. nil: discard.
	Logger *slog.Logger
	// Prefix is the path under which the endpoints are served. Default DefaultPrefix.
	Prefix string
	// Route is the route (room) of the threads served here: a thread created through another
	// route answers 409 ThreadRoomMismatch. Default "default".
	Route string
	// Identify returns the caller's identity ("" for anonymous). nil: single-tenant.
	Identify func(r *http.Request) (string, error)
	// MultiTenant refuses anonymous callers with 401.
	MultiTenant bool
	// StopLocal cancels a run this process is pumping and reports whether it was found.
	StopLocal func(threadID, runID string) bool
	// Compact configures compaction of preludes and checkpoints.
	Compact compact.Options
	// HeartbeatInterval is the silence after which an SSE comment is written. Default
	// DefaultHeartbeatInterval; negative disables.
	HeartbeatInterval time.Duration
	// WriteTimeout bounds each write to a client; a client that does not read is dropped.
	// Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Retry is the reconnection delay hinted to EventSource clients. Default DefaultRetry.
	Retry time.Duration
	// LeaseGrace is how long past its lease a running run is still considered alive.
	// Default DefaultLeaseGrace.
	LeaseGrace time.Duration
	// FollowPoll is how often a ?follow=1 thread attach checks for the thread's next run.
	// Default DefaultFollowPoll.
	FollowPoll time.Duration
	// MaxImportBytes bounds an import document. Default DefaultMaxImportBytes.
	MaxImportBytes int64
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
}

type nopMetrics struct{}

func (nopMetrics) StreamStarted(string)          {}
func (nopMetrics) StreamEnded(string)            {}
func (nopMetrics) Resumed(bool)                  {}
func (nopMetrics) Prelude(string, time.Duration) {}

// Handler serves the attach, resume and history endpoints. Create it with New. It is safe for
// concurrent use; it starts no goroutine of its own (each stream runs on its request's).
type Handler struct {
	cfg      Config
	log      *slog.Logger
	store    recorder.Store
	follower recorder.Follower
	leaser   recorder.Leaser
	mux      *http.ServeMux
}

// New returns a Handler for cfg.
func New(cfg Config) (*Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("attach: Config.Store is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("attach: Prefix %q must start and end with /", cfg.Prefix)
	}
	if cfg.Route == "" {
		cfg.Route = "default"
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
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.LeaseGrace <= 0 {
		cfg.LeaseGrace = DefaultLeaseGrace
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
	h := &Handler{cfg: cfg, log: cfg.Logger, store: cfg.Store, mux: http.NewServeMux()}
	h.follower, _ = cfg.Store.(recorder.Follower)
	h.leaser, _ = cfg.Store.(recorder.Leaser)
	p := cfg.Prefix
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

// access returns the thread if the caller may use it: it exists, belongs to the caller (a
// foreign thread answers exactly like an unknown one) and to this route.
func (h *Handler) access(ctx context.Context, r *http.Request, threadID string) (recorder.Thread, error) {
	if err := agui.ValidateID("threadId", threadID); err != nil {
		return recorder.Thread{}, err
	}
	owner := ""
	if h.cfg.Identify != nil {
		var err error
		if owner, err = h.cfg.Identify(r); err != nil {
			return recorder.Thread{}, err
		}
	}
	if h.cfg.MultiTenant && owner == "" {
		return recorder.Thread{}, problem.ErrIdentityRequired
	}
	th, err := h.store.Thread(ctx, threadID)
	if err != nil {
		return th, storeErr(err)
	}
	if th.Owner != owner {
		return recorder.Thread{}, fmt.Errorf("%w: %q", recorder.ErrThreadNotFound, threadID)
	}
	if th.Route != h.cfg.Route {
		return recorder.Thread{}, recorder.ErrThreadRoomMismatch
	}
	return th, nil
}

// accessRun is access for the {thread} and {run} of the request's path.
func (h *Handler) accessRun(ctx context.Context, r *http.Request) (recorder.Thread, recorder.Run, error) {
	th, err := h.access(ctx, r, r.PathValue("thread"))
	if err != nil {
		return th, recorder.Run{}, err
	}
	runID := r.PathValue("run")
	if err := agui.ValidateID("runId", runID); err != nil {
		return th, recorder.Run{}, err
	}
	run, err := h.store.Run(ctx, th.ID, runID)
	if err != nil {
		return th, run, storeErr(err)
	}
	return th, run, nil
}

// storeErr hides every store error that is not a sentinel behind problem.ErrStoreUnavailable.
func storeErr(err error) error { return problem.StoreErr(err) }

var _ http.Handler = (*Handler)(nil)
