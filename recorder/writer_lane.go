package recorder

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// A lane is one of a Writer's queues and the goroutine (loop) that writes it, batch after
// batch: the runs of the threads that hash to it are recorded through it (Writer.laneOf).
type lane struct {
	cfg WriterConfig // the Writer's, with this lane's share of the buffer
	log *slog.Logger

	mu       sync.Mutex
	q        []item // q[head:] is waiting; q[head:head+inflight] is being written
	head     int
	inflight int
	events   int    // events in q[head:]
	bytes    int64  // itemBytes of the events in q[head:]
	enq      uint64 // items ever queued
	// done counts the items ever completed, in queue order: written under mu (with
	// progress), read without it by Recording.Stored, which a pump calls per event.
	done     atomic.Uint64
	progress chan struct{} // closed and replaced whenever done advances or the lane stops
	closed   bool
	// writeStart is when the write in flight began (zero when none): the store is stuck once
	// it is older than FullWait.
	writeStart time.Time
	// urgent counts the callers waiting on the store (wait, a full buffer): Linger does not
	// hold the next batch while it is not zero.
	urgent int
	// expressRuns are the runs whose FinishSync waits: the lane goroutine writes their
	// queued items ahead of the rest (expressWrite), woken by express (cap 1).
	expressRuns []*Recording
	express     chan struct{}
	st          WriterStats

	batcher  batcher         // the lane goroutine's
	lastRuns int             // runs whose events the last batch carried (the lane goroutine's)
	lease    appendLease     // the lane goroutine's: the lease its appends renew
	outcomes []appendOutcome // the lane goroutine's, reused

	wake    chan struct{} // cap 1: something was queued or Shutdown started
	hurry   chan struct{} // cap 1: Linger must end (a caller waits, the queue is a full batch)
	stop    chan struct{} // closed when Shutdown gives up waiting: abandon work
	exited  chan struct{} // closed when the goroutine returns
	stopCtx context.Context
	cancel  context.CancelFunc
	stopped sync.Once
}

// newLane starts a lane and its goroutine.
func newLane(cfg WriterConfig, log *slog.Logger) *lane {
	ctx, cancel := context.WithCancel(context.Background())
	l := &lane{
		cfg: cfg, log: log,
		progress: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		hurry:    make(chan struct{}, 1),
		express:  make(chan struct{}, 1),
		stop:     make(chan struct{}),
		exited:   make(chan struct{}),
		stopCtx:  ctx, cancel: cancel,
	}
	go l.loop()
	return l
}

// close stops the lane accepting items and returns the position of its last item.
func (l *lane) close() uint64 {
	l.mu.Lock()
	l.closed = true
	pos := l.enq
	l.mu.Unlock()
	l.signal()
	return pos
}

func (l *lane) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// hurryUp ends a Linger wait.
func (l *lane) hurryUp() {
	select {
	case l.hurry <- struct{}{}:
	default:
	}
}

// waiting counts a caller that starts (+1) or stops (-1) waiting on the store; one that
// starts ends a Linger wait. l.mu must be held.
func (l *lane) waiting(delta int) {
	l.urgent += delta
	if delta > 0 && l.cfg.Linger > 0 {
		l.hurryUp()
	}
}

// enqueue adds it when there is room. l.mu must be held. It returns the item's position
// (completion is reached when done >= position) and whether it was queued.
func (l *lane) enqueue(it item) (uint64, bool) {
	size := itemBytes(it)
	if it.finish == nil {
		// An event larger than the whole bound is taken once nothing else waits.
		if l.events >= l.cfg.MaxBufferedEvents || (l.events > 0 && l.bytes+size > l.cfg.MaxBufferedBytes) {
			return 0, false
		}
		l.events++
		l.bytes += size
		l.st.HighWater = max(l.st.HighWater, l.events)
		l.st.HighWaterBytes = max(l.st.HighWaterBytes, l.bytes)
	}
	if l.head > 0 && l.head == len(l.q) && l.inflight == 0 {
		l.q, l.head = l.q[:0], 0
	}
	l.q = append(l.q, it)
	l.enq++
	// A batch's worth is queued: end a Linger wait. Once, when the queue reaches it (by
	// events or by bytes), not at every event after: lingerLeft sees a full batch anyway.
	batch := int64(l.cfg.MaxBatchBytes)
	if l.cfg.Linger > 0 && (len(l.q)-l.head == l.cfg.MaxBatchEvents || (l.bytes >= batch && l.bytes-size < batch)) {
		l.hurryUp()
	}
	return l.enq, true
}

// itemBytes is what an event counts against MaxBufferedBytes and MaxBatchBytes: its frame
// and type (a finish counts nothing).
func itemBytes(it item) int64 {
	if it.finish != nil {
		return 0
	}
	return int64(len(it.ev.Frame) + len(it.ev.Type))
}

// stuckIn returns how long until the write in flight has been stuck for FullWait (<= 0: it
// has, or waiting is disabled). l.mu must be held.
func (l *lane) stuckIn() time.Duration {
	if l.cfg.FullWait < 0 {
		return 0
	}
	select {
	case <-l.exited:
		return 0
	default:
	}
	if l.writeStart.IsZero() { // the loop is between batches: it will take one at once
		return l.cfg.FullWait
	}
	return l.cfg.FullWait - time.Since(l.writeStart)
}

// dropLocked counts a dropped event and logs the run's first drop. l.mu must be held.
func (l *lane) dropLocked(r *Recording, seq int64) {
	l.st.Dropped++
	if !r.overflowLogged {
		r.overflowLogged = true
		run := r.run
		l.log.Warn("recorder: buffer full, dropping events; the run will be marked with a gap",
			"thread_id", run.ThreadID, "run_id", run.RunID, "seq", seq, "buffered", l.events, "buffered_bytes", l.bytes)
	}
}

// wait blocks until the items up to pos are done, ctx ends or the writer gives up.
func (l *lane) wait(ctx context.Context, pos uint64) error {
	counted := false // as waiting on the store (it ends a Linger), once it has to wait
	defer func() {
		if counted {
			l.mu.Lock()
			l.waiting(-1)
			l.mu.Unlock()
		}
	}()
	for {
		l.mu.Lock()
		done, progress := l.done.Load(), l.progress
		if done < pos && !counted {
			l.waiting(+1)
			counted = true
		}
		l.mu.Unlock()
		if done >= pos {
			return nil
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.exited:
			l.mu.Lock()
			done = l.done.Load()
			l.mu.Unlock()
			if done >= pos {
				return nil
			}
			return ErrClosed
		}
	}
}

// loop is the lane's goroutine: it takes batches from the queue and writes them.
func (l *lane) loop() {
	defer close(l.exited)
	var take []item
	var lastStart time.Time     // of the last batch
	var lingerTimer *time.Timer // (Go 1.23 timers: Reset and Stop need no draining)
	for {
		l.mu.Lock()
		for l.head == len(l.q) && !l.closed {
			l.mu.Unlock()
			select {
			case <-l.wake:
			case <-l.stop:
				return
			}
			l.mu.Lock()
		}
		if l.head == len(l.q) { // closed and drained
			l.mu.Unlock()
			return
		}
		if len(l.expressRuns) > 0 {
			if !l.expressWrite() { // unlocks l.mu
				return // stopped
			}
			continue
		}
		if rest := l.lingerLeft(lastStart); rest > 0 {
			l.mu.Unlock()
			if lingerTimer == nil {
				lingerTimer = time.NewTimer(rest)
			} else {
				lingerTimer.Reset(rest)
			}
			select {
			case <-lingerTimer.C:
			case <-l.hurry:
				lingerTimer.Stop()
			case <-l.express:
				lingerTimer.Stop() // the linger goes on after the express write
			case <-l.stop:
				return
			}
			continue
		}
		take = take[:0]
		n, size, span := 0, int64(0), 0 // span: the queue slots the batch completes
		for i := l.head; i < len(l.q) && n < l.cfg.MaxBatchEvents; i++ {
			if l.q[i].taken {
				span++
				continue
			}
			b := itemBytes(l.q[i])
			if n > 0 && size+b > int64(l.cfg.MaxBatchBytes) {
				break
			}
			take = append(take, l.q[i])
			span++
			if l.q[i].finish == nil {
				n++
				size += b
			}
		}
		l.inflight = span
		l.writeStart = time.Now()
		lastStart = l.writeStart
		l.mu.Unlock()

		if len(take) > 0 && !l.write(take, n) {
			return // stopped
		}
		finishedSync(take)

		l.mu.Lock()
		clear(l.q[l.head : l.head+span]) // release frames
		l.head += span
		l.inflight = 0
		l.writeStart = time.Time{}
		l.events -= n
		l.bytes -= size
		l.done.Add(uint64(span))
		if l.head == len(l.q) {
			l.q, l.head = l.q[:0], 0
		} else if l.head > 4096 && l.head > len(l.q)/2 {
			k := copy(l.q, l.q[l.head:])
			clear(l.q[k:])
			l.q, l.head = l.q[:k], 0
		}
		close(l.progress)
		l.progress = make(chan struct{})
		l.mu.Unlock()
	}
}

// expressWrite writes the queued items of the runs whose FinishSync waits (expressRuns),
// their events and finishes in queue order, ahead of the other runs' items, which keep
// waiting for their batch (and its Linger): a run's order is kept, and runs need no order
// between them. The items stay in the queue, marked taken, so that positions and Stored keep
// counting the queue in order; the batch that reaches them skips them. l.mu is held on entry
// and released. It returns false when the Writer stopped.
func (l *lane) expressWrite() bool {
	runs := make(map[*Recording]bool, len(l.expressRuns))
	for _, r := range l.expressRuns {
		runs[r] = true
	}
	l.expressRuns = l.expressRuns[:0]
	var take []item
	n, size := 0, int64(0)
	for i := l.head; i < len(l.q); i++ {
		it := &l.q[i]
		if it.taken || !runs[it.rec] {
			continue
		}
		take = append(take, *it)
		it.taken, it.ev = true, Event{} // the frame goes with take
		if it.finish == nil {
			n++
			size += itemBytes(take[len(take)-1])
		}
	}
	l.writeStart = time.Now()
	l.mu.Unlock()

	lastRuns := l.lastRuns // an express write says nothing of how busy the lane is
	ok := len(take) == 0 || l.write(take, n)
	l.lastRuns = lastRuns
	if !ok {
		return false
	}
	finishedSync(take)

	l.mu.Lock()
	l.writeStart = time.Time{}
	l.events -= n
	l.bytes -= size
	close(l.progress) // room freed: a caller waiting for it looks again
	l.progress = make(chan struct{})
	l.mu.Unlock()
	return true
}

// finishedSync wakes the FinishSync callers of the finishes among written items.
func finishedSync(written []item) {
	for _, it := range written {
		if it.finish != nil && it.finish.stored != nil {
			close(it.finish.stored)
		}
	}
}

// lingerLeft returns how much longer the loop holds the next batch (Linger, or BusyLinger
// after a batch of BusyRuns runs or more): only while nobody waits on the store, the queue
// holds less than a batch and the Writer is open. l.mu must be held.
func (l *lane) lingerLeft(lastStart time.Time) time.Duration {
	if l.cfg.Linger <= 0 || l.closed || l.urgent > 0 || len(l.q)-l.head >= l.cfg.MaxBatchEvents || l.bytes >= int64(l.cfg.MaxBatchBytes) {
		return 0
	}
	linger := l.cfg.Linger
	if l.cfg.BusyLinger > linger && l.lastRuns >= BusyRuns {
		linger = l.cfg.BusyLinger
	}
	return linger - time.Since(lastStart)
}

// queued returns the events waiting in the lane.
func (l *lane) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events
}
