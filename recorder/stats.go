package recorder

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// StoreStats is what a store reports about its size, for metrics.
type StoreStats struct {
	// Kind is "memory", "disk" or "redis".
	Kind string
	// StoredBytes is what the store holds: the memory store's accounted size
	// (MemoryStats.Bytes), the disk store's file size, Redis's used_memory (the whole server,
	// other data included). -1 when unknown.
	StoredBytes int64
	// CheckpointBytes is the part held by checkpoints; -1 when the store does not know it.
	CheckpointBytes int64
	// Evictions counts the threads the memory store evicted to stay under its bound.
	Evictions uint64
	// Threads is how many threads the store holds, every owner and route (the sum of every
	// thread index): the memory store's map, the disk store's threads bucket (threads expired
	// since the last sweep included). -1 when counting costs a scan of the whole store
	// (Redis: count with ThreadScanner, sparingly).
	Threads int64
}

// StatsReporter is implemented by the stores of this package.
type StatsReporter interface {
	// StoreStats returns the store's sizes. It may cost a round trip (Redis).
	StoreStats(ctx context.Context) (StoreStats, error)
}

// StoreStats implements StatsReporter.
func (m *MemoryStore) StoreStats(ctx context.Context) (StoreStats, error) {
	st := m.Stats()
	return StoreStats{Kind: "memory", StoredBytes: st.Bytes, CheckpointBytes: st.CheckpointBytes, Evictions: st.Evictions,
		Threads: int64(st.Threads)}, nil
}

// StoreStats implements StatsReporter.
func (s *DiskStore) StoreStats(ctx context.Context) (StoreStats, error) {
	st := s.Stats()
	out := StoreStats{Kind: "disk", StoredBytes: st.FileBytes, CheckpointBytes: st.CheckpointBytes, Threads: -1}
	// KeyN walks the bucket's pages (mapped in memory), not the threads' records.
	err := s.view(func(tx *bolt.Tx) error {
		out.Threads = int64(tx.Bucket(bucketThreads).Stats().KeyN)
		return nil
	})
	return out, err
}

// StoreStats implements StatsReporter: StoredBytes is the server's used_memory (INFO memory).
func (s *RedisStore) StoreStats(ctx context.Context) (StoreStats, error) {
	if err := s.check(); err != nil {
		return StoreStats{}, err
	}
	info, err := s.r.Info(ctx, "memory").Result()
	if err != nil {
		return StoreStats{}, fmt.Errorf("redis INFO memory: %w", err)
	}
	st := StoreStats{Kind: "redis", StoredBytes: -1, CheckpointBytes: -1, Threads: -1}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				st.StoredBytes = n
			}
		}
	}
	return st, nil
}

var (
	_ StatsReporter = (*MemoryStore)(nil)
	_ StatsReporter = (*DiskStore)(nil)
	_ StatsReporter = (*RedisStore)(nil)
)
