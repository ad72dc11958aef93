package recorder

import (
	"context"
)

// ThreadScanner visits every thread of a store, whatever its owner and route: what an
// operator's backup (agui-proxy export) reads, where the thread index (ListThreads) shows one
// owner on one route. Every store of this package implements it.
type ThreadScanner interface {
	// ScanThreads calls fn with the id of every thread the store holds, in no particular
	// order, holding a bounded number of ids at a time (one SCAN or disk page). A thread that
	// exists for the whole scan is visited; one created or deleted during it may or may not
	// be; on Redis, SCAN may visit a thread twice when the keyspace is rehashed meanwhile. An
	// error from fn ends the scan and is returned.
	ScanThreads(ctx context.Context, fn func(threadID string) error) error
}

var (
	_ ThreadScanner = (*MemoryStore)(nil)
	_ ThreadScanner = (*DiskStore)(nil)
	_ ThreadScanner = (*RedisStore)(nil)
)

// scanPage is how many ids a scan holds at a time (and the SCAN COUNT hint).
const scanPage = 500
