package thread

import (
	"context"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// Threads returns one page of owner's threads on this route, most recently active first
// (recorder.Store.ListThreads). q's Owner and Route are set here, never taken from the caller.
// Each summary's ID is the store key (recorder.ThreadIDOf gives the id).
func (s *Service) Threads(ctx context.Context, owner string, q recorder.ThreadQuery) (recorder.ThreadPage, error) {
	if err := s.Caller(owner); err != nil {
		return recorder.ThreadPage{}, err
	}
	q.Owner, q.Route = owner, s.cfg.Route
	page, err := s.store.ListThreads(ctx, q)
	return page, problem.StoreErr(err)
}

// Delete removes owner's thread threadID with all its runs (recorder.Store.DeleteThread), in
// owner's namespace: another owner's thread of the same id is not touched, the answer is
// recorder.ErrThreadNotFound as for an unused id. A thread with a running run answers
// recorder.ErrThreadBusy (stop the run first).
func (s *Service) Delete(ctx context.Context, owner, threadID string) error {
	if err := agui.ValidateID("threadId", threadID); err != nil {
		return err
	}
	if err := s.Caller(owner); err != nil {
		return err
	}
	return problem.StoreErr(s.store.DeleteThread(ctx, s.Key(owner, threadID), owner, s.cfg.Route))
}
