package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// Problem is an RFC 9457 problem document, the body of every error the proxy itself answers.
type Problem = problem.Problem

// Error codes of the problems the proxy answers.
const (
	CodeInvalidRunInput     = "InvalidRunInput"
	CodeBodyTooLarge        = "BodyTooLarge"
	CodeRunAlreadyStarted   = "RunAlreadyStarted"
	CodeThreadRoomMismatch  = "ThreadRoomMismatch"
	CodeThreadNotFound      = "ThreadNotFound"
	CodeRunNotFound         = "RunNotFound"
	CodeIdentityRequired    = "IdentityRequired"
	CodeInvalidIdentity     = "InvalidIdentity"
	CodeUpstreamUnavailable = "UpstreamUnavailable"
	CodeUpstreamTimeout     = "UpstreamTimeout"
	CodeStoreUnavailable    = "StoreUnavailable"
	CodeShuttingDown        = "ShuttingDown"
	CodeThreadBusy          = "ThreadBusy"
)

// ErrShuttingDown is returned by Ready (and answered 503) once Shutdown has begun.
var ErrShuttingDown = errors.New("proxy is shutting down")

// errIdentityRequired and errInvalidIdentity classify identity header failures.
var (
	errIdentityRequired = errors.New("identity header required")
	errInvalidIdentity  = errors.New("invalid identity header")
	errShuttingDown     = ErrShuttingDown
	errStoreUnavailable = errors.New("store unavailable")
	errThreadBusy       = errors.New("thread has a run in progress")
)

// problemFor maps an error to the problem the client gets. It is the one place where errors
// become statuses. Details never include store errors, addresses or stack traces: only the
// error texts of our own validation, which quote client input that has been bounded.
func problemFor(err error) Problem {
	p := problem.New
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return p(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "Request body too large",
			"the request body is larger than "+strconv.FormatInt(mbe.Limit, 10)+" bytes")
	case errors.Is(err, agui.ErrInvalidRunInput):
		return p(http.StatusBadRequest, CodeInvalidRunInput, "Invalid RunAgentInput", err.Error())
	case errors.Is(err, errInvalidIdentity):
		return p(http.StatusBadRequest, CodeInvalidIdentity, "Invalid identity", err.Error())
	case errors.Is(err, errIdentityRequired):
		return p(http.StatusUnauthorized, CodeIdentityRequired, "Identity required", "this proxy is multi-tenant: requests need an identity")
	case errors.Is(err, recorder.ErrRunAlreadyStarted):
		return p(http.StatusConflict, CodeRunAlreadyStarted, "Run already started", "this runId was already used on this thread; resume it with Last-Event-ID or use a new runId")
	case errors.Is(err, recorder.ErrThreadRoomMismatch):
		return p(http.StatusConflict, CodeThreadRoomMismatch, "Thread belongs to another route", "this thread was created through another route")
	case errors.Is(err, recorder.ErrThreadNotFound):
		return p(http.StatusNotFound, CodeThreadNotFound, "Thread not found", "")
	case errors.Is(err, recorder.ErrRunNotFound):
		return p(http.StatusNotFound, CodeRunNotFound, "Run not found", "")
	case errors.Is(err, errThreadBusy):
		return p(http.StatusConflict, CodeThreadBusy, "Thread busy", "the thread's latest run is still running; wait for it, stop it, or resume it with Last-Event-ID")
	case errors.Is(err, errShuttingDown):
		return p(http.StatusServiceUnavailable, CodeShuttingDown, "Shutting down", "the proxy is draining; retry on another replica")
	case errors.Is(err, errStoreUnavailable):
		return p(http.StatusServiceUnavailable, CodeStoreUnavailable, "Store unavailable", "the run could not be registered; retry later")
	case isTimeout(err):
		return p(http.StatusGatewayTimeout, CodeUpstreamTimeout, "Upstream timeout", "the agent did not answer in time")
	default:
		return p(http.StatusBadGateway, CodeUpstreamUnavailable, "Upstream unavailable", "the agent could not be reached")
	}
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// writeProblem answers err as application/problem+json. Only before the response started.
func writeProblem(w http.ResponseWriter, err error) Problem {
	pb := problemFor(err)
	problem.Write(w, pb)
	return pb
}
