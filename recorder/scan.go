package recorder

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"
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

// ScanThreads implements ThreadScanner: the threads bucket in key order, one short read
// transaction per page (fn runs outside any transaction, so it may read the store). Expired
// threads the sweep has not removed yet are skipped.
func (s *DiskStore) ScanThreads(ctx context.Context, fn func(threadID string) error) error {
	var after []byte
	for {
		var ids []string
		err := s.view(func(tx *bolt.Tx) error {
			now := s.now().UnixMilli()
			c := tx.Bucket(bucketThreads).Cursor()
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(ids) < scanPage; k, v = c.Next() {
				var t diskThread
				if decodeRecord(&t, v) != nil || (t.Expires != 0 && now >= t.Expires) {
					continue
				}
				ids = append(ids, string(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(id); err != nil {
				return err
			}
		}
		if len(ids) < scanPage {
			return nil
		}
		after = []byte(ids[len(ids)-1])
	}
}

// ScanThreads implements ThreadScanner: SCAN MATCH over the threads' metadata keys
// ("<prefix>:{<threadId>}:thread"), on every master of a Cluster in turn.
func (s *RedisStore) ScanThreads(ctx context.Context, fn func(threadID string) error) error {
	if err := s.check(); err != nil {
		return err
	}
	pattern := globEscape(s.prefix) + ":{*}:" + kindThread
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, scanPage).Result()
			if err != nil {
				return scriptError(err, "scanning the threads")
			}
			for _, k := range keys {
				id := hashTag(k)
				if key(s.prefix, id, kindThread, "") != k || validateIDs(id, nil) != nil {
					continue // a key of another shape that the pattern let through
				}
				if err := fn(id); err != nil {
					return err
				}
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	cc, ok := s.r.(*redis.ClusterClient)
	if !ok {
		return scan(ctx, s.r)
	}
	// ForEachMaster runs its callbacks concurrently: fn is called by one of them at a time,
	// and none after one failed.
	var mu sync.Mutex
	var failed error
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		if failed != nil {
			return failed
		}
		failed = scan(ctx, c)
		return failed
	})
	if failed != nil {
		return failed
	}
	return err
}

// globEscape quotes the glob metacharacters of a Redis MATCH pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
