package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/inflight"
	"github.com/agui-proxy/agui-proxy/keepalive"
	"github.com/agui-proxy/agui-proxy/live"
	"github.com/agui-proxy/agui-proxy/panics"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
	"github.com/agui-proxy/agui-proxy/thread"
)

// Causes that end a run early; they become the code of the RUN_ERROR the proxy appends.
var (
	errUpstreamIdle = errors.New("the agent sent nothing for too long")
	errRunTimeout   = errors.New("the run exceeded the maximum run duration")
	errInterrupted  = errors.New("the proxy shut down before the run ended")
	errStoreTooSlow = errors.New("the store did not acknowledge an event in time")
	errRunAbandoned = errors.New("the upstream did not answer with an event stream")
	errRunTooLarge  = errors.New("the run's events passed the maximum bytes of a run")
)

// RUN_ERROR codes the proxy uses when it has to end a run itself (defined in package thread,
// with the one RUN_ERROR builder).
const (
	CodeUpstreamEnded        = thread.CodeUpstreamEnded
	CodeUpstreamDisconnected = thread.CodeUpstreamDisconnected
	CodeUpstreamIdle         = thread.CodeUpstreamIdle
	CodeRunTimeout           = thread.CodeRunTimeout
	CodeFrameTooLarge        = thread.CodeFrameTooLarge
	CodeRunTooLarge          = thread.CodeRunTooLarge
	CodeInterrupted          = thread.CodeInterrupted
	CodeStorageUnavailable   = thread.CodeStorageUnavailable
	CodeCancelled            = thread.CodeCancelled
	CodeInternal             = thread.CodeInternal
)

// syncStoreTimeout bounds how long a run waits for one event to be stored in sync durability
// mode before it is ended with STORAGE_UNAVAILABLE.
const syncStoreTimeout = 10 * time.Second

// settleTimeout bounds how long a run's terminal event waits for the store to record that the
// run ended (see run.settle).
const settleTimeout = 5 * time.Second

// run is one live run: the pump goroutine reading the upstream body, the subscribers it feeds.
type run struct {
	h    *Handler
	meta recorder.Run
	// rec is the run as the handler's writer records it: each event and the run's end are
	// queued through it.
	rec    *recorder.Recording
	input  *agui.RunInput
	parent string // parentRunId to inject when the upstream's RUN_STARTED lacks one
	// inputJSON is the normalized RunAgentInput injected as RUN_STARTED.input.
	inputJSON []byte
	// bytes counts the bytes of the agent's data frames so far (Config.MaxRunBytes).
	bytes int64

	ctx       context.Context // the upstream request's context; cancelled by stop or the registry
	clientCtx context.Context // the first client's request context (its end does not end the run)
	// direct: the first client's connection is taken over once the headers are sent
	// (Config.StreamKeepAlive off, HTTP/1.1), and the pump writes the events to it.
	direct bool
	// keepAlive is where a direct run's connection goes once its stream is complete, to carry
	// the client's next request (nil: the stream's end closes it, and its headers say so).
	keepAlive *keepalive.Listener
	// sub is the first client's subscription, set when the pump starts; serveRun writes it to
	// the client once ReverseProxy has written the headers.
	sub     *live.Subscriber
	pumping atomic.Bool // the upstream answered with an event stream and the pump started
	cancel  context.CancelCauseFunc
	hub     *live.Hub     // every event goes there once: the first client and the attachers here read it
	done    chan struct{} // closed when the pump has finished, run recorded as ended
	release func()        // unregisters the run from thread.Service.Pumping (nil before)

	seq      int64 // last seq assigned; pump goroutine only
	started  bool  // RUN_STARTED sent; pump goroutine only
	terminal string
	// terminalFrame is the terminal event's frame while settle records the run's end, before
	// the event is published (pump goroutine only).
	terminalFrame []byte
	// irregular counts, by kind (irregularKinds), the events of the agent's response that
	// bend the run's lifecycle; logged once when the run ends (nil until one came).
	irregular map[string]int
	// continued: the agent sent events after a RUN_FINISHED the run kept (AfterTerminalKeep).
	continued bool
	// open is what the agent's stream opened and did not close yet, for a stop to close
	// (pump goroutine only).
	open openStreams
	// foreign counts the agent's frames holding lines that are not SSE (sse.Frame.Foreign)
	// and their bytes, forwarded or (an unterminated last piece) dropped; logged at the end.
	foreign, foreignBytes, foreignDropped int
	// status and detail are how the run ended, once it did; settled is the seq its end was
	// recorded through (0: not yet).
	status  recorder.RunStatus
	detail  string
	settled int64
	final   bool // the run is being ended: record without waiting for the store
	// checkpointed: the run's checkpoint was stored by settle, through r.settled.
	checkpointed bool
	// kept is the data of the events the recorder accepted for the run, kept within the
	// handler's Config.CheckpointMemory so that settle builds the checkpoint without reading
	// them back (retainReserved is what the run took from the budget, in chunks); nil once
	// retainOff (no budget, spent, an event was dropped, or the run settled). Pump goroutine
	// only.
	kept           *thread.KeptEvents
	retainReserved int64
	retainOff      bool
	// markFrame records upstream activity for the idle watchdog (nil when it is disabled).
	markFrame func()
	idBuf     []byte
	// held: the last event was published with More (its clients may hold it until the next
	// one); flushHeld lets it go before the pump waits for anything else. flush is
	// r.flushHeld, bound once.
	held  bool
	flush func()
	// unstored are the events handed to the writer that the pump has not yet seen stored,
	// oldest first (pump goroutine only): once the store has them, the hub's backlog lets them
	// go (publish).
	unstored []unstoredEvent
}

// unstoredEvent is an event queued in the recorder at writer position pos.
type unstoredEvent struct {
	seq int64
	pos uint64
}

// maxUnstored bounds r.unstored while the store is stuck; losing its oldest entries only
// delays letting the backlog go (a later event stored means the earlier ones are).
const maxUnstored = 256

// registry owns the live runs of a Handler and their pump goroutines.
type registry struct {
	mu   sync.Mutex
	runs map[string]*run // key: threadID + "\x00" + runID
	// pumps counts the pump goroutines (a run may start while Shutdown waits: not a WaitGroup)
	pumps inflight.Counter
	live  atomic.Int64
}

func runKey(threadID, runID string) string { return threadID + "\x00" + runID }

func (g *registry) add(r *run) {
	g.mu.Lock()
	if g.runs == nil {
		g.runs = make(map[string]*run)
	}
	g.runs[runKey(r.meta.ThreadID, r.meta.RunID)] = r
	g.mu.Unlock()
	g.live.Add(1)
}

func (g *registry) remove(r *run) {
	if r.release != nil {
		r.release()
	}
	g.mu.Lock()
	delete(g.runs, runKey(r.meta.ThreadID, r.meta.RunID))
	g.mu.Unlock()
	g.live.Add(-1)
}

// get returns the live run, or nil.
func (g *registry) get(threadID, runID string) *run {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs[runKey(threadID, runID)]
}

// list returns the live runs.
func (g *registry) list() []*run {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*run, 0, len(g.runs))
	for _, r := range g.runs {
		out = append(out, r)
	}
	return out
}

// cancelAll cancels every live run with cause.
func (g *registry) cancelAll(cause error) {
	g.mu.Lock()
	for _, r := range g.runs {
		r.cancel(cause)
	}
	g.mu.Unlock()
}

// start hands the upstream body to a new pump goroutine and returns the first client's
// subscription (with o) to the run's hub. The registry owns the goroutine: Handler.Shutdown
// waits for it.
func (r *run) start(body io.ReadCloser, o live.Options) *live.Subscriber {
	sub, _ := r.hub.Subscribe(0, o)
	r.h.runs.pumps.Add()
	go r.pump(body)
	return sub
}

// pump reads the upstream stream to its end, whatever happens to the clients: every frame is
// given an id, recorded and published. It ends the run well-formed: RUN_STARTED first, and a
// RUN_ERROR appended when the upstream did not end with RUN_FINISHED or RUN_ERROR.
func (r *run) pump(body io.ReadCloser) {
	h := r.h
	defer h.runs.pumps.Done()
	defer close(r.done)
	defer h.runs.remove(r)
	defer r.cancel(nil)
	defer body.Close()
	defer r.dropRetained()

	// The idle watchdog does not touch its timer per frame: the pump only stores when it last
	// read a frame (monotonic clock), and the timer re-arms itself for the rest of the window.
	var lastFrame atomic.Int64 // time.Since(start) at the last frame
	if idle := h.cfg.UpstreamIdleTimeout; idle > 0 {
		start := time.Now()
		var watchdog *time.Timer
		watchdog = time.AfterFunc(idle, func() {
			if quiet := time.Since(start) - time.Duration(lastFrame.Load()); quiet < idle {
				watchdog.Reset(idle - quiet)
				return
			}
			r.cancel(errUpstreamIdle)
		})
		defer watchdog.Stop()
		r.markFrame = func() { lastFrame.Store(int64(time.Since(start))) }
	}
	rd := sse.NewReader(body, sse.Limits{MaxLineBytes: h.cfg.MaxEventBytes, MaxFrameBytes: h.cfg.MaxEventBytes})
	r.endSafely(r.pumpFrames(rd))
}

// pumpFrames reads, records and publishes the frames of rd until the stream ends or the run
// must end, and returns why. A panic on the way ends only this run: it returns the
// *panics.Error (logged with the run's ids and counted), and the run ends with RUN_ERROR
// INTERNAL.
func (r *run) pumpFrames(rd *sse.Reader) (err error) {
	h := r.h
	defer func() {
		if v := recover(); v != nil {
			err = panics.Recovered(panics.Pump, v, h.log, r.logIDs()...)
		}
	}()
	for {
		var f *sse.Frame
		f, err = rd.Next()
		if err != nil {
			break
		}
		if r.markFrame != nil {
			r.markFrame()
		}
		if f.Foreign > 0 {
			// Bytes that are not SSE (a JSON body, compressed bytes sent as an event stream):
			// WHATWG parsing ignores them; counted, and said once when the run ends.
			r.foreign++
			r.foreignBytes += len(f.Raw)
			if !f.Terminated {
				r.foreignDropped++
			}
			h.metrics.nonSSE(len(f.Raw))
		}
		if !f.HasData {
			// Comments, heartbeats, blank lines, lines that are not SSE: forwarded as they
			// are, not recorded. Not an unterminated one the stream ended in: without its
			// blank line it would run into the frame the proxy writes next (its RUN_ERROR, or
			// RUN_STARTED), and the client would read that frame's first line as part of it.
			// A frame whose blank line is a lone CR gets an LF after it, for the same reason:
			// the official client splits lines on LF only, so the proxy's next frame would
			// start on the line of the agent's last bytes.
			if f.Terminated {
				raw := f.Raw
				if f.HasRetry {
					raw, _ = sse.DropRetry(raw) // the agent's reconnection delay is not the client's (below)
				}
				fr := append(make([]byte, 0, len(raw)+1), raw...)
				if n := len(fr); n > 0 && fr[n-1] != '\n' {
					fr = append(fr, '\n')
				}
				r.publish(live.Event{Frame: fr, More: rd.FrameBuffered()})
			}
			continue
		}
		if r.bytes += int64(len(f.Raw)); h.cfg.MaxRunBytes > 0 && r.bytes > h.cfg.MaxRunBytes {
			// Neither forwarded nor recorded: the run ends with RUN_ERROR RUN_TOO_LARGE,
			// before its checkpoint, its export or a resume has to hold more than this.
			err = errRunTooLarge
			break
		}
		typ, ok := agui.EventType(f.Data)
		h.metrics.eventIn(typ, len(f.Raw))
		if !f.Terminated && !ok {
			h.log.LogAttrs(r.ctx, slog.LevelWarn, "dropped an unterminated final frame that is not a JSON event",
				slog.String("thread_id", r.meta.ThreadID), slog.String("run_id", r.meta.RunID))
			break
		}
		if !r.started {
			panics.Probe(panics.Pump, r.meta.ThreadID) // (once per run: the test hook)
			r.started = true
			if typ == agui.RunStarted {
				err = r.emitData(typ, r.enrichRunStarted(f.Data))
			} else {
				err = r.emitData(agui.RunStarted, r.synthesizedRunStarted())
			}
			r.input, r.inputJSON = nil, nil // in RUN_STARTED now: not held for the run's life
			if err != nil {
				break
			}
			if typ == agui.RunStarted {
				continue
			}
		}
		if r.terminal != "" {
			if r.terminal == agui.RunError || h.cfg.AfterTerminal != AfterTerminalKeep {
				// The run ended at its terminal event: what the agent sends after it is
				// refused (neither forwarded nor recorded), so the live stream, every replay
				// and the runs tree tell the same story. Counted and logged when the run ends.
				if r.terminal == agui.RunError {
					r.noteIrregular(IrregularRefusedAfterError)
				} else {
					r.noteIrregular(IrregularRefusedAfterFinished)
				}
				continue
			}
			// A response that goes on after its RUN_FINISHED (TanStack AI, after each model
			// call) is kept whole as one run: forwarded as sent and recorded, the run ending
			// at the response's last terminal event.
			r.continued = true
			r.noteIrregular(IrregularKeptAfterFinished)
		}
		if typ == agui.RunStarted { // not the run's first event (above)
			r.noteRunStartedAgain(f.Data)
		}
		if !ok {
			h.log.LogAttrs(r.ctx, slog.LevelWarn, "recording a frame whose data is not a JSON event",
				slog.String("thread_id", r.meta.ThreadID), slog.String("run_id", r.meta.RunID), slog.Int64("seq", r.seq+1))
		}
		r.open.observe(typ, f.Data)
		r.seq++
		if f.HasRetry {
			// The agent's reconnection delay is not the client's: the client reconnects to
			// the proxy (a resume, an attach with AGUI_ATTACH_RETRY), and "retry: 0" would make
			// an EventSource reconnect at once, again and again. The field is dropped, live and
			// recorded; the frame's other bytes are kept.
			g := *f
			g.Raw, _ = sse.DropRetry(f.Raw)
			f = &g
		}
		out := f.AppendWithID(make([]byte, 0, len(f.Raw)+len(r.meta.RunID)+32), r.cursor())
		terminal := agui.IsTerminal(typ) // (r.terminal is "" here, or the run goes on after it)
		// later: the clients first, then the recorder (which never fails then), so a client
		// that keeps up is written before the recorder's bookkeeping and its writer's wake-up.
		later := !terminal && r.recordsLater()
		if !later {
			if err = r.record(typ, f.Data, out); err != nil {
				break
			}
		}
		if terminal {
			r.terminal = typ
			r.status = recorder.StatusFinished
			if typ == agui.RunError {
				r.status = recorder.StatusError
			}
			r.terminalFrame = out // (published by end if settle panics)
			r.settle()
			r.publish(live.Event{Seq: r.seq, Type: typ, Frame: out})
			r.terminalFrame = nil
			if typ == agui.RunError || h.cfg.AfterTerminal != AfterTerminalKeep {
				r.hub.End() // the clients' streams end with the terminal event
			} // else with the agent's response: it may go on (end ends the hub)
			continue
		}
		// More: the next frame is already read, so a client's connection gets both in one
		// write (an agent faster than one write per event is read in large pieces).
		r.publish(live.Event{Seq: r.seq, Type: typ, Frame: out, More: rd.FrameBuffered()})
		if later {
			r.record(typ, f.Data, out)
		}
	}
	return err
}

// logIDs are the attributes that name the run in a log line.
func (r *run) logIDs() []slog.Attr {
	return []slog.Attr{slog.String("thread_id", r.meta.ThreadID), slog.String("run_id", r.meta.RunID)}
}

// endSafely is end, contained: should end itself panic, the run is still recorded as ended
// (INTERNAL) and its clients released.
func (r *run) endSafely(readErr error) {
	defer func() {
		if v := recover(); v != nil {
			panics.Recovered(panics.Pump, v, r.h.log, r.logIDs()...)
			r.rec.Finish(recorder.StatusError, CodeInternal, r.seq)
			r.hub.End()
		}
	}()
	r.end(readErr)
}

// end records how the run ended, appending the RUN_STARTED / RUN_ERROR the upstream did not
// send, and releases the subscribers.
func (r *run) end(readErr error) {
	h := r.h
	if r.terminalFrame != nil {
		// The run ended at its terminal event, but a panic stopped the pump before the event
		// was published (its end is recorded or being recorded): its clients get it now.
		r.publish(live.Event{Seq: r.seq, Type: r.terminal, Frame: r.terminalFrame})
		r.terminalFrame = nil
	}
	if r.terminal == "" || (r.continued && r.settled != r.seq) {
		// No terminal event, or events after the last one the response went on after (a
		// continuation cut short: stopped, or the agent gone): the run ends as any run that
		// the agent did not end.
		code, msg := r.endCause(readErr)
		r.final = true // from here on, events are published even if the store does not answer
		if !r.started {
			r.started = true
			r.emitData(agui.RunStarted, r.synthesizedRunStarted())
		}
		if code == CodeCancelled && h.cfg.StopEnding == StopCancelled {
			r.endCancelled()
		} else {
			r.terminal, r.status, r.detail = agui.RunError, thread.StatusFor(code), code
			r.emitData(agui.RunError, thread.RunError(code, msg))
		}
		h.log.LogAttrs(context.Background(), slog.LevelWarn, "run ended without a terminal event from the agent",
			slog.String("thread_id", r.meta.ThreadID), slog.String("run_id", r.meta.RunID),
			slog.String("code", code), slog.Any("err", readErr))
	}
	for _, kind := range irregularKinds {
		if n := r.irregular[kind]; n > 0 {
			h.log.LogAttrs(context.Background(), slog.LevelWarn, irregularLog[kind],
				slog.String("thread_id", r.meta.ThreadID), slog.String("run_id", r.meta.RunID),
				slog.String("kind", kind), slog.Int("events", n), slog.String("terminal", r.terminal))
		}
	}
	if r.foreign > 0 {
		h.log.LogAttrs(context.Background(), slog.LevelWarn, "the agent's stream held bytes that are not SSE: forwarded in frames without data, not recorded",
			slog.String("thread_id", r.meta.ThreadID), slog.String("run_id", r.meta.RunID),
			slog.Int("frames", r.foreign), slog.Int("bytes", r.foreignBytes), slog.Int("dropped_unterminated", r.foreignDropped))
	}
	status, detail := r.status, r.detail
	switch {
	case r.settled != r.seq && r.continued:
		// Events kept after the last terminal event: the run ends at the response's end,
		// recorded (and checkpointed) again through its last seq.
		r.settle()
	case r.settled != r.seq:
		// A settle that never happened (a panic): record the end so the run's last seq is
		// right.
		r.rec.Finish(status, detail, r.seq)
	}
	outcome := string(status)
	if detail != "" {
		outcome = detail
	}
	h.metrics.runEnded(outcome)
	r.hub.End()
	if !r.checkpointed || r.settled != r.seq {
		h.checkpoint(r.meta)
	}
	h.log.LogAttrs(context.Background(), slog.LevelInfo, "run ended",
		slog.String("thread_id", r.meta.ThreadID), slog.String("run_id", r.meta.RunID),
		slog.String("status", string(status)), slog.Int64("events", r.seq))
}

// Kinds of irregular events in an agent's response (the kind label of
// agui_proxy_upstream_irregular_events_total; each is also logged once per run).
const (
	// IrregularKeptAfterFinished: an event after RUN_FINISHED, kept (AfterTerminalKeep).
	IrregularKeptAfterFinished = "kept_after_finished"
	// IrregularRefusedAfterFinished: an event after RUN_FINISHED, neither forwarded nor
	// recorded (AfterTerminalRefuse).
	IrregularRefusedAfterFinished = "refused_after_finished"
	// IrregularRefusedAfterError: an event after RUN_ERROR, neither forwarded nor recorded
	// (whatever AfterTerminal says: the run failed).
	IrregularRefusedAfterError = "refused_after_error"
	// IrregularRunStartedAgain: a RUN_STARTED with the run's own id that is not the run's
	// first event, forwarded and recorded as sent.
	IrregularRunStartedAgain = "run_started_again"
	// IrregularRunStartedOther: a RUN_STARTED naming another run id that is not the run's
	// first event (after its RUN_FINISHED, kept), forwarded and recorded as sent, in this run.
	IrregularRunStartedOther = "run_started_other_run"
)

// irregularKinds lists every kind, in the order the end of a run logs them.
var irregularKinds = []string{IrregularKeptAfterFinished, IrregularRefusedAfterFinished, IrregularRefusedAfterError,
	IrregularRunStartedAgain, IrregularRunStartedOther}

// irregularLog is the message of each kind's log line.
var irregularLog = map[string]string{
	IrregularKeptAfterFinished:    "kept the events the agent sent after RUN_FINISHED in the same response (one run, ending at the response's last terminal event)",
	IrregularRefusedAfterFinished: "refused events the agent sent after the run's terminal event",
	IrregularRefusedAfterError:    "refused events the agent sent after the run's terminal event",
	IrregularRunStartedAgain:      "the agent sent RUN_STARTED again for the same run; forwarded and recorded as sent",
	IrregularRunStartedOther:      "the agent sent RUN_STARTED for another run id in the same response; forwarded and recorded as sent, in this run",
}

// noteIrregular counts an irregular event of kind.
func (r *run) noteIrregular(kind string) {
	if r.irregular == nil {
		r.irregular = map[string]int{}
	}
	r.irregular[kind]++
	r.h.metrics.irregularEvent(kind)
}

// noteRunStartedAgain counts a RUN_STARTED that is not the run's first event (data is its
// JSON) by the run id it names.
func (r *run) noteRunStartedAgain(data []byte) {
	var ev struct {
		RunID string `json:"runId"`
	}
	json.Unmarshal(data, &ev)
	if ev.RunID == r.meta.RunID {
		r.noteIrregular(IrregularRunStartedAgain)
	} else {
		r.noteIrregular(IrregularRunStartedOther)
	}
}

// endCancelled ends a run stopped on request as AG-UI 1.0 ends a cancelled run: an event
// closing each thing the agent left open, the most recently opened first, then RUN_FINISHED
// with outcome cancelled; the run is recorded as cancelled.
func (r *run) endCancelled() {
	for _, data := range r.open.closing() {
		typ, _ := agui.EventType(data)
		r.emitData(typ, data)
	}
	r.terminal, r.status, r.detail = agui.RunFinished, recorder.StatusCancelled, ""
	r.emitData(agui.RunFinished, thread.RunFinishedCancelled(recorder.ThreadIDOf(r.meta.ThreadID), r.meta.RunID))
}

// endCause classifies why the upstream stream ended without a terminal event.
func (r *run) endCause(readErr error) (code, msg string) {
	switch cause := context.Cause(r.ctx); {
	case errors.Is(cause, errUpstreamIdle):
		return CodeUpstreamIdle, "agui-proxy: " + cause.Error()
	case errors.Is(cause, errRunTimeout):
		return CodeRunTimeout, "agui-proxy: " + cause.Error()
	case errors.Is(cause, errInterrupted):
		return CodeInterrupted, "agui-proxy: " + cause.Error()
	case errors.Is(cause, thread.ErrStopped):
		return CodeCancelled, "agui-proxy: " + cause.Error()
	case errors.Is(cause, errStoreTooSlow):
		return CodeStorageUnavailable, "agui-proxy: " + cause.Error()
	}
	switch {
	case errors.Is(readErr, panics.ErrPanicked):
		return CodeInternal, "agui-proxy: an internal error ended the run (the proxy's log has the details)"
	case errors.Is(readErr, errRunTooLarge):
		return CodeRunTooLarge, "agui-proxy: the agent sent more than " + strconv.FormatInt(r.h.cfg.MaxRunBytes, 10) + " bytes of events in one run"
	case errors.Is(readErr, sse.ErrFrameTooLarge) || errors.Is(readErr, sse.ErrLineTooLong):
		return CodeFrameTooLarge, "agui-proxy: the agent sent an event larger than " + strconv.Itoa(r.h.cfg.MaxEventBytes) + " bytes"
	case readErr == nil || errors.Is(readErr, io.EOF):
		return CodeUpstreamEnded, "agui-proxy: the agent ended the stream without RUN_FINISHED or RUN_ERROR"
	default:
		return CodeUpstreamDisconnected, "agui-proxy: the connection to the agent broke before the run ended"
	}
}

// emitData sends and records an event the proxy wrote itself (enriched or synthesized).
func (r *run) emitData(typ string, data []byte) error {
	r.seq++
	out, err := sse.AppendEvent(make([]byte, 0, len(data)+len(r.meta.RunID)+32), sse.Event{ID: r.cursor(), Data: data})
	if err != nil { // ids are validated before a run exists; this would be a bug
		return fmt.Errorf("encoding event %d: %w", r.seq, err)
	}
	later := typ != r.terminal && r.recordsLater() // as in pump: the clients first
	if !later {
		if err := r.record(typ, data, out); err != nil {
			return err
		}
	}
	if typ == r.terminal {
		r.settle()
	}
	r.publish(live.Event{Seq: r.seq, Type: typ, Frame: out})
	if later {
		return r.record(typ, data, out)
	}
	return nil
}

// publish sends ev to the run's hub, telling it which earlier events the store now holds so
// that its backlog keeps only the ones an attacher could not read from the store yet.
func (r *run) publish(ev live.Event) {
	r.hub.PublishStored(ev, r.storedThrough())
	r.held = ev.More
}

// flushHeld makes the clients write the event published with More before the pump waits for
// something other than reading its next frame (the store: a full recorder buffer, a sync
// append, the run's end being recorded).
func (r *run) flushHeld() {
	if r.held {
		r.held = false
		r.hub.Flush()
	}
}

// storedThrough returns the seq through which the recorder has stored the run's events, as
// far as r.unstored tells (0: no news), and forgets those entries.
func (r *run) storedThrough() int64 {
	if len(r.unstored) == 0 {
		return 0
	}
	stored := r.rec.Stored()
	n := 0
	for n < len(r.unstored) && r.unstored[n].pos <= stored {
		n++
	}
	if n == 0 {
		return 0
	}
	through := r.unstored[n-1].seq
	r.unstored = r.unstored[:copy(r.unstored, r.unstored[n:])]
	return through
}

// settle records that the run ended (r.status, r.detail, through r.seq) before its terminal
// event is published: the busy rule of the next run on the thread reads that status, so a
// client that saw the terminal event can start the next run at once, on any replica. It waits
// for the writer to store the run's events and status, at most settleTimeout; a run being
// ended because the store is failing does not wait.
func (r *run) settle() {
	r.flushHeld()
	r.settled = r.seq
	r.checkpointed = false // (a run kept after its RUN_FINISHED settles again)
	if r.detail == CodeStorageUnavailable {
		r.rec.Finish(r.status, r.detail, r.seq)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := r.rec.FinishSync(ctx, r.status, r.detail, r.seq); err != nil {
		r.h.log.LogAttrs(ctx, slog.LevelWarn, "the store did not record the run's end before its terminal event was sent",
			slog.String("thread_id", r.meta.ThreadID), slog.String("run_id", r.meta.RunID), slog.Any("err", err))
		return
	}
	ended := r.meta
	ended.Status, ended.Detail, ended.LastSeq = r.status, r.detail, r.seq
	r.checkpointed = r.h.checkpointNow(ctx, ended, r.kept)
	r.dropRetained()
}

// cursor formats the id of the event r.seq without allocating: the returned string aliases a
// buffer reused by the next call, so callers must copy it before then (AppendWithID and
// AppendEvent do).
func (r *run) cursor() string {
	r.idBuf = recorder.AppendCursor(r.idBuf[:0], r.meta.RunID, r.meta.Epoch, r.seq)
	return unsafe.String(unsafe.SliceData(r.idBuf), len(r.idBuf))
}

// recordsLater reports whether an event may be published before it is handed to the
// recorder: without recording, and in async durability, where record returns no error and
// clients are never promised that what they read is stored (sync durability publishes an
// event only once it is).
func (r *run) recordsLater() bool {
	return r.h.cfg.DisableRecording || r.h.cfg.Durability != recorder.DurabilitySync || r.final
}

// record hands the event (its frame as recorded; data is its JSON, for the run's kept events)
// to the writer. In async mode it returns at once unless the recorder's buffer is full: it
// then waits for room, bounded (recorder.WriterConfig.FullWait), so a fast agent is slowed to
// the store's pace instead of losing events. In sync mode it returns once the event is
// stored, or an error when the store did not answer in time.
func (r *run) record(typ string, data, frame []byte) error {
	if r.h.cfg.DisableRecording {
		return nil
	}
	ev := recorder.Event{Seq: r.seq, Type: typ, Frame: frame}
	if r.recordsLater() { // async (recording is on here)
		// A drop (store stuck past FullWait) is counted, logged and marked as a gap by the
		// writer; its position 0 lets the backlog forget it (the store will never have it).
		if r.flush == nil {
			r.flush = r.flushHeld
		}
		pos, _ := r.rec.AppendPosWaiting(ev, r.flush)
		if pos == 0 {
			r.dropRetained() // the store will have a gap: the checkpoint reads it back
		} else {
			r.retain(typ, data)
		}
		if len(r.unstored) == maxUnstored {
			r.unstored = r.unstored[:copy(r.unstored, r.unstored[maxUnstored/2:])]
		}
		r.unstored = append(r.unstored, unstoredEvent{seq: ev.Seq, pos: pos})
		return nil
	}
	r.flushHeld()
	ctx, cancel := context.WithTimeout(r.ctx, syncStoreTimeout)
	defer cancel()
	if err := r.rec.AppendSync(ctx, ev); err != nil {
		r.cancel(errStoreTooSlow)
		return err
	}
	r.unstored = append(r.unstored[:0], unstoredEvent{seq: ev.Seq}) // stored: every earlier one too
	r.retain(typ, data)
	return nil
}

// retainChunk is how much of the handler's budget a run takes at a time, so that keeping an
// event touches the shared counter once per chunk, not once per event.
const retainChunk = 2 << 10

// retain keeps the data of an event the recorder accepted, for the run's checkpoint at its
// end (see Config.CheckpointMemory); typ is the type it was recorded with. When the handler's
// budget is spent the run keeps nothing more and lets go of what it kept. Pump goroutine only.
func (r *run) retain(typ string, data []byte) {
	if r.retainOff {
		return
	}
	if r.kept == nil {
		r.kept = new(thread.KeptEvents)
	}
	r.kept.Add(typ, data)
	if cost := r.kept.Cost(); cost > r.retainReserved {
		take := max(cost-r.retainReserved, retainChunk)
		if r.h.retainLeft.Add(-take) < 0 {
			r.h.retainLeft.Add(take)
			r.dropRetained()
			return
		}
		r.retainReserved += take
	}
}

// dropRetained lets go of the events the run kept and keeps none from now on. Pump goroutine
// only; called again when the run ends.
func (r *run) dropRetained() {
	r.retainOff = true
	if r.retainReserved > 0 {
		r.h.retainLeft.Add(r.retainReserved)
	}
	r.kept, r.retainReserved = nil, 0
}

// clientOptions are the bounds of a client reading a run's hub: the queue bound in bytes and
// the heartbeat (attach applies the same to its attachers), and the delivery metrics.
func (h *Handler) clientOptions(gone <-chan struct{}) live.Options {
	o := live.Options{QueueBytes: h.cfg.ClientQueueBytes, Heartbeat: h.cfg.HeartbeatInterval, Gone: gone}
	if m := h.metrics; m != nil {
		o.OnWrite, o.OnDrop = m.delivered, m.slowClient
	}
	return o
}
