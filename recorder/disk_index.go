package recorder

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ListThreads implements Store. The index bucket orders each owner's and route's threads by
// activity, newest first, so a page reads about limit entries (plus the threads sharing the
// last entry's millisecond, sorted by id as the other stores do).
func (s *DiskStore) ListThreads(ctx context.Context, q ThreadQuery) (ThreadPage, error) {
	after, hasCursor, err := decodePageCursor(q.Cursor)
	if err != nil {
		return ThreadPage{}, err
	}
	limit := q.pageLimit()
	var out []ThreadSummary
	err = s.view(func(tx *bolt.Tx) error {
		now := s.now()
		tag := append([]byte(indexTag(q.Owner, q.Route)), 0)
		start := int64(1<<63 - 1)
		if hasCursor {
			start = after.ms
		}
		if !q.Until.IsZero() {
			start = min(start, q.Until.UnixMilli()-1)
		}
		if start < 0 {
			return nil
		}
		c := tx.Bucket(bucketIndex).Cursor()
		seek := binary.BigEndian.AppendUint64(slices.Clone(tag), ^uint64(start))
		lastMs := int64(-1)
		for k, _ := c.Seek(seek); k != nil && bytes.HasPrefix(k, tag) && len(k) > len(tag)+8; k, _ = c.Next() {
			ms := int64(^binary.BigEndian.Uint64(k[len(tag):]))
			id := string(k[len(tag)+8:])
			if len(out) > limit && ms != lastMs {
				break // a whole millisecond group past the page is read
			}
			if !q.Since.IsZero() && ms < q.Since.UnixMilli() {
				break
			}
			lastMs = ms
			if !q.listed(ms, id, after, hasCursor) {
				continue
			}
			t, err := s.thread(tx, id, now)
			if err != nil {
				return err
			}
			if t == nil || t.Owner != q.Owner || t.Route != q.Route || t.Active != ms || t.Count == 0 {
				continue // expired, or a stale entry: never shown
			}
			sum := ThreadSummary{Thread: t.info(id), ActiveAt: time.UnixMilli(ms)}
			if r, err := getRecord[diskRun](tx.Bucket(bucketRuns), runKey(id, t.Latest)); err != nil {
				return err
			} else if r != nil {
				sum.UpdatedAt, sum.LatestStatus = time.UnixMilli(r.Updated), RunStatus(r.Status)
			}
			out = append(out, sum)
		}
		return nil
	})
	if err != nil {
		return ThreadPage{}, err
	}
	sortThreads(out)
	return cutPage(out, limit), nil
}

// DeleteThread implements Store. Followers of the thread's runs wake and find them gone.
func (s *DiskStore) DeleteThread(ctx context.Context, threadID, owner, route string) error {
	if err := validateIDs(threadID, nil); err != nil {
		return err
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	var woken []string
	err := s.freeing(func(tx *bolt.Tx) error {
		t, err := s.thread(tx, threadID, s.now())
		if err != nil {
			return err
		}
		if t == nil || t.Owner != owner || t.Route != route {
			return errAbort{fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)}
		}
		p := threadPrefix(threadID)
		if k, _ := tx.Bucket(bucketRunning).Cursor().Seek(p); k != nil && bytes.HasPrefix(k, p) {
			return errAbort{fmt.Errorf("thread %q, run %q: %w", threadID, k[len(p):], ErrThreadBusy)}
		}
		woken, err = s.dropThread(tx, threadID)
		return err
	})
	s.wake(woken...)
	return err
}
