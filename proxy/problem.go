package proxy

import "github.com/agui-proxy/agui-proxy/internal/problem"

// Problem is an RFC 9457 problem document, the body of every error the proxy itself answers.
// The codes and their statuses are one table, shared with the attach endpoints.
type Problem = problem.Problem

// Codes of the problems the run endpoint answers (the attach endpoints answer more; the whole
// table is in the package documentation of attach and README.md).
const (
	CodeInvalidRunInput     = problem.CodeInvalidRunInput
	CodeBodyTooLarge        = problem.CodeBodyTooLarge
	CodeRunAlreadyStarted   = problem.CodeRunAlreadyStarted
	CodeThreadRoomMismatch  = problem.CodeThreadRoomMismatch
	CodeThreadNotFound      = problem.CodeThreadNotFound
	CodeRunNotFound         = problem.CodeRunNotFound
	CodeIdentityRequired    = problem.CodeIdentityRequired
	CodeInvalidIdentity     = problem.CodeInvalidIdentity
	CodeUpstreamUnavailable = problem.CodeUpstreamUnavailable
	CodeUpstreamTimeout     = problem.CodeUpstreamTimeout
	CodeStoreUnavailable    = problem.CodeStoreUnavailable
	CodeShuttingDown        = problem.CodeShuttingDown
	CodeThreadBusy          = problem.CodeThreadBusy
	CodeBodyTimeout         = problem.CodeBodyTimeout
)

// ErrShuttingDown is returned by Ready (and answered 503) once Shutdown has begun.
var ErrShuttingDown = problem.ErrShuttingDown
