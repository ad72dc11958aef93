package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// followChunk is how many events a DiskStore subscription reads per transaction.
const followChunk = 64

// Follow implements Follower. Like the MemoryStore's, the subscription reads the run's events
// from the store (a short read transaction per followChunk events, never held while waiting)
// and waits on a channel that the run's next append, end or removal closes. Its queue is the
// distance between its position and the run's newest event: more than DiskConfig.FollowQueue
// events appended after Follow and not yet read, or an unread event dropped by retention, end
// it with ErrSlowSubscriber.
func (s *DiskStore) Follow(ctx context.Context, threadID, runID string, afterSeq int64) (Subscription, error) {
	run, trimmed, err := s.followRun(threadID, runID)
	if err != nil {
		return nil, err
	}
	return &diskSub{
		s: s, threadID: threadID, runID: runID, key: string(runKey(threadID, runID)), epoch: run.Epoch,
		pos: max(afterSeq, trimmed, 0), base: run.LastSeq, closed: make(chan struct{}),
	}, nil
}

// followRun reads the run's metadata and retention mark.
func (s *DiskStore) followRun(threadID, runID string) (Run, int64, error) {
	if err := validateIDs(threadID, &runID); err != nil {
		return Run{}, 0, err
	}
	var out Run
	var trimmed int64
	err := s.view(func(tx *bolt.Tx) error {
		_, r, err := s.findRun(tx, threadID, runID, s.now())
		if err != nil {
			return err
		}
		trimmed = r.Trimmed
		out, err = r.run(threadID, runID)
		return err
	})
	return out, trimmed, err
}

// diskSub is a DiskStore Subscription. Next is meant for one goroutine at a time; Close may be
// called from any.
type diskSub struct {
	s               *DiskStore
	threadID, runID string
	key             string
	epoch           string
	pos             int64   // seq of the last event returned (or the start position)
	base            int64   // the run's LastSeq when Follow was called: history, not queue
	buf             []Event // read but not returned yet
	err             error   // sticky end
	closeOnce       sync.Once
	closed          chan struct{}
}

// Next implements Subscription.
func (d *diskSub) Next(ctx context.Context) (Event, error) {
	for {
		select {
		case <-d.closed:
			return Event{}, ErrClosed
		default:
		}
		if len(d.buf) > 0 {
			ev := d.buf[0]
			d.buf = d.buf[1:]
			d.pos = ev.Seq
			return ev, nil
		}
		if d.err != nil {
			return Event{}, d.err
		}
		wait := d.s.waitChan(d.key) // taken before the read: a change after it closes it
		more, err := d.fill()
		if err != nil {
			if err != ErrClosed {
				d.err = err
			}
			return Event{}, err
		}
		if more {
			continue
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-d.closed:
			return Event{}, ErrClosed
		case <-d.s.done:
			return Event{}, ErrClosed
		}
	}
}

// fill reads the next events into d.buf. It reports false when there is nothing to read yet;
// io.EOF when the run ended and everything was delivered.
func (d *diskSub) fill() (bool, error) {
	s := d.s
	err := s.view(func(tx *bolt.Tx) error {
		_, r, err := s.findRun(tx, d.threadID, d.runID, s.now())
		if err != nil || r.Epoch != d.epoch {
			return errAbort{fmt.Errorf("following run %q in thread %q: the run was removed: %w", d.runID, d.threadID, ErrRunNotFound)}
		}
		if r.Trimmed > d.pos {
			return errAbort{fmt.Errorf("following run %q in thread %q: events %d..%d were dropped by retention before they were read: %w",
				d.runID, d.threadID, d.pos+1, r.Trimmed, ErrSlowSubscriber)}
		}
		if r.Last > d.pos {
			gaps, err := parseGaps(r.Gaps)
			if err != nil {
				return err
			}
			from := max(d.pos, d.base)
			queued := r.Last - from
			for _, g := range gaps {
				queued -= max(0, min(g.To, r.Last)-max(g.From, from+1)+1)
			}
			if queued > int64(s.cfg.FollowQueue) {
				return errAbort{fmt.Errorf("following run %q in thread %q: %d events behind (bound %d): %w",
					d.runID, d.threadID, queued, s.cfg.FollowQueue, ErrSlowSubscriber)}
			}
			d.buf, err = s.readEvents(tx, d.threadID, d.runID, r, d.pos, followChunk)
			if err != nil {
				return err
			}
		}
		if len(d.buf) == 0 && r.Status != string(StatusRunning) {
			return errAbort{io.EOF}
		}
		return nil
	})
	if err == io.EOF {
		return false, io.EOF
	}
	return len(d.buf) > 0, err
}

// Close implements Subscription.
func (d *diskSub) Close() error {
	d.closeOnce.Do(func() { close(d.closed) })
	return nil
}

// RenewLease implements Leaser.
func (s *DiskStore) RenewLease(ctx context.Context, threadID, runID, node string, until time.Time) (bool, error) {
	var stop bool
	err := s.writeRun(threadID, runID, func(tx *bolt.Tx, r *diskRun, now time.Time) error {
		if r.Status != string(StatusRunning) {
			stop = false
			return errAbort{nil}
		}
		r.Node, r.Lease = node, msOrZero(leaseTime(until))
		stop = r.Stop
		return nil
	})
	return stop, err
}

// RenewLeases implements BatchLeaser: every run's renewal in one transaction (one fsync),
// where RenewLease costs one each.
func (s *DiskStore) RenewLeases(ctx context.Context, node string, until time.Time, runs []RunRef) ([]LeaseOutcome, error) {
	for _, r := range runs {
		if err := validateIDs(r.ThreadID, &r.RunID); err != nil {
			return nil, err
		}
	}
	if len(runs) == 0 {
		return nil, nil
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	out := make([]LeaseOutcome, len(runs))
	lease := msOrZero(leaseTime(until))
	err := s.update(func(tx *bolt.Tx) error {
		now := s.now()
		for i, ref := range runs {
			t, r, err := s.findRun(tx, ref.ThreadID, ref.RunID, now)
			var abort errAbort
			if errors.As(err, &abort) {
				out[i] = LeaseNoRun
				continue
			}
			if err != nil {
				return err
			}
			out[i] = LeaseRenewed
			if r.Status != string(StatusRunning) {
				continue
			}
			r.Node, r.Lease = node, lease
			if r.Stop {
				out[i] = LeaseStop
			}
			if err := putRecord(tx.Bucket(bucketRuns), runKey(ref.ThreadID, ref.RunID), r); err != nil {
				return err
			}
			if err := s.refreshThread(tx, ref.ThreadID, t, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RequestStop implements Leaser.
func (s *DiskStore) RequestStop(ctx context.Context, threadID, runID string) error {
	return s.writeRun(threadID, runID, func(tx *bolt.Tx, r *diskRun, now time.Time) error {
		if r.Status != string(StatusRunning) {
			return errAbort{nil}
		}
		r.Stop = true
		return nil
	})
}

var (
	_ Follower       = (*DiskStore)(nil)
	_ Leaser         = (*DiskStore)(nil)
	_ BatchLeaser    = (*DiskStore)(nil)
	_ appendFinisher = (*DiskStore)(nil)
	_ groupCommitter = (*DiskStore)(nil)
)
