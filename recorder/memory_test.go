package recorder_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/recorder/recordertest"
)

func TestMemoryStore(t *testing.T) {
	recordertest.Run(t, func(t *testing.T) recorder.Store {
		return recorder.NewMemoryStore(recorder.MemoryConfig{MaxEventsPerRun: recordertest.MaxEventsPerRun, FollowQueue: recordertest.FollowQueue})
	})
}

// fakeClock is a settable clock for expiry tests.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

// TestMemoryStoreTTL: a thread expires TTL after its last write, with everything in it; reads
// do not extend it, writes do.
func TestMemoryStoreTTL(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := recorder.NewMemoryStore(recorder.MemoryConfig{TTL: time.Hour, Now: clock.Now})
	ctx := t.Context()
	r := recorder.Run{ThreadID: "t1", RunID: "r1", Epoch: recorder.NewEpoch()}
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.now = clock.now.Add(50 * time.Minute)
	if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{{Seq: 1, Frame: []byte("x")}}}}); err != nil {
		t.Fatal(err)
	}
	clock.now = clock.now.Add(50 * time.Minute) // 100 min after creation, 50 after the last write
	if _, err := s.Thread(ctx, "t1"); err != nil {
		t.Errorf("Thread(t1) 50 min after the last write = %v, want nil", err)
	}
	clock.now = clock.now.Add(10 * time.Minute)
	for name, err := range map[string]error{
		"Thread": func() error { _, err := s.Thread(ctx, "t1"); return err }(),
		"Run":    func() error { _, err := s.Run(ctx, "t1", "r1"); return err }(),
	} {
		if !errors.Is(err, recorder.ErrThreadNotFound) {
			t.Errorf("%s 60 min after the last write = %v, want ErrThreadNotFound", name, err)
		}
	}
	// The expired id is free again, for anyone.
	r2 := recorder.Run{ThreadID: "t1", RunID: "r1", Epoch: recorder.NewEpoch(), Owner: "bob"}
	if _, err := s.CreateRun(ctx, r2, recorder.CreateOptions{}); err != nil {
		t.Errorf("CreateRun(t1/r1, recorder.CreateOptions{}) after expiry = %v, want nil", err)
	}
}

// TestMemoryStoreSweep: expired threads nobody reads again are released by a later write.
func TestMemoryStoreSweep(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := recorder.NewMemoryStore(recorder.MemoryConfig{TTL: time.Minute, Now: clock.Now})
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.CreateRun(ctx, recorder.Run{ThreadID: id, RunID: "r", Epoch: recorder.NewEpoch()}, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clock.now = clock.now.Add(2 * time.Minute)
	if _, err := s.CreateRun(ctx, recorder.Run{ThreadID: "d", RunID: "r", Epoch: recorder.NewEpoch()}, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := recorder.MemoryThreadCount(s); n != 1 {
		t.Errorf("threads held after the sweep = %d, want 1", n)
	}
}

// TestMemoryStoreMaxBytes: above MaxBytes the least recently written idle threads are evicted
// whole (and counted); a thread with a running run and the thread being written are kept; the
// accounting returns to zero when everything is gone.
func TestMemoryStoreMaxBytes(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := recorder.NewMemoryStore(recorder.MemoryConfig{MaxBytes: 120_000, Now: clock.Now})
	ctx := t.Context()
	fill := func(thread string, finish bool) {
		t.Helper()
		clock.now = clock.now.Add(time.Second)
		r := testRun(thread, "r1")
		if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		evs := make([]recorder.Event, 100)
		for i := range evs {
			evs[i] = testEvent(r, int64(i+1))
			evs[i].Frame = append(evs[i].Frame, make([]byte, 150)...) // about 200 bytes each
		}
		if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: evs}}); err != nil {
			t.Fatal(err)
		}
		if finish {
			if err := s.FinishRun(ctx, thread, "r1", recorder.StatusFinished, "", 100); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill("busy", false) // oldest, but running
	for _, id := range []string{"a", "b", "c"} {
		fill(id, true)
	}
	if st := s.Stats(); st.Evictions != 0 || st.Threads != 4 || st.Bytes > 120_000 {
		t.Fatalf("Stats after 4 threads of ~25 KB = %+v, want no eviction", st)
	}
	fill("d", true) // above the bound: the oldest idle threads go first
	st := s.Stats()
	if st.Evictions == 0 || st.Bytes > 120_000 {
		t.Fatalf("Stats after exceeding MaxBytes = %+v, want evictions and at most 120000 bytes", st)
	}
	if _, err := s.Thread(ctx, "a"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("Thread(a), the oldest idle thread, = %v, want evicted", err)
	}
	for _, id := range []string{"busy", "d"} {
		if _, err := s.Thread(ctx, id); err != nil {
			t.Errorf("Thread(%s) = %v, want kept (running / just written)", id, err)
		}
	}
	if err := s.PutCheckpoint(ctx, "d", "r1", make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.CheckpointBytes != 1000 {
		t.Errorf("CheckpointBytes = %d, want 1000", st.CheckpointBytes)
	}
	if err := s.FinishRun(ctx, "busy", "r1", recorder.StatusFinished, "", 100); err != nil {
		t.Fatal(err)
	}
	page, err := s.ListThreads(ctx, recorder.ThreadQuery{Owner: "alice", Route: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range page.Threads {
		if err := s.DeleteThread(ctx, th.ID, "alice", "/a"); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Bytes != 0 || st.CheckpointBytes != 0 || st.Threads != 0 {
		t.Errorf("Stats after deleting every thread = %+v, want zero sizes", st)
	}
}
