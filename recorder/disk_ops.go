package recorder

// The DiskStore's operations for operators: the backup scan (ThreadScanner), its sizes
// (StatsReporter) and compaction at rest (RunCompactor).

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

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

// ReplaceRunEvents implements RunCompactor: one transaction, which replaces the run's chunks
// by one packed chunk (packed.go).
func (s *DiskStore) ReplaceRunEvents(ctx context.Context, threadID, runID, prevEpoch, epoch string, events []Event) error {
	if !ValidEpoch(epoch) {
		return fmt.Errorf("run %q: epoch %q: %w", runID, epoch, ErrInvalidEpoch)
	}
	err := s.writeRun(threadID, runID, func(tx *bolt.Tx, r *diskRun, now time.Time) error {
		if r.Epoch != prevEpoch || r.Status == string(StatusRunning) {
			return errAbort{fmt.Errorf("compacting run %q in thread %q (epoch %s, status %s): %w", runID, threadID, r.Epoch, r.Status, ErrConflict)}
		}
		st := s.statsIn(tx)
		if err := s.deleteEvents(tx, threadID, runID, st, 0); err != nil {
			return err
		}
		*r = diskRun{Parent: r.Parent, Status: r.Status, Detail: r.Detail, Route: r.Route, Owner: r.Owner, Created: r.Created,
			Updated: r.Updated, Node: r.Node, Lease: r.Lease, Stop: r.Stop, Idx: r.Idx, Epoch: epoch, Compacted: now.UnixMilli()}
		if len(events) > 0 {
			// One packed chunk (a compacted run is read whole and never appended to).
			data := encodePackedChunk(events)
			if err := tx.Bucket(bucketEvents).Put(chunkKey(threadID, runID, 1), data); err != nil {
				return err
			}
			r.Count, r.Bytes = int64(len(events)), int64(len(data))
			st.EventBytes += int64(len(data))
			r.First, r.Last = 1, int64(len(events))
		}
		return s.putStats(tx, st)
	})
	s.wake(string(runKey(threadID, runID)))
	return err
}
