package attach

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/live"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// serveThreadEvents is the thread attach: GET {prefix}threads/{thread}/events.
//
// Without a cursor it sends the compacted history of the thread's current branch, the
// replay_complete marker, then the live tail of the run in progress, if any. With a cursor
// (Last-Event-ID or ?after=) it sends the raw events strictly after it instead, then the live
// tail; a cursor it cannot resume from exactly gets the resume_failed signal and the full
// compacted history. With ?follow=1 the stream stays open for the thread's next runs.
func (h *Handler) serveThreadEvents(w http.ResponseWriter, r *http.Request) {
	r, slot := withStreamSlot(r)
	h.finish(slot, h.startThreadEvents(w, r))
}

// tailing is an attach stream whose first bytes are sent and whose live part is still to
// come: the runs to tail in turn and, with ?follow=1, the thread to follow after them. The
// handlers set it up in one call and wait on it from a small frame of their own, so that an
// idle attacher's goroutine holds a small stack while it waits (a goroutine stack shrinks at
// GC only when its use is under a quarter: the setup's frames, 1.2 to 2.3 KiB of locals,
// would keep a waiting attacher at 16 KiB instead of 8).
type tailing struct {
	h      *Handler
	r      *http.Request
	s      *stream
	kind   string         // the Metrics stream kind, ended by wait
	runs   []recorder.Run // tailed in turn, the first after after and past spans, the others from their start
	after  int64
	stored bool // runs[0] has ended: the rest of it is read from the store (replayStored), not tailed
	spans  *ephemeralSpans
	follow string // with ?follow=1, the thread followed once runs are done
	head   string // the thread's head run when set up (follow's starting point)
}

// wait streams the live part: each run in turn until it ends, then the thread's next runs if
// followed. It ends the stream's Metrics.
func (t *tailing) wait() {
	defer t.h.cfg.Metrics.StreamEnded(t.kind)
	t.s.buf = nil // the prelude's buffer (up to 4 KiB) is not kept while the attacher waits
	ctx := t.r.Context()
	for i := range t.runs {
		tail := t.h.tail
		if i == 0 && t.stored {
			tail = t.h.replayStored
		}
		if _, err := tail(ctx, t.s, &t.runs[i], t.after, t.spans); !errors.Is(err, io.EOF) {
			t.h.streamEnded(t.r, err)
			t.s.abortOn(err)
			return
		}
		t.after, t.spans = 0, nil
	}
	if t.follow != "" {
		t.followThread(ctx)
	}
}

// startThreadEvents answers the thread attach up to its live part: nil when the request was
// answered (an error, or a client gone before the prelude was out), else what to wait on.
func (h *Handler) startThreadEvents(w http.ResponseWriter, r *http.Request) (t *tailing) {
	ctx := r.Context()
	sctx, cancel := h.setupCtx(ctx) // every store read before the first byte
	defer cancel()
	th, err := h.access(sctx, r, r.PathValue("thread"))
	if err != nil {
		writeErr(w, r, h.log, err)
		return nil
	}
	cursor, hasCursor, err := cursorFrom(r)
	if err != nil {
		writeErr(w, r, h.log, err)
		return nil
	}
	follow := r.URL.Query().Get("follow") == "1"
	h.cfg.Metrics.StreamStarted("thread")
	defer func() {
		if t == nil {
			h.cfg.Metrics.StreamEnded("thread")
		}
	}()
	began := time.Now()
	head, err := h.run(ctx, th.ID, th.LatestRunID)
	if err != nil {
		writeErr(w, r, h.log, storeErr(err))
		return nil
	}
	s := h.newStream(w, r)
	t = &tailing{h: h, r: r, s: s, kind: "thread", head: head.RunID}
	if follow {
		t.follow = th.ID
	}
	var failed string
	if hasCursor {
		// The lineage only for a cursor, and only up to the cursor's run (usually the head):
		// a walk up a long thread costs one store read per run.
		chain, err := h.threads.LineageFrom(ctx, th.ID, head.RunID, cursor.RunID)
		if err != nil {
			writeErr(w, r, h.log, storeErr(err))
			return nil
		}
		idx := -1
		for i, run := range chain {
			if run.RunID == cursor.RunID {
				idx = i
			}
		}
		if idx >= 0 {
			chain[idx] = h.streaming(chain[idx])
		}
		switch {
		case idx < 0:
			if _, err := h.store.Run(sctx, th.ID, cursor.RunID); err != nil {
				writeErr(w, r, h.log, storeErr(err)) // unknown or foreign: a clear 404
				return nil
			}
			failed = "the event id belongs to another branch of the thread"
		case chain[idx].Epoch != cursor.Epoch:
			failed = reasonEarlierEpoch
		case cursor.Seq > chain[idx].LastSeq && chain[idx].Status != recorder.StatusRunning:
			failed = "the event id is past the end of the run"
		case !chain[idx].Complete(cursor.Seq):
			failed = "events after this id are no longer all stored (trimmed or lost)"
		default:
			// The cursor's run, when it ended, is read from the store here, in its epoch (its
			// first page: the rest by wait): tailed after the first byte, a compaction at rest
			// meanwhile would leave the stream no way on.
			var recs []recorder.Event
			if chain[idx].Status != recorder.StatusRunning {
				if recs, err = h.storedEvents(sctx, chain[idx], cursor.Seq, storedPage); errors.Is(err, errEpochChanged) {
					failed = reasonEarlierEpoch
					break
				} else if err != nil {
					writeErr(w, r, h.log, storeErr(err))
					return nil
				}
			}
			h.cfg.Metrics.Resumed(true)
			if err := s.begin(h.cfg.Retry, "exact"); err != nil {
				return nil
			}
			t.runs, t.after = chain[idx:], cursor.Seq
			if chain[idx].Status != recorder.StatusRunning {
				last, ended, err := s.writeStored(recs, chain[idx], cursor.Seq, nil)
				switch {
				case err != nil:
					return nil
				case ended || len(recs) < storedPage:
					t.runs, t.after = chain[idx+1:], 0
				default:
					t.after, t.stored = last, true
				}
			}
			return t
		}
	}
	resume := "full-history"
	if failed == "" {
		resume = ""
	} else {
		h.cfg.Metrics.Resumed(false)
	}
	// The prelude is read before the first byte: a store that fails here gets a problem, not
	// a stream that breaks off.
	prelude, pos, spans, err := h.prelude(sctx, &head)
	if err != nil {
		writeErr(w, r, h.log, storeErr(err))
		return nil
	}
	if err := s.begin(h.cfg.Retry, resume); err != nil {
		return nil
	}
	live := head.Status == recorder.StatusRunning
	if err := s.writePrelude(prelude, pos, live, failed); err != nil || s.flush() != nil {
		return nil
	}
	h.cfg.Metrics.Prelude("thread", time.Since(began))
	if live {
		t.runs, t.after, t.spans = []recorder.Run{head}, pos.Seq, spans
	}
	return t
}

// prelude returns the compacted branch through run (its events so far if it is running), the
// position it covers, and the ephemeral spans open there. A running run that ended and was
// compacted at rest before its events were read is read again (into *run), ended.
func (h *Handler) prelude(ctx context.Context, run *recorder.Run) ([]compact.Event, recorder.Cursor, *ephemeralSpans, error) {
	for attempt := 1; ; attempt++ {
		pos := recorder.Cursor{RunID: run.RunID, Epoch: run.Epoch, Seq: run.LastSeq}
		if run.Status != recorder.StatusRunning {
			evs, err := h.threads.Branch(ctx, run.ThreadID, run.RunID)
			return evs, pos, nil, err
		}
		base, err := h.threads.Branch(ctx, run.ThreadID, run.ParentRunID)
		if err != nil {
			return nil, pos, nil, err
		}
		recs, err := h.storedEvents(ctx, *run, 0, 0)
		if errors.Is(err, errEpochChanged) && attempt < maxEpochReads {
			if *run, err = h.run(ctx, run.ThreadID, run.RunID); err != nil {
				return nil, pos, nil, err
			}
			continue
		}
		if err != nil {
			return nil, pos, nil, err
		}
		cur, _ := thread.ParseRecords(recs, -1)
		pos.Seq = 0
		if len(recs) > 0 {
			pos.Seq = recs[len(recs)-1].Seq
		}
		return h.threads.Compact(append(base, cur...)), pos, h.spansOf(cur), nil
	}
}

// followThread keeps a ?follow=1 stream open: each new run of the thread is streamed raw from
// its RUN_STARTED, live. Which run is the thread's latest is read once per FollowPoll per
// process (live.Registry.WatchThread), however many streams follow the thread.
func (t *tailing) followThread(ctx context.Context) {
	h, current := t.h, t.head
	watch, release := h.threads.Live().WatchThread(t.follow, h.cfg.FollowPoll)
	defer release()
	// One heartbeat timer for the whole follow, not a context and timer per quiet interval:
	// this goroutine waits here for as long as the browser tab stays open.
	var timer *time.Timer
	var tick <-chan time.Time
	if h.cfg.HeartbeatInterval > 0 {
		timer = time.NewTimer(h.cfg.HeartbeatInterval)
		defer timer.Stop()
		tick = timer.C
	}
	for {
		latest, ticked, err := watch.NextOrTick(ctx.Done(), tick, current)
		switch {
		case ticked:
			if t.s.comment() != nil {
				return
			}
			timer.Reset(h.cfg.HeartbeatInterval)
			continue
		case err == nil:
		case ctx.Err() != nil, errors.Is(err, live.ErrClosed): // the client left, or the process is stopping
			return
		default:
			h.streamEnded(t.r, storeErr(err))
			return
		}
		current = latest
		if err := t.load(ctx, current); err != nil {
			h.streamEnded(t.r, storeErr(err))
			return
		}
		if _, err := h.tail(ctx, t.s, &t.runs[0], 0, nil); !errors.Is(err, io.EOF) {
			h.streamEnded(t.r, err)
			t.s.abortOn(err)
			return
		}
		if timer != nil {
			timer.Reset(h.cfg.HeartbeatInterval) // the quiet counts from the run's end
		}
	}
}

// load reads run runID of the followed thread into t.runs[0]: on the heap, not in
// followThread's frame, which stays on the stack while the run is tailed.
func (t *tailing) load(ctx context.Context, runID string) error {
	run, err := t.h.run(ctx, t.follow, runID)
	if err != nil {
		return err
	}
	t.runs = append(t.runs[:0], run)
	return nil
}

// streamEnded logs why a stream that already started ended early.
func (h *Handler) streamEnded(r *http.Request, err error) {
	if err == nil || errors.Is(err, io.EOF) || r.Context().Err() != nil || clientLeft(err) {
		return
	}
	level := slog.LevelInfo
	if !errors.Is(err, recorder.ErrSlowSubscriber) && !errors.Is(err, live.ErrSlowClient) {
		level = slog.LevelWarn
	}
	h.log.LogAttrs(r.Context(), level, "attach stream ended early", slog.String("path", r.URL.Path), slog.Any("err", err))
}

// serveRunEvents is the run attach: GET {prefix}threads/{thread}/runs/{run}/events, the run's
// raw events from its start or strictly after the cursor, then live until the run ends.
func (h *Handler) serveRunEvents(w http.ResponseWriter, r *http.Request) {
	r, slot := withStreamSlot(r)
	h.finish(slot, h.startRunEvents(w, r))
}

// startRunEvents answers the run attach up to its live part (see startThreadEvents).
func (h *Handler) startRunEvents(w http.ResponseWriter, r *http.Request) *tailing {
	sctx, cancel := h.setupCtx(r.Context()) // the store reads before the first byte
	defer cancel()
	cursor, hasCursor, err := cursorFrom(r)
	if err != nil {
		writeErr(w, r, h.log, err)
		return nil
	}
	var (
		run   recorder.Run
		after int64
		recs  []recorder.Event // an ended run's events after the cursor, read before the first byte
	)
	for attempt := 1; ; attempt++ {
		_, run, err = h.accessRun(sctx, r)
		if err != nil {
			writeErr(w, r, h.log, err)
			return nil
		}
		if hasCursor {
			switch {
			case cursor.RunID != run.RunID:
				writeErr(w, r, h.log, problem.ErrCursorForeign)
				return nil
			case cursor.Epoch != run.Epoch || !run.Complete(cursor.Seq) ||
				(cursor.Seq > run.LastSeq && run.Status != recorder.StatusRunning):
				writeErr(w, r, h.log, problem.ErrUnrecoverable)
				return nil
			}
			after = cursor.Seq
		} else if !run.Complete(0) {
			writeErr(w, r, h.log, problem.ErrUnrecoverable)
			return nil
		}
		if run.Status == recorder.StatusRunning {
			break
		}
		// An ended run is read from the store here, in its epoch (its first page: the rest
		// by wait): tailed after the first byte, a compaction at rest meanwhile would leave
		// the stream no way on. Compacted since its metadata was read, it is read again: a
		// cursor then has an earlier epoch.
		recs, err = h.storedEvents(sctx, run, after, storedPage)
		if err == nil || !errors.Is(err, errEpochChanged) || attempt == maxEpochReads {
			break
		}
	}
	if err != nil {
		writeErr(w, r, h.log, storeErr(err))
		return nil
	}
	h.cfg.Metrics.StreamStarted("run")
	if hasCursor {
		h.cfg.Metrics.Resumed(true)
	}
	s := h.newStream(w, r)
	if err := s.begin(h.cfg.Retry, "exact"); err != nil {
		h.cfg.Metrics.StreamEnded("run")
		return nil
	}
	t := &tailing{h: h, r: r, s: s, kind: "run", runs: []recorder.Run{run}, after: after}
	if run.Status != recorder.StatusRunning {
		last, ended, err := s.writeStored(recs, run, after, nil)
		if err != nil || ended || len(recs) < storedPage {
			t.runs = nil // nothing left: wait ends the metrics
		}
		t.after, t.stored = last, true
	}
	return t
}

// ServeResume answers a run POST that re-sends a known run with Last-Event-ID: instead of
// RunAlreadyStarted, a stream the official client accepts on its own, which replays to the
// uninterrupted run's messages and state. It holds the run's RUN_STARTED, the thread's state
// compacted up to the cursor (open messages and tool calls re-opened), every event after the
// cursor exactly once, then the live tail. The agent is not called again.
func (h *Handler) ServeResume(w http.ResponseWriter, r *http.Request, threadID, runID, lastEventID string) {
	ctx := r.Context()
	sctx, cancel := h.setupCtx(ctx) // every store read before the first byte
	defer cancel()
	began := time.Now()
	th, err := h.access(sctx, r, threadID)
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	cursor, err := recorder.ParseCursor(lastEventID)
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	var (
		run    recorder.Run
		recs   []recorder.Event
		failed string
		cut    int64
		limit  int
	)
	// The run's metadata, then its events through the cut and a page after, in the same epoch:
	// a run compacted at rest in between is read again (its new epoch then answers like any
	// earlier one).
	for attempt := 1; ; attempt++ {
		if run, err = h.run(sctx, th.ID, runID); err != nil {
			writeErr(w, r, h.log, storeErr(err))
			return
		}
		if cursor.RunID != run.RunID {
			writeErr(w, r, h.log, fmt.Errorf("%w: it names run %q", problem.ErrCursorForeign, cursor.RunID))
			return
		}
		failed, cut = "", min(cursor.Seq, run.LastSeq)
		switch {
		case cursor.Epoch != run.Epoch:
			failed, cut = reasonEarlierEpoch, run.LastSeq
		case !run.Complete(cursor.Seq):
			failed, cut = "events after this id are no longer all stored (trimmed or lost)", run.LastSeq
		}
		// Every event through the cut (the prelude compacts them) and a page after it.
		limit = int(cut) + storedPage
		recs, err = h.storedEvents(sctx, run, 0, limit)
		if err == nil || !errors.Is(err, errEpochChanged) || attempt == maxEpochReads {
			break
		}
	}
	if err != nil {
		writeErr(w, r, h.log, storeErr(err))
		return
	}
	more := len(recs) == limit // (the run may have more stored)
	base, err := h.threads.Branch(sctx, th.ID, run.ParentRunID)
	if err != nil {
		writeErr(w, r, h.log, storeErr(err))
		return
	}
	cur, n := thread.ParseRecords(recs, cut)
	var last int64 // the last event the prelude covers
	if n > 0 {
		last = recs[n-1].Seq
	}
	recs = recs[n:] // the events after the cursor
	spans := h.spansOf(cur)
	prelude := h.threads.Compact(append(base, cur...))
	if len(cur) > 0 && cur[0].Type == agui.RunStarted {
		// Start the stream with this run's RUN_STARTED: the snapshots travel in the last run.
		for i := len(prelude) - 1; i >= 0; i-- {
			if prelude[i].Type == agui.RunStarted {
				prelude = prelude[i:]
				break
			}
		}
	}
	resume := "exact"
	if failed != "" {
		resume = "full-history"
	}
	h.cfg.Metrics.Resumed(failed == "")
	h.cfg.Metrics.StreamStarted("resume")
	defer h.cfg.Metrics.StreamEnded("resume")
	s := h.newStream(w, r)
	if err := s.begin(h.cfg.Retry, resume); err != nil {
		return
	}
	pos := recorder.Cursor{RunID: run.RunID, Epoch: run.Epoch, Seq: last}
	if err := s.writePrelude(prelude, pos, run.Status == recorder.StatusRunning, failed); err != nil || s.flush() != nil {
		return
	}
	h.cfg.Metrics.Prelude("resume", time.Since(began))
	// The events stored after the cursor, as read with the prelude; then the rest of an
	// ended run from the store, or the live tail.
	last, ended, err := s.writeStored(recs, run, last, spans)
	switch {
	case err != nil || ended:
		return
	case run.Status != recorder.StatusRunning:
		if !more {
			return
		}
		_, err = h.replayStored(ctx, s, &run, last, spans)
	default:
		_, err = h.tail(ctx, s, &run, last, spans)
	}
	h.streamEnded(r, err)
	s.abortOn(err)
}

// reasonEarlierEpoch is the resume_failed reason for an event id whose run no longer has its
// epoch (records lost or re-created, or compacted at rest).
const reasonEarlierEpoch = "the event id is from an earlier epoch of this run (its records were lost or re-created)"

// maxEpochReads bounds the reads of a run that keeps being compacted at rest between the
// read of its metadata and of its events (once is already rare: compaction at rest replaces
// a run's events once).
const maxEpochReads = 3

// errEpochChanged: a run's events were read in another epoch than its metadata: the run was
// compacted at rest (recorder.RunCompactor) in between, its events replaced and numbered anew.
var errEpochChanged = errors.New("the run was compacted at rest meanwhile (its events have a new epoch)")

// storedPage bounds the events of an ended run read from the store at once (storedEvents): a
// long run is written out page by page instead of being held whole per request.
const storedPage = 2000

// storedEvents reads up to limit (<= 0: all) of run's stored events after after, all of run's
// epoch (errEpochChanged otherwise: one Events read is of one epoch, the one the frames' ids
// name).
func (h *Handler) storedEvents(ctx context.Context, run recorder.Run, after int64, limit int) ([]recorder.Event, error) {
	recs, err := h.store.Events(ctx, run.ThreadID, run.RunID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("reading events of run %q: %w", run.RunID, err)
	}
	for _, rec := range recs {
		if recorder.OtherEpoch(rec.Frame, run.Epoch) {
			return nil, fmt.Errorf("run %q: %w", run.RunID, errEpochChanged)
		}
	}
	return recs, nil
}

// replayStored writes the events of run, which has ended, stored after after, page by page
// from the store, each page in run's epoch. It returns io.EOF at the run's end. A failed read
// is retried as the catch-up's are (the stream started: design.md F12); a run compacted at
// rest since it was read ends the stream with errEpochChanged (see tail).
func (h *Handler) replayStored(ctx context.Context, s *stream, run *recorder.Run, after int64, spans *ephemeralSpans) (int64, error) {
	var rt *storeRetry
	for {
		if err := ctx.Err(); err != nil {
			return after, err
		}
		recs, err := h.storedEvents(ctx, *run, after, storedPage)
		if err != nil && !errors.Is(err, errEpochChanged) {
			if rt == nil {
				rt = h.newStoreRetry(s, run)
			}
			if err := rt.wait(ctx, err); err != nil {
				return after, storeErr(err)
			}
			continue
		}
		if err != nil {
			return after, err
		}
		last, ended, err := s.writeStored(recs, *run, after, spans)
		if err != nil {
			return last, err
		}
		if ended || len(recs) < storedPage {
			return last, io.EOF
		}
		after = last
	}
}

// clientLeft reports whether err is a write to a client that closed its connection: how a
// stream that took its connection over learns that its client left.
func clientLeft(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}
