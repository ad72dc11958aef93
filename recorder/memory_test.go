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
	if _, err := s.CreateRun(ctx, r); err != nil {
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
	if _, err := s.CreateRun(ctx, r2); err != nil {
		t.Errorf("CreateRun(t1/r1) after expiry = %v, want nil", err)
	}
}

// TestMemoryStoreSweep: expired threads nobody reads again are released by a later write.
func TestMemoryStoreSweep(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := recorder.NewMemoryStore(recorder.MemoryConfig{TTL: time.Minute, Now: clock.Now})
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.CreateRun(ctx, recorder.Run{ThreadID: id, RunID: "r", Epoch: recorder.NewEpoch()}); err != nil {
			t.Fatal(err)
		}
	}
	clock.now = clock.now.Add(2 * time.Minute)
	if _, err := s.CreateRun(ctx, recorder.Run{ThreadID: "d", RunID: "r", Epoch: recorder.NewEpoch()}); err != nil {
		t.Fatal(err)
	}
	if n := recorder.MemoryThreadCount(s); n != 1 {
		t.Errorf("threads held after the sweep = %d, want 1", n)
	}
}
