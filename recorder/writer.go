package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
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
	// WriterConfig.MaxBufferedEvents): 8 batches of DefaultMaxBatchEvents, 1.6 s of a store
	// stall absorbed at 10,000 events/s before runs are slowed. A deeper buffer only makes a
	// stream that an agent runs faster than the store lag further behind: at 50 × 10,000
	// events with no pause, 65,536 gave the same throughput with a p50 latency of 1.4-1.9 s,
	// 9-11 µs of CPU per event and 240 MB, against 0.7-1.05 s, 6.5-8.3 µs and 120 MB.
	DefaultMaxBufferedEvents = 16384
	// DefaultMaxBatchEvents bounds the events of one store call (see
	// WriterConfig.MaxBatchEvents): on Redis one script call of 10-20 ms at most on a busy 2-core machine. At 2,000
	// streams at 20 ms (55,000 events/s over four lanes), 512 kept the lanes' queues full
	// (40,000-90,000 backpressure waits, p99 1.8-2.1 s); 2,048, 1,900-3,400 waits and p99 0.5 s.
	DefaultMaxBatchEvents = 2048
	// DefaultMaxBufferedBytes bounds the bytes of the events waiting to be stored (see
	// WriterConfig.MaxBufferedBytes): 16,384 events of the proxy's largest (10 MB) would
	// otherwise be 160 GB.
	DefaultMaxBufferedBytes = 256 << 20
	// DefaultMaxBatchBytes bounds the bytes of one Store.Append call (see
	// WriterConfig.MaxBatchBytes).
	DefaultMaxBatchBytes = 8 << 20
	// DefaultGroupCommitBatchBytes is MaxBatchBytes on a store that commits a batch as one
	// transaction (DiskStore), where MaxBatchEvents defaults to the whole buffer: such a
	// commit costs about the pages it dirties, one or two per run whatever its number of
	// events, so the longer one takes the more the next should carry. At 2,000 streams at
	// 20 ms, batches of 512 events gave a p50 latency of 67 s; of the whole buffer, 10 s.
	DefaultGroupCommitBatchBytes = 64 << 20
	DefaultRetryMin              = 50 * time.Millisecond
	DefaultRetryMax              = 2 * time.Second
	// DefaultFullWait is how long Append waits for room in a full buffer while the store
	// makes no progress, before it drops events (see WriterConfig.FullWait).
	DefaultFullWait = 10 * time.Second
	// DefaultLinger is the Linger the proxy uses unless configured (proxy.Config.RecorderLinger).
	DefaultLinger = 10 * time.Millisecond
	// DefaultBusyLinger is the BusyLinger the proxy uses unless configured
	// (proxy.Config.RecorderBusyLinger): DefaultLinger's, so that by default one linger
	// holds whatever the load; it takes effect where Linger is set shorter.
	DefaultBusyLinger = 10 * time.Millisecond
	// DefaultLanes is the Lanes the proxy uses unless configured (proxy.Config.RecorderLanes):
	// four batches in flight, so that a store's round trip (a Redis script call of a few
	// milliseconds) no longer bounds the rate, while each stays large enough to be cheap.
	DefaultLanes = 4
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
	// MaxBatchEvents bounds the events of one Store.Append call (default DefaultMaxBatchEvents;
	// on a store that commits each batch as one transaction, DiskStore, a lane's whole buffer).
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
	// when the agent sends large events. A larger event goes alone. On a store that commits
	// each batch as one transaction (DiskStore) the default is DefaultGroupCommitBatchBytes.
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
	// waiting on the store (AppendSync, Flush, a full buffer) or a queue of MaxBatchEvents
	// ends the wait at once, so sync durability is not delayed; a FinishSync has its run's
	// queued events and finish written at once, ahead of the rest, and leaves the other runs'
	// events lingering (an express write; on a DiskStore, whose commits are serialized, it
	// ends the wait too), so a run's terminal event is not delayed either.
	// An event reaches the store up to Linger later. Zero: send at once.
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
	// Lanes is how many batches are written at once (default 1): the runs are spread over
	// that many lanes by thread, each a queue of its own with its own goroutine, batch and
	// store call in flight, so a slow round trip delays only its lane. A run's events and its
	// finish go through one lane, in order. MaxBufferedEvents and MaxBufferedBytes are split
	// evenly between the lanes; MaxBatchEvents, MaxBatchBytes and Linger apply to each.
	Lanes int
	// Logger receives outage, recovery and overflow messages (nil: discard). Each outage is
	// logged once when it starts and once when it ends; each run's overflow once.
	Logger *slog.Logger
}

// WriterLease is the lease a Writer's appends renew (WriterConfig.Lease), as
// Leaser.RenewLease renews it: the run is pumped by Node until TTL after the append.
type WriterLease struct {
	Node string
	TTL  time.Duration
	// OnStop is called, from the goroutine of the run's lane, for a run whose append found that
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

// Writer records events through a Store without making the caller wait while the store
// keeps up. Runs are spread over WriterConfig.Lanes lanes by thread: a lane is a bounded queue
// (a full one slows its callers, see Recording.Append) drained by ONE goroutine of its own that
// writes everything queued (up to MaxBatchEvents and MaxBatchBytes) with one Store.Append call,
// then the finishes taken with it (in one round trip on Redis), retrying with capped
// exponential backoff for as long as the Writer runs. Each lane writes its items in queue
// order, so each run's events (and its Finish) are stored in the order they were queued,
// retries included; the lanes' batches are in flight at the same time.
//
// All methods are safe for concurrent use. Shutdown stops the goroutines.
type Writer struct {
	cfg   WriterConfig
	log   *slog.Logger
	lanes []*lane
}

// NewWriter starts a Writer and its lanes' goroutines; call Shutdown to stop them.
func NewWriter(cfg WriterConfig) *Writer {
	if cfg.MaxBufferedEvents <= 0 {
		cfg.MaxBufferedEvents = DefaultMaxBufferedEvents
	}
	_, group := cfg.Store.(groupCommitter)
	if cfg.MaxBatchEvents <= 0 {
		cfg.MaxBatchEvents = DefaultMaxBatchEvents
		if group {
			cfg.MaxBatchEvents = cfg.MaxBufferedEvents
		}
	}
	if cfg.MaxBufferedBytes <= 0 {
		cfg.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
		if group {
			cfg.MaxBatchBytes = DefaultGroupCommitBatchBytes
		}
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
	cfg.Lanes = min(max(cfg.Lanes, 1), cfg.MaxBufferedEvents)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w := &Writer{cfg: cfg, log: log, lanes: make([]*lane, cfg.Lanes)}
	per := cfg // each lane's share of the buffer
	per.MaxBufferedEvents = max(cfg.MaxBufferedEvents/cfg.Lanes, 1)
	per.MaxBufferedBytes = max(cfg.MaxBufferedBytes/int64(cfg.Lanes), 1)
	for i := range w.lanes {
		w.lanes[i] = newLane(per, log)
	}
	return w
}

// Open checks run's ids and epoch (errors wrap agui.ErrInvalidID or ErrInvalidEpoch) and
// returns the Recording its events and end are queued through, in the lane of its thread.
// Opening a run writes nothing.
func (w *Writer) Open(run Run) (*Recording, error) {
	if err := validateRun(run); err != nil {
		return nil, err
	}
	return &Recording{l: w.laneOf(run.ThreadID), run: run}, nil
}

// laneOf returns the lane of a thread's runs (FNV-1a of its id).
func (w *Writer) laneOf(threadID string) *lane {
	if len(w.lanes) == 1 {
		return w.lanes[0]
	}
	h := uint32(2166136261)
	for i := 0; i < len(threadID); i++ {
		h = (h ^ uint32(threadID[i])) * 16777619
	}
	return w.lanes[h%uint32(len(w.lanes))]
}

// Durability returns the configured durability.
func (w *Writer) Durability() Durability { return w.cfg.Durability }

// Flush waits until everything queued before the call is stored, or ctx ends.
func (w *Writer) Flush(ctx context.Context) error {
	pos := make([]uint64, len(w.lanes))
	for i, l := range w.lanes {
		l.mu.Lock()
		pos[i] = l.enq
		l.mu.Unlock()
	}
	for i, l := range w.lanes {
		if err := l.wait(ctx, pos[i]); err != nil {
			return err
		}
	}
	return nil
}

// Shutdown stops accepting events (Append returns ErrClosed), keeps writing until everything
// queued is stored or ctx ends, then stops the goroutines and waits for them. It returns ctx's
// error (wrapped, with the number of events abandoned) when it had to give up.
func (w *Writer) Shutdown(ctx context.Context) error {
	pos := make([]uint64, len(w.lanes))
	for i, l := range w.lanes {
		pos[i] = l.close()
	}
	var err error
	for i, l := range w.lanes {
		if e := l.wait(ctx, pos[i]); e != nil && err == nil {
			err = e
		}
	}
	left := 0
	for _, l := range w.lanes {
		l.stopped.Do(func() {
			close(l.stop)
			l.cancel()
		})
		<-l.exited
		l.mu.Lock()
		left += l.events
		l.mu.Unlock()
	}
	if err != nil {
		w.log.Error("recorder: shutdown before everything was stored", "abandoned_events", left, "err", err)
		return fmt.Errorf("recorder shutdown abandoned %d events: %w", left, err)
	}
	return nil
}

// Stats returns a snapshot of the counters, summed over the lanes (HighWater and
// HighWaterBytes: the sum of each lane's).
func (w *Writer) Stats() WriterStats {
	var st WriterStats
	for _, l := range w.lanes {
		l.mu.Lock()
		s := l.st
		s.Queued, s.QueuedBytes = l.events, l.bytes
		l.mu.Unlock()
		st.Queued += s.Queued
		st.HighWater += s.HighWater
		st.QueuedBytes += s.QueuedBytes
		st.HighWaterBytes += s.HighWaterBytes
		st.Appended += s.Appended
		st.Batches += s.Batches
		st.RoundTrips += s.RoundTrips
		st.StoreErrors += s.StoreErrors
		st.Retries += s.Retries
		st.Dropped += s.Dropped
		st.Waits += s.Waits
		st.WaitTime += s.WaitTime
		st.Finished += s.Finished
		st.BatchLatency += s.BatchLatency
		st.BatchLatencyCount += s.BatchLatencyCount
	}
	return st
}
