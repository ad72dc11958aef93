// Package panics contains a panic to the work it belongs to. net/http recovers a panic per
// request; the proxy owns goroutines of its own (a run's pump, the checkpoint loop, the
// recorder's writer, the Redis tail, the sweeper at rest), and a panic in any of them would
// otherwise end the process and every run, attach and client on it. Each family recovers at
// its own boundary (a run, a request, a batch, a followed stream, a swept run), turns the
// panic into an *Error, logs its stack once with the ids of the work it ended, and counts it
// in agui_proxy_panics_total{where} (Collectors).
//
// It sits below every package that recovers through it (compact, recorder, thread, proxy)
// and imports none of them.
//
// Probe is the hook the hostile tests use to make each family panic on demand; it costs one
// atomic load where no hook is set.
package panics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Where names the family of work a panic ended: the label of agui_proxy_panics_total.
type Where string

// The families that recover their panics.
const (
	// Pump: a run's pump goroutine. The run ends with RUN_ERROR INTERNAL, recorded.
	Pump Where = "pump"
	// Checkpoint: building or storing a run's checkpoint. The run gets none; its prelude is
	// built from its events instead.
	Checkpoint Where = "checkpoint"
	// Compact: compaction (compact.Fold). The caller gets an error and replays raw.
	Compact Where = "compact"
	// Hydrate: rebuilding a run request's messages and state from the thread. The request is
	// answered 500 INTERNAL.
	Hydrate Where = "hydrate"
	// Attach: serving an attach endpoint. The request is answered 500 INTERNAL, or its
	// stream is cut (the client resumes from its last event id).
	Attach Where = "attach"
	// Request: any other request the proxy answers itself.
	Request Where = "request"
	// Sweep: compaction at rest of one ended run. The run is left raw.
	Sweep Where = "sweep"
	// Tail: the Redis tail feeding one followed run. Its followers end with an error and
	// resume.
	Tail Where = "tail"
	// Writer: the recorder's writer storing one batch. The batch is written again run by
	// run; a run whose events still panic is marked with a gap.
	Writer Where = "writer"
)

// All lists every Where, in the order the metric is registered.
var All = []Where{Pump, Checkpoint, Compact, Hydrate, Attach, Request, Sweep, Tail, Writer}

var counts = func() map[Where]*atomic.Uint64 {
	m := make(map[Where]*atomic.Uint64, len(All))
	for _, w := range All {
		m[w] = new(atomic.Uint64)
	}
	return m
}()

// ErrPanicked is matched (errors.Is) by every *Error.
var ErrPanicked = errors.New("internal error (recovered panic)")

// Error is a recovered panic: where it happened, the value it panicked with, and the stack.
type Error struct {
	Where Where
	Value any
	Stack []byte
}

// Error returns "internal error (recovered panic) in <where>: <value>".
func (e *Error) Error() string {
	return fmt.Sprintf("%v in %s: %v", ErrPanicked, e.Where, e.Value)
}

// Is reports target == ErrPanicked.
func (e *Error) Is(target error) bool { return target == ErrPanicked }

// Unwrap returns the value's error when it panicked with one.
func (e *Error) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Recovered turns v, what recover returned in a deferred function, into an *Error: nil when v
// is nil. It counts the panic, and logs it once on log (nil: slog.Default) at level Error with
// the stack and attrs (the ids of the work it ended). http.ErrAbortHandler, the value net/http
// uses to abort a response on purpose, is panicked again.
//
//	defer func() {
//		if v := recover(); v != nil {
//			err := panics.Recovered(panics.Pump, v, log, ids...) // (ids built only then)
//			...
//		}
//	}()
func Recovered(where Where, v any, log *slog.Logger, attrs ...slog.Attr) *Error {
	if v == nil {
		return nil
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	e := &Error{Where: where, Value: v, Stack: debug.Stack()}
	if c := counts[where]; c != nil {
		c.Add(1)
	}
	if log == nil {
		log = slog.Default()
	}
	attrs = append(attrs, slog.String("where", string(where)), slog.Any("panic", v), slog.String("stack", string(e.Stack)))
	log.LogAttrs(context.Background(), slog.LevelError, "recovered a panic; only the work it belongs to ended", attrs...)
	return e
}

// Call runs fn and returns its error, or the *Error of its panic (counted and logged by
// Recovered).
func Call(where Where, log *slog.Logger, fn func() error, attrs ...slog.Attr) (err error) {
	defer func() {
		if e := Recovered(where, recover(), log, attrs...); e != nil {
			err = e
		}
	}()
	return fn()
}

// Count returns the panics recovered in where since the process started.
func Count(where Where) uint64 {
	if c := counts[where]; c != nil {
		return c.Load()
	}
	return 0
}

// Collectors returns agui_proxy_panics_total{where}, one counter per Where, reading the
// process-wide counts; each call returns new collectors, for one registry.
func Collectors() []prometheus.Collector {
	out := make([]prometheus.Collector, 0, len(All))
	for _, w := range All {
		c := counts[w]
		out = append(out, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "agui_proxy", Name: "panics_total",
			Help:        "Panics recovered, by the family of work they ended (pump, checkpoint, compact, hydrate, attach, request, sweep, tail, writer); the process and every other run went on.",
			ConstLabels: prometheus.Labels{"where": string(w)},
		}, func() float64 { return float64(c.Load()) }))
	}
	return out
}

var hook atomic.Pointer[func(Where, string)]

// Probe calls the test hook (SetHook) with where and key (a thread id), when one is set. The
// families call it where their work on key starts, so that a test can make exactly that work
// panic.
func Probe(where Where, key string) {
	if h := hook.Load(); h != nil {
		(*h)(where, key)
	}
}

// Hooked reports whether a test hook is set: a family whose key costs something to build
// (compaction's: each event's bytes) builds it only then.
func Hooked() bool { return hook.Load() != nil }

// SetHook sets the function Probe calls (nil: none) and returns a func that restores the one
// before. For tests only.
func SetHook(f func(where Where, key string)) (restore func()) {
	var p *func(Where, string)
	if f != nil {
		p = &f
	}
	old := hook.Swap(p)
	return func() { hook.Store(old) }
}
