package recorder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
)

// MemoryConfig configures a MemoryStore. The zero value keeps everything forever.
type MemoryConfig struct {
	// TTL removes a thread, with all its runs, events and checkpoints, TTL after the last write
	// to it. Zero keeps threads forever. Expiry is lazy: an expired thread is invisible at once
	// and its memory is released by a sweep that runs inside a later write call (at most once
	// per half TTL), so the store starts no goroutine.
	TTL time.Duration
	// MaxEventsPerRun keeps only the newest MaxEventsPerRun events of each run; older events are
	// dropped and Run.FirstSeq moves up. Zero keeps every event.
	MaxEventsPerRun int
	// Now is the clock (nil: time.Now). Tests use it to drive expiry.
	Now func() time.Time
	// FollowQueue bounds how far a Subscription (see Follow) may fall behind: when more than
	// FollowQueue events were appended after its position (not counting those already stored
	// when Follow was called), Next returns ErrSlowSubscriber. Zero: DefaultFollowQueue.
	FollowQueue int
	// MaxBytes bounds the memory the store's data takes (frames, types, checkpoints and a
	// fixed overhead per event and run, see MemoryStats.Bytes). When a write takes it above,
	// the threads written least recently that have no running run are evicted whole, oldest
	// first, until it is 90% of MaxBytes or only busy threads (and the one written) are left;
	// each eviction is counted (MemoryStats.Evictions). Zero: no bound.
	MaxBytes int64
}

// DefaultFollowQueue is the default bound of a live subscription's queue, in events
// (MemoryConfig.FollowQueue, RedisConfig.FollowQueue).
const DefaultFollowQueue = 4096

// MemoryStore is the in-memory Store, the proxy's zero-configuration default. It keeps
// everything in the process: a restart loses it all. It is safe for concurrent use; one mutex
// guards all of it. It also implements Follower (in-process notification) and Leaser.
type MemoryStore struct {
	cfg MemoryConfig

	mu        sync.Mutex
	closed    bool
	done      chan struct{} // closed by Close: wakes every waiting Subscription
	threads   map[string]*memThread
	nextSweep time.Time

	bytes, checkpointBytes int64  // accounted size (see MemoryStats)
	evictions              uint64 // threads evicted by MaxBytes
}

type memThread struct {
	owner, route string
	title        string
	created      time.Time
	active       time.Time // start of the latest run: the thread index order
	expires      time.Time // zero: never
	written      time.Time // last write: the eviction order
	bytes        int64     // accounted size of the thread's runs
	runs         []*memRun // creation order
	byID         map[string]*memRun
}

type memRun struct {
	run        Run // Gaps, LastSeq kept up to date; FirstSeq derived from events
	events     []Event
	checkpoint []byte // nil: none
	trimmed    int64  // highest seq dropped by MaxEventsPerRun (0: none)
	stop       bool   // RequestStop was called while the run was running
	bytes      int64  // accounted size: overhead, events, checkpoint
	// notify is closed (and set to nil) by every change a follower waits for: an append, the
	// run's end, its deletion. Followers create it when they find nothing to read.
	notify chan struct{}
}

// wake releases the followers waiting on r. m.mu must be held.
func (r *memRun) wake() {
	if r.notify != nil {
		close(r.notify)
		r.notify = nil
	}
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(cfg MemoryConfig) *MemoryStore {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FollowQueue <= 0 {
		cfg.FollowQueue = DefaultFollowQueue
	}
	return &MemoryStore{cfg: cfg, threads: map[string]*memThread{}, done: make(chan struct{})}
}

// now returns the store clock at millisecond precision, the precision RedisStore keeps too.
func (m *MemoryStore) now() time.Time { return time.UnixMilli(m.cfg.Now().UnixMilli()) }

// thread returns a live thread, removing it first when it has expired. m.mu must be held.
func (m *MemoryStore) thread(id string, now time.Time) *memThread {
	t := m.threads[id]
	if t != nil && !t.expires.IsZero() && !now.Before(t.expires) {
		m.drop(id, t)
		return nil
	}
	return t
}

// touch extends a thread's life after a write and runs the sweep when it is due. m.mu must be
// held.
func (m *MemoryStore) touch(t *memThread, now time.Time) {
	if t != nil {
		t.written = now
	}
	m.enforceBound(t)
	if m.cfg.TTL <= 0 {
		return
	}
	if t != nil {
		t.expires = now.Add(m.cfg.TTL)
	}
	if now.Before(m.nextSweep) {
		return
	}
	for id, th := range m.threads {
		if !now.Before(th.expires) {
			m.drop(id, th)
		}
	}
	m.nextSweep = now.Add(max(m.cfg.TTL/2, time.Second))
}

// drop removes a thread and wakes the followers of its runs (they then find the run gone).
// m.mu must be held.
func (m *MemoryStore) drop(id string, t *memThread) {
	delete(m.threads, id)
	m.bytes -= t.bytes
	for _, r := range t.runs {
		m.checkpointBytes -= int64(len(r.checkpoint))
		r.wake()
	}
}

func (m *MemoryStore) check() error {
	if m.closed {
		return ErrClosed
	}
	return nil
}

// validateRun checks the ids (and epoch) a write needs before it touches the maps.
func validateRun(run Run) error {
	if err := validateThreadKey(run.ThreadID); err != nil {
		return err
	}
	if err := agui.ValidateID("runId", run.RunID); err != nil {
		return err
	}
	if run.ParentRunID != "" {
		if err := agui.ValidateID("parentRunId", run.ParentRunID); err != nil {
			return err
		}
	}
	if !ValidEpoch(run.Epoch) {
		return fmt.Errorf("run %q: epoch %q: %w", run.RunID, run.Epoch, ErrInvalidEpoch)
	}
	return nil
}

// validateIDs checks a thread key and, unless runID is nil, a run id.
func validateIDs(threadID string, runID *string) error {
	if err := validateThreadKey(threadID); err != nil {
		return err
	}
	if runID == nil {
		return nil
	}
	return agui.ValidateID("runId", *runID)
}

// CreateRun implements Store.
func (m *MemoryStore) CreateRun(ctx context.Context, run Run, opts CreateOptions) (Thread, error) {
	if err := validateRun(run); err != nil {
		return Thread{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(); err != nil {
		return Thread{}, err
	}
	now := m.now()
	t := m.thread(run.ThreadID, now)
	var prev Thread
	if t != nil {
		if t.owner != run.Owner {
			return Thread{}, fmt.Errorf("thread %q: %w", run.ThreadID, ErrThreadNotFound)
		}
		if t.route != run.Route {
			return Thread{}, fmt.Errorf("thread %q: %w", run.ThreadID, ErrThreadRoomMismatch)
		}
		if t.byID[run.RunID] != nil {
			return Thread{}, fmt.Errorf("run %q in thread %q: %w", run.RunID, run.ThreadID, ErrRunAlreadyStarted)
		}
		prev = t.info(run.ThreadID)
	}
	if run.ParentRunID != "" && (t == nil || t.byID[run.ParentRunID] == nil) {
		return Thread{}, fmt.Errorf("parent run %q in thread %q: %w", run.ParentRunID, run.ThreadID, ErrRunNotFound)
	}
	if t != nil && len(t.runs) > 0 {
		latest := t.runs[len(t.runs)-1].run
		if opts.Exclusive && opts.Busy(latest, now) {
			return Thread{}, fmt.Errorf("thread %q, run %q: %w", run.ThreadID, latest.RunID, ErrThreadBusy)
		}
		if run.ParentRunID == "" && opts.ContinueLatest {
			run.ParentRunID = latest.RunID
		}
	}
	if run.ParentRunID != "" {
		prev.ParentEpoch = t.byID[run.ParentRunID].run.Epoch
	}
	start := opts.startTime(now)
	if t == nil {
		t = &memThread{owner: run.Owner, route: run.Route, created: start, byID: map[string]*memRun{}}
		m.threads[run.ThreadID] = t
	}
	r := &memRun{run: Run{
		ThreadID: run.ThreadID, RunID: run.RunID, ParentRunID: run.ParentRunID, Epoch: run.Epoch,
		Status: StatusRunning, Route: t.route, Owner: t.owner, CreatedAt: start, UpdatedAt: start,
		Node: run.Node, LeaseUntil: leaseTime(run.LeaseUntil),
	}}
	t.runs = append(t.runs, r)
	t.byID[run.RunID] = r
	m.charge(t, r, memRunOverhead)
	t.active = start
	if t.title == "" {
		t.title = cleanTitle(run.Title)
	}
	m.touch(t, now)
	return prev, nil
}

// after returns the index of r's first stored event with seq > seq.
func (r *memRun) after(seq int64) int {
	i, _ := slices.BinarySearchFunc(r.events, seq+1, func(e Event, seq int64) int {
		switch {
		case e.Seq < seq:
			return -1
		case e.Seq > seq:
			return 1
		}
		return 0
	})
	return i
}

func (t *memThread) info(id string) Thread {
	th := Thread{ID: id, Owner: t.owner, Route: t.route, CreatedAt: t.created, RunCount: len(t.runs), Title: t.title}
	if n := len(t.runs); n > 0 {
		th.LatestRunID = t.runs[n-1].run.RunID
	}
	return th
}

// DeleteRun implements Store.
func (m *MemoryStore) DeleteRun(ctx context.Context, threadID, runID string) error {
	if err := validateIDs(threadID, &runID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(); err != nil {
		return err
	}
	now := m.now()
	t := m.thread(threadID, now)
	if t == nil {
		return fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)
	}
	r := t.byID[runID]
	if r == nil {
		return fmt.Errorf("run %q in thread %q: %w", runID, threadID, ErrRunNotFound)
	}
	delete(t.byID, runID)
	t.runs = slices.DeleteFunc(t.runs, func(x *memRun) bool { return x == r })
	m.charge(t, r, -r.bytes)
	m.checkpointBytes -= int64(len(r.checkpoint))
	r.wake()
	if len(t.runs) == 0 {
		m.drop(threadID, t)
		return nil
	}
	m.touch(t, now)
	return nil
}

// Append implements Store.
func (m *MemoryStore) Append(ctx context.Context, batches []Batch) error {
	for _, b := range batches {
		if err := validateRun(b.Run); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(); err != nil {
		return err
	}
	now := m.now()
	for _, b := range batches {
		m.appendBatch(b, now)
	}
	return nil
}

// appendBatch stores one batch. m.mu must be held.
func (m *MemoryStore) appendBatch(b Batch, now time.Time) {
	t := m.thread(b.Run.ThreadID, now)
	if t == nil {
		// The thread is gone (expired or never created): re-create it from the batch, like
		// RedisStore does after a data loss.
		t = &memThread{owner: b.Run.Owner, route: b.Run.Route, created: now, active: now, byID: map[string]*memRun{}}
		m.threads[b.Run.ThreadID] = t
	}
	r := t.byID[b.Run.RunID]
	if r == nil {
		created, status := b.recreated(now)
		r = &memRun{run: Run{
			ThreadID: b.Run.ThreadID, RunID: b.Run.RunID, ParentRunID: b.Run.ParentRunID,
			Epoch: b.Run.Epoch, Status: status, Route: b.Run.Route, Owner: b.Run.Owner,
			CreatedAt: time.UnixMilli(created.UnixMilli()), UpdatedAt: now,
		}}
		if len(b.Events) > 0 && b.Events[0].Seq > 1 {
			r.run.Gaps = addGap(r.run.Gaps, 1, b.Events[0].Seq-1)
		}
		t.runs = append(t.runs, r)
		t.byID[b.Run.RunID] = r
		m.charge(t, r, memRunOverhead)
	} else if r.run.Epoch != b.Run.Epoch {
		// Another run now uses this id (deleted and created again): these events are not its.
		return
	}
	for _, ev := range b.Events {
		if ev.Seq <= r.run.LastSeq {
			continue
		}
		if ev.Seq > r.run.LastSeq+1 {
			r.run.Gaps = addGap(r.run.Gaps, r.run.LastSeq+1, ev.Seq-1)
		}
		r.events = append(r.events, Event{Seq: ev.Seq, Type: ev.Type, Frame: slices.Clone(ev.Frame)})
		m.charge(t, r, eventSize(ev))
		r.run.LastSeq = ev.Seq
	}
	if keep := m.cfg.MaxEventsPerRun; keep > 0 && len(r.events) > keep {
		// Reslicing is O(1); the dropped head is released when a later append outgrows the
		// (now smaller) capacity and copies the kept tail to a new array.
		r.trimmed = r.events[len(r.events)-keep-1].Seq
		for _, ev := range r.events[:len(r.events)-keep] {
			m.charge(t, r, -eventSize(ev))
		}
		clear(r.events[:len(r.events)-keep])
		r.events = r.events[len(r.events)-keep:]
	}
	r.run.UpdatedAt = now
	r.wake()
	m.touch(t, now)
}

// FinishRun implements Store.
func (m *MemoryStore) FinishRun(ctx context.Context, threadID, runID string, status RunStatus, detail string, lastSeq int64) error {
	r, now, err := m.lockRun(threadID, runID)
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	r.run.Status, r.run.Detail, r.run.UpdatedAt = status, detail, now
	if lastSeq > r.run.LastSeq {
		r.run.Gaps = addGap(r.run.Gaps, r.run.LastSeq+1, lastSeq)
	}
	r.wake()
	m.touch(m.threads[threadID], now)
	return nil
}

// run finds a live run. m.mu must be held.
// lockRun validates the ids, locks the store and finds the run. On success the caller holds
// m.mu and must unlock it; on error the lock is released.
func (m *MemoryStore) lockRun(threadID, runID string) (*memRun, time.Time, error) {
	if err := validateIDs(threadID, &runID); err != nil {
		return nil, time.Time{}, err
	}
	m.mu.Lock()
	if err := m.check(); err != nil {
		m.mu.Unlock()
		return nil, time.Time{}, err
	}
	now := m.now()
	r, err := m.run(threadID, runID, now)
	if err != nil {
		m.mu.Unlock()
		return nil, now, err
	}
	return r, now, nil
}

func (m *MemoryStore) run(threadID, runID string, now time.Time) (*memRun, error) {
	t := m.thread(threadID, now)
	if t == nil {
		return nil, fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)
	}
	r := t.byID[runID]
	if r == nil {
		return nil, fmt.Errorf("run %q in thread %q: %w", runID, threadID, ErrRunNotFound)
	}
	return r, nil
}

// Thread implements Store.
func (m *MemoryStore) Thread(ctx context.Context, threadID string) (Thread, error) {
	if err := validateIDs(threadID, nil); err != nil {
		return Thread{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(); err != nil {
		return Thread{}, err
	}
	t := m.thread(threadID, m.now())
	if t == nil {
		return Thread{}, fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)
	}
	return t.info(threadID), nil
}

// snapshot returns a copy of r's metadata with FirstSeq filled in.
func (r *memRun) snapshot() Run {
	out := r.run
	out.Gaps = slices.Clone(r.run.Gaps)
	if len(r.events) > 0 {
		out.FirstSeq = r.events[0].Seq
	}
	return out
}

// Run implements Store.
func (m *MemoryStore) Run(ctx context.Context, threadID, runID string) (Run, error) {
	r, _, err := m.lockRun(threadID, runID)
	if err != nil {
		return Run{}, err
	}
	defer m.mu.Unlock()
	return r.snapshot(), nil
}

// Runs implements Store.
func (m *MemoryStore) Runs(ctx context.Context, threadID string) ([]Run, error) {
	if err := validateIDs(threadID, nil); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(); err != nil {
		return nil, err
	}
	t := m.thread(threadID, m.now())
	if t == nil {
		return nil, fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)
	}
	out := make([]Run, len(t.runs))
	for i, r := range t.runs {
		out[i] = r.snapshot()
	}
	return out, nil
}

// Events implements Store. The returned frames are copies.
func (m *MemoryStore) Events(ctx context.Context, threadID, runID string, afterSeq int64, limit int) ([]Event, error) {
	r, _, err := m.lockRun(threadID, runID)
	if errors.Is(err, ErrThreadNotFound) || errors.Is(err, ErrRunNotFound) {
		return nil, fmt.Errorf("events of run %q in thread %q: %w", runID, threadID, ErrRunNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	evs := r.events[r.after(afterSeq):]
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	out := make([]Event, len(evs))
	for j, e := range evs {
		out[j] = Event{Seq: e.Seq, Type: e.Type, Frame: slices.Clone(e.Frame)}
	}
	return out, nil
}

// PutCheckpoint implements Store. Errors: ErrRunNotFound, ErrThreadNotFound.
func (m *MemoryStore) PutCheckpoint(ctx context.Context, threadID, runID string, data []byte) error {
	r, now, err := m.lockRun(threadID, runID)
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	t := m.threads[threadID]
	m.charge(t, r, int64(len(data)-len(r.checkpoint)))
	m.checkpointBytes += int64(len(data) - len(r.checkpoint))
	r.checkpoint = append(make([]byte, 0, len(data)), data...)
	m.touch(t, now)
	return nil
}

// appendCheckpoint is WriteCheckpoints' append.
func (m *MemoryStore) appendCheckpoint(threadID, runID string, prefix, data []byte) error {
	r, now, err := m.lockRun(threadID, runID)
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	if r.checkpoint == nil || !bytes.HasPrefix(r.checkpoint, prefix) {
		return fmt.Errorf("checkpoint of run %q in thread %q to append to: %w", runID, threadID, ErrNotFound)
	}
	t := m.threads[threadID]
	m.charge(t, r, int64(len(data)))
	m.checkpointBytes += int64(len(data))
	r.checkpoint = append(r.checkpoint, data...) // (Checkpoint hands out copies)
	m.touch(t, now)
	return nil
}

// WriteCheckpoints implements Store, one write after the other.
func (m *MemoryStore) WriteCheckpoints(ctx context.Context, threadID string, writes []CheckpointWrite) (int, error) {
	return writeEach(ctx, m, threadID, writes)
}

// Checkpoint implements Store.
func (m *MemoryStore) Checkpoint(ctx context.Context, threadID, runID string) ([]byte, error) {
	r, _, err := m.lockRun(threadID, runID)
	if errors.Is(err, ErrThreadNotFound) || errors.Is(err, ErrRunNotFound) {
		return nil, fmt.Errorf("checkpoint of run %q in thread %q: %w", runID, threadID, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if r.checkpoint == nil {
		return nil, fmt.Errorf("checkpoint of run %q in thread %q: %w", runID, threadID, ErrNotFound)
	}
	return slices.Clone(r.checkpoint), nil
}

// Ping implements Store: it fails only after Close.
func (m *MemoryStore) Ping(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.check()
}

// Close implements Store. It drops all data.
func (m *MemoryStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		close(m.done)
	}
	m.closed = true
	m.threads = nil
	return nil
}

var _ Store = (*MemoryStore)(nil)
