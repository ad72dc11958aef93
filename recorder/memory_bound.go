package recorder

import (
	"cmp"
	"slices"
	"time"
)

// Accounted sizes of the MemoryStore (MemoryConfig.MaxBytes): the bytes of each frame and
// type plus a fixed overhead for the Event and slice slot, and per run for its metadata.
const (
	memEventOverhead = 48
	memRunOverhead   = 512
)

func eventSize(ev Event) int64 { return int64(len(ev.Frame)+len(ev.Type)) + memEventOverhead }

// charge adds n accounted bytes to r (if not nil), its thread and the store. m.mu must be held.
func (m *MemoryStore) charge(t *memThread, r *memRun, n int64) {
	if r != nil {
		r.bytes += n
	}
	t.bytes += n
	m.bytes += n
}

// enforceBound evicts idle threads, least recently written first, while the store is above
// MaxBytes (down to 90% of it); keep (the thread just written) is never evicted. m.mu must be
// held.
func (m *MemoryStore) enforceBound(keep *memThread) {
	if m.cfg.MaxBytes <= 0 || m.bytes <= m.cfg.MaxBytes {
		return
	}
	type cand struct {
		id      string
		t       *memThread
		written time.Time
	}
	var cands []cand
	for id, t := range m.threads {
		if t != keep && !t.busy() {
			cands = append(cands, cand{id, t, t.written})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.written.UnixNano(), b.written.UnixNano()) })
	target := m.cfg.MaxBytes / 10 * 9
	for _, c := range cands {
		if m.bytes <= target {
			break
		}
		m.drop(c.id, c.t)
		m.evictions++
	}
}

// busy reports whether a run of the thread is running.
func (t *memThread) busy() bool {
	for i := len(t.runs) - 1; i >= 0; i-- {
		if t.runs[i].run.Status == StatusRunning {
			return true
		}
	}
	return false
}

// MemoryStats are a MemoryStore's sizes and evictions.
type MemoryStats struct {
	// Bytes is the accounted size of everything stored: frames, types and checkpoints, plus
	// a fixed overhead per event and per run. It is what MemoryConfig.MaxBytes bounds.
	Bytes int64
	// CheckpointBytes is the part of Bytes held by checkpoints.
	CheckpointBytes int64
	// Threads is the number of threads held.
	Threads int
	// Evictions counts the threads evicted by MaxBytes since the store was made.
	Evictions uint64
}

// Stats returns the store's sizes and evictions.
func (m *MemoryStore) Stats() MemoryStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MemoryStats{Bytes: m.bytes, CheckpointBytes: m.checkpointBytes, Threads: len(m.threads), Evictions: m.evictions}
}
