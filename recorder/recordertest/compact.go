package recordertest

import (
	"errors"
	"io"
	"testing"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// runCompactAtRest runs the RunCompactor subtests; other stores skip them.
func runCompactAtRest(t *testing.T, newStore func(t *testing.T) recorder.Store) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s recorder.Store, c recorder.RunCompactor)
	}{
		{"Replace", testCompactReplace},
		{"Refusals", testCompactRefusals},
		{"FollowerOfOldEpoch", testCompactFollower},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() })
			c, ok := s.(recorder.RunCompactor)
			if !ok {
				t.Skipf("%T does not implement recorder.RunCompactor", s)
			}
			tc.fn(t, s, c)
		})
	}
}

// endedRun creates a run with events 1..n (a gap at 3 when n >= 5) and finishes it.
func endedRun(t *testing.T, s recorder.Store, thread, run string, n int64) recorder.Run {
	t.Helper()
	r := newRun(thread, run)
	mustCreate(t, s, r)
	evs := events(r, 1, n)
	if n >= 5 {
		evs = append(evs[:2], evs[3:]...)
	}
	mustAppend(t, s, recorder.Batch{Run: r, Events: evs})
	if err := s.FinishRun(t.Context(), thread, run, recorder.StatusFinished, "", n); err != nil {
		t.Fatal(err)
	}
	return r
}

// testCompactReplace: the compacted events replace the raw ones whole, under the new epoch;
// the run is complete, marked compacted, and its checkpoint and siblings are untouched.
func testCompactReplace(t *testing.T, s recorder.Store, c recorder.RunCompactor) {
	ctx := t.Context()
	r1 := endedRun(t, s, "t1", "r1", 300)
	r2 := endedRun(t, s, "t1", "r2", 7)
	if err := s.PutCheckpoint(ctx, "t1", "r1", []byte("cp")); err != nil {
		t.Fatal(err)
	}
	next := r1
	next.Epoch = recorder.NewEpoch()
	want := events(next, 1, 4)
	want[1].Type = "OTHER"
	if err := c.ReplaceRunEvents(ctx, "t1", "r1", r1.Epoch, next.Epoch, want); err != nil {
		t.Fatalf("ReplaceRunEvents(t1/r1) = %v", err)
	}
	checkEvents(t, mustEvents(t, s, "t1", "r1", 0, 0), want)
	got := mustRun(t, s, "t1", "r1")
	if got.Epoch != next.Epoch || got.LastSeq != 4 || got.FirstSeq != 1 || len(got.Gaps) != 0 || !got.Complete(0) ||
		got.CompactedAt.IsZero() || got.Status != recorder.StatusFinished {
		t.Errorf("Run(t1/r1) after compaction = %+v, want epoch %s, 1..4, no gaps, compacted, finished", got, next.Epoch)
	}
	if cp, err := s.Checkpoint(ctx, "t1", "r1"); err != nil || string(cp) != "cp" {
		t.Errorf("Checkpoint(t1/r1) after compaction = %q, %v, want kept", cp, err)
	}
	if got := mustRun(t, s, "t1", "r2"); !got.CompactedAt.IsZero() || got.Epoch != r2.Epoch || got.LastSeq != 7 {
		t.Errorf("Run(t1/r2), not compacted, = %+v", got)
	}
	// A second compactor that read the old epoch loses the race without changing anything.
	other := r1
	other.Epoch = recorder.NewEpoch()
	if err := c.ReplaceRunEvents(ctx, "t1", "r1", r1.Epoch, other.Epoch, events(other, 1, 2)); !errors.Is(err, recorder.ErrConflict) {
		t.Errorf("ReplaceRunEvents with a stale epoch = %v, want ErrConflict", err)
	}
	checkEvents(t, mustEvents(t, s, "t1", "r1", 0, 0), want)
	// Late raw events of the old epoch (a Writer retry) are not mixed in.
	mustAppend(t, s, recorder.Batch{Run: r1, Events: events(r1, 301, 302)})
	checkEvents(t, mustEvents(t, s, "t1", "r1", 0, 0), want)
	// Compacting to nothing is allowed (a run that changed nothing).
	empty := recorder.NewEpoch()
	if err := c.ReplaceRunEvents(ctx, "t1", "r2", r2.Epoch, empty, nil); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, s, "t1", "r2"); got.LastSeq != 0 || !got.Complete(0) || len(mustEvents(t, s, "t1", "r2", 0, 0)) != 0 {
		t.Errorf("Run(t1/r2) compacted to nothing = %+v", got)
	}
}

// testCompactRefusals: running runs, unknown runs and threads, bad epochs.
func testCompactRefusals(t *testing.T, s recorder.Store, c recorder.RunCompactor) {
	ctx := t.Context()
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 1, 3)})
	if err := c.ReplaceRunEvents(ctx, "t1", "r1", r.Epoch, recorder.NewEpoch(), nil); !errors.Is(err, recorder.ErrConflict) {
		t.Errorf("ReplaceRunEvents of a running run = %v, want ErrConflict", err)
	}
	checkEvents(t, mustEvents(t, s, "t1", "r1", 0, 0), events(r, 1, 3))
	if err := c.ReplaceRunEvents(ctx, "t1", "nope", r.Epoch, recorder.NewEpoch(), nil); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("ReplaceRunEvents(t1/nope) = %v, want ErrRunNotFound", err)
	}
	if err := c.ReplaceRunEvents(ctx, "t9", "r1", r.Epoch, recorder.NewEpoch(), nil); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("ReplaceRunEvents(t9/r1) = %v, want ErrThreadNotFound", err)
	}
	if err := c.ReplaceRunEvents(ctx, "t1", "r1", r.Epoch, "BAD", nil); !errors.Is(err, recorder.ErrInvalidEpoch) {
		t.Errorf("ReplaceRunEvents with epoch BAD = %v, want ErrInvalidEpoch", err)
	}
	for _, id := range HostileIDs {
		if err := c.ReplaceRunEvents(ctx, "t1", id, r.Epoch, recorder.NewEpoch(), nil); err == nil {
			t.Errorf("ReplaceRunEvents(t1/%.20q) = nil, want the id refused", id)
		}
	}
}

// testCompactFollower: a follower reading the run's raw events when it is compacted ends
// instead of mixing the two forms.
func testCompactFollower(t *testing.T, s recorder.Store, c recorder.RunCompactor) {
	f, ok := s.(recorder.Follower)
	if !ok {
		t.Skip("not a Follower")
	}
	r := endedRun(t, s, "t1", "r1", 4)
	sub := mustFollow(t, f, "t1", "r1", 0)
	defer sub.Close()
	first, err := sub.Next(t.Context())
	if err != nil || first.Seq != 1 {
		t.Fatalf("Next = %d, %v, want seq 1", first.Seq, err)
	}
	next := recorder.NewEpoch()
	if err := c.ReplaceRunEvents(t.Context(), "t1", "r1", r.Epoch, next, events(recorder.Run{RunID: "r1", Epoch: next}, 1, 1)); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		ev, err := sub.Next(t.Context())
		if err != nil {
			if !errors.Is(err, recorder.ErrRunNotFound) && !errors.Is(err, io.EOF) {
				t.Fatalf("Next after compaction = %v, want ErrRunNotFound or io.EOF", err)
			}
			return
		}
		if string(ev.Frame) != string(events(r, ev.Seq, ev.Seq)[0].Frame) {
			t.Fatalf("follower got %q after compaction, not a raw event of the old epoch", ev.Frame)
		}
	}
	t.Fatal("the follower never ended")
}
