package recorder

import (
	"container/heap"
	"context"
	"fmt"
)

// ListThreads implements Store. The memory store keeps no separate index: it scans the
// threads, which costs O(threads) time per page and O(page) memory (fine for the
// zero-configuration store; the Redis store keeps a sorted set per owner and route).
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
	// Keep only the limit+1 first entries in listing order (a bounded heap whose root is the
	// last kept): a page costs O(threads · log limit) time and O(limit) memory, so a bulk
	// export, which reads every page, does not copy and sort the whole store for each.
	sel := pageHeap{}
	for id := range m.threads {
		t := m.thread(id, now)
		if t == nil || t.owner != q.Owner || t.route != q.Route || len(t.runs) == 0 {
			continue
		}
		ms := t.active.UnixMilli()
		if !q.listed(ms, id, after, hasCursor) {
			continue
		}
		if len(sel) > limit && sel.pos(0).before(ms, id) {
			continue // listed after every kept entry
		}
		latest := t.runs[len(t.runs)-1].run
		e := ThreadSummary{Thread: t.info(id), ActiveAt: t.active, UpdatedAt: latest.UpdatedAt, LatestStatus: latest.Status}
		if len(sel) > limit {
			heap.Pop(&sel)
		}
		heap.Push(&sel, e)
	}
	out := []ThreadSummary(sel)
	sortThreads(out)
	return cutPage(out, limit), nil
}

// pageHeap is a heap of ThreadSummary whose root is the entry listed last (the listing is
// newest activity first, then id descending).
type pageHeap []ThreadSummary

func (h pageHeap) pos(i int) pagePos { return pagePos{ms: h[i].ActiveAt.UnixMilli(), id: h[i].ID} }
func (h pageHeap) Len() int          { return len(h) }

// Less reports whether i is listed after j.
func (h pageHeap) Less(i, j int) bool { return h.pos(j).before(h[i].ActiveAt.UnixMilli(), h[i].ID) }
func (h pageHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pageHeap) Push(x any)        { *h = append(*h, x.(ThreadSummary)) }
func (h *pageHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
