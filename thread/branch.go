package thread

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// maxLineageRuns bounds the walk up a run's ancestors.
const maxLineageRuns = 100000

// Lineage returns the runs from the thread's root to runID, following parentRunId.
func (s *Service) Lineage(ctx context.Context, threadID, runID string) ([]recorder.Run, error) {
	return s.LineageFrom(ctx, threadID, runID, "")
}

// LineageFrom is Lineage starting at the ancestor from instead of the root when runID's
// lineage holds it (a run of the lineage read from the store per step: a resume whose cursor
// is in the head run reads one; past batchChainRuns steps, every run's record at once).
func (s *Service) LineageFrom(ctx context.Context, threadID, runID, from string) ([]recorder.Run, error) {
	var chain []recorder.Run
	var byID map[string]recorder.Run // a long lineage's run records, read at once
	for id := runID; id != "" && (len(chain) == 0 || chain[len(chain)-1].RunID != from); {
		if len(chain) == maxLineageRuns {
			return nil, fmt.Errorf("lineage of run %q is longer than %d runs", runID, maxLineageRuns)
		}
		if len(chain) == batchChainRuns && byID == nil {
			// A long walk: every run's record in one read (two round trips on Redis) instead
			// of one read per run.
			runs, err := s.store.Runs(ctx, threadID)
			if err != nil {
				return nil, fmt.Errorf("reading the runs of thread %q: %w", threadID, err)
			}
			byID = make(map[string]recorder.Run, len(runs))
			for _, r := range runs {
				byID[r.RunID] = r
			}
		}
		r, ok := byID[id]
		if !ok {
			var err error
			if r, err = s.store.Run(ctx, threadID, id); err != nil {
				return nil, fmt.Errorf("reading run %q: %w", id, err)
			}
		}
		chain = append(chain, r)
		id = r.ParentRunID
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

// RunEvents returns the run's stored events with afterSeq < seq <= upTo (upTo < 0: all),
// parsed. Frames whose data is not a JSON event are skipped: the official client would fail
// on them (they are kept in the store and in exports).
func (s *Service) RunEvents(ctx context.Context, threadID, runID string, afterSeq, upTo int64) ([]compact.Event, int64, error) {
	recs, err := s.store.Events(ctx, threadID, runID, afterSeq, 0)
	if err != nil {
		return nil, afterSeq, fmt.Errorf("reading events of run %q: %w", runID, err)
	}
	events, n := ParseRecords(recs, upTo)
	if n == 0 {
		return events, afterSeq, nil
	}
	return events, recs[n-1].Seq, nil
}

// ParseRecords parses the leading records with seq <= upTo (upTo < 0: all) into events and
// returns them and how many records that was. Frames whose data is not a JSON event are
// skipped: the official client would fail on them (they are kept in the store and exports).
func ParseRecords(recs []recorder.Event, upTo int64) ([]compact.Event, int) {
	n := len(recs)
	if upTo >= 0 {
		for i, rec := range recs {
			if rec.Seq > upTo {
				n = i
				break
			}
		}
	}
	events := make([]compact.Event, 0, n)
	for _, rec := range recs[:n] {
		if ev, ok := parseRecord(rec); ok {
			events = append(events, ev)
		}
	}
	return withoutContinuedFinishes(events), n
}

// withoutContinuedFinishes leaves out of a run's events each RUN_FINISHED that the run goes
// on after (an event follows that is neither RUN_STARTED nor RUN_ERROR): a response kept
// whole after its RUN_FINISHED (TanStack AI's server-tool turn, proxy.AfterTerminalKeep) is
// one run to the thread, whose messages are what the agent's own client shows, and the
// official client's rules (which compaction follows) would refuse what comes after a
// RUN_FINISHED. Its recorded events keep it: the run attach, resumes from an event id and
// exports send it as the agent did. events is changed in place.
func withoutContinuedFinishes(events []compact.Event) []compact.Event {
	out := events[:0]
	for i, e := range events {
		if e.Type == agui.RunFinished && i+1 < len(events) {
			if next := events[i+1].Type; next != agui.RunStarted && next != agui.RunError {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// parseRecord decodes a recorded frame into an event; false for a frame that is not a JSON
// event.
func parseRecord(rec recorder.Event) (compact.Event, bool) {
	if rec.Type == "" {
		return compact.Event{}, false
	}
	data, err := FrameData(rec.Frame)
	if err != nil {
		return compact.Event{}, false
	}
	ev, err := compact.ParseEvent(data)
	return ev, err == nil
}

// FrameData returns the data of one recorded SSE frame. The result may alias frame (frames
// from a store are never modified).
func FrameData(frame []byte) ([]byte, error) {
	// Fast path: the proxy's own LF framing, "data: <one line>\n" followed by other fields.
	if bytes.HasPrefix(frame, []byte("data: ")) && bytes.IndexByte(frame, '\r') < 0 {
		if nl := bytes.IndexByte(frame, '\n'); nl > 0 && !bytes.Contains(frame[nl:], []byte("\ndata")) {
			return frame[6:nl], nil
		}
	}
	f, err := sse.NewReader(bytes.NewReader(frame), sse.Limits{MaxLineBytes: len(frame) + 1, MaxFrameBytes: len(frame) + 1}).Next()
	if err != nil {
		return nil, err
	}
	if !f.HasData {
		return nil, errors.New("recorded frame has no data")
	}
	return bytes.Clone(f.Data), nil
}

// Branch returns the compacted events of the branch from the root through runID, which
// must have ended: from runID's checkpoint, or computed from the nearest ancestor checkpoint
// (walking up only as far as it) and stored for next time. "" returns nothing.
func (s *Service) Branch(ctx context.Context, threadID, runID string) ([]compact.Event, error) {
	b, err := s.branch(ctx, threadID, runID)
	if b == nil || err != nil {
		return nil, err
	}
	return slices.Clip(b.events), nil // shared with concurrent callers: an append copies
}

// flight is one branch being read or built, shared by the callers that ask for it meanwhile
// (a run start and the checkpoint loop both asking for the run that just ended).
type flight struct {
	done chan struct{}
	b    *loadedBranch
	err  error
}

// branch returns the branch through runID; concurrent calls for the same run share one read.
func (s *Service) branch(ctx context.Context, threadID, runID string) (*loadedBranch, error) {
	return s.branchOf(ctx, threadID, runID, nil)
}

// endedRun is a run whose end its caller just had the store record (CheckpointEnded): its
// metadata, and the events it recorded when the caller kept them (nil: read them back).
type endedRun struct {
	run  recorder.Run
	kept *KeptEvents
}

// events returns the run's events parsed from kept when it holds exactly the run's events
// 1..LastSeq, and the buffer their bytes are in; ok is false otherwise (they are read back
// from the store then).
func (e *endedRun) events() (events []compact.Event, buf []byte, ok bool) {
	if e.kept == nil || e.kept.Len() != e.run.LastSeq {
		return nil, nil, false
	}
	events, buf = e.kept.events()
	return events, buf, true
}

// branchOf is branch; ended, when not nil, is runID as its caller knows it (see
// CheckpointEnded).
func (s *Service) branchOf(ctx context.Context, threadID, runID string, ended *endedRun) (*loadedBranch, error) {
	if runID == "" {
		return nil, nil
	}
	k := runKey{threadID, runID}
	s.mu.Lock()
	if f, ok := s.flights[k]; ok {
		s.mu.Unlock()
		select {
		case <-f.done:
			if f.err != nil && ctx.Err() == nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
				return s.readBranch(ctx, threadID, runID, true, ended) // the first caller gave up; this one has not
			}
			return f.b, f.err
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	f := &flight{done: make(chan struct{})}
	s.flights[k] = f
	s.mu.Unlock()
	f.b, f.err = s.readBranch(ctx, threadID, runID, true, ended)
	s.mu.Lock()
	delete(s.flights, k)
	s.mu.Unlock()
	close(f.done)
	return f.b, f.err
}

// peekBranch is branch for a reader that must not wait for checkpoint writes (a run start): a
// branch being built meanwhile is shared, else it is computed without storing checkpoints
// (the checkpoint loop stores them).
func (s *Service) peekBranch(ctx context.Context, threadID, runID string) (*loadedBranch, error) {
	s.mu.Lock()
	f := s.flights[runKey{threadID, runID}]
	s.mu.Unlock()
	if f != nil {
		select {
		case <-f.done:
			if f.err == nil {
				return f.b, nil
			}
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	return s.readBranch(ctx, threadID, runID, false, nil)
}

// readBranch reads the branch through runID, building (and with store, storing) the
// checkpoints missing on the way from its nearest ancestor with one.
func (s *Service) readBranch(ctx context.Context, threadID, runID string, store bool, ended *endedRun) (*loadedBranch, error) {
	// The run's own checkpoint first: usually one or two reads; else up the lineage to the
	// nearest ancestor with one. A run whose end its caller just recorded (ended) has no
	// checkpoint yet, and its metadata is the caller's: neither is read.
	var chain []recorder.Run
	var base *loadedBranch
	var byID map[string]recorder.Run // a long chain's run records, read at once
	for id := runID; id != ""; {
		if ended != nil && id == runID {
			chain = append(chain, ended.run)
			id = ended.run.ParentRunID
			continue
		}
		if id != runID && s.recent.has(threadID, id) {
			// An ancestor built here a moment ago (usually the parent of the run that just
			// ended), known to be the same run by its epoch: the one the ended run's creation
			// answered for its parent (Run.ParentEpoch, no read), else one small read instead
			// of its segment. (The run asked for itself is always read from its checkpoint: a
			// damaged one is then noticed and stored again.)
			var b *loadedBranch
			if ended != nil && len(chain) == 1 && ended.run.ParentEpoch != "" {
				b = s.recent.get(threadID, id, ended.run.ParentEpoch)
			}
			if b == nil {
				r, err := s.store.Run(ctx, threadID, id)
				if err != nil {
					return nil, fmt.Errorf("reading run %q: %w", id, err)
				}
				if r.Status != recorder.StatusRunning {
					b = s.recent.get(threadID, id, r.Epoch)
				}
			}
			if b != nil {
				base = b
				break
			}
		}
		b, err := s.loadBranch(ctx, threadID, id)
		if err == nil {
			base = b
			break
		}
		if !errors.Is(err, recorder.ErrNotFound) {
			if !errors.Is(err, errCorruptCheckpoint) {
				return nil, err
			}
			s.log.Warn("rebuilding an unreadable checkpoint from the events", "thread_id", threadID, "run_id", id, "err", err)
		}
		if len(chain) == maxLineageRuns {
			return nil, fmt.Errorf("lineage of run %q is longer than %d runs", runID, maxLineageRuns)
		}
		if len(chain) == batchChainRuns && byID == nil {
			// A long walk: every run's record in one read (two round trips on Redis) instead
			// of one read per run.
			runs, err := s.store.Runs(ctx, threadID)
			if err != nil {
				return nil, fmt.Errorf("reading the runs of thread %q: %w", threadID, err)
			}
			byID = make(map[string]recorder.Run, len(runs))
			for _, r := range runs {
				byID[r.RunID] = r
			}
		}
		r, ok := byID[id]
		if !ok {
			var err error
			if r, err = s.store.Run(ctx, threadID, id); err != nil {
				return nil, fmt.Errorf("reading run %q: %w", id, err)
			}
		}
		chain = append(chain, r)
		id = r.ParentRunID
	}
	slices.Reverse(chain)
	parentRun := ""
	if len(chain) > 0 {
		parentRun = chain[0].ParentRunID
	}
	// A chain longer than batchChainRuns is folded in one pass: one Compact (or one Feed of
	// the base's fold) over all its runs' events, and one checkpoint stored, the last run's.
	// Building and storing each run's branch in turn costs the whole branch per run: the first
	// read of an imported 5,000-run chain (no checkpoints) was quadratic, 6.8 s. A shorter
	// chain (a run's end: its parent's branch at hand; a few runs whose checkpoints were lost
	// or damaged) stores each run's checkpoint, a delta in its parent's segment, as before.
	batch := len(chain) > batchChainRuns
	var pending []compact.Event // batch: the events of the chain's runs before the current one
	folded := 0                 // batch: the events folded into base by this read
	whole := base == nil || base.whole.Load()
	running := false
	for i, r := range chain {
		var evs []compact.Event
		var keptBuf []byte
		kept := false
		if ended != nil && r.RunID == runID {
			evs, keptBuf, kept = ended.events()
		}
		// The run is whole when its events 1..LastSeq were all kept, or read back from a
		// record without gaps (the ended run's own record is not read: its gaps are unknown).
		runWhole := kept
		if !kept {
			var err error
			if evs, _, err = s.RunEvents(ctx, threadID, r.RunID, 0, -1); err != nil {
				return nil, err
			}
			runWhole = (ended == nil || r.RunID != runID) && r.Complete(0)
		}
		whole = whole && runWhole
		running = (batch && running) || r.Status == recorder.StatusRunning
		if batch && i < len(chain)-1 {
			pending = append(pending, evs...)
			parentRun = r.RunID
			// A checkpoint each time the pending events are as many as those folded before
			// them: the branch is built and stored O(log runs) times, O(runs) in all, and a
			// read that runs out of time (a chain of 100,000 runs on Redis) leaves the work
			// done stored, so the next read goes on from there instead of failing the same way.
			if store && !running && len(pending) >= max(folded, batchCheckpointEvents) {
				events, fold := s.extend(base, pending)
				folded += len(pending)
				pending = nil
				base = s.storeCheckpoint(ctx, threadID, r.RunID, events, fold, nil, "")
				base.whole.Store(whole)
				s.recent.put(threadID, r.RunID, r.Epoch, base)
			}
			continue
		}
		if len(pending) > 0 {
			evs = append(pending, evs...)
		}
		if running || !store {
			var events []compact.Event
			if base != nil {
				events = slices.Clip(base.events)
			}
			events = s.Compact(append(events, evs...))
			unalias(events, keptBuf) // the branch may be kept in memory; the run's events need not be
			base = &loadedBranch{events: events, flat: flatten(events)}
			base.whole.Store(whole)
		} else {
			// The branch, and its fold when one can be kept, may stay in memory; the bytes of
			// all the run's events need not. A fold keeps slices of what it was fed, so then
			// each of the run's events gets bytes of its own; otherwise only the events the
			// branch keeps do.
			keepFold := mayKeepFold(base, evs)
			if keepFold {
				unalias(evs, keptBuf)
			}
			events, fold := s.extend(base, evs)
			if !keepFold {
				unalias(events, keptBuf)
			}
			parent := base
			if len(pending) > 0 {
				// The branch extends an ancestor, not the parent: stored as a segment's base.
				parent = nil
			}
			base = s.storeCheckpoint(ctx, threadID, r.RunID, events, fold, parent, parentRun)
			base.whole.Store(whole)
			if !keepFold {
				base.fold.Store(nil)
			}
			s.recent.put(threadID, r.RunID, r.Epoch, base)
		}
		parentRun = r.RunID
	}
	return base, nil
}

// batchChainRuns is the longest chain of runs without a readable checkpoint whose branches
// readBranch builds and stores run by run (see there).
const batchChainRuns = 8

// batchCheckpointEvents is the fewest events a long chain's read folds between two of the
// checkpoints it stores on the way (see readBranch).
const batchCheckpointEvents = 4096

// extend returns the branch of a run whose parent's branch is base (nil for a first run) and
// whose events are evs, with the fold that produced it (nil when there is none to keep). When
// base still has the fold it was built with (the parent's checkpoint was built here, and no
// other child took it), only evs are folded: a run's end then costs what the run and the
// branch's output hold, not a fold of the whole thread. Otherwise (another replica built the
// parent's branch, the process restarted, a second child of the same parent) the branch is
// compacted whole, as Compact does, and its fold kept for the next run. The two agree: a
// Fold's output is Compact's over everything it was fed (compact.Fold).
func (s *Service) extend(base *loadedBranch, evs []compact.Event) ([]compact.Event, *compact.Fold) {
	if base != nil {
		if f := base.fold.Swap(nil); f != nil {
			err := f.Feed(evs)
			var events []compact.Event
			if err == nil {
				events, err = f.Events()
			}
			if err == nil {
				s.branchesFolded.Add(1)
				return events, f
			}
			// The run holds an event the client rejects, or passes a limit: Compact's rules
			// (events left out, or the branch served raw) apply to the whole branch.
		}
	}
	var events []compact.Event
	if base != nil {
		events = slices.Clip(base.events)
	}
	s.branchesCompacted.Add(1)
	return s.compactFold(append(events, evs...))
}

// Compact compacts events with compact.Readable: events the official client would reject (an
// orphan, an event after a run's terminal event, a bad patch) are left out and a CUSTOM
// agui-proxy.events_omitted event says how many, so a thread stays readable whatever bad
// events it holds and its prelude still starts with RUN_STARTED. A stream past one of the
// compaction limits is returned as it is: replaying it raw is then the faithful answer.
func (s *Service) Compact(events []compact.Event) []compact.Event {
	out, _ := s.compactFold(events)
	return out
}

// compactFold is Compact, with the fold whose Events its result is (compact.ReadableFold);
// nil when events were left out or the thread is served raw.
func (s *Service) compactFold(events []compact.Event) ([]compact.Event, *compact.Fold) {
	out, omitted, fold, err := compact.ReadableFold(events, s.cfg.Compact)
	if err != nil {
		s.log.Warn("compaction refused a thread; serving it raw", "err", err)
		return events, nil
	}
	if omitted > 0 {
		s.log.Info("left out events the official client rejects", "omitted", omitted)
	}
	return out, fold
}

// Checkpoint computes and stores the checkpoint of an ended run (the proxy calls it when a
// run ends, so the next prelude or run start reads one checkpoint instead of the whole
// branch).
func (s *Service) Checkpoint(ctx context.Context, threadID, runID string) error {
	_, err := s.Branch(ctx, threadID, runID)
	return err
}

// CheckpointEnded is Checkpoint for a run whose end the caller just had the store record
// (the proxy, after its terminal event was stored and before it is sent): run is its
// metadata as created (thread, run and parent ids, epoch) with the status it ended with and
// its LastSeq. The run has no checkpoint yet and its metadata cannot be newer than the
// caller's, so neither is read; run ids are never reused (a re-sent run id is refused), so no
// other run's checkpoint is skipped. kept, when not nil, is what the caller kept of the
// events it handed the store for the run: when it holds the run's events 1..LastSeq, the
// run's events are not read back either (otherwise they are, as Checkpoint reads them). Only
// the parent's branch is read then, usually from memory: when run carries the parent's epoch
// (Run.ParentEpoch, as StartRun returns it) and this process built that branch, nothing is
// read from the store at all before the checkpoint is written.
func (s *Service) CheckpointEnded(ctx context.Context, run recorder.Run, kept *KeptEvents) error {
	if run.Status == recorder.StatusRunning || run.Status == "" {
		return fmt.Errorf("checkpoint of run %q: the run has not ended (status %q)", run.RunID, run.Status)
	}
	_, err := s.branchOf(ctx, run.ThreadID, run.RunID, &endedRun{run: run, kept: kept})
	return err
}

// MessageIDs returns the ids of the messages a client holds after replaying the branch through
// runID ("" for none): the messages RUN_STARTED.input need not repeat. It reads the branch
// (sharing a build in progress) and stores no checkpoint, so a run start never waits for a
// checkpoint write; KnownMessageIDs answers a run start without reading the branch in the
// usual case.
func (s *Service) MessageIDs(ctx context.Context, threadID, runID string) (map[string]bool, error) {
	if runID == "" {
		return nil, nil
	}
	run, err := s.store.Run(ctx, threadID, runID)
	if err != nil {
		return nil, err
	}
	var events []compact.Event
	if run.Status == recorder.StatusRunning {
		if events, err = s.Branch(ctx, threadID, run.ParentRunID); err != nil {
			return nil, err
		}
		cur, _, err := s.RunEvents(ctx, threadID, runID, 0, -1)
		if err != nil {
			return nil, err
		}
		events = append(events, cur...)
	} else {
		b, err := s.peekBranch(ctx, threadID, runID)
		if err != nil {
			return nil, err
		}
		if b.ids != nil {
			return idSet(b.ids), nil
		}
		ids, err := branchMessageIDs(b.events, b.flat, nil)
		if err != nil {
			return nil, err
		}
		return idSet(ids), nil
	}
	ids, err := orderedMessageIDs(events)
	if err != nil {
		return nil, err
	}
	return idSet(ids), nil
}

func idSet(ids []string) map[string]bool {
	known := make(map[string]bool, len(ids))
	for _, id := range ids {
		known[id] = true
	}
	return known
}

// KnownMessageIDs is MessageIDs for a run start whose request sends messages with the ids sent
// (in order; "" for a message without one). When the request starts with exactly the messages
// the ended run runID's branch holds, in the branch's order (what a client that replayed the
// branch sends), the answer is those ids, learnt from the count and hash in runID's checkpoint
// record: one small read, no replay, whatever the thread's length. Otherwise it is MessageIDs.
// epoch, when not "", is runID's epoch as the caller knows it (Run.ParentEpoch of the run being
// started): when this process built that run's branch a moment ago (a thread's turns on one
// replica), the answer is the branch's ids, and nothing is read.
func (s *Service) KnownMessageIDs(ctx context.Context, threadID, runID, epoch string, sent []string) (map[string]bool, error) {
	if runID == "" {
		return nil, nil
	}
	if epoch != "" {
		if b := s.recent.get(threadID, runID, epoch); b != nil && b.ids != nil {
			// Both answers below are these ids: those sent, when they are the branch's, or
			// the branch's (MessageIDs).
			return idSet(b.ids), nil
		}
	}
	rec, err := s.readRecord(ctx, threadID, runID, true)
	if err == nil && rec.V == checkpointVersion && rec.IDHash != "" {
		ids := make([]string, 0, len(sent))
		for _, id := range sent {
			if id != "" {
				ids = append(ids, id)
			}
		}
		if rec.IDCount <= len(ids) && idsHash(ids[:rec.IDCount]) == rec.IDHash {
			known := make(map[string]bool, rec.IDCount)
			for _, id := range ids[:rec.IDCount] {
				known[id] = true
			}
			return known, nil
		}
	}
	if err != nil && !errors.Is(err, recorder.ErrNotFound) && !errors.Is(err, errCorruptCheckpoint) {
		return nil, err
	}
	return s.MessageIDs(ctx, threadID, runID)
}
