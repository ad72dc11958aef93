package thread

import (
	"context"
	"encoding/json"
	"fmt"

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
// conversation. It reads the thread's runs in one call, then the branch as Branch does (one
// checkpoint read when runID has one).
func (s *Service) BranchInput(ctx context.Context, threadID, runID string) (b hydrate.Branch, ended bool, err error) {
	if runID == "" {
		return hydrate.Branch{}, true, nil
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
	events, err := s.Branch(ctx, threadID, runID)
	if err != nil {
		return hydrate.Branch{}, false, err
	}
	messages, state, err := compact.Replay(events)
	if err != nil {
		return hydrate.Branch{}, false, fmt.Errorf("%w: replaying the branch through run %q: %v", problem.ErrHistoryIncomplete, runID, err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(messages, &list); err != nil {
		return hydrate.Branch{}, false, fmt.Errorf("replaying the branch through run %q: messages: %w", runID, err)
	}
	return hydrate.Branch{Messages: list, State: state}, true, nil
}
