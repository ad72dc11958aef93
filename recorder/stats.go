package recorder

import (
	"context"
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

var (
	_ StatsReporter = (*MemoryStore)(nil)
	_ StatsReporter = (*DiskStore)(nil)
	_ StatsReporter = (*RedisStore)(nil)
)
