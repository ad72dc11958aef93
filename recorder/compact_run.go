package recorder

import (
	"context"
	_ "embed" // Lua script
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"
)

// ErrConflict is returned by ReplaceRunEvents when the run changed meanwhile: its epoch is not
// the expected one (another replica compacted it, or the run id was re-created) or it is
// running.
var ErrConflict = errors.New("run changed meanwhile")

// RunCompactor is implemented by stores that can replace an ended run's raw events by their
// compacted form (compaction at rest, AGUI_COMPACT_AFTER). Every store of this package
// implements it.
type RunCompactor interface {
	// ReplaceRunEvents atomically replaces the events of an ended run whose epoch is
	// prevEpoch by events (their Seq is ignored: they are stored as 1..n, and their frames
	// should carry cursors of the new epoch), sets the run's epoch to epoch, clears its gaps
	// and sets CompactedAt. A reader sees the raw events or the compacted ones, never a mix or
	// neither; a cursor of the old epoch no longer matches, so a resume from inside the run
	// answers the full history. The checkpoint is left alone (the state is the same).
	// Errors: ErrConflict, ErrRunNotFound, ErrThreadNotFound, ErrInvalidEpoch.
	ReplaceRunEvents(ctx context.Context, threadID, runID, prevEpoch, epoch string, events []Event) error
}

//go:embed compact_run.lua
var compactRunLua string

var compactRunScript = redis.NewScript(compactRunLua)

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

var (
	_ RunCompactor = (*MemoryStore)(nil)
	_ RunCompactor = (*DiskStore)(nil)
	_ RunCompactor = (*RedisStore)(nil)
)
