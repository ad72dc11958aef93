package thread

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/hydrate"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// BranchInput returns what the branch through runID holds, for hydration (package hydrate):
// the messages and state a client has after replaying it. ended is false (and the branch
// empty) while runID is still running (concurrent runs, Config.AllowConcurrentRuns): its
// conversation is not settled yet, and the caller forwards the request as it is. It refuses with
// problem.ErrHistoryIncomplete when an event of the branch is missing from the store (a gap or
// a trimmed head in one of its runs): the agent must never get a silently shortened
// conversation.
//
// epoch, when not "", is runID's epoch as the caller knows it (Run.ParentEpoch of the run
// being started): when this process built that run's branch and knows it whole (a thread's
// turns on one replica), only runID's own record is read, to see it still has no event
// missing; the older runs' were when the branch was known whole. Otherwise it reads the
// thread's runs in one call, then the branch as Branch does (one checkpoint read when runID
// has one), and remembers that branch whole once the runs' records show no event missing. A
// thread's turns on one replica thus cost one small read, not a read of every run and of the
// whole branch.
func (s *Service) BranchInput(ctx context.Context, threadID, runID, epoch string) (b hydrate.Branch, ended bool, err error) {
	if runID == "" {
		return hydrate.Branch{}, true, nil
	}
	if epoch != "" && s.recent.has(threadID, runID) {
		r, err := s.store.Run(ctx, threadID, runID)
		if err != nil {
			return hydrate.Branch{}, false, fmt.Errorf("run %q of the branch: %w", runID, err)
		}
		if lb := s.recent.get(threadID, runID, epoch); lb != nil && lb.whole.Load() && r.Epoch == epoch &&
			r.Status != recorder.StatusRunning && r.Complete(0) {
			return branchInput(runID, slices.Clip(lb.events), lb.flat.Msgs)
		}
	}
	runs, err := s.store.Runs(ctx, threadID)
	if err != nil {
		return hydrate.Branch{}, false, err
	}
	byID := make(map[string]recorder.Run, len(runs))
	for _, r := range runs {
		byID[r.RunID] = r
	}
	var last recorder.Run
	for id, n := runID, 0; id != ""; n++ {
		r, ok := byID[id]
		if !ok {
			return hydrate.Branch{}, false, fmt.Errorf("run %q of the branch: %w", id, recorder.ErrRunNotFound)
		}
		if n == 0 {
			last = r
		}
		if !r.Complete(0) {
			return hydrate.Branch{}, false, fmt.Errorf("%w: run %q of the branch has events missing in the store (gaps %v, first stored event %d)",
				problem.ErrHistoryIncomplete, r.RunID, r.Gaps, r.FirstSeq)
		}
		if n > maxLineageRuns {
			return hydrate.Branch{}, false, fmt.Errorf("lineage of run %q is longer than %d runs", runID, maxLineageRuns)
		}
		id = r.ParentRunID
	}
	if last.Status == recorder.StatusRunning {
		return hydrate.Branch{}, false, nil
	}
	lb, err := s.branch(ctx, threadID, runID)
	if err != nil {
		return hydrate.Branch{}, false, err
	}
	// Gaps are only ever added to a run's record, and a record made again after a loss
	// records one: no gap now means none when the branch's events were read. The branch this
	// process keeps for the run (built at its end, the same branch) is known whole too.
	lb.whole.Store(true)
	if rb := s.recent.get(threadID, runID, last.Epoch); rb != nil {
		rb.whole.Store(true)
	}
	return branchInput(runID, slices.Clip(lb.events), lb.flat.Msgs)
}

// branchInput turns a branch's compacted events into what hydration adds to a request: read from
// its snapshots when it has the shape Compact gives an ended branch (snapshotInput), else
// replayed; msgs, when not nil, are the messages of its last MESSAGES_SNAPSHOT, split
// (flatBranch.Msgs).
func branchInput(runID string, events []compact.Event, msgs []json.RawMessage) (hydrate.Branch, bool, error) {
	if b, ok := snapshotInput(events, msgs); ok {
		return b, true, nil
	}
	return replayedInput(runID, events)
}

// stateSnapshotPrefix is how a STATE_SNAPSHOT of Compact's starts, up to its state.
const stateSnapshotPrefix = `{"type":"STATE_SNAPSHOT","snapshot":`

// snapshotInput is branchInput without a replay (msgs as branchInput's), for the shape
// Compact gives an ended branch: its last MESSAGES_SNAPSHOT, as Compact renders it, followed
// only by events that change no message (quietAfterSnapshot), so a client holds that
// snapshot's messages; and its state the last STATE_SNAPSHOT's (Compact renders it as Replay
// does), with no STATE_DELTA after it, or no state event at all (the state {}). ok is false
// for any other branch, which is then replayed. A replay parses every message of the branch
// at every run start of a hydrated thread; this reads the two snapshots as they are
// (TestBranchFoldProperty checks that both answer the same).
func snapshotInput(events []compact.Event, msgs []json.RawMessage) (b hydrate.Branch, ok bool) {
	snap, lastState, delta := -1, -1, false
	for i, e := range events {
		switch e.Type {
		case agui.MessagesSnapshot:
			snap = i
		case agui.StateSnapshot:
			lastState, delta = i, false
		case agui.StateDelta:
			delta = true
		}
	}
	if snap < 0 || delta {
		return hydrate.Branch{}, false
	}
	for _, e := range events[snap+1:] {
		if !quietAfterSnapshot[e.Type] {
			return hydrate.Branch{}, false
		}
	}
	list := msgs
	if list == nil {
		raw := events[snap].Raw
		if !bytes.HasPrefix(raw, []byte(snapshotPrefix)) || !bytes.HasSuffix(raw, []byte("]}")) {
			return hydrate.Branch{}, false
		}
		if list, ok = splitArray(raw[len(snapshotPrefix)-1 : len(raw)-1]); !ok || !trimmed(list) {
			return hydrate.Branch{}, false
		}
	}
	state := json.RawMessage(`{}`)
	if lastState >= 0 {
		st := events[lastState].Raw
		if !bytes.HasPrefix(st, []byte(stateSnapshotPrefix)) || !bytes.HasSuffix(st, []byte("}")) {
			return hydrate.Branch{}, false
		}
		state = st[len(stateSnapshotPrefix) : len(st)-1]
	}
	return hydrate.Branch{Messages: list, State: state, Valid: true}, true
}

// replayedInput is branchInput by a replay of the branch's events, for any branch.
func replayedInput(runID string, events []compact.Event) (hydrate.Branch, bool, error) {
	messages, state, err := compact.Replay(events)
	if err != nil {
		return hydrate.Branch{}, false, fmt.Errorf("%w: replaying the branch through run %q: %v", problem.ErrHistoryIncomplete, runID, err)
	}
	list, ok := splitArray(messages)
	if !ok || !trimmed(list) {
		// (Replay renders compact JSON; this is for one that would not.)
		list = nil
		if err := json.Unmarshal(messages, &list); err != nil {
			return hydrate.Branch{}, false, fmt.Errorf("replaying the branch through run %q: messages: %w", runID, err)
		}
	}
	return hydrate.Branch{Messages: list, State: state, Valid: true}, true, nil
}

// trimmed reports whether no element of list starts or ends with JSON whitespace: splitArray's
// elements are then the array's values exactly.
func trimmed(list []json.RawMessage) bool {
	for _, m := range list {
		if len(m) == 0 || isJSONSpace(m[0]) || isJSONSpace(m[len(m)-1]) {
			return false
		}
	}
	return true
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
