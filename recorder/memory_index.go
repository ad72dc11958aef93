package recorder

import (
	"context"
	"fmt"
)

// ListThreads implements Store. The memory store keeps no separate index: it scans the
// threads, which costs O(threads) per page (fine for the zero-configuration store; the Redis
// store keeps a sorted set per owner and route).
func (m *MemoryStore) ListThreads(ctx context.Context, q ThreadQuery) (ThreadPage, error) {
	after, hasCursor, err := decodePageCursor(q.Cursor)
	if err != nil {
		return ThreadPage{}, err
	}
	limit := q.pageLimit()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(); err != nil {
		return ThreadPage{}, err
	}
	now := m.now()
	var out []ThreadSummary
	for id := range m.threads {
		t := m.thread(id, now)
		if t == nil || t.owner != q.Owner || t.route != q.Route || len(t.runs) == 0 {
			continue
		}
		ms := t.active.UnixMilli()
		if !q.listed(ms, id, after, hasCursor) {
			continue
		}
		latest := t.runs[len(t.runs)-1].run
		out = append(out, ThreadSummary{
			Thread: t.info(id), ActiveAt: t.active, UpdatedAt: latest.UpdatedAt, LatestStatus: latest.Status,
		})
	}
	sortThreads(out)
	return cutPage(out, limit), nil
}

// DeleteThread implements Store. Followers of the thread's runs wake and find them gone.
func (m *MemoryStore) DeleteThread(ctx context.Context, threadID, owner, route string) error {
	if err := validateIDs(threadID, nil); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(); err != nil {
		return err
	}
	t := m.thread(threadID, m.now())
	if t == nil || t.owner != owner || t.route != route {
		return fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)
	}
	for _, r := range t.runs {
		if r.run.Status == StatusRunning {
			return fmt.Errorf("thread %q, run %q: %w", threadID, r.run.RunID, ErrThreadBusy)
		}
	}
	m.drop(threadID, t)
	return nil
}
