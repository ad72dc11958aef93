package recorder

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// item is one queued operation: an event, or a run's final status (finish != nil).
type item struct {
	rec    *Recording
	ev     Event
	finish *finishOp
	// taken marks an item an express write stored ahead of its place (lane.expressWrite):
	// the batch that reaches it skips it, and only counts it as done.
	taken bool
}

type finishOp struct {
	status  RunStatus
	detail  string
	lastSeq int64
	// stored, for a FinishSync, is closed once the finish (and so every event of the run
	// queued before it) is written, by whichever write takes it.
	stored chan struct{}
}

// A Recording is one run as a Writer records it, from Writer.Open to the run's finish: the
// run's ids and epoch, checked once when it is opened, and what the Writer keeps for the run
// between batches (where the run's events go in the batch being built, the store's key for it,
// the last lease its appends renewed). Each of the run's events and its end are queued through
// it (Append, Finish and their variants), so that nothing done per event checks the ids again
// or looks the run up by them: at thousands of slow streams, a batch holds one event of each of
// thousands of runs. Its methods are safe for concurrent use.
type Recording struct {
	l   *lane // of its thread
	run Run   // as opened; never modified

	// gen and batch are its lane goroutine's: in the batch being built (batcher.gen), the
	// run's events are batches[batch].
	gen   uint64
	batch int
	// key is the store's key for the run (RedisStore: the run hash), set by the store from
	// its lane goroutine the first time it writes the run.
	key string
	// stored is the store's (RedisStore) own record of what it wrote for the run, from its
	// lane goroutine: the run's last seq it saw stored, the time of its last full write
	// (append.lua's full path, unix nanoseconds) and the store's error generation then.
	stored struct {
		last, fullAt int64
		errGen       uint64
		stream       string // the run's events stream key
	}
	// leasedAt is when an append last renewed the run's lease (WriterConfig.Lease), in unix
	// nanoseconds; 0 before that and once the run's finish is stored.
	leasedAt atomic.Int64
	// overflowLogged is set (under l.mu) once the run's first dropped event is logged.
	overflowLogged bool
}

// Run returns the run as it was opened.
func (r *Recording) Run() Run { return r.run }

// Append queues ev for run. It returns at once while the buffer has room; when it is full it
// waits for room (backpressure: the caller is slowed to the store's pace) for as long as the
// store makes progress. The Writer keeps ev.Frame until it is stored, so the caller must not
// modify those bytes afterwards. Only when the write in flight has been stuck for FullWait is
// the event dropped, counted, logged once for the run, and ErrBufferFull returned; the store
// records the gap when the run's next event or Finish is stored. After Shutdown it returns
// ErrClosed.
func (r *Recording) Append(ev Event) error {
	_, err := r.AppendPos(ev)
	return err
}

// AppendPos is Append that also returns the event's position in its lane's queue: the event
// is stored once Stored() >= pos. A dropped or refused event has position 0 (it will never be
// stored; the store records the gap instead). A caller that keeps events in memory until the
// store has them (the live hub's backlog) uses it to let them go.
func (r *Recording) AppendPos(ev Event) (pos uint64, err error) {
	return r.AppendPosWaiting(ev, nil)
}

// AppendPosWaiting is AppendPos, calling beforeWait (when not nil) once before it waits for
// room: a caller holding something for its next step (a frame it has not written yet) lets
// it go before it is slowed down.
func (r *Recording) AppendPosWaiting(ev Event, beforeWait func()) (pos uint64, err error) {
	l := r.l
	l.mu.Lock()
	var waited time.Time
	for {
		if l.closed {
			l.mu.Unlock()
			return 0, ErrClosed
		}
		if pos, ok := l.enqueue(item{rec: r, ev: ev}); ok {
			if !waited.IsZero() {
				l.st.WaitTime += time.Since(waited)
			}
			l.mu.Unlock()
			l.signal()
			return pos, nil
		}
		wait := l.stuckIn()
		if wait <= 0 {
			l.dropLocked(r, ev.Seq)
			l.mu.Unlock()
			return 0, ErrBufferFull
		}
		first := waited.IsZero()
		if first {
			waited = time.Now()
			l.st.Waits++
		}
		progress := l.progress
		l.waiting(+1)
		l.mu.Unlock()
		if first && beforeWait != nil {
			beforeWait()
		}
		t := time.NewTimer(wait)
		select {
		case <-progress:
		case <-t.C:
		case <-l.exited:
		}
		t.Stop()
		l.mu.Lock()
		l.waiting(-1)
	}
}

// AppendSync queues ev and waits until it is stored (ev.Frame is kept as by Append). If ctx ends first it returns ctx's error;
// an event already queued stays queued and will still be stored, while one that could not be
// queued (buffer full until ctx ended) is dropped and counted like Append's overflow.
func (r *Recording) AppendSync(ctx context.Context, ev Event) error {
	l := r.l
	l.mu.Lock()
	for {
		if l.closed {
			l.mu.Unlock()
			return ErrClosed
		}
		pos, ok := l.enqueue(item{rec: r, ev: ev})
		if ok {
			l.mu.Unlock()
			l.signal()
			return l.wait(ctx, pos)
		}
		progress := l.progress
		l.waiting(+1)
		l.mu.Unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			l.mu.Lock()
			l.waiting(-1)
			l.dropLocked(r, ev.Seq)
			l.mu.Unlock()
			return fmt.Errorf("queueing event %d of run %q: %w", ev.Seq, r.run.RunID, ctx.Err())
		}
		l.mu.Lock()
		l.waiting(-1)
	}
}

// Stored returns the position (AppendPos) up to which every item queued in the run's lane is
// stored. It does not take a lock: a pump calls it per event.
func (r *Recording) Stored() uint64 { return r.l.done.Load() }

// Finish queues the run's final status after its queued events. lastSeq is the seq of the
// run's last event; a missing tail becomes a Gap. Finish never drops and never blocks (it
// does not count against MaxBufferedEvents); after Shutdown it is ignored.
func (r *Recording) Finish(status RunStatus, detail string, lastSeq int64) {
	r.finish(status, detail, lastSeq)
}

// FinishSync is Finish that waits until the status, and every event queued for the run before
// it, is stored, or ctx ends (it then returns ctx's error; the status is still written
// later). A caller that holds a run's terminal event back until FinishSync returns lets any
// replica accept the thread's next run as soon as a client has seen that event.
//
// It does not end the lane's Linger for the other runs: the lane writes this run's queued
// events and its finish at once, ahead of the rest (an express write, lane.expressWrite), and
// lets the other runs' events gather as long as they would have. At 2,000 streams a run ends
// every few milliseconds; each ending a Linger kept every batch at about one event per run.
//
// On a store that commits a batch as one transaction (DiskStore) it waits for the lane's
// next batch instead, as a caller waiting on the store does: its commits are serialized, so
// one per run's end would cost an fsync each and hold back everything else.
func (r *Recording) FinishSync(ctx context.Context, status RunStatus, detail string, lastSeq int64) error {
	l := r.l
	if _, group := l.cfg.Store.(groupCommitter); group || l.cfg.Linger <= 0 {
		pos, ok := r.finish(status, detail, lastSeq)
		if !ok {
			return ErrClosed
		}
		return l.wait(ctx, pos)
	}
	f := &finishOp{status: status, detail: detail, lastSeq: lastSeq, stored: make(chan struct{})}
	if _, ok := r.enqueueFinish(f, true); !ok {
		return ErrClosed
	}
	select {
	case <-f.stored:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.exited:
		select {
		case <-f.stored:
			return nil
		default:
			return ErrClosed
		}
	}
}

func (r *Recording) finish(status RunStatus, detail string, lastSeq int64) (uint64, bool) {
	return r.enqueueFinish(&finishOp{status: status, detail: detail, lastSeq: lastSeq}, false)
}

// enqueueFinish queues f after the run's events; express asks the lane to write the run's
// queued items ahead of the others' (FinishSync).
func (r *Recording) enqueueFinish(f *finishOp, express bool) (uint64, bool) {
	l := r.l
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, false
	}
	pos, ok := l.enqueue(item{rec: r, finish: f})
	if express {
		l.expressRuns = append(l.expressRuns, r)
		select {
		case l.express <- struct{}{}:
		default:
		}
	}
	l.mu.Unlock()
	l.signal()
	return pos, ok
}

// LeasedSince reports whether an append renewed the run's lease at t or later
// (WriterConfig.Lease): its lease then runs until TTL after that. It is false once the run's
// finish is stored.
func (r *Recording) LeasedSince(t time.Time) bool {
	at := r.leasedAt.Load()
	return at != 0 && at >= t.UnixNano()
}
