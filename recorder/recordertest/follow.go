package recordertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// FollowQueue is the subscription queue bound (MemoryConfig.FollowQueue,
// RedisConfig.FollowQueue) the factory's stores must be configured with. The follow subtests
// append fewer events than this to a run that is read while it grows, and more to the run of
// the slow-subscriber subtest, whose follower reads nothing until the appends are done.
const FollowQueue = 256

// followEvents is how many events the live follow subtests append (below FollowQueue and
// MaxEventsPerRun, so a follower that lags behind the appender is never told it is slow).
const followEvents = 200

// Patience bounds every wait of the follow subtests. It is a hang guard, never a measure:
// stores notice a run's end after at most about a second.
const Patience = 20 * time.Second

// followTests are the subtests for stores implementing recorder.Follower.
var followTests = []struct {
	name string
	fn   func(t *testing.T, s recorder.Store, f recorder.Follower)
}{
	{"FinishedRun", testFollowFinished},
	{"LiveRun", testFollowLive},
	{"AfterSeqInTheMiddle", testFollowAfterMiddle},
	{"AcrossGap", testFollowAcrossGap},
	{"ConcurrentFollowers", testFollowConcurrent},
	{"FinishRunEndsFollowers", testFollowFinishEnds},
	{"StoreCloseEndsFollowers", testFollowStoreClose},
	{"SubscriptionClose", testFollowSubscriptionClose},
	{"SlowSubscriber", testFollowSlow},
	{"DeadlinesLoseNothing", testFollowDeadlines},
	{"RunDeleted", testFollowRunDeleted},
	{"NotFound", testFollowNotFound},
}

// runFollow runs the follow subtests; stores that are not Followers skip them.
func runFollow(t *testing.T, newStore func(t *testing.T) recorder.Store) {
	for _, tc := range followTests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() })
			f, ok := s.(recorder.Follower)
			if !ok {
				t.Skipf("%T does not implement recorder.Follower", s)
			}
			tc.fn(t, s, f)
		})
	}
}

func mustFollow(t *testing.T, f recorder.Follower, thread, run string, after int64) recorder.Subscription {
	t.Helper()
	sub, err := f.Follow(t.Context(), thread, run, after)
	if err != nil {
		t.Fatalf("Follow(%s/%s, %d) = %v, want nil", thread, run, after, err)
	}
	t.Cleanup(func() { sub.Close() })
	return sub
}

// drain reads sub until an error (io.EOF included) or Patience, and returns what it read.
func drain(sub recorder.Subscription) ([]recorder.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	defer cancel()
	var out []recorder.Event
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// appendInBatches appends events from..to of r in batches of size, then finishes the run
// when finish is set. It reports the first error.
func appendInBatches(s recorder.Store, r recorder.Run, from, to, size int64, finish bool) error {
	ctx := context.Background()
	for b := from; b <= to; b += size {
		if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: events(r, b, min(b+size-1, to))}}); err != nil {
			return err
		}
	}
	if finish {
		return s.FinishRun(ctx, r.ThreadID, r.RunID, recorder.StatusFinished, "", to)
	}
	return nil
}

// testFollowFinished: a finished run is delivered whole, then io.EOF, every time Next is
// called again.
func testFollowFinished(t *testing.T, s recorder.Store, f recorder.Follower) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	if err := appendInBatches(s, r, 1, 50, 20, true); err != nil {
		t.Fatal(err)
	}
	sub := mustFollow(t, f, "t1", "r1", 0)
	got, err := drain(sub)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Next after %d events = %v, want io.EOF", len(got), err)
	}
	checkEvents(t, got, events(r, 1, 50))
	if _, err := sub.Next(t.Context()); !errors.Is(err, io.EOF) {
		t.Errorf("Next after io.EOF = %v, want io.EOF again", err)
	}
	// A run finished without any event ends at once.
	empty := newRun("t1", "r2")
	mustCreate(t, s, empty)
	if err := s.FinishRun(t.Context(), "t1", "r2", recorder.StatusError, "boom", 0); err != nil {
		t.Fatal(err)
	}
	if got, err := drain(mustFollow(t, f, "t1", "r2", 0)); len(got) != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("following an empty finished run = %d events, %v, want 0, io.EOF", len(got), err)
	}
}

// testFollowLive: a follower that starts before the first event gets every event once, in
// order, while another goroutine appends in batches, and io.EOF after FinishRun.
func testFollowLive(t *testing.T, s recorder.Store, f recorder.Follower) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	sub := mustFollow(t, f, "t1", "r1", 0)
	errc := make(chan error, 1)
	go func() { errc <- appendInBatches(s, r, 1, followEvents, 7, true) }()
	got, err := drain(sub)
	if aerr := <-errc; aerr != nil {
		t.Fatalf("appending: %v", aerr)
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Next after %d events = %v, want io.EOF", len(got), err)
	}
	checkEvents(t, got, events(r, 1, followEvents))
}

// testFollowAfterMiddle: afterSeq inside the stored events skips exactly those up to it;
// events appended later follow.
func testFollowAfterMiddle(t *testing.T, s recorder.Store, f recorder.Follower) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 1, 40)})
	sub := mustFollow(t, f, "t1", "r1", 25)
	ctx, cancel := context.WithTimeout(t.Context(), Patience)
	defer cancel()
	var got []recorder.Event
	for range 15 {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d events = %v, want event %d", len(got), err, 26+len(got))
		}
		got = append(got, ev)
	}
	checkEvents(t, got, events(r, 26, 40))
	if err := appendInBatches(s, r, 41, 60, 5, true); err != nil {
		t.Fatal(err)
	}
	rest, err := drain(sub)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Next after %d more events = %v, want io.EOF", len(rest), err)
	}
	checkEvents(t, rest, events(r, 41, 60))
	// afterSeq at or past the end: nothing but the end.
	for _, after := range []int64{60, 1000} {
		if got, err := drain(mustFollow(t, f, "t1", "r1", after)); len(got) != 0 || !errors.Is(err, io.EOF) {
			t.Errorf("Follow(t1/r1, %d) = %d events, %v, want 0, io.EOF", after, len(got), err)
		}
	}
}

// testFollowAcrossGap: a seq jump (events the writer had to drop, recorded as a gap) is
// followed across, live and in the history, without an error.
func testFollowAcrossGap(t *testing.T, s recorder.Store, f recorder.Follower) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 1, 3)})
	sub := mustFollow(t, f, "t1", "r1", 0)
	if got, err := drainN(sub, 3); err != nil {
		t.Fatalf("Next after %d events = %v, want 3 events", len(got), err)
	}
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 7, 9)})
	if err := appendInBatches(s, r, 12, 12, 1, true); err != nil {
		t.Fatal(err)
	}
	want := append(events(r, 7, 9), events(r, 12, 12)...)
	got, err := drain(sub)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Next after %d events = %v, want io.EOF", len(got), err)
	}
	checkEvents(t, got, want)
	got, err = drain(mustFollow(t, f, "t1", "r1", 2))
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Follow(t1/r1, 2): Next after %d events = %v, want io.EOF", len(got), err)
	}
	checkEvents(t, got, append(events(r, 3, 3), want...))
}

// testFollowConcurrent: 20 followers, started while the run grows, all read the identical
// sequence.
func testFollowConcurrent(t *testing.T, s recorder.Store, f recorder.Follower) {
	const followers = 20
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 1, 10)})
	got := make([][]recorder.Event, followers)
	errs := make([]error, followers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range followers {
		sub := mustFollow(t, f, "t1", "r1", int64(i%3)) // a few different start positions
		wg.Go(func() {
			<-start
			got[i], errs[i] = drain(sub)
		})
	}
	errc := make(chan error, 1)
	go func() {
		<-start
		errc <- appendInBatches(s, r, 11, followEvents, 9, true)
	}()
	close(start)
	wg.Wait()
	if err := <-errc; err != nil {
		t.Fatalf("appending: %v", err)
	}
	for i := range followers {
		if !errors.Is(errs[i], io.EOF) {
			t.Errorf("follower %d: Next after %d events = %v, want io.EOF", i, len(got[i]), errs[i])
			continue
		}
		checkEvents(t, got[i], events(r, int64(i%3)+1, followEvents))
	}
}

// waitingFollower starts a follower of a running run that has read everything stored and
// waits; the returned channel yields Next's first error.
func waitingFollower(t *testing.T, s recorder.Store, f recorder.Follower, r recorder.Run) (<-chan error, recorder.Subscription) {
	t.Helper()
	mustCreate(t, s, r)
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 1, 3)})
	sub := mustFollow(t, f, r.ThreadID, r.RunID, 0)
	first, err := drainN(sub, 3)
	if err != nil {
		t.Fatalf("Next after %d events = %v, want 3 events", len(first), err)
	}
	errc := make(chan error, 1)
	go func() {
		got, err := drain(sub)
		if err == nil || len(got) != 0 {
			err = fmt.Errorf("%d more events, then %w", len(got), err)
		}
		errc <- err
	}()
	return errc, sub
}

func drainN(sub recorder.Subscription, n int) ([]recorder.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	defer cancel()
	var out []recorder.Event
	for len(out) < n {
		ev, err := sub.Next(ctx)
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// testFollowFinishEnds: FinishRun wakes a follower waiting for more with io.EOF.
func testFollowFinishEnds(t *testing.T, s recorder.Store, f recorder.Follower) {
	r := newRun("t1", "r1")
	errc, _ := waitingFollower(t, s, f, r)
	if err := s.FinishRun(t.Context(), "t1", "r1", recorder.StatusInterrupted, "gone", 3); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, io.EOF) {
		t.Errorf("waiting Next after FinishRun = %v, want io.EOF", err)
	}
}

// testFollowStoreClose: closing the store ends waiting followers with ErrClosed, and Follow
// after Close fails the same way.
func testFollowStoreClose(t *testing.T, s recorder.Store, f recorder.Follower) {
	errc, _ := waitingFollower(t, s, f, newRun("t1", "r1"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, recorder.ErrClosed) {
		t.Errorf("waiting Next after the store's Close = %v, want ErrClosed", err)
	}
	if _, err := f.Follow(t.Context(), "t1", "r1", 0); !errors.Is(err, recorder.ErrClosed) {
		t.Errorf("Follow after Close = %v, want ErrClosed", err)
	}
}

// testFollowSubscriptionClose: Subscription.Close ends its own waiting Next with ErrClosed
// and leaves other followers alone.
func testFollowSubscriptionClose(t *testing.T, s recorder.Store, f recorder.Follower) {
	r := newRun("t1", "r1")
	errc, sub := waitingFollower(t, s, f, r)
	other := mustFollow(t, f, "t1", "r1", 3)
	if err := sub.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := <-errc; !errors.Is(err, recorder.ErrClosed) {
		t.Errorf("waiting Next after Close = %v, want ErrClosed", err)
	}
	if _, err := sub.Next(t.Context()); !errors.Is(err, recorder.ErrClosed) {
		t.Errorf("Next after Close = %v, want ErrClosed", err)
	}
	if err := sub.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
	if err := appendInBatches(s, r, 4, 6, 3, true); err != nil {
		t.Fatal(err)
	}
	got, err := drain(other)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("other follower: Next after %d events = %v, want io.EOF", len(got), err)
	}
	checkEvents(t, got, events(r, 4, 6))
}

// testFollowSlow: a follower that reads nothing while more than FollowQueue events are
// appended gets a gap-free prefix, then ErrSlowSubscriber; it may follow again from there.
// A second follower, read after each batch, paces the appends: once it has an event, every
// follower of the run was offered it (a store may hand events over asynchronously).
func testFollowSlow(t *testing.T, s recorder.Store, f recorder.Follower) {
	const total, batch = FollowQueue + 40, 20 // below MaxEventsPerRun: nothing is trimmed
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	sub := mustFollow(t, f, "t1", "r1", 0)
	pacer := mustFollow(t, f, "t1", "r1", 0)
	for from := int64(1); from <= total; from += batch {
		to := min(from+batch-1, total)
		if err := appendInBatches(s, r, from, to, batch, false); err != nil {
			t.Fatal(err)
		}
		got, err := drainN(pacer, int(to-from+1))
		if err != nil {
			t.Fatalf("pacing follower: Next after %d events of batch %d..%d = %v", len(got), from, to, err)
		}
		checkEvents(t, got, events(r, from, to))
	}
	got, err := drain(sub)
	if !errors.Is(err, recorder.ErrSlowSubscriber) {
		t.Fatalf("Next after %d events = %v, want ErrSlowSubscriber", len(got), err)
	}
	if len(got) > FollowQueue {
		t.Errorf("slow follower read %d events before ErrSlowSubscriber, want at most FollowQueue = %d", len(got), FollowQueue)
	}
	checkEvents(t, got, events(r, 1, int64(len(got))))
	if _, err := sub.Next(t.Context()); !errors.Is(err, recorder.ErrSlowSubscriber) {
		t.Errorf("Next after ErrSlowSubscriber = %v, want ErrSlowSubscriber again", err)
	}
	// Following again from the last event read resumes without a gap; history read at Follow
	// is not counted against the bound.
	again := mustFollow(t, f, "t1", "r1", int64(len(got)))
	if err := s.FinishRun(t.Context(), "t1", "r1", recorder.StatusFinished, "", total); err != nil {
		t.Fatal(err)
	}
	rest, err := drain(again)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("second follower: Next after %d events = %v, want io.EOF", len(rest), err)
	}
	checkEvents(t, rest, events(r, int64(len(got))+1, total))
}

// testFollowDeadlines: Next with a context that expires before an event arrives returns the
// context's error and consumes nothing, however often that happens (the attach handler calls
// Next with a short deadline to send heartbeats).
func testFollowDeadlines(t *testing.T, s recorder.Store, f recorder.Follower) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	sub := mustFollow(t, f, "t1", "r1", 0)
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	_, err := sub.Next(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with nothing to read and a 20ms deadline = %v, want context.DeadlineExceeded", err)
	}
	done, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := sub.Next(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context and nothing to read = %v, want context.Canceled", err)
	}
	// The appender waits for a deadline to expire after each batch, so deadlines and events
	// interleave however fast the store is.
	expiredc := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		for from := int64(1); from <= 120; from += 3 {
			if err := appendInBatches(s, r, from, from+2, 3, false); err != nil {
				errc <- err
				return
			}
			select {
			case <-expiredc:
			case <-time.After(Patience):
				errc <- errors.New("no Next deadline expired within Patience")
				return
			}
		}
		errc <- s.FinishRun(context.Background(), "t1", "r1", recorder.StatusFinished, "", 120)
	}()
	var got []recorder.Event
	expired := 0
	deadline := time.Now().Add(2 * Patience)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		ev, err := sub.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			expired++
			select {
			case expiredc <- struct{}{}:
			default:
			}
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("Next after %d events = %v, want an event, a deadline or io.EOF", len(got), err)
			}
			break
		}
		got = append(got, ev)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	checkEvents(t, got, events(r, 1, 120))
	t.Logf("%d deadlines expired while reading 120 events", expired)
}

// testFollowRunDeleted: a followed run whose data is removed ends its followers with
// ErrRunNotFound instead of leaving them waiting.
func testFollowRunDeleted(t *testing.T, s recorder.Store, f recorder.Follower) {
	errc, _ := waitingFollower(t, s, f, newRun("t1", "r1"))
	if err := s.DeleteRun(t.Context(), "t1", "r1"); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("waiting Next after DeleteRun = %v, want ErrRunNotFound", err)
	}
}

// testFollowNotFound: unknown runs and threads, and ids that are not ids, are refused.
func testFollowNotFound(t *testing.T, s recorder.Store, f recorder.Follower) {
	mustCreate(t, s, newRun("t1", "r1"))
	if _, err := f.Follow(t.Context(), "t1", "nope", 0); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("Follow(t1/nope) = %v, want ErrRunNotFound", err)
	}
	if _, err := f.Follow(t.Context(), "nope", "r1", 0); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("Follow(nope/r1) = %v, want ErrThreadNotFound", err)
	}
	for _, id := range HostileIDs {
		if sub, err := f.Follow(t.Context(), id, "r1", 0); err == nil {
			sub.Close()
			t.Errorf("Follow(%.20q/r1) = nil error, want the id refused", id)
		}
		if sub, err := f.Follow(t.Context(), "t1", id, 0); err == nil {
			sub.Close()
			t.Errorf("Follow(t1/%.20q) = nil error, want the id refused", id)
		}
	}
}
