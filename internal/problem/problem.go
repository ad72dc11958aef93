// Package problem is the one place where errors become HTTP answers: the table of problem
// codes with their statuses, the sentinel errors of the proxy's own refusals, and For, which
// maps any error (these sentinels, the store's and the protocol's) to the RFC 9457 problem
// document the client gets. The proxy's run endpoint and the attach endpoints both answer
// through Respond, so one error always gets one status and one code.
package problem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/panics"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// Problem is an RFC 9457 problem document. Code is a stable machine-readable name
// (RunAlreadyStarted, ThreadRoomMismatch, ...); Type is derived from it.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// Codes of every problem the proxy answers. They are part of the API: clients switch on them.
const (
	CodeInvalidRunInput       = "InvalidRunInput"
	CodeBodyTooLarge          = "BodyTooLarge"
	CodeRunAlreadyStarted     = "RunAlreadyStarted"
	CodeThreadRoomMismatch    = "ThreadRoomMismatch"
	CodeThreadNotFound        = "ThreadNotFound"
	CodeRunNotFound           = "RunNotFound"
	CodeIdentityRequired      = "IdentityRequired"
	CodeInvalidIdentity       = "InvalidIdentity"
	CodeUpstreamUnavailable   = "UpstreamUnavailable"
	CodeUpstreamTimeout       = "UpstreamTimeout"
	CodeStoreUnavailable      = "StoreUnavailable"
	CodeShuttingDown          = "ShuttingDown"
	CodeThreadBusy            = "ThreadBusy"
	CodeNotFound              = "NotFound"
	CodeInvalidID             = "InvalidId"
	CodeInvalidEventID        = "InvalidEventId"
	CodeUnrecoverablePosition = "UnrecoverablePosition"
	CodeThreadNotEmpty        = "ThreadNotEmpty"
	CodeInvalidImport         = "InvalidImport"
	CodeRunNotRunning         = "RunNotRunning"
	CodeLiveTailsUnsupported  = "LiveTailsUnsupported"
	CodeBodyTimeout           = "BodyTimeout"
	CodeInvalidQuery          = "InvalidQuery"
	CodeHistoryIncomplete     = "HistoryIncomplete"
	CodeInternal              = "Internal"
)

// Sentinel errors of the proxy's own refusals (the store's are recorder.Err*, the protocol's
// agui.Err*). Wrap them with detail; For finds them with errors.Is.
var (
	ErrIdentityRequired     = errors.New("identity required")
	ErrInvalidIdentity      = errors.New("invalid identity header")
	ErrShuttingDown         = errors.New("proxy is shutting down")
	ErrStoreUnavailable     = errors.New("store unavailable")
	ErrUpstreamUnavailable  = errors.New("upstream unavailable")
	ErrNoSuchEndpoint       = errors.New("no such endpoint")
	ErrUnrecoverable        = errors.New("cannot resume exactly from this event id")
	ErrCursorForeign        = errors.New("event id does not belong to this run")
	ErrThreadNotEmpty       = errors.New("thread already has history")
	ErrInvalidImport        = errors.New("invalid import document")
	ErrRunNotRunning        = errors.New("run is not running")
	ErrLiveTailsUnsupported = errors.New("the store cannot follow live runs")
	ErrBodyTimeout          = errors.New("the request body did not arrive in time")
	ErrInvalidQuery         = errors.New("invalid query parameter")
	// ErrHistoryIncomplete refuses to hydrate a run request from a branch whose stored history
	// has a gap: the agent would get a silently shortened conversation.
	ErrHistoryIncomplete = errors.New("the thread's stored history is incomplete")
	// ErrStoreTimeout is the cause of a request context whose store deadline passed: Respond
	// answers it (503 StoreUnavailable) instead of taking the client for gone.
	ErrStoreTimeout = errors.New("the store did not answer in time")
)

// entry is one row of the table: the errors it matches, and what the client gets. quote puts
// the error's own text in the detail: only for errors of our validation, which quote bounded
// client input (never a store error, an address or a stack trace).
type entry struct {
	errs   []error
	status int
	code   string
	title  string
	detail string
	quote  bool
}

// table is searched in order; the first row with a matching error wins. Errors that match no
// row are StoreUnavailable (see For).
var table = []entry{
	{errs: []error{agui.ErrInvalidRunInput}, status: http.StatusBadRequest, code: CodeInvalidRunInput, title: "Invalid RunAgentInput", quote: true},
	{errs: []error{ErrInvalidIdentity}, status: http.StatusBadRequest, code: CodeInvalidIdentity, title: "Invalid identity", quote: true},
	{errs: []error{ErrIdentityRequired}, status: http.StatusUnauthorized, code: CodeIdentityRequired, title: "Identity required",
		detail: "this proxy is multi-tenant: requests need an identity"},
	{errs: []error{recorder.ErrInvalidCursor, ErrCursorForeign}, status: http.StatusBadRequest, code: CodeInvalidEventID, title: "Invalid event id",
		detail: "the event id was not issued for this run or thread"},
	{errs: []error{agui.ErrInvalidID}, status: http.StatusBadRequest, code: CodeInvalidID, title: "Invalid id", quote: true},
	{errs: []error{ErrInvalidImport}, status: http.StatusBadRequest, code: CodeInvalidImport, title: "Invalid import document", quote: true},
	{errs: []error{ErrBodyTimeout}, status: http.StatusRequestTimeout, code: CodeBodyTimeout, title: "Request body timeout", quote: true},
	{errs: []error{ErrInvalidQuery, recorder.ErrInvalidPageCursor}, status: http.StatusBadRequest, code: CodeInvalidQuery, title: "Invalid query parameter", quote: true},
	{errs: []error{ErrNoSuchEndpoint}, status: http.StatusNotFound, code: CodeNotFound, title: "No such endpoint"},
	{errs: []error{recorder.ErrRunAlreadyStarted}, status: http.StatusConflict, code: CodeRunAlreadyStarted, title: "Run already started",
		detail: "this runId was already used on this thread; resume it with Last-Event-ID or use a new runId"},
	{errs: []error{recorder.ErrThreadRoomMismatch}, status: http.StatusConflict, code: CodeThreadRoomMismatch, title: "Thread belongs to another route",
		detail: "this thread was created through another route"},
	{errs: []error{recorder.ErrThreadBusy}, status: http.StatusConflict, code: CodeThreadBusy, title: "Thread busy",
		detail: "the thread's latest run is still running; wait for it, stop it, or resume it with Last-Event-ID"},
	{errs: []error{ErrThreadNotEmpty}, status: http.StatusConflict, code: CodeThreadNotEmpty, title: "Thread already has history",
		detail: "import only into a thread that does not exist yet"},
	{errs: []error{ErrHistoryIncomplete}, status: http.StatusConflict, code: CodeHistoryIncomplete, title: "History incomplete", quote: true},
	{errs: []error{ErrRunNotRunning}, status: http.StatusConflict, code: CodeRunNotRunning, title: "Run is not running"},
	{errs: []error{recorder.ErrThreadNotFound}, status: http.StatusNotFound, code: CodeThreadNotFound, title: "Thread not found"},
	{errs: []error{recorder.ErrRunNotFound}, status: http.StatusNotFound, code: CodeRunNotFound, title: "Run not found"},
	{errs: []error{ErrUnrecoverable}, status: http.StatusGone, code: CodeUnrecoverablePosition, title: "Cannot resume exactly",
		detail: "events after this id are no longer all stored (trimmed, lost or from an earlier epoch); attach to the thread for its full compacted history"},
	{errs: []error{ErrLiveTailsUnsupported}, status: http.StatusNotImplemented, code: CodeLiveTailsUnsupported, title: "Live tails unsupported",
		detail: "the configured store cannot follow live runs"},
	{errs: []error{ErrShuttingDown}, status: http.StatusServiceUnavailable, code: CodeShuttingDown, title: "Shutting down",
		detail: "the proxy is draining; retry on another replica"},
	{errs: []error{panics.ErrPanicked}, status: http.StatusInternalServerError, code: CodeInternal, title: "Internal error",
		detail: "the proxy failed on this request (a recovered panic); its log has the details, and every other request went on"},
	{errs: []error{ErrUpstreamUnavailable}, status: http.StatusBadGateway, code: CodeUpstreamUnavailable, title: "Upstream unavailable",
		detail: "the agent could not be reached"},
}

// New returns the problem for status and code.
func New(status int, code, title, detail string) Problem {
	return Problem{Type: "urn:agui-proxy:problem:" + code, Title: title, Status: status, Detail: detail, Code: code}
}

// For maps err to the problem the client gets. A request body over its limit is
// BodyTooLarge; an upstream failure (wrapped in ErrUpstreamUnavailable) that timed out is
// UpstreamTimeout; an error no row of the table matches is StoreUnavailable: the doors hand
// every store error that is not a sentinel over as ErrStoreUnavailable, so that is what an
// unknown failure behind them is.
func For(err error) Problem {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return New(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "Request body too large",
			"the request body is larger than "+strconv.FormatInt(mbe.Limit, 10)+" bytes")
	}
	if errors.Is(err, ErrUpstreamUnavailable) && isTimeout(err) {
		return New(http.StatusGatewayTimeout, CodeUpstreamTimeout, "Upstream timeout", "the agent did not answer in time")
	}
	var d *detailed
	hasDetail := errors.As(err, &d)
	for _, e := range table {
		for _, target := range e.errs {
			if errors.Is(err, target) {
				detail := e.detail
				switch {
				case hasDetail:
					detail = d.detail
				case e.quote:
					detail = err.Error()
				}
				return New(e.status, e.code, e.title, detail)
			}
		}
	}
	return New(http.StatusServiceUnavailable, CodeStoreUnavailable, "Store unavailable", "the store did not answer; retry later")
}

// WithDetail returns err with the detail its problem carries in place of its row's (For):
// what the client should do, in words that name this request's own values (the header to
// send, the parentRunId that is unknown). detail must not hold store errors or addresses.
func WithDetail(err error, detail string) error { return &detailed{err: err, detail: detail} }

// detailed is an error with its problem's detail (WithDetail).
type detailed struct {
	err    error
	detail string
}

func (d *detailed) Error() string { return d.err.Error() + ": " + d.detail }
func (d *detailed) Unwrap() error { return d.err }

// Upstream wraps an error of the call to the agent in ErrUpstreamUnavailable.
func Upstream(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrUpstreamUnavailable, err)
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Write answers p as application/problem+json. Only before the response started.
func Write(w http.ResponseWriter, p Problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	if p.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(p.Status)
	body, _ := json.Marshal(p)
	w.Write(append(body, '\n'))
}

// Respond answers err as the problem For gives and logs it once (Info below 500, Warn from
// 500). When the client is already gone nothing can be written: it logs 499, as other proxies
// do. Only before the response started. It returns the problem (zero when the client is gone).
func Respond(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) Problem {
	if r.Context().Err() != nil && !errors.Is(context.Cause(r.Context()), ErrStoreTimeout) {
		log.LogAttrs(r.Context(), slog.LevelInfo, "client closed the request", slog.Int("status", 499),
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
		return Problem{}
	}
	p := For(err)
	Write(w, p)
	level := slog.LevelInfo
	if p.Status >= 500 {
		level = slog.LevelWarn
	}
	log.LogAttrs(r.Context(), level, "request refused", slog.Int("status", p.Status), slog.String("code", p.Code),
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("err", err.Error()))
	return p
}

// StoreErr keeps the errors a client may learn of (the store's sentinels, invalid ids, the
// request's own cancellation) and hides every other store error behind ErrStoreUnavailable,
// so problems never carry Redis errors or addresses. nil stays nil.
func StoreErr(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range []error{recorder.ErrThreadNotFound, recorder.ErrRunNotFound, recorder.ErrNotFound,
		recorder.ErrRunAlreadyStarted, recorder.ErrThreadRoomMismatch, recorder.ErrThreadBusy, recorder.ErrInvalidPageCursor,
		agui.ErrInvalidID, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, s) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
}
