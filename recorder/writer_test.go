package recorder_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/recorder/recordertest"
)

// flakyStore wraps a Store: while failing is set every Append and FinishRun fails; a gate,
// when set, makes Append wait until it is opened. It counts calls.
type flakyStore struct {
	recorder.Store
	mu       sync.Mutex
	failing  bool
	gate     chan struct{}
	appends  int
	finishes int
	batches  [][]recorder.Batch
}

// lastBatch returns the batches of the last Append call.
func (f *flakyStore) lastBatch() []recorder.Batch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.batches[len(f.batches)-1]
}

var errInjected = errors.New("injected store failure")

func (f *flakyStore) setFailing(v bool) { f.mu.Lock(); f.failing = v; f.mu.Unlock() }

func (f *flakyStore) Append(ctx context.Context, b []recorder.Batch) error {
	f.mu.Lock()
	f.appends++
	gate, failing := f.gate, f.failing
	f.batches = append(f.batches, b)
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if failing {
		return errInjected
	}
	return f.Store.Append(ctx, b)
}

func (f *flakyStore) FinishRun(ctx context.Context, th, run string, st recorder.RunStatus, d string, last int64) error {
	f.mu.Lock()
	f.finishes++
	failing := f.failing
	f.mu.Unlock()
	if failing {
		return errInjected
	}
	return f.Store.FinishRun(ctx, th, run, st, d, last)
}

func newTestWriter(t *testing.T, store recorder.Store, cfg recorder.WriterConfig) *recorder.Writer {
	t.Helper()
	cfg.Store = store
	if cfg.RetryMin == 0 {
		cfg.RetryMin, cfg.RetryMax = time.Millisecond, 5*time.Millisecond
	}
	w := recorder.NewWriter(cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Shutdown(ctx)
	})
	return w
}

// recordings holds the Recording each test opened per Writer and run, so that a test that
// queues a run's events from several places does it through one Recording, as the proxy does.
var recordings sync.Map // recordingKey -> *recorder.Recording

type recordingKey struct {
	w           *recorder.Writer
	thread, run string
}

// recOf returns w's Recording of run, opening it the first time (an Open error fails the test).
func recOf(tb testing.TB, w *recorder.Writer, run recorder.Run) *recorder.Recording {
	tb.Helper()
	k := recordingKey{w, run.ThreadID, run.RunID}
	if r, ok := recordings.Load(k); ok {
		return r.(*recorder.Recording)
	}
	r, err := w.Open(run)
	if err != nil {
		tb.Fatalf("Open(%s/%s): %v", run.ThreadID, run.RunID, err)
	}
	got, _ := recordings.LoadOrStore(k, r)
	return got.(*recorder.Recording)
}

func testRun(thread, run string) recorder.Run {
	return recorder.Run{ThreadID: thread, RunID: run, Epoch: recorder.NewEpoch(), Owner: "alice", Route: "/a"}
}

func testEvent(r recorder.Run, seq int64) recorder.Event {
	f := recorder.AppendCursor([]byte("id: "), r.RunID, r.Epoch, seq)
	f = fmt.Appendf(f, "\ndata: {\"type\":\"CUSTOM\",\"n\":%d}\n\n", seq)
	return recorder.Event{Seq: seq, Type: "CUSTOM", Frame: f}
}

// checkStored asserts the store holds exactly seqs 1..n of r, in order, byte-exact.
func checkStored(t *testing.T, s recorder.Store, r recorder.Run, n int64) {
	t.Helper()
	evs, err := s.Events(context.Background(), r.ThreadID, r.RunID, 0, 0)
	if err != nil {
		t.Fatalf("Events(%s/%s) = %v", r.ThreadID, r.RunID, err)
	}
	if int64(len(evs)) != n {
		t.Fatalf("Events(%s/%s) = %d events, want %d", r.ThreadID, r.RunID, len(evs), n)
	}
	for i, e := range evs {
		if want := testEvent(r, int64(i+1)); e.Seq != want.Seq || string(e.Frame) != string(want.Frame) {
			t.Fatalf("Events(%s/%s)[%d] = seq %d %q, want seq %d %q", r.ThreadID, r.RunID, i, e.Seq, e.Frame, want.Seq, want.Frame)
		}
	}
}

func TestWriterAppendFlush(t *testing.T) {
	store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{})}
	w := newTestWriter(t, store, recorder.WriterConfig{MaxBatchEvents: 64})
	runs := []recorder.Run{testRun("t1", "a"), testRun("t1", "b"), testRun("t2", "c")}
	for _, r := range runs {
		if _, err := store.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for seq := int64(1); seq <= 500; seq++ {
		for _, r := range runs {
			if err := recOf(t, w, r).Append(testEvent(r, seq)); err != nil {
				t.Fatalf("Append(%s, %d) = %v", r.RunID, seq, err)
			}
		}
	}
	for _, r := range runs {
		recOf(t, w, r).Finish(recorder.StatusFinished, "", 500)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatalf("Flush() = %v", err)
	}
	for _, r := range runs {
		checkStored(t, store, r, 500)
		got, _ := store.Run(t.Context(), r.ThreadID, r.RunID)
		if got.Status != recorder.StatusFinished || len(got.Gaps) != 0 {
			t.Errorf("Run(%s) = status %s gaps %v, want finished, none", r.RunID, got.Status, got.Gaps)
		}
	}
	st := w.Stats()
	if st.Appended != 1500 || st.Queued != 0 || st.Dropped != 0 || st.Finished != 3 || st.StoreErrors != 0 {
		t.Errorf("Stats() = %+v, want 1500 appended, 0 queued, 0 dropped, 3 finished, 0 errors", st)
	}
	if st.Batches == 0 || st.Batches > st.Appended || st.BatchLatencyCount != st.Batches || st.RoundTrips != st.Batches+3 {
		t.Errorf("Stats() = %+v, want 1 to 1500 batches, a latency sample each, batches+3 round trips", st)
	}
	for _, b := range store.batches {
		n := 0
		for _, x := range b {
			n += len(x.Events)
		}
		if n > 64 {
			t.Errorf("a Store.Append call carried %d events, want <= MaxBatchEvents 64", n)
		}
	}
}

// TestWriterRetriesInOrder: while the store fails, events wait and the writer retries with
// capped exponential backoff; once the store recovers they are stored once each, in order, and
// Append never blocked meanwhile. The clock is fake (testing/synctest): the backoff schedule is
// checked to the millisecond without waiting for it.
func TestWriterRetriesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{})}
		w := newTestWriter(t, store, recorder.WriterConfig{MaxBatchEvents: 16,
			RetryMin: 100 * time.Millisecond, RetryMax: 400 * time.Millisecond})
		r := testRun("t", "r")
		if _, err := store.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		store.setFailing(true)
		start := time.Now()
		for seq := int64(1); seq <= 100; seq++ {
			if err := recOf(t, w, r).Append(testEvent(r, seq)); err != nil {
				t.Fatalf("Append(%d) while the store fails = %v", seq, err)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("100 Appends while the store fails took %v, want no wait", d)
		}
		// Attempts at 0, then after 100, 200, 400 (the cap), 400 and 400 ms.
		attempts := []time.Duration{0, 100, 300, 700, 1100, 1500}
		for i, at := range attempts {
			at *= time.Millisecond
			if at > 0 {
				time.Sleep(at - time.Millisecond - time.Since(start))
				synctest.Wait()
				if got := w.Stats().StoreErrors; got != uint64(i) {
					t.Fatalf("%v after the first attempt: %d store errors, want %d", at-time.Millisecond, got, i)
				}
				time.Sleep(time.Millisecond)
			}
			synctest.Wait() // the writer tried and waits out its backoff
			if got := w.Stats().StoreErrors; got != uint64(i+1) {
				t.Fatalf("%v after the first attempt: %d store errors, want %d", at, got, i+1)
			}
		}
		if q := w.Stats().Queued; q != 100 {
			t.Errorf("Stats().Queued while failing = %d, want 100", q)
		}
		store.setFailing(false)
		recOf(t, w, r).Finish(recorder.StatusFinished, "", 100)
		if err := w.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 1900*time.Millisecond {
			t.Errorf("stored after %v, want 1.9s (the last backoff of 400 ms after the attempt at 1.5 s)", d)
		}
		checkStored(t, store, r, 100)
		st := w.Stats()
		if st.Retries != 6 || st.HighWater != 100 || st.Queued != 0 || st.Appended != 100 {
			t.Errorf("Stats() = %+v, want 6 retries, high water 100, 0 queued, 100 appended", st)
		}
	})
}

// TestWriterOverflow: a buffer that stays full while the store is stuck makes Append wait
// FullWait, then drop events (counted, ErrBufferFull, logged once per run), and the store
// records the gap when the run goes on. The clock is fake (testing/synctest).
func TestWriterOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{}), gate: gate}
		var logs logBuffer
		const fullWait = 3 * time.Second
		w := newTestWriter(t, store, recorder.WriterConfig{MaxBufferedEvents: 10, MaxBatchEvents: 4, Logger: logs.logger(),
			FullWait: fullWait})
		r := testRun("t", "r")
		if _, err := store.Store.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var dropped []int64
		start := time.Now()
		for seq := int64(1); seq <= 25; seq++ {
			err := recOf(t, w, r).Append(testEvent(r, seq))
			switch {
			case errors.Is(err, recorder.ErrBufferFull):
				dropped = append(dropped, seq)
			case err != nil:
				t.Fatalf("Append(%d) = %v", seq, err)
			}
		}
		if d := time.Since(start); d != fullWait {
			t.Errorf("Appends into a full buffer with the store stuck took %v, want FullWait %v (then drop at once)", d, fullWait)
		}
		if want := 15; len(dropped) != want || dropped[0] != 11 {
			t.Errorf("dropped seqs = %v, want 11..25", dropped)
		}
		st := w.Stats()
		if st.Dropped != 15 || st.Queued != 10 || st.HighWater != 10 || st.Waits != 1 {
			t.Errorf("Stats() = %+v, want 15 dropped, 10 queued, high water 10, 1 wait", st)
		}
		if n := strings.Count(logs.String(), "buffer full"); n != 1 {
			t.Errorf("overflow logged %d times, want once per run:\n%s", n, logs.String())
		}
		store.mu.Lock()
		store.gate = nil
		store.mu.Unlock()
		close(gate)
		if err := w.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := recOf(t, w, r).Append(testEvent(r, 26)); err != nil {
			t.Fatalf("Append(26) after the store recovered = %v", err)
		}
		recOf(t, w, r).Finish(recorder.StatusFinished, "", 28)
		if err := w.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		got, err := store.Run(t.Context(), "t", "r")
		if err != nil {
			t.Fatal(err)
		}
		if want := []recorder.Gap{{From: 11, To: 25}, {From: 27, To: 28}}; !slices.Equal(got.Gaps, want) || got.LastSeq != 26 || got.Complete(0) {
			t.Errorf("Run = gaps %v last %d, want %v, 26, incomplete", got.Gaps, got.LastSeq, want)
		}
	})
}

// TestWriterAppendSync: AppendSync returns only once the event is stored; while the store
// fails it waits until ctx ends, and the event is stored once the store recovers. The clock is
// fake (testing/synctest).
func TestWriterAppendSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{})}
		w := newTestWriter(t, store, recorder.WriterConfig{Durability: recorder.DurabilitySync,
			RetryMin: 100 * time.Millisecond, RetryMax: time.Second})
		if w.Durability() != recorder.DurabilitySync || w.Durability().String() != "sync" {
			t.Errorf("Durability() = %v, want sync", w.Durability())
		}
		r := testRun("t", "r")
		for seq := int64(1); seq <= 50; seq++ {
			if err := recOf(t, w, r).AppendSync(t.Context(), testEvent(r, seq)); err != nil {
				t.Fatalf("AppendSync(%d) = %v", seq, err)
			}
			got, err := store.Run(t.Context(), "t", "r")
			if err != nil || got.LastSeq != seq {
				t.Fatalf("after AppendSync(%d): Run = last %d, %v, want %d", seq, got.LastSeq, err, seq)
			}
		}
		// A store that fails: AppendSync gives up with ctx's error, the event stays queued and
		// is stored once the store recovers.
		store.setFailing(true)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		if err := recOf(t, w, r).AppendSync(ctx, testEvent(r, 51)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("AppendSync while the store fails = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("AppendSync while the store fails returned after %v, want when its ctx ended (5s)", d)
		}
		if st := w.Stats(); st.StoreErrors == 0 || st.Queued != 1 {
			t.Errorf("Stats() = %+v, want store errors and the event still queued", st)
		}
		store.setFailing(false)
		if err := w.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		checkStored(t, store, r, 51)
	})
}

// TestWriterAppendSyncBufferFull: in sync mode a full buffer makes the caller wait (no drop)
// until there is room. The clock is fake (testing/synctest).
func TestWriterAppendSyncBufferFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{}), gate: gate}
		w := newTestWriter(t, store, recorder.WriterConfig{MaxBufferedEvents: 2})
		r := testRun("t", "r")
		errs := make(chan error, 3)
		for seq := int64(1); seq <= 2; seq++ {
			go func() { errs <- recOf(t, w, r).AppendSync(t.Context(), testEvent(r, seq)) }()
			// One after another, so seq order is queue order.
			synctest.Wait()
			if q := w.Stats().Queued; q != int(seq) {
				t.Fatalf("Stats().Queued = %d after AppendSync(%d), want %d", q, seq, seq)
			}
		}
		// Seq 3 waits for room: the buffer holds 1 and 2.
		go func() { errs <- recOf(t, w, r).AppendSync(t.Context(), testEvent(r, 3)) }()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := recOf(t, w, r).AppendSync(ctx, testEvent(r, 4)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("AppendSync with a full buffer and a ctx that ends = %v, want DeadlineExceeded", err)
		}
		if len(errs) != 0 {
			t.Errorf("an AppendSync returned while the buffer stayed full: %v", <-errs)
		}
		store.mu.Lock()
		store.gate = nil
		store.mu.Unlock()
		close(gate)
		for range 3 {
			if err := <-errs; err != nil {
				t.Errorf("AppendSync = %v", err)
			}
		}
		if d := w.Stats().Dropped; d != 1 {
			t.Errorf("Stats().Dropped = %d, want 1 (the AppendSync that gave up before queueing)", d)
		}
	})
}

// TestWriterShutdown: Shutdown stores what was queued, then refuses more; with a dead store it
// gives up when ctx ends and reports it. The clock is fake (testing/synctest).
func TestWriterShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{})}
		w := recorder.NewWriter(recorder.WriterConfig{Store: store, RetryMin: time.Millisecond})
		r := testRun("t", "r")
		for seq := int64(1); seq <= 10; seq++ {
			recOf(t, w, r).Append(testEvent(r, seq))
		}
		if err := w.Shutdown(t.Context()); err != nil {
			t.Fatalf("Shutdown() = %v", err)
		}
		checkStored(t, store, r, 10)
		if err := recOf(t, w, r).Append(testEvent(r, 11)); !errors.Is(err, recorder.ErrClosed) {
			t.Errorf("Append after Shutdown = %v, want ErrClosed", err)
		}
		if err := recOf(t, w, r).AppendSync(t.Context(), testEvent(r, 11)); !errors.Is(err, recorder.ErrClosed) {
			t.Errorf("AppendSync after Shutdown = %v, want ErrClosed", err)
		}
		recOf(t, w, r).Finish(recorder.StatusFinished, "", 10) // ignored, must not panic or block
		if err := w.Shutdown(t.Context()); err != nil {
			t.Errorf("second Shutdown() = %v, want nil", err)
		}

		dead := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{}), failing: true}
		w = recorder.NewWriter(recorder.WriterConfig{Store: dead, RetryMin: time.Millisecond})
		recOf(t, w, r).Append(testEvent(r, 1))
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if err := w.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "abandoned 1 events") {
			t.Errorf("Shutdown with a dead store = %v, want context.DeadlineExceeded and 1 abandoned event", err)
		}
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("Shutdown with a dead store returned after %v, want when its ctx ended (10s)", d)
		}
		if st := w.Stats(); st.StoreErrors == 0 {
			t.Errorf("Stats() = %+v, want failed store calls before Shutdown gave up", st)
		}
		if err := w.Flush(t.Context()); !errors.Is(err, recorder.ErrClosed) {
			t.Errorf("Flush after an abandoning Shutdown = %v, want ErrClosed", err)
		}
	})
}

// TestWriterFinishRecreatesLostRun: a Finish for a run the store lost re-creates it and records
// the whole run as a gap instead of failing forever.
func TestWriterFinishRecreatesLostRun(t *testing.T) {
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	w := newTestWriter(t, store, recorder.WriterConfig{})
	r := testRun("t", "r")
	recOf(t, w, r).Finish(recorder.StatusError, "lost", 7)
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := store.Run(t.Context(), "t", "r")
	if err != nil || got.Status != recorder.StatusError || !slices.Equal(got.Gaps, []recorder.Gap{{From: 1, To: 7}}) {
		t.Errorf("Run = %+v, %v, want status error with gap 1-7", got, err)
	}
}

// TestWriterRefusesInvalidIDs: Open refuses a run whose ids or epoch a store would refuse
// forever, so none of its events ever reaches the queue.
func TestWriterRefusesInvalidIDs(t *testing.T) {
	w := newTestWriter(t, recorder.NewMemoryStore(recorder.MemoryConfig{}), recorder.WriterConfig{})
	noEpoch := testRun("t", "r")
	noEpoch.Epoch = ""
	hostileParent := testRun("t", "r")
	hostileParent.ParentRunID = "p q"
	for _, c := range []struct {
		run  recorder.Run
		want error
	}{
		{testRun("t{x}", "r"), agui.ErrInvalidID},
		{testRun("t", "r\n"), agui.ErrInvalidID},
		{hostileParent, agui.ErrInvalidID},
		{noEpoch, recorder.ErrInvalidEpoch},
	} {
		if rec, err := w.Open(c.run); rec != nil || !errors.Is(err, c.want) {
			t.Errorf("Open(thread %q, run %q, parent %q, epoch %q) = %v, %v; want %v", c.run.ThreadID, c.run.RunID, c.run.ParentRunID, c.run.Epoch, rec, err, c.want)
		}
	}
	if st := w.Stats(); st.Queued != 0 {
		t.Errorf("Stats().Queued = %d, want 0", st.Queued)
	}
}

// TestWriterConcurrent: many runs appended from many goroutines (as many pumps do) all end
// whole and in order; run with -race.
func TestWriterConcurrent(t *testing.T) {
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	w := newTestWriter(t, store, recorder.WriterConfig{MaxBatchEvents: 100})
	rs := make([]recorder.Run, 40)
	for i := range rs {
		rs[i] = testRun(fmt.Sprintf("t%d", i%10), fmt.Sprintf("r%d", i))
	}
	appendConcurrently(t, w, store, rs, 200, func(i int) bool { return i%4 == 0 })
}

// appendConcurrently has each of rs queue its events 1..events from a goroutine of its own
// (through AppendSync where viaSync says so, else Append), then its finish; after Flush the store
// must hold every run's events in order, byte for byte, and the Writer must have counted each
// event and finish once and dropped none.
func appendConcurrently(t *testing.T, w *recorder.Writer, store recorder.Store, rs []recorder.Run, events int64, viaSync func(i int) bool) {
	t.Helper()
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() {
			for seq := int64(1); seq <= events; seq++ {
				var err error
				if viaSync(i) {
					err = recOf(t, w, r).AppendSync(context.Background(), testEvent(r, seq))
				} else {
					err = recOf(t, w, r).Append(testEvent(r, seq))
				}
				if err != nil {
					t.Errorf("append %s/%d: %v", r.RunID, seq, err)
					return
				}
			}
			recOf(t, w, r).Finish(recorder.StatusFinished, "", events)
		})
	}
	wg.Wait()
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		checkStored(t, store, r, events)
	}
	if st := w.Stats(); st.Appended != uint64(len(rs))*uint64(events) || st.Finished != uint64(len(rs)) || st.Dropped != 0 {
		t.Errorf("Stats() = %+v, want %d appended, %d finished, none dropped", st, len(rs)*int(events), len(rs))
	}
}

// TestWriterNoGoroutineLeak: the Writer's goroutine ends with Shutdown. The writers run in a
// testing/synctest bubble, which fails the test if any goroutine started in it is still
// blocked when the test function returns.
func TestWriterNoGoroutineLeak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for range 10 {
			w := recorder.NewWriter(recorder.WriterConfig{Store: recorder.NewMemoryStore(recorder.MemoryConfig{})})
			r := testRun("t", "r")
			recOf(t, w, r).Append(testEvent(r, 1))
			if err := w.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// slowStore is a Store whose every Append first waits for a tick: the store keeps making
// progress, slower than the caller.
type slowStore struct {
	recorder.Store
	tick <-chan time.Time
}

func (s *slowStore) Append(ctx context.Context, b []recorder.Batch) error {
	select {
	case <-s.tick:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Append(ctx, b)
}

// TestWriterBackpressure: a store slower than the caller slows Append down instead of
// dropping: every event is stored, none dropped, and the waits are counted. The store's ticks
// come from a fake clock (testing/synctest).
func TestWriterBackpressure(t *testing.T) {
	synctest.Test(t, testWriterBackpressure)
}

func testWriterBackpressure(t *testing.T) {
	ticker := time.NewTicker(time.Millisecond)
	defer ticker.Stop()
	store := &slowStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{}), tick: ticker.C}
	w := newTestWriter(t, store, recorder.WriterConfig{MaxBufferedEvents: 4, MaxBatchEvents: 2, FullWait: time.Minute})
	runs := []recorder.Run{testRun("t", "r1"), testRun("t", "r2")}
	for _, r := range runs {
		if _, err := store.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 60
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			for seq := int64(1); seq <= n; seq++ {
				if err := recOf(t, w, r).Append(testEvent(r, seq)); err != nil {
					t.Errorf("Append(%s, %d) = %v, want nil (backpressure, no drop)", r.RunID, seq, err)
					return
				}
			}
			recOf(t, w, r).Finish(recorder.StatusFinished, "", n)
		})
	}
	wg.Wait()
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Dropped != 0 || st.Appended != 2*n || st.Waits == 0 || st.HighWater > 4 {
		t.Errorf("Stats() = %+v, want 0 dropped, %d appended, some waits, high water <= 4", st, 2*n)
	}
	for _, r := range runs {
		got, err := store.Run(t.Context(), "t", r.RunID)
		if err != nil || got.LastSeq != n || len(got.Gaps) != 0 || got.Status != recorder.StatusFinished {
			t.Errorf("Run(%s) = %+v, %v, want %d events, no gap, finished", r.RunID, got, err, n)
		}
	}
}

// TestWriterNoWait: a negative FullWait drops at once when the buffer is full.
func TestWriterNoWait(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{}), gate: gate}
	w := newTestWriter(t, store, recorder.WriterConfig{MaxBufferedEvents: 2, FullWait: -1})
	r := testRun("t", "r")
	var errs []error
	for seq := int64(1); seq <= 3; seq++ {
		errs = append(errs, recOf(t, w, r).Append(testEvent(r, seq)))
	}
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], recorder.ErrBufferFull) {
		t.Errorf("Append errors = %v, want nil, nil, ErrBufferFull", errs)
	}
	if st := w.Stats(); st.Waits != 0 || st.Dropped != 1 {
		t.Errorf("Stats() = %+v, want no wait and 1 dropped", st)
	}
}

// TestWriterBusyLinger: after a batch that carried the events of BusyRuns runs, the next
// batch waits BusyLinger (far longer than the test: the event stays queued until a Flush
// ends the wait); after a batch of one run it waits only Linger.
func TestWriterBusyLinger(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	gate := make(chan struct{})
	store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{}), gate: gate}
	w := newTestWriter(t, store, recorder.WriterConfig{Linger: time.Millisecond, BusyLinger: time.Hour})
	appends := func() int { store.mu.Lock(); defer store.mu.Unlock(); return store.appends }
	waitAppends := func(n int) {
		t.Helper()
		for appends() < n {
			select {
			case <-ctx.Done():
				t.Fatalf("%d store calls, want %d", appends(), n)
			case <-time.After(time.Millisecond):
			}
		}
	}

	// The first batch (one run) is held in the store while BusyRuns runs queue an event
	// each: they go together in the second batch.
	first := testRun("busy", "first")
	if err := recOf(t, w, first).Append(testEvent(first, 1)); err != nil {
		t.Fatal(err)
	}
	waitAppends(1)
	var runs []recorder.Run
	for i := range recorder.BusyRuns {
		r := testRun("busy", fmt.Sprintf("r%d", i))
		runs = append(runs, r)
		if err := recOf(t, w, r).Append(testEvent(r, 1)); err != nil {
			t.Fatal(err)
		}
	}
	gate <- struct{}{} // the first batch
	waitAppends(2)
	if n := len(store.lastBatch()); n != recorder.BusyRuns {
		t.Fatalf("second batch carried %d runs, want %d", n, recorder.BusyRuns)
	}
	close(gate) // every later batch goes through at once

	// After the busy batch, the next event waits BusyLinger (an hour).
	if err := recOf(t, w, runs[0]).Append(testEvent(runs[0], 2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := appends(); n != 2 {
		t.Fatalf("after a batch of %d runs the next was written within 50 ms (%d store calls); want it held for BusyLinger", recorder.BusyRuns, n)
	}
	if err := w.Flush(ctx); err != nil { // ends the wait: a batch of one run
		t.Fatal(err)
	}
	checkStored(t, store, runs[0], 2)

	// After a batch of one run, the next event waits only Linger.
	if err := recOf(t, w, runs[0]).Append(testEvent(runs[0], 3)); err != nil {
		t.Fatal(err)
	}
	waitAppends(4)
	checkStored(t, store, runs[0], 3)
	for _, r := range runs[1:] {
		checkStored(t, store, r, 1)
	}
}

// TestWriterLinger: with a Linger far longer than the test, events after a batch wait for the
// next one; what ends the wait at once is a caller waiting on the store (FinishSync, Flush,
// AppendSync), a queue of MaxBatchEvents, or Shutdown. Nothing is lost or reordered.
func TestWriterLinger(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // (a hurry that never comes fails instead of hanging)
	defer cancel()
	store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{})}
	w := newTestWriter(t, store, recorder.WriterConfig{MaxBatchEvents: 8, Linger: time.Hour})
	r := testRun("linger", "a")
	appends := func() int { store.mu.Lock(); defer store.mu.Unlock(); return store.appends }

	// The first batch goes at once (no batch before it); the next events then wait.
	if err := recOf(t, w, r).AppendSync(ctx, testEvent(r, 1)); err != nil {
		t.Fatal(err)
	}
	for seq := int64(2); seq <= 5; seq++ {
		if err := recOf(t, w, r).Append(testEvent(r, seq)); err != nil {
			t.Fatal(err)
		}
	}
	if st := w.Stats(); st.Appended != 1 || st.Queued != 4 {
		t.Fatalf("after the first batch: %d stored, %d queued; want 1 and 4 lingering", st.Appended, st.Queued)
	}
	// A run's end waited on (FinishSync) takes the lingering events with it, in one batch.
	before := appends()
	if err := recOf(t, w, r).FinishSync(ctx, recorder.StatusFinished, "", 5); err != nil {
		t.Fatalf("FinishSync while lingering: %v", err)
	}
	if n := appends() - before; n != 1 {
		t.Errorf("the lingering events took %d store calls, want 1", n)
	}
	checkStored(t, store, r, 5)

	// Flush ends a linger as well.
	r2 := testRun("linger", "b")
	if err := recOf(t, w, r2).Append(testEvent(r2, 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush while lingering: %v", err)
	}
	checkStored(t, store, r2, 1)

	// A full batch goes without anyone waiting.
	for seq := int64(2); seq <= 9; seq++ {
		if err := recOf(t, w, r2).Append(testEvent(r2, seq)); err != nil {
			t.Fatal(err)
		}
	}
	for w.Stats().Appended < 5+9 {
		select {
		case <-ctx.Done():
			t.Fatalf("a queue of MaxBatchEvents lingered: %d stored", w.Stats().Appended)
		case <-time.After(time.Millisecond):
		}
	}
	checkStored(t, store, r2, 9)

	// Shutdown writes what lingers.
	if err := recOf(t, w, r2).Append(testEvent(r2, 10)); err != nil {
		t.Fatal(err)
	}
	if err := w.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown while lingering: %v", err)
	}
	checkStored(t, store, r2, 10)
}

// TestWriterFinishSyncExpress: a run's FinishSync is written ahead of the other runs' events
// (an express write), with the run's own queued events, and leaves the others lingering:
// with a Linger far longer than the test, the other run's event is still queued after it,
// and Stored does not pass it. Both runs' events end up stored once each, in order.
func TestWriterFinishSyncExpress(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{})}
	w := newTestWriter(t, store, recorder.WriterConfig{Lanes: 1, Linger: time.Hour})
	a, b := testRun("express", "a"), testRun("express", "b")
	ra, rb := recOf(t, w, a), recOf(t, w, b)
	if err := ra.AppendSync(ctx, testEvent(a, 1)); err != nil { // the first batch goes at once
		t.Fatal(err)
	}
	posA, err := ra.AppendPos(testEvent(a, 2)) // lingers
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 3; seq++ {
		if err := rb.Append(testEvent(b, seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rb.FinishSync(ctx, recorder.StatusFinished, "", 3); err != nil {
		t.Fatalf("FinishSync while another run lingers: %v", err)
	}
	checkStored(t, store, b, 3)
	if got, err := store.Run(ctx, b.ThreadID, b.RunID); err != nil || got.Status != recorder.StatusFinished {
		t.Fatalf("run b after its FinishSync: %+v, %v; want finished", got, err)
	}
	checkStored(t, store, a, 1)
	if st := w.Stats(); st.Queued != 1 {
		t.Fatalf("after the express write %d events are queued, want run a's one lingering", st.Queued)
	}
	if ra.Stored() >= posA {
		t.Fatalf("Stored passed run a's lingering event (%d >= %d)", ra.Stored(), posA)
	}
	// Run a goes on, and ends the same way; run b's items are not written again.
	if err := ra.Append(testEvent(a, 3)); err != nil {
		t.Fatal(err)
	}
	appends := func() int { store.mu.Lock(); defer store.mu.Unlock(); return store.appends }
	before := appends()
	if err := ra.FinishSync(ctx, recorder.StatusFinished, "", 3); err != nil {
		t.Fatal(err)
	}
	checkStored(t, store, a, 3)
	if n := appends() - before; n != 1 {
		t.Errorf("run a's express write took %d store calls, want 1", n)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if ra.Stored() < posA {
		t.Fatalf("after Flush, Stored %d is still before run a's event %d", ra.Stored(), posA)
	}
	if st := w.Stats(); st.Queued != 0 || st.Appended != 6 {
		t.Fatalf("after Flush: %d queued, %d stored; want 0 and 6", st.Queued, st.Appended)
	}
	checkStored(t, store, b, 3)
}

// TestWriterLease: with WriterConfig.Lease on Redis, the appends of a running run renew its
// lease (LeasedSince vouches for it from the append's start on, and the run hash holds the
// node and an expiry TTL later), a stop requested for the run reaches OnStop with one of its
// next appends (the next full write), and the run's finish ends what LeasedSince says of it.
func TestWriterLease(t *testing.T) {
	s := newRedisStore(t, recorder.RedisConfig{URL: redistest.Start(t).URL(), Prefix: uniquePrefix()})
	stops := make(chan recorder.Run, 16)
	w := newTestWriter(t, s, recorder.WriterConfig{Lease: &recorder.WriterLease{Node: "node-w", TTL: time.Hour, OnStop: func(r recorder.Run) { stops <- r }}})
	ctx := t.Context()
	r := testRun("t", "r")
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if recOf(t, w, r).LeasedSince(before.Add(-time.Hour)) {
		t.Fatal("LeasedSince before any append")
	}
	if err := recOf(t, w, r).Append(testEvent(r, 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if !recOf(t, w, r).LeasedSince(before) || recOf(t, w, r).LeasedSince(time.Now().Add(time.Second)) || recOf(t, w, testRun("t", "other")).LeasedSince(before) {
		t.Fatal("LeasedSince does not say the append renewed the lease (and only then, only that run's)")
	}
	got, err := s.Run(ctx, "t", "r")
	if err != nil || got.Node != "node-w" || got.LeaseUntil.Before(before.Add(time.Hour-time.Second)) {
		t.Fatalf("run after a leased append = node %q until %v (%v), want node-w about an hour on", got.Node, got.LeaseUntil, err)
	}
	if len(stops) != 0 {
		t.Fatal("OnStop called for a run nobody asked to stop")
	}
	if err := s.RequestStop(ctx, "t", "r"); err != nil {
		t.Fatal(err)
	}
	// The stop is read by the run's next full write (append.lua: at most a second after the
	// last one while the run streams on the fast path).
	seq := int64(1)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for stopped := false; !stopped; {
		seq++
		if err := recOf(t, w, r).Append(testEvent(r, seq)); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-stops:
			if got.ThreadID != "t" || got.RunID != "r" {
				t.Fatalf("OnStop(%s/%s), want t/r", got.ThreadID, got.RunID)
			}
			stopped = true
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("a stop requested for a streaming run did not reach OnStop in %d appends", seq)
		}
	}
	if err := recOf(t, w, r).FinishSync(ctx, recorder.StatusError, "CANCELLED", seq); err != nil {
		t.Fatal(err)
	}
	if recOf(t, w, r).LeasedSince(before) {
		t.Fatal("LeasedSince still vouches for a finished run")
	}
	checkStored(t, s, r, seq)
}

// sizedEvent is testEvent with a payload of n bytes: the frames an agent streaming large
// events (file contents, images as data URLs) sends.
func sizedEvent(r recorder.Run, seq int64, n int) recorder.Event {
	f := recorder.AppendCursor([]byte("id: "), r.RunID, r.Epoch, seq)
	f = fmt.Appendf(f, "\ndata: {\"type\":\"CUSTOM\",\"n\":%d,\"value\":\"%s\"}\n\n", seq, strings.Repeat("x", n))
	return recorder.Event{Seq: seq, Type: "CUSTOM", Frame: f}
}

// appendAll appends events to r in a goroutine, as a run's pump does, reporting any refusal
// (with backpressure none is expected), and returns a channel closed once it is done.
func appendAll(t *testing.T, w *recorder.Writer, r recorder.Run, events []recorder.Event) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, ev := range events {
			if err := recOf(t, w, r).Append(ev); err != nil {
				t.Errorf("Append(%d) = %v, want nil (backpressure, no drop)", ev.Seq, err)
				return
			}
		}
	}()
	return done
}

// checkStoredFrames asserts the store holds exactly want for r, in order, byte-exact.
func checkStoredFrames(t *testing.T, s recorder.Store, r recorder.Run, want []recorder.Event) {
	t.Helper()
	evs, err := s.Events(context.Background(), r.ThreadID, r.RunID, 0, 0)
	if err != nil {
		t.Fatalf("Events(%s/%s) = %v", r.ThreadID, r.RunID, err)
	}
	if len(evs) != len(want) {
		t.Fatalf("Events(%s/%s) = %d events, want %d", r.ThreadID, r.RunID, len(evs), len(want))
	}
	for i, e := range evs {
		if e.Seq != want[i].Seq || !bytes.Equal(e.Frame, want[i].Frame) {
			t.Fatalf("Events(%s/%s)[%d] = seq %d (%d bytes), want seq %d (%d bytes)", r.ThreadID, r.RunID, i, e.Seq, len(e.Frame), want[i].Seq, len(want[i].Frame))
		}
	}
}

// TestWriterBoundsBytes: large events fill the buffer by bytes long before its event count.
// While the store is held, the queue stays within MaxBufferedBytes and the caller waits (no
// drop); once it goes on, no store call carries more than MaxBatchBytes unless it is one
// event, and an event larger than the whole buffer is taken alone. Everything is stored.
func TestWriterBoundsBytes(t *testing.T) {
	const (
		bufBytes   = 64 << 10
		batchBytes = 20 << 10
		evBytes    = 8 << 10
		n          = 40
	)
	store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{}), gate: make(chan struct{})}
	w := newTestWriter(t, store, recorder.WriterConfig{MaxBufferedBytes: bufBytes, MaxBatchBytes: batchBytes, FullWait: time.Minute})
	r := testRun("t", "r")
	if _, err := store.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var want []recorder.Event
	for seq := int64(1); seq < n; seq++ {
		want = append(want, sizedEvent(r, seq, evBytes))
	}
	want = append(want, sizedEvent(r, n, 2*bufBytes)) // larger than the whole buffer
	done := appendAll(t, w, r, want)
	redistest.WaitFor(t, 10*time.Second, "the caller waiting for room", func() bool { return w.Stats().Waits > 0 })
	st := w.Stats()
	if st.QueuedBytes > bufBytes || st.HighWaterBytes > bufBytes || st.Queued >= n/2 {
		t.Errorf("held store: Stats() = %+v, want at most %d bytes queued (a few events of %d bytes)", st, bufBytes, evBytes)
	}
	close(store.gate)
	<-done
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkStoredFrames(t, store.Store, r, want)
	store.mu.Lock()
	for i, call := range store.batches {
		var events, size int
		for _, b := range call {
			for _, e := range b.Events {
				events++
				size += len(e.Frame) + len(e.Type)
			}
		}
		if size > batchBytes && events > 1 {
			t.Errorf("store call %d: %d events, %d bytes; want at most %d bytes unless one event", i, events, size, batchBytes)
		}
	}
	calls := len(store.batches)
	store.mu.Unlock()
	if st := w.Stats(); st.Dropped != 0 || st.QueuedBytes != 0 || st.HighWaterBytes < 2*bufBytes {
		t.Errorf("Stats() = %+v, want 0 dropped, 0 bytes queued, the large event counted in the high water", st)
	}
	t.Logf("%d events in %d store calls", n, calls)
}

// TestWriterLingerBatchBytes: with a Linger far longer than the test, a queue that reaches
// MaxBatchBytes (fewer events than MaxBatchEvents, each large) is written without anyone
// waiting, as a queue of MaxBatchEvents is; then the same again, so the signal comes each time
// the queue reaches the bound, not only the first. (A queue that passes the bound keeps what
// does not fit in the batch: that lingers until the queue reaches a batch's bytes again.)
func TestWriterLingerBatchBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	store := &flakyStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{})}
	w := newTestWriter(t, store, recorder.WriterConfig{MaxBatchEvents: 1000, MaxBatchBytes: 4 << 10, Linger: time.Hour})
	r := testRun("linger-bytes", "a")
	large := func(seq int64) recorder.Event { // 1 KiB with its type: 4 make a batch's bytes
		e := testEvent(r, seq)
		pad := 1<<10 - len(e.Type) - len(e.Frame) - 2
		e.Frame = append(e.Frame[:len(e.Frame)-1], ":"+strings.Repeat("x", pad)+"\n\n"...)
		return e
	}
	if err := recOf(t, w, r).AppendSync(ctx, large(1)); err != nil { // (the first batch goes at once)
		t.Fatal(err)
	}
	for round, last := 0, int64(1); round < 2; round++ {
		for range 4 {
			last++
			if err := recOf(t, w, r).Append(large(last)); err != nil {
				t.Fatal(err)
			}
		}
		for w.Stats().Appended < uint64(last) {
			select {
			case <-ctx.Done():
				t.Fatalf("round %d: a queue of MaxBatchBytes lingered: %d of %d stored", round, w.Stats().Appended, last)
			case <-time.After(time.Millisecond):
			}
		}
	}
	if st := w.Stats(); st.Appended != 9 || st.Queued != 0 {
		t.Fatalf("%d stored, %d queued; want 9 and 0", st.Appended, st.Queued)
	}
}

// TestWriterLanesConcurrent is TestWriterConcurrent over four lanes: every run's events and
// finish are stored, in order, byte for byte, and Flush waits for every lane.
func TestWriterLanesConcurrent(t *testing.T) {
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	w := newTestWriter(t, store, recorder.WriterConfig{MaxBatchEvents: 64, MaxBufferedEvents: 256, Lanes: 4})
	rs := make([]recorder.Run, 40)
	for i := range rs {
		rs[i] = testRun(fmt.Sprintf("t%d", i), fmt.Sprintf("r%d", i))
	}
	appendConcurrently(t, w, store, rs, 300, func(int) bool { return false })
	for _, r := range rs {
		if got, err := store.Run(t.Context(), r.ThreadID, r.RunID); err != nil || got.Status != recorder.StatusFinished {
			t.Fatalf("Run(%s) = %+v, %v; want finished", r.RunID, got, err)
		}
	}
}

// laneGateStore holds every Append that carries a run of thread "held" until gate is closed.
type laneGateStore struct {
	recorder.Store
	gate chan struct{}
}

func (s *laneGateStore) Append(ctx context.Context, b []recorder.Batch) error {
	for _, x := range b {
		if x.Run.ThreadID == "held" {
			select {
			case <-s.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return s.Store.Append(ctx, b)
}

// TestWriterLanesIndependent: with a write of one lane stuck, the runs of the other lanes are
// stored (several batches are in flight), and the stuck lane's run is stored once it frees.
func TestWriterLanesIndependent(t *testing.T) {
	store := &laneGateStore{Store: recorder.NewMemoryStore(recorder.MemoryConfig{}), gate: make(chan struct{})}
	w := newTestWriter(t, store, recorder.WriterConfig{Lanes: 8})
	held := testRun("held", "r")
	if err := recOf(t, w, held).Append(testEvent(held, 1)); err != nil {
		t.Fatal(err)
	}
	// Sixteen threads: those that hash to another lane than "held" are stored meanwhile.
	free := make([]recorder.Run, 16)
	for i := range free {
		free[i] = testRun(fmt.Sprintf("free-%d", i), "r")
		if err := recOf(t, w, free[i]).Append(testEvent(free[i], 1)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(recordertest.Patience)
	for stored := 0; stored == 0; {
		for _, r := range free {
			if evs, err := store.Events(t.Context(), r.ThreadID, r.RunID, 0, 0); err == nil && len(evs) == 1 {
				stored++
			}
		}
		if stored == 0 && time.Now().After(deadline) {
			t.Fatal("no run of another thread was stored while one lane's write was stuck")
		}
		time.Sleep(time.Millisecond)
	}
	if evs, _ := store.Events(t.Context(), held.ThreadID, held.RunID, 0, 0); len(evs) != 0 {
		t.Fatalf("the stuck lane's run has %d events stored before its write was let go", len(evs))
	}
	close(store.gate)
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkStored(t, store, held, 1)
}
