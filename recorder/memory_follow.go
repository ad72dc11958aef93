package recorder

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// leaseTime returns t at the millisecond precision both stores keep (zero stays zero).
func leaseTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli())
}

// Follow implements Follower. The subscription reads the run's events straight from the
// store (no copy is queued per subscriber): it waits on a channel that every append, the
// run's end and its removal close. Its "queue" is the distance between its position and the
// run's newest event: more than MemoryConfig.FollowQueue events appended after Follow and
// not yet read, or an unread event dropped by MaxEventsPerRun, end it with ErrSlowSubscriber.
func (m *MemoryStore) Follow(ctx context.Context, threadID, runID string, afterSeq int64) (Subscription, error) {
	r, _, err := m.lockRun(threadID, runID)
	if err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return &memSub{
		m: m, threadID: threadID, runID: runID, r: r,
		pos:    max(afterSeq, r.trimmed, 0),
		base:   r.run.LastSeq,
		closed: make(chan struct{}),
	}, nil
}

// memSub is a MemoryStore Subscription. Next is meant for one goroutine at a time; Close may
// be called from any.
type memSub struct {
	m               *MemoryStore
	threadID, runID string
	r               *memRun
	pos             int64 // seq of the last event returned (or the start position)
	base            int64 // the run's LastSeq when Follow was called: history, not queue
	err             error // sticky end (io.EOF excluded: more events cannot come after it anyway)
	closeOnce       sync.Once
	closed          chan struct{}
}

// Next implements Subscription.
func (s *memSub) Next(ctx context.Context) (Event, error) {
	for {
		select {
		case <-s.closed:
			return Event{}, ErrClosed
		default:
		}
		ev, wait, err := s.poll()
		if err != nil || wait == nil {
			return ev, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-s.closed:
			return Event{}, ErrClosed
		case <-s.m.done:
			return Event{}, ErrClosed
		}
	}
}

// poll returns the next event, an end, or a channel to wait on.
func (s *memSub) poll() (Event, <-chan struct{}, error) {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Event{}, nil, ErrClosed
	}
	if s.err != nil {
		return Event{}, nil, s.err
	}
	if t := m.thread(s.threadID, m.now()); t == nil || t.byID[s.runID] != s.r {
		s.err = fmt.Errorf("following run %q in thread %q: the run was removed: %w", s.runID, s.threadID, ErrRunNotFound)
		return Event{}, nil, s.err
	}
	r := s.r
	if r.trimmed > s.pos {
		s.err = fmt.Errorf("following run %q in thread %q: events %d..%d were dropped by retention before they were read: %w",
			s.runID, s.threadID, s.pos+1, r.trimmed, ErrSlowSubscriber)
		return Event{}, nil, s.err
	}
	i := r.after(s.pos)
	if i < len(r.events) {
		if queued := len(r.events) - r.after(max(s.pos, s.base)); queued > m.cfg.FollowQueue {
			s.err = fmt.Errorf("following run %q in thread %q: %d events behind (bound %d): %w",
				s.runID, s.threadID, queued, m.cfg.FollowQueue, ErrSlowSubscriber)
			return Event{}, nil, s.err
		}
		e := r.events[i]
		s.pos = e.Seq
		return Event{Seq: e.Seq, Type: e.Type, Frame: slices.Clone(e.Frame)}, nil, nil
	}
	if r.run.Status != StatusRunning {
		return Event{}, nil, io.EOF
	}
	if r.notify == nil {
		r.notify = make(chan struct{})
	}
	return Event{}, r.notify, nil
}

// Close implements Subscription.
func (s *memSub) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

// RenewLease implements Leaser.
func (m *MemoryStore) RenewLease(ctx context.Context, threadID, runID, node string, until time.Time) (bool, error) {
	r, _, err := m.lockRun(threadID, runID)
	if err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	if r.run.Status != StatusRunning {
		return false, nil
	}
	r.run.Node, r.run.LeaseUntil = node, leaseTime(until)
	return r.stop, nil
}

// RequestStop implements Leaser.
func (m *MemoryStore) RequestStop(ctx context.Context, threadID, runID string) error {
	r, _, err := m.lockRun(threadID, runID)
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	if r.run.Status == StatusRunning {
		r.stop = true
	}
	return nil
}

var (
	_ Follower = (*MemoryStore)(nil)
	_ Leaser   = (*MemoryStore)(nil)
)
