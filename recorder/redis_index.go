package recorder

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// indexKey returns the sorted set indexing the threads of one owner on one route:
// "<prefix>:{#index/<hash>}:threads", member thread id, score the start of its latest run in
// ms. '#' and '/' are outside the id alphabet, so the hash tag can never be a thread's, and
// the owner appears only hashed (indexTag). Each index has its own Cluster slot, apart from
// the threads it lists: that is why it is not written inside the thread scripts (see
// CreateRun and ListThreads for how it is kept right without them).
func (s *RedisStore) indexKey(owner, route string) string {
	return s.prefix + ":{#index/" + indexTag(owner, route) + "}:threads"
}

// queueIndexAdd queues the index update of a run start at ms. The index key lives twice the
// thread TTL: threads outlive their last run start by up to a run's duration plus TTL, and
// ListThreads drops the entries of threads that expired before it.
func (s *RedisStore) queueIndexAdd(ctx context.Context, p redis.Pipeliner, owner, route, threadID string, ms int64) {
	k := s.indexKey(owner, route)
	p.ZAdd(ctx, k, redis.Z{Score: float64(ms), Member: threadID})
	if s.ttlMs > 0 {
		p.PExpire(ctx, k, 2*time.Duration(s.ttlMs)*time.Millisecond)
	}
}

// indexEntry is one member of an index read by ListThreads.
type indexEntry struct {
	id string
	ms int64
}

// ListThreads implements Store. It reads the owner's index newest first and checks each entry
// against its thread (one pipeline per batch): entries whose thread is gone (expired, deleted,
// never created because the run was refused) or belongs to another owner or route are removed
// from the index on the way (the repair path), so the index cannot show what the caller does
// not hold.
func (s *RedisStore) ListThreads(ctx context.Context, q ThreadQuery) (ThreadPage, error) {
	after, hasCursor, err := decodePageCursor(q.Cursor)
	if err != nil {
		return ThreadPage{}, err
	}
	if err := s.check(); err != nil {
		return ThreadPage{}, err
	}
	limit := q.pageLimit()
	idx := s.indexKey(q.Owner, q.Route)
	pos, hasPos := after, hasCursor
	if !q.Until.IsZero() {
		u := pagePos{ms: q.Until.UnixMilli() - 1, id: "\xff"} // before Until, every id at u.ms
		if !hasPos || u.ms < pos.ms {
			pos, hasPos = u, true
		}
	}
	minScore := "-inf"
	if !q.Since.IsZero() {
		minScore = strconv.FormatInt(q.Since.UnixMilli(), 10)
	}
	var page ThreadPage
	batch := limit + 1
	for len(page.Threads) <= limit {
		maxScore := "+inf"
		if hasPos {
			maxScore = strconv.FormatInt(pos.ms, 10)
		}
		zs, err := s.r.ZRevRangeByScoreWithScores(ctx, idx, &redis.ZRangeBy{Max: maxScore, Min: minScore, Count: int64(batch)}).Result()
		if err != nil {
			return ThreadPage{}, scriptError(err, "reading the thread index")
		}
		var entries []indexEntry
		for _, z := range zs {
			id, _ := z.Member.(string)
			ms := int64(z.Score)
			if hasPos && !pos.before(ms, id) {
				continue // at the position's score, not after it (equal scores: id order)
			}
			entries = append(entries, indexEntry{id: id, ms: ms})
		}
		if len(entries) == 0 {
			if len(zs) < batch {
				break // the index is exhausted
			}
			batch *= 2 // a full batch of entries sharing the position's ms: read further
			continue
		}
		last := entries[len(entries)-1]
		pos, hasPos = pagePos{ms: last.ms, id: last.id}, true
		sums, err := s.summaries(ctx, q, idx, entries)
		if err != nil {
			return ThreadPage{}, err
		}
		page.Threads = append(page.Threads, sums...)
		if len(zs) < batch {
			break
		}
	}
	return cutPage(page.Threads, limit), nil
}

// summaries reads the threads of index entries (two pipelined round trips) and removes the
// entries that do not name a thread of q.Owner on q.Route.
func (s *RedisStore) summaries(ctx context.Context, q ThreadQuery, idx string, entries []indexEntry) ([]ThreadSummary, error) {
	type threadRead struct {
		meta   *redis.SliceCmd
		count  *redis.IntCmd
		latest *redis.StringCmd
	}
	reads := make([]threadRead, len(entries))
	if _, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, e := range entries {
			k, err := threadKeys(s.prefix, e.id)
			if err != nil {
				continue // not an id this store writes: left unread, removed below
			}
			reads[i] = threadRead{
				meta:   p.HMGet(ctx, k.thread, "owner", "route", "created", "title"),
				count:  p.LLen(ctx, k.runs),
				latest: p.LIndex(ctx, k.runs, -1),
			}
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, scriptError(err, "reading indexed threads")
	}
	var stale []any
	out := make([]ThreadSummary, 0, len(entries))
	for i, e := range entries {
		r := reads[i]
		if r.meta == nil {
			stale = append(stale, e.id)
			continue
		}
		v := r.meta.Val()
		if len(v) != 4 || v[0] == nil || str(v[0]) != q.Owner || str(v[1]) != q.Route || r.count.Val() == 0 {
			stale = append(stale, e.id)
			continue
		}
		out = append(out, ThreadSummary{
			Thread: Thread{
				ID: e.id, Owner: q.Owner, Route: q.Route, CreatedAt: msTime(str(v[2])), Title: str(v[3]),
				LatestRunID: r.latest.Val(), RunCount: int(r.count.Val()),
			},
			ActiveAt: time.UnixMilli(e.ms),
		})
	}
	statuses := make([]*redis.SliceCmd, len(out))
	if len(out) > 0 || len(stale) > 0 {
		if _, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, t := range out {
				statuses[i] = p.HMGet(ctx, key(s.prefix, t.ID, kindRun, t.LatestRunID), "status", "updated")
			}
			if len(stale) > 0 {
				p.ZRem(ctx, idx, stale...)
			}
			return nil
		}); err != nil && !errors.Is(err, redis.Nil) {
			return nil, scriptError(err, "reading indexed threads")
		}
	}
	for i := range out {
		if v := statuses[i].Val(); len(v) == 2 {
			out[i].LatestStatus = RunStatus(str(v[0]))
			out[i].UpdatedAt = msTime(str(v[1]))
		}
	}
	return out, nil
}

// DeleteThread implements Store: one script removes the thread's keys (refusing while a run
// is running), then its index entry is removed.
func (s *RedisStore) DeleteThread(ctx context.Context, threadID, owner, route string) error {
	k, err := threadKeys(s.prefix, threadID)
	if err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	what := fmt.Sprintf("deleting thread %q", threadID)
	if err := deleteThreadScript.Run(ctx, s.r, []string{k.thread, k.runs}, owner, route, k.base).Err(); err != nil {
		return scriptError(err, what)
	}
	// A failure here leaves an entry ListThreads removes when it meets it.
	if err := s.r.ZRem(ctx, s.indexKey(owner, route), threadID).Err(); err != nil {
		s.log.Warn("recorder: thread deleted but its index entry was not removed (ListThreads repairs it)",
			"thread_id", threadID, "err", err)
	}
	return nil
}
