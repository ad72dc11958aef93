package recorder_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/redis/go-redis/v9"
)

// Fault tests: real redis-server processes, frozen, killed and restarted; a TCP proxy that
// loses replies. They wait for conditions with bounded polling and never assert durations.

// TestFaultRedisHung: the writer keeps accepting events while Redis is frozen (SIGSTOP) for 5 s;
// after SIGCONT every event is stored exactly once, in order. This is where go-redis re-sends a
// write whose reply timed out (the frozen server executes every copy once it runs again); the
// append script's seq check keeps one.
func TestFaultRedisHung(t *testing.T) {
	srv := redistest.Start(t)
	store := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "hung"})
	w := newTestWriter(t, store, recorder.WriterConfig{RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond})
	const runs = 8
	rs := make([]recorder.Run, runs)
	for i := range rs {
		rs[i] = testRun(fmt.Sprintf("t%d", i%3), fmt.Sprintf("r%d", i))
		if _, err := store.CreateRun(t.Context(), rs[i], recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var seq atomic.Int64 // the last seq appended to every run
	appendRound := func() {
		n := seq.Add(1)
		for _, r := range rs {
			if err := recOf(t, w, r).Append(testEvent(r, n)); err != nil {
				t.Errorf("Append(%s, %d) = %v", r.RunID, n, err)
			}
		}
	}
	for range 50 {
		appendRound()
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	stopped := time.Now()
	var during int64
	for time.Since(stopped) < 5*time.Second { // the outage lasts 5 s; the pump keeps going
		appendRound()
		during++
		time.Sleep(10 * time.Millisecond)
	}
	redistest.WaitFor(t, 30*time.Second, "a failed store call", func() bool { return w.Stats().StoreErrors > 0 })
	srv.Continue()
	for range 50 {
		appendRound()
	}
	for _, r := range rs {
		recOf(t, w, r).Finish(recorder.StatusFinished, "", seq.Load())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush after SIGCONT = %v", err)
	}
	last := seq.Load()
	for _, r := range rs {
		checkStored(t, store, r, last)
		got, _ := store.Run(t.Context(), r.ThreadID, r.RunID)
		if got.Status != recorder.StatusFinished || len(got.Gaps) != 0 || got.LastSeq != last {
			t.Errorf("Run(%s) = status %s last %d gaps %v, want finished, %d, none", r.RunID, got.Status, got.LastSeq, got.Gaps, last)
		}
	}
	st := w.Stats()
	if st.Dropped != 0 || st.StoreErrors == 0 || st.HighWater < int(during)*runs {
		t.Errorf("Stats() = %+v, want 0 dropped, store errors > 0, high water >= %d", st, int(during)*runs)
	}
	t.Logf("%d events per run appended during the 5 s freeze; stats %+v", during, st)
}

// TestFaultRedisRestartEmpty: Redis is killed and comes back empty; the writer reconnects by
// itself, runs it lost are re-created with a gap for what was lost, and new runs are recorded.
func TestFaultRedisRestartEmpty(t *testing.T) {
	srv := redistest.Start(t)
	store := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "crash"})
	w := newTestWriter(t, store, recorder.WriterConfig{RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	rs := []recorder.Run{testRun("t1", "a"), testRun("t1", "b"), testRun("t2", "c")}
	for _, r := range rs {
		if _, err := store.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for seq := int64(1); seq <= 10; seq++ {
			recOf(t, w, r).Append(testEvent(r, seq))
		}
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	for _, r := range rs {
		for seq := int64(11); seq <= 20; seq++ {
			if err := recOf(t, w, r).Append(testEvent(r, seq)); err != nil {
				t.Fatalf("Append while Redis is down = %v", err)
			}
		}
	}
	redistest.WaitFor(t, 30*time.Second, "a failed store call", func() bool { return w.Stats().StoreErrors > 0 })
	srv.Restart()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush after the restart = %v", err)
	}
	for _, r := range rs {
		got, err := store.Run(t.Context(), r.ThreadID, r.RunID)
		if err != nil {
			t.Fatalf("Run(%s) after the restart = %v", r.RunID, err)
		}
		if got.Epoch != r.Epoch || got.Owner != "alice" || got.Route != "/a" || got.FirstSeq != 11 || got.LastSeq != 20 ||
			!slices.Equal(got.Gaps, []recorder.Gap{{From: 1, To: 10}}) || got.Complete(0) || !got.Complete(10) {
			t.Errorf("Run(%s) after the restart = %+v, want epoch %s, alice, /a, 11..20 with gap 1-10", r.RunID, got, r.Epoch)
		}
		evs, _ := store.Events(t.Context(), r.ThreadID, r.RunID, 0, 0)
		if len(evs) != 10 || evs[0].Seq != 11 || evs[9].Seq != 20 {
			t.Errorf("Events(%s) after the restart = %d events, want 11..20", r.RunID, len(evs))
		}
	}
	// New runs work on the restarted server (scripts reloaded after NOSCRIPT).
	n := testRun("t3", "new")
	if _, err := store.CreateRun(t.Context(), n, recorder.CreateOptions{}); err != nil {
		t.Fatalf("CreateRun after the restart = %v", err)
	}
	for seq := int64(1); seq <= 5; seq++ {
		if err := recOf(t, w, n).AppendSync(t.Context(), testEvent(n, seq)); err != nil {
			t.Fatalf("AppendSync after the restart = %v", err)
		}
	}
	recOf(t, w, n).Finish(recorder.StatusFinished, "", 5)
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkStored(t, store, n, 5)
}

// TestFaultRestartWithAOF: with appendonly yes a crash loses nothing acknowledged in sync mode.
func TestFaultRestartWithAOF(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	store := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "aof"})
	w := newTestWriter(t, store, recorder.WriterConfig{Durability: recorder.DurabilitySync, RetryMin: 20 * time.Millisecond})
	r := testRun("t", "r")
	if _, err := store.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 20; seq++ {
		if err := recOf(t, w, r).AppendSync(t.Context(), testEvent(r, seq)); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill()
	srv.Restart()
	redistest.WaitFor(t, 30*time.Second, "Redis to load the AOF", func() bool { return store.Ping(t.Context()) == nil })
	checkStored(t, store, r, 20)
	if got, _ := store.Run(t.Context(), "t", "r"); len(got.Gaps) != 0 || got.LastSeq != 20 {
		t.Errorf("Run after the AOF restart = last %d gaps %v, want 20, none", got.LastSeq, got.Gaps)
	}
}

// TestFaultDuplicateXADDHazard pins the hazard the store is built around (docs/design.md
// F10, F11): go-redis re-sends a plain XADD * whose reply was lost, and the stream ends up
// with two entries although the caller saw one success.
func TestFaultDuplicateXADDHazard(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewFaultProxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	proxy.SetMode(redistest.DropNextReply)
	err := c.XAdd(ctx, &redis.XAddArgs{Stream: "s", Values: []string{"f", "v"}}).Err()
	n, _ := srv.Client(t).XLen(ctx, "s").Result()
	if err != nil || n != 2 || proxy.Dropped() != 1 {
		t.Errorf("XADD * through a lost reply: err %v, XLEN %d, dropped %d; want nil, 2, 1 (the duplicate go-redis creates)", err, n, proxy.Dropped())
	}
}

// TestFaultDropNextReply: an append whose reply is lost (Redis executed it, the client saw EOF)
// is retried by go-redis or by the writer and still stored exactly once.
func TestFaultDropNextReply(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewFaultProxy(t, srv.Addr())
	store := newRedisStore(t, recorder.RedisConfig{URL: proxy.URL(), Prefix: "drop"})
	r := testRun("t", "r")
	if _, err := store.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		from, to int64
		maxRetry bool // go-redis retries inside Append; otherwise the writer retries
	}{
		{"store", 1, 5, true},
		{"writer", 6, 10, false},
	}
	for _, tc := range tests {
		proxy.SetMode(redistest.DropNextReply)
		var evs []recorder.Event
		for seq := tc.from; seq <= tc.to; seq++ {
			evs = append(evs, testEvent(r, seq))
		}
		if tc.maxRetry {
			if err := store.Append(t.Context(), []recorder.Batch{{Run: r, Events: evs}}); err != nil {
				t.Errorf("%s: Append through a lost reply = %v, want nil (go-redis retried)", tc.name, err)
			}
		} else {
			w := newTestWriter(t, store, recorder.WriterConfig{})
			for _, ev := range evs {
				recOf(t, w, r).Append(ev)
			}
			if err := w.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if proxy.Dropped() == 0 {
			t.Fatalf("%s: the fault proxy dropped no reply", tc.name)
		}
		proxy.SetMode(redistest.Pass)
	}
	checkStored(t, store, r, 10)
	if proxy.Dropped() != 2 {
		t.Errorf("replies dropped = %d, want 2", proxy.Dropped())
	}
}

// TestFaultOverflow: with Redis frozen and a small buffer, events beyond the buffer are dropped,
// counted and logged once; the run gets gaps when Redis is back; the counters add up.
func TestFaultOverflow(t *testing.T) {
	srv := redistest.Start(t)
	store := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "ovf"})
	var logs logBuffer
	w := newTestWriter(t, store, recorder.WriterConfig{MaxBufferedEvents: 50, MaxBatchEvents: 8, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, Logger: logs.logger()})
	r := testRun("t", "r")
	if _, err := store.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	var refused int
	for seq := int64(1); seq <= 200; seq++ {
		if err := recOf(t, w, r).Append(testEvent(r, seq)); err != nil {
			refused++
		}
	}
	st := w.Stats()
	if refused != 150 || st.Dropped != 150 || st.Queued != 50 || st.HighWater != 50 {
		t.Errorf("after 200 appends into a 50-event buffer: refused %d, stats %+v; want 150 refused and dropped, 50 queued, high water 50", refused, st)
	}
	srv.Continue()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := recOf(t, w, r).Append(testEvent(r, 201)); err != nil {
		t.Fatal(err)
	}
	recOf(t, w, r).Finish(recorder.StatusFinished, "", 203)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := store.Run(t.Context(), "t", "r")
	if err != nil {
		t.Fatal(err)
	}
	if want := []recorder.Gap{{From: 51, To: 200}, {From: 202, To: 203}}; !slices.Equal(got.Gaps, want) || got.LastSeq != 201 || got.Status != recorder.StatusFinished {
		t.Errorf("Run = gaps %v last %d status %s, want %v, 201, finished", got.Gaps, got.LastSeq, got.Status, want)
	}
	st = w.Stats()
	if st.Appended != 51 || st.Dropped != 150 || st.Queued != 0 || st.Finished != 1 {
		t.Errorf("Stats() = %+v, want 51 appended, 150 dropped, 0 queued, 1 finished", st)
	}
}

// TestFaultLargeEventsBounded: an agent streaming large events while Redis is frozen. Before
// the recorder's buffer had a byte bound, 65,536 events of 1 MB were 64 GB of memory; now the
// caller is slowed once MaxBufferedBytes wait, nothing is dropped, and after SIGCONT every
// event is stored byte-exact, in store calls of at most MaxBatchBytes (or one event).
func TestFaultLargeEventsBounded(t *testing.T) {
	const (
		bufBytes   = 2 << 20
		batchBytes = 1 << 20
		evBytes    = 256 << 10
		n          = 48 // 12 MiB: six times the buffer
	)
	srv := redistest.Start(t)
	store := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "big"})
	w := newTestWriter(t, store, recorder.WriterConfig{MaxBufferedBytes: bufBytes, MaxBatchBytes: batchBytes, FullWait: 5 * time.Minute, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	r := testRun("t", "big")
	if _, err := store.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := make([]recorder.Event, n)
	for i := range want {
		want[i] = sizedEvent(r, int64(i+1), evBytes)
	}
	srv.Stop()
	done := appendAll(t, w, r, want)
	redistest.WaitFor(t, 30*time.Second, "the caller slowed by a full buffer", func() bool { return w.Stats().Waits > 0 })
	if st := w.Stats(); st.HighWaterBytes > bufBytes || st.Queued*evBytes > bufBytes {
		t.Errorf("while frozen: Stats() = %+v, want at most %d bytes queued", st, bufBytes)
	}
	srv.Continue()
	<-done
	recOf(t, w, r).Finish(recorder.StatusFinished, "", n)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkStoredFrames(t, store, r, want)
	got, err := store.Run(t.Context(), r.ThreadID, r.RunID)
	if err != nil || got.Status != recorder.StatusFinished || len(got.Gaps) != 0 {
		t.Errorf("Run = %+v, %v, want finished without gaps", got, err)
	}
	if st := w.Stats(); st.Dropped != 0 || st.HighWaterBytes > bufBytes {
		t.Errorf("Stats() = %+v, want 0 dropped, high water at most %d bytes", st, bufBytes)
	}
}
