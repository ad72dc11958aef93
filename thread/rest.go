package thread

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/panics"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// Compaction at rest (AGUI_COMPACT_AFTER): an ended run's raw events are replaced by their
// merged form, compact.Concat (the official compactEvents: the deltas of each text message and
// tool call joined into one event), through recorder.RunCompactor, atomically per run and on
// the condition that the run still has the epoch it was read with. The run gets a new epoch,
// so a cursor into its raw events no longer matches: a resume from inside it answers the full
// history with resume_failed (thread attach) or 410 (run attach), as for a trimmed run. What
// the thread holds is unchanged: before a run is replaced, its branch replayed with the merged
// events must give the same messages and state as with the raw ones under both builds of the
// official client, and no STATE_DELTA or ACTIVITY_DELTA may have been folded (the clients
// could apply it differently, docs/compaction.md); otherwise the run is kept raw. Its
// checkpoint is built first, so preludes do not fold the merged events.

// RestResult is what CompactRun did with one run.
type RestResult int

// CompactRun results.
const (
	// RestCompacted: the run's events were replaced by their merged form.
	RestCompacted RestResult = iota
	// RestKept: the run stays as it is: running, already compacted, with events missing or
	// not parseable, not smaller merged, or merging would change what a client replays.
	RestKept
	// RestConflict: the run changed meanwhile (another replica compacted it).
	RestConflict
)

// CompactRun compacts one ended run at rest (see the package's compaction at rest). The store
// must implement recorder.RunCompactor.
func (s *Service) CompactRun(ctx context.Context, threadID, runID string) (RestResult, error) {
	rc, ok := s.store.(recorder.RunCompactor)
	if !ok {
		return RestKept, fmt.Errorf("store %T cannot replace a run's events", s.store)
	}
	run, err := s.store.Run(ctx, threadID, runID)
	if err != nil {
		return RestKept, err
	}
	if run.Status == recorder.StatusRunning || !run.CompactedAt.IsZero() || run.LastSeq == 0 || !run.Complete(0) {
		return RestKept, nil
	}
	recs, err := s.store.Events(ctx, threadID, runID, 0, 0)
	if err != nil {
		return RestKept, err
	}
	raw := make([]compact.Event, 0, len(recs))
	rawBytes := 0
	for _, rec := range recs {
		ev, ok := parseRecord(rec)
		if !ok {
			return RestKept, nil // a frame that is not an event: kept as it was streamed
		}
		raw = append(raw, ev)
		rawBytes += len(rec.Frame)
	}
	merged, err := compact.Concat(raw)
	if err != nil {
		return RestKept, nil
	}
	events := make([]recorder.Event, len(merged))
	epoch := recorder.NewEpoch()
	mergedBytes := 0
	for i, e := range merged {
		frame, err := sse.AppendEvent(nil, sse.Event{ID: recorder.Cursor{RunID: runID, Epoch: epoch, Seq: int64(i + 1)}.String(), Data: e.Raw})
		if err != nil {
			return RestKept, nil
		}
		events[i] = recorder.Event{Seq: int64(i + 1), Type: e.Type, Frame: frame}
		mergedBytes += len(frame)
	}
	if mergedBytes >= rawBytes || deltas(merged) != deltas(raw) {
		return RestKept, nil
	}
	// The branch before the run, which both forms must continue alike. The run's own
	// checkpoint is built from the raw events first.
	if err := s.Checkpoint(ctx, threadID, runID); err != nil {
		return RestKept, err
	}
	base, err := s.Branch(ctx, threadID, run.ParentRunID)
	if err != nil {
		return RestKept, err
	}
	for _, replay := range []func([]compact.Event) (json.RawMessage, json.RawMessage, error){compact.Replay, compact.ReplayCommonJS} {
		wm, ws, err1 := replay(append(base[:len(base):len(base)], raw...))
		gm, gs, err2 := replay(append(base[:len(base):len(base)], merged...))
		if err1 != nil || err2 != nil || !bytes.Equal(wm, gm) || !bytes.Equal(ws, gs) {
			return RestKept, nil
		}
	}
	err = rc.ReplaceRunEvents(ctx, threadID, runID, run.Epoch, epoch, events)
	switch {
	case errors.Is(err, recorder.ErrConflict):
		return RestConflict, nil
	case err != nil:
		return RestKept, err
	}
	s.log.Debug("compacted a run at rest", "thread_id", threadID, "run_id", runID, "events", len(raw), "merged", len(merged),
		"bytes", rawBytes, "merged_bytes", mergedBytes)
	return RestCompacted, nil
}

// packSegments stores packed (compressed, checkpoint record version 3) the checkpoint
// segments a run at rest closes: when runID is the thread's latest run (latest), its own
// segment (the whole thread is at rest); when runID's checkpoint is the base of a new segment,
// the segment holding its parent's branch, in case it was not packed when runID's segment
// started (storeCheckpoint packs it then). The segment a thread's latest runs extend stays as
// written while the thread is active: run ends write it and preludes read it without
// inflating; a run that extends a packed segment stores it unpacked again (storeCheckpoint),
// and the sweep that reaches that run packs it again.
func (s *Service) packSegments(ctx context.Context, threadID, runID, parentRunID string, latest bool) error {
	rec, err := s.readRecord(ctx, threadID, runID, true)
	if err != nil || rec.V != checkpointVersion {
		return ignoreNotFound(err) // no checkpoint (yet), or a version 1 one
	}
	if rec.Seg == "" && parentRunID != "" {
		prec, err := s.readRecord(ctx, threadID, parentRunID, true)
		if err != nil || prec.V != checkpointVersion {
			return ignoreNotFound(err)
		}
		segRun := parentRunID
		if prec.Seg != "" {
			segRun = prec.Seg
		}
		if err := s.packSegment(ctx, threadID, segRun); err != nil {
			return err
		}
	}
	if !latest {
		return nil
	}
	segRun := runID
	if rec.Seg != "" {
		segRun = rec.Seg
	}
	return s.packSegment(ctx, threadID, segRun)
}

// packSegment stores segRun's segment packed, only if its bytes did not change since they were
// read; one changed in the instant between that check and the write (a run of the thread
// that ended meanwhile) loses a delta, which that run's pointer's checksum detects: its branch
// is rebuilt from the events, never served wrong.
func (s *Service) packSegment(ctx context.Context, threadID, segRun string) error {
	raw, err := s.store.Checkpoint(ctx, threadID, segRun)
	if err != nil || bytes.HasPrefix(raw, packedRecordMagic) {
		return ignoreNotFound(err)
	}
	seg, err := decodeRecord(raw, false)
	if err != nil || seg.Packed || seg.Base == nil {
		return nil // damaged (rebuilt when read), packed already, or not a segment
	}
	seg.Packed = true
	packed := encodeRecord(seg)
	if now, err := s.store.Checkpoint(ctx, threadID, segRun); err != nil || !bytes.Equal(now, raw) {
		return ignoreNotFound(err)
	}
	if err := s.store.PutCheckpoint(ctx, threadID, segRun, packed); err != nil {
		return err
	}
	s.log.Debug("packed a checkpoint segment at rest", "thread_id", threadID, "run_id", segRun, "bytes", len(raw), "packed_bytes", len(packed))
	return nil
}

func ignoreNotFound(err error) error {
	if errors.Is(err, recorder.ErrNotFound) || errors.Is(err, recorder.ErrRunNotFound) || errors.Is(err, recorder.ErrThreadNotFound) {
		return nil
	}
	return err
}

// deltas counts the STATE_DELTA and ACTIVITY_DELTA events.
func deltas(events []compact.Event) int {
	n := 0
	for _, e := range events {
		if e.Type == agui.StateDelta || e.Type == agui.ActivityDelta {
			n++
		}
	}
	return n
}

// RestSweeper compacts the ended runs of every thread of a store once they are older than
// After (AGUI_COMPACT_AFTER). Create it with NewRestSweeper and call Run in a goroutine the
// caller owns; Run returns when its context is done.
//
// Several replicas may sweep the same store: a run is replaced only if it still has the epoch
// it was read with, so of two replicas compacting it one wins and the other gets a conflict
// (counted, harmless), and readers see the raw or the merged events, never a mix.
type RestSweeper struct {
	s       *Service
	scan    recorder.ThreadScanner
	after   time.Duration
	every   time.Duration
	onRun   func(RestResult)
	mu      sync.Mutex
	kept    map[string]bool // runs (thread, run, epoch) kept raw: not examined again
	maxKept int
	// settled holds the threads whose every run was compacted or kept raw at a sweep, as
	// they were then: a later sweep reads their runs again only when that changed.
	settled map[string]threadMark
}

// threadMark is what a sweep compares to know a settled thread did not change: a new run
// changes its latest run and count, a deleted run its count, a thread deleted and created
// again its creation time.
type threadMark struct {
	created int64 // Unix ms
	latest  string
	count   int
}

// NewRestSweeper returns a sweeper of s's store (which must implement recorder.ThreadScanner
// and recorder.RunCompactor) for runs ended more than after ago, sweeping every every (0:
// after/4, at least a second and at most an hour). onRun, if not nil, is called with each
// run's result (for metrics).
func NewRestSweeper(s *Service, after, every time.Duration, onRun func(RestResult)) (*RestSweeper, error) {
	scan, ok := s.store.(recorder.ThreadScanner)
	if _, ok2 := s.store.(recorder.RunCompactor); !ok || !ok2 {
		return nil, fmt.Errorf("store %T cannot compact at rest", s.store)
	}
	if after <= 0 {
		return nil, errors.New("thread: compaction at rest needs a positive age")
	}
	if every <= 0 {
		every = min(max(after/4, time.Second), time.Hour)
	}
	return &RestSweeper{s: s, scan: scan, after: after, every: every, onRun: onRun, kept: map[string]bool{}, maxKept: 1 << 16,
		settled: map[string]threadMark{}}, nil
}

// Run sweeps at once, then every interval, until ctx is done.
func (w *RestSweeper) Run(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		if err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
			w.s.log.Warn("compaction at rest: sweep ended early", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep compacts every run that ended more than After ago, once. A thread whose runs were
// all settled (compacted or kept raw) at an earlier sweep costs one read of its metadata
// (recorder.Store.Thread) while it has the same runs; its runs are read again once it has
// another.
func (w *RestSweeper) Sweep(ctx context.Context) error {
	cutoff := time.Now().Add(-w.after)
	return w.scan.ScanThreads(ctx, func(threadID string) error {
		th, err := w.s.store.Thread(ctx, threadID)
		if err != nil {
			if errors.Is(err, recorder.ErrThreadNotFound) {
				w.mu.Lock()
				delete(w.settled, threadID)
				w.mu.Unlock()
				return nil // deleted meanwhile
			}
			return err
		}
		mark := threadMark{created: th.CreatedAt.UnixMilli(), latest: th.LatestRunID, count: th.RunCount}
		w.mu.Lock()
		was, ok := w.settled[threadID]
		w.mu.Unlock()
		if ok && was == mark {
			return nil
		}
		runs, err := w.s.store.Runs(ctx, threadID)
		if err != nil {
			if errors.Is(err, recorder.ErrThreadNotFound) {
				return nil // deleted meanwhile
			}
			return err
		}
		settled := true
		for _, r := range runs {
			if !r.CompactedAt.IsZero() {
				continue
			}
			if r.Status == recorder.StatusRunning || !r.UpdatedAt.Before(cutoff) {
				settled = false
				continue
			}
			key := threadID + "\x00" + r.RunID + "\x00" + r.Epoch
			w.mu.Lock()
			skip := w.kept[key]
			w.mu.Unlock()
			if skip {
				continue
			}
			var res RestResult
			err := panics.Call(panics.Sweep, w.s.log, func() (err error) {
				panics.Probe(panics.Sweep, threadID)
				res, err = w.s.CompactRun(ctx, threadID, r.RunID)
				if err == nil {
					err = w.s.packSegments(ctx, threadID, r.RunID, r.ParentRunID, r.RunID == th.LatestRunID)
				}
				return err
			}, slog.String("thread_id", threadID), slog.String("run_id", r.RunID))
			if errors.Is(err, panics.ErrPanicked) {
				// Logged and counted; the run stays raw (as it was) and is not tried again
				// by this process, which would panic at every sweep.
				res, err = RestKept, nil
			}
			if err != nil {
				settled = false
				if ctx.Err() != nil {
					return ctx.Err()
				}
				w.s.log.LogAttrs(ctx, slog.LevelWarn, "compaction at rest failed for a run", slog.String("thread_id", threadID),
					slog.String("run_id", r.RunID), slog.Any("err", err))
				continue
			}
			if res == RestKept {
				w.mu.Lock()
				if len(w.kept) >= w.maxKept {
					clear(w.kept)
				}
				w.kept[key] = true
				w.mu.Unlock()
			}
			if w.onRun != nil {
				w.onRun(res)
			}
		}
		w.mu.Lock()
		if !settled {
			delete(w.settled, threadID)
		} else {
			if len(w.settled) >= w.maxKept {
				clear(w.settled)
			}
			w.settled[threadID] = mark
		}
		w.mu.Unlock()
		return nil
	})
}
