package recorder

// The RedisStore's operations for operators: the backup scan (ThreadScanner), its sizes
// (StatsReporter) and compaction at rest (RunCompactor, compact_run.lua).

import (
	"context"
	_ "embed" // Lua script
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed compact_run.lua
var compactRunLua string

var compactRunScript = redis.NewScript(compactRunLua)

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

// ReplaceRunEvents implements RunCompactor: one run of compact_run.lua, which replaces the
// run's stream by its packed events (packed.go).
func (s *RedisStore) ReplaceRunEvents(ctx context.Context, threadID, runID, prevEpoch, epoch string, events []Event) error {
	k, err := keysFor(s.prefix, threadID, runID)
	if err != nil {
		return err
	}
	if !ValidEpoch(epoch) {
		return fmt.Errorf("run %q: epoch %q: %w", runID, epoch, ErrInvalidEpoch)
	}
	if err := s.check(); err != nil {
		return err
	}
	args := []any{prevEpoch, epoch, time.Now().UnixMilli(), packEvents(events), len(events)}
	err = compactRunScript.Run(ctx, s.w, []string{k.run, k.events, k.packed}, args...).Err()
	switch {
	case err == nil:
		return nil
	case strings.HasPrefix(err.Error(), "NORUN"):
		if _, terr := s.Thread(ctx, threadID); errors.Is(terr, ErrThreadNotFound) {
			return fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)
		}
		return fmt.Errorf("run %q in thread %q: %w", runID, threadID, ErrRunNotFound)
	case strings.HasPrefix(err.Error(), "CONFLICT"):
		return fmt.Errorf("compacting run %q in thread %q: %s: %w", runID, threadID, err.Error(), ErrConflict)
	}
	return fmt.Errorf("compacting run %q in thread %q: %w", runID, threadID, err)
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
