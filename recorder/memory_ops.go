package recorder

// The MemoryStore's operations for operators: the backup scan (ThreadScanner), its sizes
// (StatsReporter) and compaction at rest (RunCompactor).

import (
	"context"
	"fmt"
	"slices"
)

// ScanThreads implements ThreadScanner. The ids are copied under the lock first (the memory
// store holds every thread in memory anyway).
func (m *MemoryStore) ScanThreads(ctx context.Context, fn func(threadID string) error) error {
	m.mu.Lock()
	if err := m.check(); err != nil {
		m.mu.Unlock()
		return err
	}
	now := m.now()
	ids := make([]string, 0, len(m.threads))
	for id := range m.threads {
		if m.thread(id, now) != nil {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}

// StoreStats implements StatsReporter.
func (m *MemoryStore) StoreStats(ctx context.Context) (StoreStats, error) {
	st := m.Stats()
	return StoreStats{Kind: "memory", StoredBytes: st.Bytes, CheckpointBytes: st.CheckpointBytes, Evictions: st.Evictions,
		Threads: int64(st.Threads)}, nil
}

// ReplaceRunEvents implements RunCompactor.
func (m *MemoryStore) ReplaceRunEvents(ctx context.Context, threadID, runID, prevEpoch, epoch string, events []Event) error {
	if !ValidEpoch(epoch) {
		return fmt.Errorf("run %q: epoch %q: %w", runID, epoch, ErrInvalidEpoch)
	}
	r, now, err := m.lockRun(threadID, runID)
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	if r.run.Epoch != prevEpoch || r.run.Status == StatusRunning {
		return fmt.Errorf("compacting run %q in thread %q (epoch %s, status %s): %w", runID, threadID, r.run.Epoch, r.run.Status, ErrConflict)
	}
	t := m.threads[threadID]
	for _, ev := range r.events {
		m.charge(t, r, -eventSize(ev))
	}
	out := make([]Event, len(events))
	for i, ev := range events {
		out[i] = Event{Seq: int64(i + 1), Type: ev.Type, Frame: slices.Clone(ev.Frame)}
		m.charge(t, r, eventSize(ev))
	}
	r.events, r.trimmed = out, 0
	r.run.Epoch, r.run.LastSeq, r.run.Gaps, r.run.CompactedAt = epoch, int64(len(out)), nil, now
	r.wake()
	return nil
}
