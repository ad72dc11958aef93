package recorder_test

import (
	"errors"
	"io"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/panics"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// TestRedisFollowPanicContained: a panic while the tail feeds one followed run (forced
// through panics.SetHook) ends that run's follower with the *panics.Error, counted; the
// follower of another run on the same tail reads every event to the end.
func TestRedisFollowPanicContained(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix()
	a := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: prefix})
	b := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: prefix})
	ctx := t.Context()
	poisoned, other := followRun("poisoned", "r1"), followRun("other", "r1")
	for _, r := range []recorder.Run{poisoned, other} {
		if _, err := a.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	defer panics.SetHook(func(where panics.Where, key string) {
		if where == panics.Tail && key == poisoned.ThreadID {
			panic("a forced panic in the tail")
		}
	})()
	before := panics.Count(panics.Tail)
	subP, err := b.Follow(ctx, poisoned.ThreadID, poisoned.RunID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer subP.Close()
	subO, err := b.Follow(ctx, other.ThreadID, other.RunID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer subO.Close()
	const total = 50
	for from := int64(1); from <= total; from += 10 {
		for _, r := range []recorder.Run{poisoned, other} {
			if err := a.Append(ctx, []recorder.Batch{{Run: r, Events: followEvents(r, from, from+9)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.FinishRun(ctx, other.ThreadID, other.RunID, recorder.StatusFinished, "", total); err != nil {
		t.Fatal(err)
	}
	got, err := collect(subO)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("the other run's follower: Next after %d events = %v, want io.EOF", len(got), err)
	}
	checkSeqs(t, "the other run's follower", got, other, 1, total)
	if got, err := collect(subP); !errors.Is(err, panics.ErrPanicked) {
		t.Fatalf("the poisoned run's follower: Next after %d events = %v, want a recovered panic", len(got), err)
	}
	if panics.Count(panics.Tail) <= before {
		t.Fatalf("the tail's panic was not counted")
	}
}
