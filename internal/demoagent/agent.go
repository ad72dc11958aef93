package demoagent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// MaxBodyBytes bounds the RunAgentInput body the agent reads.
const MaxBodyBytes = 10 << 20

// Config configures an Agent. The zero value is usable.
type Config struct {
	// Delay is the pause between events of the paced scenarios (slow, bench) when the request
	// gives no intervalMs. Zero means the scenario's own default: 50ms for slow, none for
	// bench. Other scenarios pause only when the request gives intervalMs.
	Delay time.Duration
	// Logger receives one line per run. Nil means discard.
	Logger *slog.Logger
	// OnRunDone, if set, is called once per run, after its last write and before ServeHTTP
	// returns, from the request's goroutine. It may be called concurrently for different runs.
	OnRunDone func(RunReport)
}

// RunReport tells how far a run got.
type RunReport struct {
	ThreadID, RunID, Scenario string
	// EventsSent counts the events written and flushed to the client.
	EventsSent int
	// Completed reports whether the scenario sent all its events.
	Completed bool
	// Err is why the run stopped early: the request context's error (the client went away)
	// or the write error. Nil when Completed.
	Err error
}

// Agent is the scripted agent. It implements http.Handler: a POST to any path starts a run.
// It is safe for concurrent use.
type Agent struct {
	cfg Config
	log *slog.Logger
}

// New returns an Agent configured by cfg.
func New(cfg Config) *Agent {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Agent{cfg: cfg, log: log}
}

// ServeHTTP decodes the RunAgentInput, picks the scenario and streams its events as
// text/event-stream, flushing after each one. It answers 405 to anything but POST, 413 to a
// body over MaxBodyBytes, 400 to a body it cannot use or an unknown forwardedProps.scenario.
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a RunAgentInput to start a run", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		http.Error(w, "reading body: "+err.Error(), status)
		return
	}
	in, err := decodeRequest(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p, err := parseParams(in.ForwardedProps)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	name, err := pickScenario(in, p)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rep := a.run(r.Context(), w, scenarios[name], in, p)
	rep.Scenario = name
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "run done",
		slog.String("thread_id", in.ThreadID), slog.String("run_id", in.RunID),
		slog.String("scenario", name), slog.Int("events", rep.EventsSent),
		slog.Bool("completed", rep.Completed), slog.Any("err", rep.Err))
	if a.cfg.OnRunDone != nil {
		a.cfg.OnRunDone(rep)
	}
}

// run streams one scenario. It stops at the first write or flush error and when ctx ends,
// like an agent whose client went away.
func (a *Agent) run(ctx context.Context, w http.ResponseWriter, sc scenario, in Input, p params) RunReport {
	rep := RunReport{ThreadID: in.ThreadID, RunID: in.RunID}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		rep.Err = err
		return rep
	}

	interval := p.interval
	if !p.intervalSet && sc.paced {
		interval = a.cfg.Delay
		if interval == 0 {
			interval = sc.defaultInterval
		}
	}
	var timer *time.Timer
	if interval > 0 {
		timer = time.NewTimer(interval)
		defer timer.Stop()
	}
	wait := func() bool {
		if timer != nil {
			timer.Reset(interval)
			select {
			case <-ctx.Done():
				return false
			case <-timer.C:
			}
		}
		return ctx.Err() == nil
	}

	// The last event's frame is written by the deferred closure below, once the script has
	// ended, because only then is it known to be the last (framingUnterminated).
	var pending []byte
	write := func(ev []byte, last bool) bool {
		if err := ctx.Err(); err != nil {
			rep.Err = err
			return false
		}
		frame := make([]byte, 0, len(ev)+10)
		frame = append(frame, "data: "...)
		frame = append(frame, ev...)
		switch {
		case sc.framing == framingCRLF:
			frame = append(frame, "\r\n\r\n"...)
		case sc.framing == framingUnterminated && last:
			frame = append(frame, '\n') // the data line ends; the blank line never comes
		default:
			frame = append(frame, "\n\n"...)
		}
		if _, err := w.Write(frame); err != nil {
			rep.Err = err
			return false
		}
		if err := rc.Flush(); err != nil {
			rep.Err = err
			return false
		}
		rep.EventsSent++
		return true
	}
	send := func(ev []byte) bool {
		if sc.framing != framingUnterminated {
			return write(ev, false)
		}
		ok := pending == nil || write(pending, false)
		pending = ev
		return ok
	}

	e := &emitter{in: in, p: p, now: time.Now, wait: wait, send: send}
	sc.script(e)
	if pending != nil && !e.stopped {
		if !write(pending, true) {
			e.stopped = true
		}
	}
	if e.stopped && rep.Err == nil {
		rep.Err = ctx.Err()
	}
	rep.Completed = !e.stopped
	return rep
}

var _ http.Handler = (*Agent)(nil)
