package compact

// Errors of the reducer: a stream the official client rejects, and input past a limit.

import (
	"errors"
	"fmt"
)

// ErrRejected is wrapped by a *StreamError when the official client would fail the whole
// run: the verifier refuses the event order, a field has the wrong type for the @ag-ui/core
// schema, or the chunk transform cannot attribute a chunk.
var ErrRejected = errors.New("stream rejected by the official client")

// StreamError reports the first event the official client's pipeline would reject.
type StreamError struct {
	Index  int    // position of the event in the input
	Type   string // its type
	Reason string
}

// Error implements error.
func (e *StreamError) Error() string {
	return fmt.Sprintf("event %d (%s): %s", e.Index, e.Type, e.Reason)
}

// Unwrap returns ErrRejected.
func (e *StreamError) Unwrap() error { return ErrRejected }

// LimitError reports input beyond one of Options' limits. Compact does not fold such a
// thread; callers replay it raw.
type LimitError struct {
	Limit string // the Options field name
	Value int
	Max   int
}

// Error implements error.
func (e *LimitError) Error() string {
	return fmt.Sprintf("%s exceeded: %d > %d", e.Limit, e.Value, e.Max)
}
