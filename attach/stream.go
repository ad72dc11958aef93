package attach

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/keepalive"
	"github.com/agui-proxy/agui-proxy/live"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
	"github.com/agui-proxy/agui-proxy/thread"
)

// Names of the CUSTOM events the proxy adds to attach and resume streams.
const (
	// EventReplayComplete marks the end of the prelude: what follows is live. Its value holds
	// "cursor" (the id of the last event covered) and "live" (whether a run is in progress).
	EventReplayComplete = "agui-proxy.replay_complete"
	// EventResumeFailed says the stream could not resume exactly from the client's event id
	// (unknown epoch, trimmed or lost events, another branch): the full compacted history
	// follows instead. Its value holds "reason".
	EventResumeFailed = "agui-proxy.resume_failed"
)

// ResumeHeader is set to "exact" or "full-history" on every attach and resume stream.
const ResumeHeader = "X-Agui-Resume"

// stream writes one SSE response: LF framing, compact JSON, a deadline on every write.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     []byte
	started bool
	// takeOver: begin takes the connection over (see takeover.go); conn is then the writer.
	takeOver bool
	conn     *connWriter
	// keepAlive is where a stream taken over hands its connection at a clean end, for the
	// client's next request (nil: the end closes it, and the headers say so).
	keepAlive *keepalive.Listener
}

func newStream(w http.ResponseWriter, timeout time.Duration) *stream {
	return &stream{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// begin sends the headers and a retry hint, committing the response.
func (s *stream) begin(retry time.Duration, resume string) error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if resume != "" {
		h.Set(ResumeHeader, resume)
	}
	if s.takeOver && s.keepAlive == nil {
		h.Set("Connection", "close")
	}
	s.w.WriteHeader(http.StatusOK)
	s.started = true
	if s.takeOver {
		// Hijack sends the headers (chunked transfer coding) first.
		if conn, brw, err := s.rc.Hijack(); err == nil {
			s.conn = &connWriter{conn: conn, keepAlive: s.keepAlive.Hijacked(brw)}
			s.w, s.rc = s.conn, http.NewResponseController(s.conn)
		}
	}
	s.buf = append(s.buf[:0], "retry: "...)
	s.buf = strconv.AppendInt(s.buf, retry.Milliseconds(), 10)
	s.buf = append(s.buf, "\n\n"...)
	return s.flush()
}

// event queues one event; id may be "".
func (s *stream) event(data []byte, id string) error {
	var err error
	s.buf, err = sse.AppendEvent(s.buf, sse.Event{ID: id, Data: data})
	return err
}

// appendRecord appends a recorded frame to b, re-encoded with LF framing if it was not
// (nothing when it holds nothing a client could apply).
func appendRecord(b []byte, rec recorder.Event, runID, epoch string) []byte {
	if lfFramed(rec.Frame) {
		return append(b, rec.Frame...)
	}
	data, err := thread.FrameData(rec.Frame)
	if err != nil {
		return b
	}
	out, err := sse.AppendEvent(b, sse.Event{ID: recorder.Cursor{RunID: runID, Epoch: epoch, Seq: rec.Seq}.String(), Data: data})
	if err != nil {
		return b
	}
	return out
}

// lfFramed reports whether frame is LF-framed and complete, as a client may get it unchanged.
func lfFramed(frame []byte) bool {
	return bytes.IndexByte(frame, '\r') < 0 && bytes.HasSuffix(frame, []byte("\n\n"))
}

// comment writes the heartbeat comment (live.Heartbeat, the one every stream uses).
func (s *stream) comment() error {
	s.buf = append(s.buf, live.Heartbeat...)
	return s.flush()
}

// flush writes what is queued, under the write deadline.
func (s *stream) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	_, err := s.w.Write(s.buf)
	if err == nil {
		err = s.rc.Flush()
	}
	if cap(s.buf) > 4<<10 {
		s.buf = nil // a prelude's buffer is not kept for the rest of a long-lived stream
	} else {
		s.buf = s.buf[:0]
	}
	return err
}

// custom builds a CUSTOM event.
func custom(name string, value any) []byte {
	v, _ := json.Marshal(value)
	b, _ := json.Marshal(struct {
		Type  string          `json:"type"`
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value"`
	}{agui.Custom, name, v})
	return b
}

// writePrelude writes compacted events: the replay_complete marker goes before a trailing
// RUN_FINISHED/RUN_ERROR (nothing but RUN_STARTED may follow those in a valid stream) and the
// cursor id on the last event, so an EventSource reconnects from there.
func (s *stream) writePrelude(events []compact.Event, cursor recorder.Cursor, live bool, failed string) error {
	if len(events) == 0 {
		return nil // nothing replayed; a stream may not start with the marker
	}
	marker := custom(EventReplayComplete, map[string]any{"cursor": cursorString(cursor), "live": live})
	// The marker goes before the trailing terminal event (only RUN_STARTED may follow one) and
	// before the events that re-open what is still streaming: a chunked message or tool call
	// re-opened by a CHUNK must be followed directly by the tail's next CHUNK, or the client
	// closes it.
	end := len(events)
	if end > 0 && agui.IsTerminal(events[end-1].Type) {
		end--
	} else {
		for end > 1 && reopens(events[end-1].Type) {
			end--
		}
	}
	id := cursorString(cursor)
	for i, e := range events {
		if i == end {
			if err := s.event(marker, ""); err != nil {
				return err
			}
		}
		eid := ""
		if i == len(events)-1 && end < len(events) {
			eid = id // the last event written carries the cursor
		}
		if err := s.event(e.Raw, eid); err != nil {
			return err
		}
		if i == 0 && failed != "" {
			s.event(custom(EventResumeFailed, map[string]string{"reason": failed}), "")
		}
	}
	if end == len(events) {
		return s.event(marker, id)
	}
	return nil
}

// reopens reports whether Compact uses events of type t to re-open a stream still in progress.
func reopens(t string) bool {
	switch t {
	case agui.TextMessageStart, agui.TextMessageChunk, agui.ToolCallStart, agui.ToolCallChunk,
		agui.ReasoningMessageStart, agui.ReasoningMessageChunk, agui.ReasoningStart:
		return true
	}
	return false
}

// ephemeralSpans tracks the live-only (ephemeral) spans open at a prelude's cursor. The prelude
// leaves them out, so the rest of such a span must not follow in the tail either: the client
// would refuse a THINKING_TEXT_MESSAGE_CONTENT whose span it never saw start.
type ephemeralSpans struct {
	ephemeral func(string) bool
	depth     int
}

func (h *Handler) newSpans() *ephemeralSpans {
	e := h.threads.CompactOptions().Ephemeral
	if e == nil {
		e = compact.DefaultEphemeral
	}
	return &ephemeralSpans{ephemeral: e}
}

// spansOf returns the ephemeral spans left open by events (a prelude's, up to its cursor).
func (h *Handler) spansOf(events []compact.Event) *ephemeralSpans {
	sp := h.newSpans()
	for _, e := range events {
		sp.see(e.Type)
	}
	return sp
}

// see accounts for one event before the cursor.
func (sp *ephemeralSpans) see(t string) {
	if !sp.ephemeral(t) {
		return
	}
	switch {
	case strings.HasSuffix(t, "_START"):
		sp.depth++
	case strings.HasSuffix(t, "_END") && sp.depth > 0:
		sp.depth--
	}
}

// skip reports whether a tail event belongs to a span that was open at the cursor, and
// accounts for it.
func (sp *ephemeralSpans) skip(t string) bool {
	if sp == nil || sp.depth == 0 || !sp.ephemeral(t) {
		return false
	}
	sp.see(t)
	return true
}

func cursorString(c recorder.Cursor) string {
	if c.RunID == "" {
		return ""
	}
	return c.String()
}

// tail writes the run's events after afterSeq live, until the run ends, the client goes or
// ctx ends. It returns io.EOF at the run's end. The events come from the run's live hub
// (package live): the pump's own when this process pumps the run, else the one store follower
// this process shares among the run's attachers; the hub's bounds, heartbeat and slow-client
// rule are the POSTing client's. Events the hub no longer keeps (a store that lagged the
// pump by more than the hub's backlog) are read from the store first, so no event is missed
// or repeated at the seam.
// spans, when not nil, holds the ephemeral spans open at afterSeq that the prelude left out.
//
// The events must be of run's epoch. A run compacted at rest since it was read has events of
// another: tailed from its start, with nothing written yet, the tail goes on in the new epoch;
// else it ends with errEpochChanged (the client has part of the run, which the new events,
// numbered anew, cannot continue) and the caller breaks the stream off (abortOn) for the
// client to resume: its event id, of the old epoch, then gets the full history.
func (h *Handler) tail(ctx context.Context, s *stream, run *recorder.Run, afterSeq int64, spans *ephemeralSpans) (int64, error) {
	o := live.Options{
		QueueBytes:   h.cfg.ClientQueueBytes,
		Heartbeat:    h.cfg.HeartbeatInterval,
		WriteTimeout: h.cfg.WriteTimeout,
		Gone:         ctx.Done(),
	}
	sub, gapEnd, release, err := h.threads.Live().Subscribe(run.ThreadID, run.RunID, afterSeq, o)
	if errors.Is(err, live.ErrNoFollower) {
		return afterSeq, problem.ErrLiveTailsUnsupported
	}
	if errors.Is(err, live.ErrClosed) {
		return afterSeq, problem.ErrShuttingDown
	}
	if err != nil {
		return afterSeq, err
	}
	defer release()
	last := afterSeq
	if gapEnd > afterSeq {
		if last, err = h.catchUp(ctx, s, run, afterSeq, gapEnd, spans); err != nil {
			return last, err
		}
	}
	var buf []byte
	changed := false
	err = sub.WriteTo(s.w, func(ev live.Event) ([]byte, bool) {
		if ev.Seq <= last {
			return nil, false // a comment, or never twice
		}
		if changed = epochChanged(run, ev.Frame, last); changed {
			return nil, true
		}
		last = ev.Seq
		if ev.Type == "" || spans.skip(ev.Type) {
			return nil, false // not a JSON event (recorded, not replayed), or the rest of a left-out span
		}
		// The run is over at its terminal event (the proxy ends every recorded run with one).
		last := agui.IsTerminal(ev.Type)
		if lfFramed(ev.Frame) {
			return ev.Frame, last // as published: no copy
		}
		buf = appendRecord(buf[:0], recorder.Event{Seq: ev.Seq, Type: ev.Type, Frame: ev.Frame}, run.RunID, run.Epoch)
		return buf, last
	})
	if changed {
		return last, epochChangedError(run, last)
	}
	return last, err
}

// catchUp writes the run's stored events in (after, until] with a store subscription: the
// part of the seam the live hub no longer holds. It returns io.EOF when the run ended there.
//
// The stream has started, so a store read that fails here is retried, not turned into a
// stream that ends without its terminal event (design.md F12: a stream that started waits for
// the store): a failed Follow or Next is followed again from the last event written, with
// backoff and heartbeats, while the client is there. Under thousands of simultaneous
// catch-ups a Follow can fail for want of a pooled connection (redis: connection pool
// timeout); such attach streams used to end with no event at all. Only what retrying cannot
// mend ends the stream: the run or thread gone, the store closed, the client gone.
func (h *Handler) catchUp(ctx context.Context, s *stream, run *recorder.Run, after, until int64, spans *ephemeralSpans) (int64, error) {
	if h.follower == nil {
		return after, problem.ErrLiveTailsUnsupported
	}
	last := after
	var sub recorder.Subscription
	defer func() {
		if sub != nil {
			sub.Close()
		}
	}()
	rt := h.newStoreRetry(s, run)
	for last < until {
		if sub == nil {
			var err error
			if sub, err = h.follower.Follow(ctx, run.ThreadID, run.RunID, last); err != nil {
				sub = nil
				if err := rt.wait(ctx, err); err != nil {
					return last, storeErr(err)
				}
				continue
			}
		}
		next, cancel := ctx, context.CancelFunc(func() {})
		if h.cfg.HeartbeatInterval > 0 {
			next, cancel = context.WithTimeout(ctx, h.cfg.HeartbeatInterval)
		}
		ev, err := sub.Next(next)
		cancel()
		switch {
		case err == nil:
			rt.backoff = 0
			if ev.Seq <= last {
				continue // never twice
			}
			if epochChanged(run, ev.Frame, last) {
				return last, epochChangedError(run, last)
			}
			last = ev.Seq
			if ev.Type == "" || spans.skip(ev.Type) {
				continue
			}
			s.buf = appendRecord(s.buf, ev, run.RunID, run.Epoch)
			if err := s.flush(); err != nil {
				return last, err
			}
			rt.quietSince = time.Now()
			if agui.IsTerminal(ev.Type) {
				return last, io.EOF
			}
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			if err := s.comment(); err != nil {
				return last, err
			}
			rt.quietSince = time.Now()
		case errors.Is(err, io.EOF):
			return last, err
		default:
			// Follow again from the last event written (a subscription that failed may
			// have lost its place: the store's Follow is exact from any seq).
			sub.Close()
			sub = nil
			if err := rt.wait(ctx, err); err != nil {
				return last, err
			}
		}
	}
	return last, nil
}

// storeRetry paces the retries of a stream's store reads after it started (catchUp,
// replayStored): capped exponential backoff, the heartbeat written while the stream is quiet,
// one warning per stream.
type storeRetry struct {
	h          *Handler
	s          *stream
	run        *recorder.Run
	backoff    time.Duration
	quietSince time.Time
	warned     bool
}

func (h *Handler) newStoreRetry(s *stream, run *recorder.Run) *storeRetry {
	return &storeRetry{h: h, s: s, run: run, quietSince: time.Now()}
}

// wait waits before the next attempt after cause, a failed store read, and returns what ends
// the stream instead (cause when retrying cannot mend it, ctx's error, a failed heartbeat).
func (rt *storeRetry) wait(ctx context.Context, cause error) error {
	if !retryable(cause) || ctx.Err() != nil {
		return cause
	}
	if !rt.warned {
		rt.h.log.Warn("attach: store read failed after the stream started; retrying", "thread_id", rt.run.ThreadID, "run_id", rt.run.RunID, "err", cause)
		rt.warned = true
	}
	rt.backoff = min(max(2*rt.backoff, catchUpMinBackoff), catchUpMaxBackoff)
	timer := time.NewTimer(rt.backoff)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
	}
	if rt.h.cfg.HeartbeatInterval > 0 && time.Since(rt.quietSince) >= rt.h.cfg.HeartbeatInterval {
		if err := rt.s.comment(); err != nil {
			return err
		}
		rt.quietSince = time.Now()
	}
	return nil
}

// Backoff bounds between catch-up attempts after a failed store read.
const (
	catchUpMinBackoff = 50 * time.Millisecond
	catchUpMaxBackoff = 2 * time.Second
)

// retryable reports whether a failed catch-up read may succeed if tried again: not when the
// run or thread is gone, the store or process is closing, or the stream's context ended.
func retryable(err error) bool {
	switch {
	case errors.Is(err, recorder.ErrRunNotFound), errors.Is(err, recorder.ErrThreadNotFound),
		errors.Is(err, recorder.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, io.EOF):
		return false
	}
	return true
}

// cursorFrom reads the client's position: the Last-Event-ID header (EventSource reconnects)
// or the ?after= parameter (EventSource cannot set headers on its first connect).
func cursorFrom(r *http.Request) (recorder.Cursor, bool, error) {
	v := r.Header.Get("Last-Event-ID")
	if q := r.URL.Query(); q.Has("after") {
		if v = q.Get("after"); v == "" {
			// Not the same as no position: replaying from the start would hide the client's bug.
			return recorder.Cursor{}, false, fmt.Errorf("%w: after is empty: give the id of the last event seen (its id: line), or leave after out to read from the start", problem.ErrInvalidQuery)
		}
	}
	if v == "" {
		return recorder.Cursor{}, false, nil
	}
	c, err := recorder.ParseCursor(v)
	return c, true, err
}

// epochChanged reports whether frame, the next event of run's tail after the event last, is
// of another epoch than run's, which the tail cannot continue. When the tail has written
// nothing of the run yet (last is 0) the frame's epoch becomes run's instead: a run compacted
// at rest before its tail began is tailed whole in its new epoch.
func epochChanged(run *recorder.Run, frame []byte, last int64) bool {
	if !recorder.OtherEpoch(frame, run.Epoch) {
		return false
	}
	if last != 0 {
		return true
	}
	run.Epoch = recorder.FrameEpoch(frame)
	return false
}

func epochChangedError(run *recorder.Run, last int64) error {
	return fmt.Errorf("run %q after event %d: %w", run.RunID, last, errEpochChanged)
}

// writeStored writes recs, events of run stored after the event last, and returns the last
// one's seq and whether it ended the run.
func (s *stream) writeStored(recs []recorder.Event, run recorder.Run, last int64, spans *ephemeralSpans) (int64, bool, error) {
	ended := false
	for _, rec := range recs {
		last = rec.Seq
		if rec.Type == "" || spans.skip(rec.Type) {
			continue // not a JSON event (recorded, not replayed), or the rest of a left-out span
		}
		s.buf = appendRecord(s.buf, rec, run.RunID, run.Epoch)
		if len(s.buf) >= 32<<10 {
			if err := s.flush(); err != nil {
				return last, ended, err
			}
		}
		ended = agui.IsTerminal(rec.Type)
	}
	return last, ended, s.flush()
}

// abortOn breaks the stream off when err is errEpochChanged, so that the client sees a broken
// stream and resumes from its last event id, instead of an end it takes for the run's.
// Through net/http it must be called from the handler's goroutine.
func (s *stream) abortOn(err error) {
	if !errors.Is(err, errEpochChanged) {
		return
	}
	if s.conn != nil {
		s.conn.broken = true // end closes the connection without the last chunk
		return
	}
	panic(http.ErrAbortHandler)
}
