package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/panics"
)

// Durability says when the proxy forwards an event: before it is stored (async) or after.
type Durability int

const (
	// DurabilityAsync forwards every event at once and records it in the background: the
	// live stream waits on storage only when the recorder's buffer is full (the store is
	// slower than the agent), and then for at most WriterConfig.FullWait. A store outage
	// longer than that loses events, which are counted and recorded as a Gap.
	DurabilityAsync Durability = iota
	// DurabilitySync forwards an event only after the store acknowledged it (AppendSync).
	// With Redis that means "in Redis memory": up to appendfsync's window can still be lost
	// if the Redis host crashes.
	DurabilitySync
)

// String returns "async" or "sync".
func (d Durability) String() string {
	if d == DurabilitySync {
		return "sync"
	}
	return "async"
}

// Writer defaults.
const (
	// DefaultMaxBufferedEvents bounds the events waiting to be stored (see
	// WriterConfig.MaxBufferedEvents): 32 batches of DefaultMaxBatchEvents, 1.6 s of a store
	// stall absorbed at 10,000 events/s before runs are slowed. A deeper buffer only makes a
	// stream that an agent runs faster than the store lag further behind: at 50 × 10,000
	// events with no pause, 65,536 gave the same throughput with a p50 latency of 1.4-1.9 s,
	// 9-11 µs of CPU per event and 240 MB, against 0.7-1.05 s, 6.5-8.3 µs and 120 MB.
	DefaultMaxBufferedEvents = 16384
	DefaultMaxBatchEvents    = 512
	// DefaultMaxBufferedBytes bounds the bytes of the events waiting to be stored (see
	// WriterConfig.MaxBufferedBytes): 16,384 events of the proxy's largest (10 MB) would
	// otherwise be 160 GB.
	DefaultMaxBufferedBytes = 256 << 20
	// DefaultMaxBatchBytes bounds the bytes of one Store.Append call (see
	// WriterConfig.MaxBatchBytes).
	DefaultMaxBatchBytes = 8 << 20
	DefaultRetryMin      = 50 * time.Millisecond
	DefaultRetryMax      = 2 * time.Second
	// DefaultFullWait is how long Append waits for room in a full buffer while the store
	// makes no progress, before it drops events (see WriterConfig.FullWait).
	DefaultFullWait = 10 * time.Second
	// DefaultLinger is the Linger the proxy uses unless configured (proxy.Config.RecorderLinger).
	DefaultLinger = 10 * time.Millisecond
	// DefaultBusyLinger is the BusyLinger the proxy uses unless configured
	// (proxy.Config.RecorderBusyLinger): DefaultLinger's, so that by default one linger
	// holds whatever the load; it takes effect where Linger is set shorter.
	DefaultBusyLinger = 10 * time.Millisecond
	// BusyRuns is how many runs a batch carries for the Writer to wait BusyLinger before the
	// next one.
	BusyRuns = 8
)

// ErrBufferFull is returned by Recording.Append when the buffer stayed full for FullWait while
// the store made no progress, and the event was dropped (counted in WriterStats.Dropped; the
// run's gap is recorded by the store when the run's next event or its Finish is stored).
var ErrBufferFull = errors.New("recorder buffer full, event dropped")

// WriterConfig configures a Writer.
type WriterConfig struct {
	// Store receives the events. Required.
	Store Store
	// Durability is informative for callers (which of Append or AppendSync to use) and is
	// reported by Writer.Durability.
	Durability Durability
	// MaxBufferedEvents bounds the events waiting to be stored, across all runs, including the
	// batch being written (default DefaultMaxBufferedEvents).
	MaxBufferedEvents int
	// MaxBatchEvents bounds the events of one Store.Append call (default DefaultMaxBatchEvents).
	MaxBatchEvents int
	// MaxBufferedBytes bounds the bytes (frames and types) of the events waiting to be stored,
	// across all runs, including the batch being written (default DefaultMaxBufferedBytes): a
	// full buffer, by events or by bytes, slows its callers the same way (see FullWait). An
	// event larger than the bound is taken when nothing else waits, so no event is too large
	// to be recorded (AGUI_MAX_EVENT_BYTES bounds those).
	MaxBufferedBytes int64
	// MaxBatchBytes bounds the bytes of one Store.Append call (default DefaultMaxBatchBytes):
	// a batch ends before the event that would pass it, so one store call, and the time the
	// store spends on it (a Lua script blocks a Redis server while it runs), stays bounded
	// when the agent sends large events. A larger event goes alone.
	MaxBatchBytes int
	// FullWait bounds how long Append waits for room when the buffer is full: the caller (the
	// run's pump) is slowed to the store's pace, which slows the agent through TCP
	// backpressure, and nothing is dropped while the store keeps making progress. Events are
	// dropped, with a gap, only once the write in flight has been stuck for FullWait (the
	// store is down or hung). Zero: DefaultFullWait; negative: never wait (drop at once, the
	// behaviour before backpressure).
	FullWait time.Duration
	// Linger is the least time between the starts of two batches while nobody waits on the
	// store: the writer lets events gather instead of sending each as it comes, so one round
	// trip carries more of them (fewer system calls and store calls per event). A caller
	// waiting on the store (AppendSync, FinishSync, Flush, a full buffer) or a queue of
	// MaxBatchEvents ends the wait at once, so a run's terminal event and sync durability are
	// not delayed. An event reaches the store up to Linger later. Zero: send at once.
	Linger time.Duration
	// BusyLinger is the Linger while many runs stream at once: after a batch that carried the
	// events of BusyRuns runs or more, the next batch waits BusyLinger instead of Linger. With
	// many concurrent runs each batch is large whatever the wait, so a longer one mostly saves
	// round trips and per-run store work (fewer, fuller batches) at no cost to the streams;
	// with few runs a shorter Linger keeps each event's way to the store short. What ends a
	// Linger ends it too. Zero or not above Linger: Linger always; a Linger of zero turns both
	// off.
	BusyLinger time.Duration
	// RetryMin and RetryMax bound the exponential backoff after a store error (defaults
	// DefaultRetryMin, DefaultRetryMax).
	RetryMin, RetryMax time.Duration
	// Lease, when set, renews the lease of every running run whose events a batch stores, in
	// the same store call, on a store that can (RedisStore; others ignore it): a run that
	// streams holds its lease through its appends, and the caller's lease loop renews only
	// the runs Recording.LeasedSince does not vouch for.
	Lease *WriterLease
	// Logger receives outage, recovery and overflow messages (nil: discard). Each outage is
	// logged once when it starts and once when it ends; each run's overflow once.
	Logger *slog.Logger
}

// WriterLease is the lease a Writer's appends renew (WriterConfig.Lease), as
// Leaser.RenewLease renews it: the run is pumped by Node until TTL after the append.
type WriterLease struct {
	Node string
	TTL  time.Duration
	// OnStop is called, from the Writer's goroutine, for a run whose append found that
	// RequestStop was called for it (as RenewLease reports it); it must not block. Called
	// again for each of the run's later appends until the run finishes.
	OnStop func(Run)
}

// WriterStats are the Writer's counters since it started.
type WriterStats struct {
	Queued    int // events waiting now, including the batch being written
	HighWater int // the largest Queued seen
	// QueuedBytes and HighWaterBytes are Queued and HighWater in bytes (itemBytes).
	QueuedBytes    int64
	HighWaterBytes int64
	Appended       uint64 // events handed to a successful Store.Append (duplicates skipped by the store included)
	Batches        uint64 // successful Store.Append calls
	RoundTrips     uint64 // store calls made (Append and FinishRun, failed ones included)
	StoreErrors    uint64 // store calls that failed
	Retries        uint64 // backoff waits after a failure
	Dropped        uint64 // events refused because the buffer was full (or AppendSync could not queue)
	// Waits counts the Append calls that found the buffer full and waited for room (the run
	// was slowed to the store's pace); WaitTime is their summed wait.
	Waits    uint64
	WaitTime time.Duration
	Finished uint64 // runs whose final status was stored
	// BatchLatency is the summed duration of successful Store.Append calls; divide by
	// BatchLatencyCount for the mean.
	BatchLatency      time.Duration
	BatchLatencyCount uint64
}

// item is one queued operation: an event, or a run's final status (finish != nil).
type item struct {
	rec    *Recording
	ev     Event
	finish *finishOp
}

type finishOp struct {
	status  RunStatus
	detail  string
	lastSeq int64
}

// A Recording is one run as a Writer records it, from Writer.Open to the run's finish: the
// run's ids and epoch, checked once when it is opened, and what the Writer keeps for the run
// between batches (where the run's events go in the batch being built, the store's key for it,
// the last lease its appends renewed). Each of the run's events and its end are queued through
// it (Append, Finish and their variants), so that nothing done per event checks the ids again
// or looks the run up by them: at thousands of slow streams, a batch holds one event of each of
// thousands of runs. Its methods are safe for concurrent use.
type Recording struct {
	w   *Writer
	run Run // as opened; never modified

	// gen and batch are the writer goroutine's: in the batch being built (batcher.gen), the
	// run's events are batches[batch].
	gen   uint64
	batch int
	// key is the store's key for the run (RedisStore: the run hash), set by the store from
	// the writer goroutine the first time it writes the run.
	key string
	// leasedAt is when an append last renewed the run's lease (WriterConfig.Lease), in unix
	// nanoseconds; 0 before that and once the run's finish is stored.
	leasedAt atomic.Int64
	// overflowLogged is set (under w.mu) once the run's first dropped event is logged.
	overflowLogged bool
}

// Open checks run's ids and epoch (errors wrap agui.ErrInvalidID or ErrInvalidEpoch) and
// returns the Recording its events and end are queued through. Opening a run writes nothing.
func (w *Writer) Open(run Run) (*Recording, error) {
	if err := validateRun(run); err != nil {
		return nil, err
	}
	return &Recording{w: w, run: run}, nil
}

// Run returns the run as it was opened.
func (r *Recording) Run() Run { return r.run }

// Writer records events through a Store without making the caller wait while the store
// keeps up: a bounded queue shared by all runs (a full queue slows its callers, see Append),
// drained by ONE goroutine that writes everything queued (up to MaxBatchEvents and
// MaxBatchBytes) with one Store.Append call, then the finishes taken with it (in one round
// trip on Redis), retrying with capped exponential backoff for as long as the Writer runs.
// Items are written in queue order, so each run's events (and its Finish) are stored in the
// order they were queued, retries included.
//
// All methods are safe for concurrent use. Shutdown stops the goroutine.
type Writer struct {
	cfg WriterConfig
	log *slog.Logger

	mu       sync.Mutex
	q        []item // q[head:] is waiting; q[head:head+inflight] is being written
	head     int
	inflight int
	events   int    // events in q[head:]
	bytes    int64  // itemBytes of the events in q[head:]
	enq      uint64 // items ever queued
	// done counts the items ever completed, in queue order: written under mu (with
	// progress), read without it by Stored, which a pump calls per event.
	done     atomic.Uint64
	progress chan struct{} // closed and replaced whenever done advances or the writer stops
	closed   bool
	// writeStart is when the write in flight began (zero when none): the store is stuck once
	// it is older than FullWait.
	writeStart time.Time
	// urgent counts the callers waiting on the store (wait, a full buffer): Linger does not
	// hold the next batch while it is not zero.
	urgent int
	st     WriterStats

	batcher  batcher         // the writer goroutine's
	lastRuns int             // runs whose events the last batch carried (the writer goroutine's)
	lease    appendLease     // the writer goroutine's: the lease its appends renew
	outcomes []appendOutcome // the writer goroutine's, reused

	wake    chan struct{} // cap 1: something was queued or Shutdown started
	hurry   chan struct{} // cap 1: Linger must end (a caller waits, the queue is a full batch)
	stop    chan struct{} // closed when Shutdown gives up waiting: abandon work
	exited  chan struct{} // closed when the goroutine returns
	stopCtx context.Context
	cancel  context.CancelFunc
	stopped sync.Once
}

// NewWriter starts a Writer and its goroutine; call Shutdown to stop it.
func NewWriter(cfg WriterConfig) *Writer {
	if cfg.MaxBufferedEvents <= 0 {
		cfg.MaxBufferedEvents = DefaultMaxBufferedEvents
	}
	if cfg.MaxBatchEvents <= 0 {
		cfg.MaxBatchEvents = DefaultMaxBatchEvents
	}
	if cfg.MaxBufferedBytes <= 0 {
		cfg.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.FullWait == 0 {
		cfg.FullWait = DefaultFullWait
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = DefaultRetryMin
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(DefaultRetryMax, cfg.RetryMin)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		cfg: cfg, log: log,
		progress: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		hurry:    make(chan struct{}, 1),
		stop:     make(chan struct{}),
		exited:   make(chan struct{}),
		stopCtx:  ctx, cancel: cancel,
	}
	go w.loop()
	return w
}

// Durability returns the configured durability.
func (w *Writer) Durability() Durability { return w.cfg.Durability }

func (w *Writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// hurryUp ends a Linger wait.
func (w *Writer) hurryUp() {
	select {
	case w.hurry <- struct{}{}:
	default:
	}
}

// waiting counts a caller that starts (+1) or stops (-1) waiting on the store; one that
// starts ends a Linger wait. w.mu must be held.
func (w *Writer) waiting(delta int) {
	w.urgent += delta
	if delta > 0 && w.cfg.Linger > 0 {
		w.hurryUp()
	}
}

// enqueue adds it when there is room. w.mu must be held. It returns the item's position
// (completion is reached when done >= position) and whether it was queued.
func (w *Writer) enqueue(it item) (uint64, bool) {
	size := itemBytes(it)
	if it.finish == nil {
		// An event larger than the whole bound is taken once nothing else waits.
		if w.events >= w.cfg.MaxBufferedEvents || (w.events > 0 && w.bytes+size > w.cfg.MaxBufferedBytes) {
			return 0, false
		}
		w.events++
		w.bytes += size
		w.st.HighWater = max(w.st.HighWater, w.events)
		w.st.HighWaterBytes = max(w.st.HighWaterBytes, w.bytes)
	}
	if w.head > 0 && w.head == len(w.q) && w.inflight == 0 {
		w.q, w.head = w.q[:0], 0
	}
	w.q = append(w.q, it)
	w.enq++
	// A batch's worth is queued: end a Linger wait. Once, when the queue reaches it (by
	// events or by bytes), not at every event after: lingerLeft sees a full batch anyway.
	batch := int64(w.cfg.MaxBatchBytes)
	if w.cfg.Linger > 0 && (len(w.q)-w.head == w.cfg.MaxBatchEvents || (w.bytes >= batch && w.bytes-size < batch)) {
		w.hurryUp()
	}
	return w.enq, true
}

// itemBytes is what an event counts against MaxBufferedBytes and MaxBatchBytes: its frame
// and type (a finish counts nothing).
func itemBytes(it item) int64 {
	if it.finish != nil {
		return 0
	}
	return int64(len(it.ev.Frame) + len(it.ev.Type))
}

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

// AppendPos is Append that also returns the event's position in the Writer's queue: the event
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
	w := r.w
	w.mu.Lock()
	var waited time.Time
	for {
		if w.closed {
			w.mu.Unlock()
			return 0, ErrClosed
		}
		if pos, ok := w.enqueue(item{rec: r, ev: ev}); ok {
			if !waited.IsZero() {
				w.st.WaitTime += time.Since(waited)
			}
			w.mu.Unlock()
			w.signal()
			return pos, nil
		}
		wait := w.stuckIn()
		if wait <= 0 {
			w.dropLocked(r, ev.Seq)
			w.mu.Unlock()
			return 0, ErrBufferFull
		}
		first := waited.IsZero()
		if first {
			waited = time.Now()
			w.st.Waits++
		}
		progress := w.progress
		w.waiting(+1)
		w.mu.Unlock()
		if first && beforeWait != nil {
			beforeWait()
		}
		t := time.NewTimer(wait)
		select {
		case <-progress:
		case <-t.C:
		case <-w.exited:
		}
		t.Stop()
		w.mu.Lock()
		w.waiting(-1)
	}
}

// stuckIn returns how long until the write in flight has been stuck for FullWait (<= 0: it
// has, or waiting is disabled). w.mu must be held.
func (w *Writer) stuckIn() time.Duration {
	if w.cfg.FullWait < 0 {
		return 0
	}
	select {
	case <-w.exited:
		return 0
	default:
	}
	if w.writeStart.IsZero() { // the loop is between batches: it will take one at once
		return w.cfg.FullWait
	}
	return w.cfg.FullWait - time.Since(w.writeStart)
}

// dropLocked counts a dropped event and logs the run's first drop. w.mu must be held.
func (w *Writer) dropLocked(r *Recording, seq int64) {
	w.st.Dropped++
	if !r.overflowLogged {
		r.overflowLogged = true
		run := r.run
		w.log.Warn("recorder: buffer full, dropping events; the run will be marked with a gap",
			"thread_id", run.ThreadID, "run_id", run.RunID, "seq", seq, "buffered", w.events, "buffered_bytes", w.bytes)
	}
}

// AppendSync queues ev and waits until it is stored (ev.Frame is kept as by Append). If ctx ends first it returns ctx's error;
// an event already queued stays queued and will still be stored, while one that could not be
// queued (buffer full until ctx ended) is dropped and counted like Append's overflow.
func (r *Recording) AppendSync(ctx context.Context, ev Event) error {
	w := r.w
	w.mu.Lock()
	for {
		if w.closed {
			w.mu.Unlock()
			return ErrClosed
		}
		pos, ok := w.enqueue(item{rec: r, ev: ev})
		if ok {
			w.mu.Unlock()
			w.signal()
			return w.wait(ctx, pos)
		}
		progress := w.progress
		w.waiting(+1)
		w.mu.Unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			w.mu.Lock()
			w.waiting(-1)
			w.dropLocked(r, ev.Seq)
			w.mu.Unlock()
			return fmt.Errorf("queueing event %d of run %q: %w", ev.Seq, r.run.RunID, ctx.Err())
		}
		w.mu.Lock()
		w.waiting(-1)
	}
}

// wait blocks until the items up to pos are done, ctx ends or the writer gives up.
func (w *Writer) wait(ctx context.Context, pos uint64) error {
	counted := false // as waiting on the store (it ends a Linger), once it has to wait
	defer func() {
		if counted {
			w.mu.Lock()
			w.waiting(-1)
			w.mu.Unlock()
		}
	}()
	for {
		w.mu.Lock()
		done, progress := w.done.Load(), w.progress
		if done < pos && !counted {
			w.waiting(+1)
			counted = true
		}
		w.mu.Unlock()
		if done >= pos {
			return nil
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		case <-w.exited:
			w.mu.Lock()
			done = w.done.Load()
			w.mu.Unlock()
			if done >= pos {
				return nil
			}
			return ErrClosed
		}
	}
}

// Stored returns the position (AppendPos) up to which every queued item is stored. It does not
// take the Writer's lock: a pump calls it per event.
func (w *Writer) Stored() uint64 { return w.done.Load() }

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
func (r *Recording) FinishSync(ctx context.Context, status RunStatus, detail string, lastSeq int64) error {
	pos, ok := r.finish(status, detail, lastSeq)
	if !ok {
		return ErrClosed
	}
	return r.w.wait(ctx, pos)
}

func (r *Recording) finish(status RunStatus, detail string, lastSeq int64) (uint64, bool) {
	w := r.w
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return 0, false
	}
	pos, ok := w.enqueue(item{rec: r, finish: &finishOp{status, detail, lastSeq}})
	w.mu.Unlock()
	w.signal()
	return pos, ok
}

// Flush waits until everything queued before the call is stored, or ctx ends.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	pos := w.enq
	w.mu.Unlock()
	return w.wait(ctx, pos)
}

// Shutdown stops accepting events (Append returns ErrClosed), keeps writing until everything
// queued is stored or ctx ends, then stops the goroutine and waits for it. It returns ctx's
// error (wrapped, with the number of events abandoned) when it had to give up.
func (w *Writer) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	pos := w.enq
	w.mu.Unlock()
	w.signal()
	err := w.wait(ctx, pos)
	w.stopped.Do(func() {
		close(w.stop)
		w.cancel()
	})
	<-w.exited
	if err != nil {
		w.mu.Lock()
		left := w.events
		w.mu.Unlock()
		w.log.Error("recorder: shutdown before everything was stored", "abandoned_events", left, "err", err)
		return fmt.Errorf("recorder shutdown abandoned %d events: %w", left, err)
	}
	return nil
}

// Stats returns a snapshot of the counters.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.st
	st.Queued = w.events
	st.QueuedBytes = w.bytes
	return st
}

// loop is the Writer's goroutine: it takes batches from the queue and writes them.
func (w *Writer) loop() {
	defer close(w.exited)
	var take []item
	var lastStart time.Time     // of the last batch
	var lingerTimer *time.Timer // (Go 1.23 timers: Reset and Stop need no draining)
	for {
		w.mu.Lock()
		for w.head == len(w.q) && !w.closed {
			w.mu.Unlock()
			select {
			case <-w.wake:
			case <-w.stop:
				return
			}
			w.mu.Lock()
		}
		if w.head == len(w.q) { // closed and drained
			w.mu.Unlock()
			return
		}
		if rest := w.lingerLeft(lastStart); rest > 0 {
			w.mu.Unlock()
			if lingerTimer == nil {
				lingerTimer = time.NewTimer(rest)
			} else {
				lingerTimer.Reset(rest)
			}
			select {
			case <-lingerTimer.C:
			case <-w.hurry:
				lingerTimer.Stop()
			case <-w.stop:
				return
			}
			continue
		}
		take = take[:0]
		n, size := 0, int64(0)
		for i := w.head; i < len(w.q) && n < w.cfg.MaxBatchEvents; i++ {
			b := itemBytes(w.q[i])
			if n > 0 && size+b > int64(w.cfg.MaxBatchBytes) {
				break
			}
			take = append(take, w.q[i])
			if w.q[i].finish == nil {
				n++
				size += b
			}
		}
		w.inflight = len(take)
		w.writeStart = time.Now()
		lastStart = w.writeStart
		w.mu.Unlock()

		if !w.write(take, n) {
			return // stopped
		}

		w.mu.Lock()
		clear(w.q[w.head : w.head+len(take)]) // release frames
		w.head += len(take)
		w.inflight = 0
		w.writeStart = time.Time{}
		w.events -= n
		w.bytes -= size
		w.done.Add(uint64(len(take)))
		if w.head == len(w.q) {
			w.q, w.head = w.q[:0], 0
		} else if w.head > 4096 && w.head > len(w.q)/2 {
			k := copy(w.q, w.q[w.head:])
			clear(w.q[k:])
			w.q, w.head = w.q[:k], 0
		}
		close(w.progress)
		w.progress = make(chan struct{})
		w.mu.Unlock()
	}
}

// lingerLeft returns how much longer the loop holds the next batch (Linger, or BusyLinger
// after a batch of BusyRuns runs or more): only while nobody waits on the store, the queue
// holds less than a batch and the Writer is open. w.mu must be held.
func (w *Writer) lingerLeft(lastStart time.Time) time.Duration {
	if w.cfg.Linger <= 0 || w.closed || w.urgent > 0 || len(w.q)-w.head >= w.cfg.MaxBatchEvents || w.bytes >= int64(w.cfg.MaxBatchBytes) {
		return 0
	}
	linger := w.cfg.Linger
	if w.cfg.BusyLinger > linger && w.lastRuns >= BusyRuns {
		linger = w.cfg.BusyLinger
	}
	return linger - time.Since(lastStart)
}

// appendFinisher is a Store that stores a batch's events and finishes runs in one round trip
// (RedisStore: the append script applies FinishRun's rules to a run after its events).
// fins[i], when not nil, is the finish of batches[i]'s run. With a lease (not nil), the
// same call renews the lease of each running run that stores events, and out[i] (out is as
// long as batches) says whether batches[i]'s run's was. Like Append it is idempotent, so a
// failed call is sent again whole.
type appendFinisher interface {
	appendFinish(ctx context.Context, batches []Batch, fins []*finishOp, lease *appendLease, out []appendOutcome) error
}

// appendLease is the lease an append renews: node, and the expiry in ms since the epoch.
type appendLease struct {
	node    string
	untilMs int64
}

// appendOutcome is what an append with a lease did to one batch's run's lease.
type appendOutcome int8

// The outcomes, as append.lua answers them.
const (
	appendNotLeased appendOutcome = iota // not renewed (no event stored, the run not running)
	appendLeased                         // renewed
	appendStop                           // renewed, and RequestStop was called for the run
)

// LeasedSince reports whether an append renewed the run's lease at t or later
// (WriterConfig.Lease): its lease then runs until TTL after that. It is false once the run's
// finish is stored.
func (r *Recording) LeasedSince(t time.Time) bool {
	at := r.leasedAt.Load()
	return at != 0 && at >= t.UnixNano()
}

// writeResult is how writeAll ended.
type writeResult int8

const (
	writeDone     writeResult = iota // stored
	writeStopped                     // the writer was stopped first
	writePanicked                    // the store call panicked twice in a row
)

// write stores take (n events plus finishes), retrying until it succeeds; false means the
// writer was stopped first.
//
// A panic in the store call (a bug, or a dependency's on an input it should accept) does not
// end the writer: the batch is written again at once, and when that panics too it is written
// run by run, so that only a run whose own events make the store panic loses them. Those are
// counted as dropped, logged, and become a gap of the run (the store records it when the
// run's next event or its finish is stored); the run's finish is written on its own.
func (w *Writer) write(take []item, n int) bool {
	switch w.writeAll(take, n) {
	case writeDone:
		return true
	case writeStopped:
		return false
	}
	for _, one := range splitRuns(take) {
		switch w.writeAll(one, countEvents(one)) {
		case writeStopped:
			return false
		case writePanicked:
			if !w.lose(one) {
				return false
			}
		}
	}
	return true
}

// splitRuns returns take's items grouped by run (one slice per run, the run's items in queue
// order), the runs in the order of their first item.
func splitRuns(take []item) [][]item {
	var out [][]item
	at := map[*Recording]int{}
	for _, it := range take {
		i, ok := at[it.rec]
		if !ok {
			i = len(out)
			at[it.rec] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], it)
	}
	return out
}

// countEvents returns the events among items (the rest are finishes).
func countEvents(items []item) int {
	n := 0
	for _, it := range items {
		if it.finish == nil {
			n++
		}
	}
	return n
}

// lose gives up the events of one run's items, on which the store panicked: they are counted
// as dropped and logged, and the run's finish among them (if any) is written alone. false
// means the writer was stopped first.
func (w *Writer) lose(items []item) bool {
	var fins []item
	dropped := 0
	for _, it := range items {
		if it.finish != nil {
			fins = append(fins, it)
		} else {
			dropped++
		}
	}
	run := items[0].rec.run
	w.mu.Lock()
	w.st.Dropped += uint64(dropped)
	w.mu.Unlock()
	w.log.Error("recorder: the store panicked on a run's events; they are lost and the run is marked with a gap",
		"thread_id", run.ThreadID, "run_id", run.RunID, "events", dropped, "first_seq", items[0].ev.Seq)
	if len(fins) == 0 {
		return true
	}
	switch w.writeAll(fins, 0) {
	case writeStopped:
		return false
	case writePanicked:
		w.log.Error("recorder: the store panicked on a run's end; the run stays recorded as running until it is reaped",
			"thread_id", run.ThreadID, "run_id", run.RunID)
	}
	return true
}

// writeAll stores take (n events plus finishes), retrying after a store error until it
// succeeds (see write).
func (w *Writer) writeAll(take []item, n int) writeResult {
	batches := w.batcher.group(take)
	defer w.batcher.release()
	w.lastRuns = len(batches)
	af, together := w.cfg.Store.(appendFinisher)
	var fins []*finishOp
	if together {
		batches, fins = w.batcher.finishes(take)
	}
	appended := n == 0
	var finished []bool // finished[i]: the i-th finish of take is stored
	backoff := w.cfg.RetryMin
	failing := false
	panicked := 0
	for {
		err := panics.Call(panics.Writer, w.log, func() error {
			if panics.Hooked() {
				for _, b := range batches {
					panics.Probe(panics.Writer, b.Run.ThreadID)
				}
			}
			if together {
				return w.attemptTogether(af, batches, fins, n)
			}
			return w.attempt(batches, n, &appended, take, &finished)
		})
		if err == nil {
			if failing {
				w.log.Info("recorder: store is writable again")
			}
			return writeDone
		}
		if errors.Is(err, panics.ErrPanicked) {
			if panicked++; panicked == 2 {
				return writePanicked
			}
			continue // written again at once: the store's calls are idempotent
		}
		w.mu.Lock()
		w.st.StoreErrors++
		w.st.Retries++
		w.mu.Unlock()
		if !failing {
			failing = true
			w.log.Warn("recorder: store write failed; buffering and retrying", "err", err, "queued", w.Stats().Queued)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-w.stop:
			t.Stop()
			return writeStopped
		}
		backoff = min(backoff*2, w.cfg.RetryMax)
	}
}

// attemptTogether stores take's events and finishes (batches, fins) in one call.
func (w *Writer) attemptTogether(af appendFinisher, batches []Batch, fins []*finishOp, n int) error {
	if len(batches) == 0 {
		return nil
	}
	start := time.Now()
	w.count(func(st *WriterStats) { st.RoundTrips++ })
	var lease *appendLease
	var out []appendOutcome
	if l := w.cfg.Lease; l != nil {
		w.lease = appendLease{node: l.Node, untilMs: leaseMs(start.Add(l.TTL))}
		lease = &w.lease
		out = slices.Grow(w.outcomes[:0], len(batches))[:len(batches)]
		clear(out)
		w.outcomes = out
	}
	if err := af.appendFinish(w.stopCtx, batches, fins, lease, out); err != nil {
		return err
	}
	d := time.Since(start)
	if lease != nil {
		w.noteLeases(batches, fins, out, start)
	}
	finished := 0
	for _, f := range fins {
		if f != nil {
			finished++
		}
	}
	w.count(func(st *WriterStats) {
		st.Finished += uint64(finished)
		if n > 0 {
			st.Appended += uint64(n)
			st.Batches++
			st.BatchLatency += d
			st.BatchLatencyCount++
		}
	})
	return nil
}

// attempt makes one pass over the store calls still needed for a batch: the events, then the
// finishes not stored yet, one by one.
func (w *Writer) attempt(batches []Batch, n int, appended *bool, take []item, finished *[]bool) error {
	ctx := w.stopCtx
	if !*appended {
		start := time.Now()
		w.count(func(st *WriterStats) { st.RoundTrips++ })
		if err := w.cfg.Store.Append(ctx, batches); err != nil {
			return err
		}
		d := time.Since(start)
		*appended = true
		w.count(func(st *WriterStats) {
			st.Appended += uint64(n)
			st.Batches++
			st.BatchLatency += d
			st.BatchLatencyCount++
		})
	}
	var fins []item // the finishes of take, in queue order
	for _, it := range take {
		if it.finish != nil {
			fins = append(fins, it)
		}
	}
	if len(fins) == 0 {
		return nil
	}
	if *finished == nil {
		*finished = make([]bool, len(fins))
	}
	done := *finished
	for i, it := range fins {
		if done[i] {
			continue
		}
		f := it.finish
		w.count(func(st *WriterStats) { st.RoundTrips++ })
		run := it.rec.run
		err := w.cfg.Store.FinishRun(ctx, run.ThreadID, run.RunID, f.status, f.detail, f.lastSeq)
		if errors.Is(err, ErrRunNotFound) || errors.Is(err, ErrThreadNotFound) {
			// The store lost the run: re-create its metadata (the store records the gap from
			// lastSeq), then finish it.
			w.count(func(st *WriterStats) { st.RoundTrips += 2 })
			if err = w.cfg.Store.Append(ctx, []Batch{{Run: run}}); err == nil {
				err = w.cfg.Store.FinishRun(ctx, run.ThreadID, run.RunID, f.status, f.detail, f.lastSeq)
			}
		}
		if err != nil {
			return err // stop at the first failure, as the store is failing
		}
		done[i] = true
		w.count(func(st *WriterStats) { st.Finished++ })
	}
	return nil
}

// noteLeases records the leases an append renewed at start (out[i] for batches[i]), forgets
// the runs it finished, and calls OnStop for the runs asked to stop.
func (w *Writer) noteLeases(batches []Batch, fins []*finishOp, out []appendOutcome, start time.Time) {
	stops := false
	at := start.UnixNano()
	for i, b := range batches {
		switch {
		case fins != nil && fins[i] != nil:
			b.rec.leasedAt.Store(0)
		case out[i] != appendNotLeased:
			b.rec.leasedAt.Store(at)
			stops = stops || out[i] == appendStop
		}
	}
	if !stops || w.cfg.Lease.OnStop == nil {
		return
	}
	for i, b := range batches {
		if out[i] == appendStop && (fins == nil || fins[i] == nil) {
			w.cfg.Lease.OnStop(b.Run)
		}
	}
}

func (w *Writer) count(f func(*WriterStats)) {
	w.mu.Lock()
	f(&w.st)
	w.mu.Unlock()
}

// batcher turns queued items into one Batch per run, events in queue order, reusing its
// memory from one batch to the next: at thousands of slow streams a batch holds one event of
// each of thousands of runs, and a fresh Batch (with its Run) and event slice per run per
// batch was most of what recording allocated. Used by the writer's goroutine only.
type batcher struct {
	gen     uint64 // of the batch being built: a Recording whose gen is this one has a batch in it
	batches []Batch
	counts  []int
	at      []int // at[i]: the batch of take[i] (-1 for a finish)
	events  []Event
}

// maxKeptBatches bounds the batches a batcher keeps room for between batches.
const maxKeptBatches = 4096

// group returns take's batches; they are valid until release.
func (g *batcher) group(take []item) []Batch {
	g.gen++
	n := 0
	g.at = g.at[:0]
	for _, it := range take {
		if it.finish != nil {
			g.at = append(g.at, -1)
			continue
		}
		i := g.batchOf(it.rec)
		g.at = append(g.at, i)
		g.counts[i]++
		n++
	}
	if cap(g.events) < n {
		g.events = make([]Event, n)
	}
	off := 0
	for i := range g.batches {
		g.batches[i].Events = g.events[off : off : off+g.counts[i]]
		off += g.counts[i]
	}
	for j, it := range take {
		if i := g.at[j]; i >= 0 {
			g.batches[i].Events = append(g.batches[i].Events, it.ev)
		}
	}
	return g.batches
}

// finishes adds the finishes of take, the items of the last group, to its batches: fins[i] is
// the finish of batches[i]'s run (nil: none), and a run finished without events in take gets
// a batch of its own, without events. fins is nil when take holds no finish.
func (g *batcher) finishes(take []item) (batches []Batch, fins []*finishOp) {
	for _, it := range take {
		if it.finish == nil {
			continue
		}
		i := g.batchOf(it.rec)
		fins = append(fins, make([]*finishOp, len(g.batches)-len(fins))...) // (no allocation for the make)
		fins[i] = it.finish
	}
	return g.batches, fins
}

// batchOf returns the index of rec's batch, adding one without events when it has none.
func (g *batcher) batchOf(rec *Recording) int {
	if rec.gen == g.gen {
		return rec.batch
	}
	i := len(g.batches)
	rec.gen, rec.batch = g.gen, i
	g.batches = append(g.batches, Batch{Run: rec.run, rec: rec})
	g.counts = append(g.counts, 0)
	return i
}

// release lets go of the last batches' runs and frames, keeping the memory for the next.
func (g *batcher) release() {
	clear(g.batches)
	clear(g.events)
	g.batches, g.counts = g.batches[:0], g.counts[:0]
	if cap(g.batches) > maxKeptBatches {
		g.batches, g.counts = nil, nil
	}
	if cap(g.at) > 8*maxKeptBatches {
		g.at = nil
	}
	if cap(g.events) > 8*maxKeptBatches {
		g.events = nil
	}
}
