package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/recorder/recordertest"
)

// followRun is a run used by the Redis follow tests.
func followRun(thread, run string) recorder.Run {
	return recorder.Run{ThreadID: thread, RunID: run, Epoch: recorder.NewEpoch(), Owner: "o", Route: "/a"}
}

// followEvents returns events from..to of r, each frame naming its seq.
func followEvents(r recorder.Run, from, to int64) []recorder.Event {
	var out []recorder.Event
	for seq := from; seq <= to; seq++ {
		f := recorder.AppendCursor([]byte("id: "), r.RunID, r.Epoch, seq)
		out = append(out, recorder.Event{Seq: seq, Type: "CUSTOM", Frame: fmt.Appendf(f, "\ndata: {\"type\":\"CUSTOM\",\"n\":%d}\n\n", seq)})
	}
	return out
}

// collect reads sub until an error or recordertest.Patience.
func collect(sub recorder.Subscription) ([]recorder.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recordertest.Patience)
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

// checkSeqs verifies evs are exactly events from..to of r, in order, byte for byte.
func checkSeqs(t *testing.T, who string, evs []recorder.Event, r recorder.Run, from, to int64) {
	t.Helper()
	want := followEvents(r, from, to)
	if len(evs) != len(want) {
		t.Fatalf("%s read %d events, want %d (seqs %d..%d)", who, len(evs), len(want), from, to)
	}
	for i := range evs {
		if evs[i].Seq != want[i].Seq || evs[i].Type != want[i].Type || string(evs[i].Frame) != string(want[i].Frame) {
			t.Fatalf("%s event %d = {%d %q %q}, want {%d %q %q}", who, i, evs[i].Seq, evs[i].Type, evs[i].Frame, want[i].Seq, want[i].Type, want[i].Frame)
		}
	}
}

// appendRetrying appends one batch, retrying while Redis is unreachable (every append is
// idempotent), for at most recordertest.Patience.
func appendRetrying(s recorder.Store, b recorder.Batch) error {
	deadline := time.Now().Add(recordertest.Patience)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := s.Append(ctx, []recorder.Batch{b})
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedisFollowAnotherReplica: a follower on store B (its own clients, as in another
// proxy process) reads what store A appends, from before the first event and from the middle.
func TestRedisFollowAnotherReplica(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix()
	a := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: prefix})
	b := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: prefix})
	ctx := t.Context()
	r := followRun("t1", "r1")
	if _, err := a.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	early, err := b.Follow(ctx, "t1", "r1", 0)
	if err != nil {
		t.Fatalf("B.Follow(t1/r1, 0) = %v", err)
	}
	defer early.Close()
	const total = 300
	var late recorder.Subscription
	for from := int64(1); from <= total; from += 10 {
		if err := a.Append(ctx, []recorder.Batch{{Run: r, Events: followEvents(r, from, from+9)}}); err != nil {
			t.Fatal(err)
		}
		if from == 151 {
			if late, err = b.Follow(ctx, "t1", "r1", 100); err != nil {
				t.Fatalf("B.Follow(t1/r1, 100) = %v", err)
			}
			defer late.Close()
		}
	}
	if err := a.FinishRun(ctx, "t1", "r1", recorder.StatusFinished, "", total); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		sub  recorder.Subscription
		from int64
	}{{"early follower", early, 1}, {"late follower", late, 101}} {
		got, err := collect(f.sub)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("%s: Next after %d events = %v, want io.EOF", f.name, len(got), err)
		}
		checkSeqs(t, f.name, got, r, f.from, total)
	}
}

// TestRedisFollowFrozen: Redis frozen (SIGSTOP) for 3 s while a run is followed and appended
// to: the follower waits (deadlines only, no error) and resumes with no gap and no duplicate.
func TestRedisFollowFrozen(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix()
	a := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: prefix})
	var logs syncLog
	b := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: prefix, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	r := followRun("t1", "r1")
	if _, err := a.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sub, err := b.Follow(t.Context(), "t1", "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const total = 200
	frozen := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		for seq := int64(1); seq <= total; seq += 4 {
			if seq == 101 {
				<-frozen // the second half is appended around the freeze
			}
			if err := appendRetrying(a, recorder.Batch{Run: r, Events: followEvents(r, seq, seq+3)}); err != nil {
				errc <- err
				return
			}
		}
		errc <- a.FinishRun(context.Background(), "t1", "r1", recorder.StatusFinished, "", total)
	}()
	var got []recorder.Event
	deadlines, stoppedAt, resumed := 0, time.Time{}, false
	end := time.Now().Add(3 * recordertest.Patience)
	for time.Now().Before(end) {
		if len(got) == 100 && stoppedAt.IsZero() {
			srv.Stop()
			close(frozen)
			stoppedAt = time.Now()
		}
		if !stoppedAt.IsZero() && !resumed && time.Since(stoppedAt) >= 3*time.Second {
			srv.Continue()
			resumed = true
		}
		ctx, cancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
		ev, err := sub.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			deadlines++
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("Next after %d events = %v, want events, deadlines, then io.EOF", len(got), err)
			}
			break
		}
		got = append(got, ev)
	}
	if err := <-errc; err != nil {
		t.Fatalf("appending: %v", err)
	}
	checkSeqs(t, "follower", got, r, 1, total)
	if deadlines == 0 {
		t.Errorf("no Next deadline expired during a 3 s freeze, want the follower to have waited")
	}
	// The tail's read outlived its deadline (block + 1 s) during the freeze: it went through
	// the reconnect path, which is what this test is about.
	if l := logs.String(); !strings.Contains(l, "live tail cannot read Redis") || !strings.Contains(l, "live tail reads Redis again") {
		t.Errorf("store B's log = %q, want the tail's lost and regained messages", l)
	}
}

// syncLog is an io.Writer for a logger used from several goroutines.
type syncLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestRedisFollowRestartEmpty: Redis restarted without its data while a run is followed: the
// follower learns the run is gone (ErrRunNotFound) instead of waiting forever.
func TestRedisFollowRestartEmpty(t *testing.T) {
	srv := redistest.Start(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix()})
	r := followRun("t1", "r1")
	if _, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(t.Context(), []recorder.Batch{{Run: r, Events: followEvents(r, 1, 5)}}); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Follow(t.Context(), "t1", "r1", 5)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	srv.Restart()
	if got, err := collect(sub); len(got) != 0 || !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("Next after an empty restart = %d events, %v, want 0, ErrRunNotFound", len(got), err)
	}
}

// TestRedisFollowStreamLost: a run whose stream vanished under its metadata (evicted) is not
// followed as if it had no events.
func TestRedisFollowStreamLost(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix()
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: prefix})
	r := followRun("t1", "r1")
	if _, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(t.Context(), []recorder.Batch{{Run: r, Events: followEvents(r, 1, 5)}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client(t).Del(t.Context(), prefix+":{t1}:events:r1").Err(); err != nil {
		t.Fatal(err)
	}
	if sub, err := s.Follow(t.Context(), "t1", "r1", 2); !errors.Is(err, recorder.ErrRunNotFound) {
		if sub != nil {
			sub.Close()
		}
		t.Errorf("Follow(t1/r1, 2) with the stream gone = %v, want ErrRunNotFound", err)
	}
	// At the end, nothing is missing: the follower waits for what comes next.
	sub, err := s.Follow(t.Context(), "t1", "r1", 5)
	if err != nil {
		t.Fatalf("Follow(t1/r1, 5) = %v, want nil", err)
	}
	defer sub.Close()
	if err := s.Append(t.Context(), []recorder.Batch{{Run: r, Events: followEvents(r, 6, 6)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(t.Context(), "t1", "r1", recorder.StatusFinished, "", 6); err != nil {
		t.Fatal(err)
	}
	got, err := collect(sub)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Next after %d events = %v, want io.EOF", len(got), err)
	}
	checkSeqs(t, "follower", got, r, 6, 6)
}

// TestRedisFollowTrimmedUnread: events MaxEventsPerRun trimmed before the tail read them end
// the follower with ErrSlowSubscriber, never a silent hole.
func TestRedisFollowTrimmedUnread(t *testing.T) {
	srv := redistest.Start(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix(), MaxEventsPerRun: 10})
	r := followRun("t1", "r1")
	if _, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Follow(t.Context(), "t1", "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// One script call: the stream is trimmed before any reader can see its head.
	if err := s.Append(t.Context(), []recorder.Batch{{Run: r, Events: followEvents(r, 1, 1000)}}); err != nil {
		t.Fatal(err)
	}
	if got, err := collect(sub); len(got) != 0 || !errors.Is(err, recorder.ErrSlowSubscriber) {
		t.Errorf("Next after a trimmed head = %d events, %v, want 0, ErrSlowSubscriber", len(got), err)
	}
}

// TestRedisFollowManyFollowers: 200 followers of 50 runs on one store share the tail's
// connections (one subscriber, subscribed to the 50 streams, and at most two pooled), and
// Append keeps succeeding while they wait.
func TestRedisFollowManyFollowers(t *testing.T) {
	srv := redistest.Start(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix()})
	ctx := t.Context()
	const runs, perRun, events = 50, 4, 20
	rs := make([]recorder.Run, runs)
	subs := make([]recorder.Subscription, 0, runs*perRun)
	for i := range rs {
		rs[i] = followRun(fmt.Sprintf("t%d", i%10), fmt.Sprintf("r%d", i))
		if _, err := s.CreateRun(ctx, rs[i], recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for range perRun {
			sub, err := s.Follow(ctx, rs[i].ThreadID, rs[i].RunID, 0)
			if err != nil {
				t.Fatalf("Follow #%d = %v", len(subs), err)
			}
			defer sub.Close()
			subs = append(subs, sub)
		}
	}
	var last string
	if !waitOK(30*time.Second, func() bool {
		list, err := srv.Client(t).ClientList(ctx).Result()
		if err != nil {
			return false
		}
		var ssubs []string
		for line := range strings.SplitSeq(list, "\n") {
			if strings.Contains(line, " name=agui-proxy-tail ") && !strings.Contains(line, " ssub=0 ") {
				for f := range strings.FieldsSeq(line) {
					if strings.HasPrefix(f, "ssub=") {
						ssubs = append(ssubs, f)
					}
				}
			}
		}
		last = fmt.Sprint(ssubs)
		return len(ssubs) == 1 && ssubs[0] == fmt.Sprintf("ssub=%d", runs)
	}) {
		t.Fatalf("tail subscriber connections (ssub each) %s, want one subscribed to the %d followed runs", last, runs)
	}
	// All 200 wait now. Appends go through the writer pool and must not wait for them.
	for seq := int64(1); seq <= events; seq++ {
		batches := make([]recorder.Batch, runs)
		for i, r := range rs {
			batches[i] = recorder.Batch{Run: r, Events: followEvents(r, seq, seq)}
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.Append(actx, batches)
		cancel()
		if err != nil {
			t.Fatalf("Append #%d while 200 followers wait = %v", seq, err)
		}
	}
	for _, r := range rs {
		if err := s.FinishRun(ctx, r.ThreadID, r.RunID, recorder.StatusFinished, "", events); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	results := make([][]recorder.Event, len(subs))
	errs := make([]error, len(subs))
	for i, sub := range subs {
		wg.Go(func() { results[i], errs[i] = collect(sub) })
	}
	wg.Wait()
	for i := range subs {
		if !errors.Is(errs[i], io.EOF) {
			t.Fatalf("follower %d: Next after %d events = %v, want io.EOF", i, len(results[i]), errs[i])
		}
		checkSeqs(t, fmt.Sprintf("follower %d", i), results[i], rs[i/perRun], 1, events)
	}
	st := s.TailPoolStats()
	if st == nil || st.TotalConns > 2 {
		t.Errorf("TailPoolStats() = %+v, want at most 2 connections for 200 followers", st)
	}
	list, err := srv.Client(t).ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(list, "name=agui-proxy-tail "); n < 1 || n > 2 {
		t.Errorf("CLIENT LIST shows %d tail connections, want 1 or 2:\n%s", n, list)
	}
}

// TestRedisFollowNoGoroutineLeak: Close stops the tail goroutine, with followers waiting.
func TestRedisFollowNoGoroutineLeak(t *testing.T) {
	srv := redistest.Start(t)
	cycle := func() {
		s, err := recorder.NewRedisStore(context.Background(), recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix()})
		if err != nil {
			t.Fatal(err)
		}
		r := followRun("t1", "r1")
		if _, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sub, err := s.Follow(t.Context(), "t1", "r1", 0)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { _, err := sub.Next(context.Background()); errc <- err }()
		s.Close()
		if err := <-errc; !errors.Is(err, recorder.ErrClosed) {
			t.Errorf("waiting Next after Close = %v, want ErrClosed", err)
		}
	}
	cycle() // go-redis starts process-wide helpers once; count after them
	before := runtime.NumGoroutine()
	for range 5 {
		cycle()
	}
	redistest.WaitFor(t, 10*time.Second, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= before })
}
