package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// failoverRuns is how many runs stream through a failover test, on threads spread over the
// cluster's masters.
const failoverRuns = 6

// failoverScenario streams events of failoverRuns runs through a Writer on store a (the
// recording replica) while store b (another proxy replica) follows every run, calls kill
// once each run has events stored, keeps streaming until recording resumed, then finishes the
// runs and checks what a client could see: the follower on b got every run's events in order
// without duplicates, ending with io.EOF; every event the producer passed on (in async mode a
// client saw it at once) is stored or inside a recorded gap; the gaps are exactly what the
// failover lost. during, when set, runs once recording resumed, while the runs still stream
// and are followed. It returns the time from kill until the first run stored an event written
// after it, and the number of events lost.
func failoverScenario(t *testing.T, a, b *recorder.RedisStore, kill func(thread string), during func(runs []recorder.Run)) (resume time.Duration, lost int64) {
	ctx := t.Context()
	w := newTestWriter(t, a, recorder.WriterConfig{RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, FullWait: -1})
	runs := make([]recorder.Run, failoverRuns)
	for i := range runs {
		runs[i] = testRun(fmt.Sprintf("fo-%d", i), "r")
		if _, err := a.CreateRun(ctx, runs[i], recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	type seen struct {
		evs []recorder.Event
		err error
	}
	followed := make([]seen, len(runs))
	var fwg sync.WaitGroup
	for i, r := range runs {
		sub, err := b.Follow(ctx, r.ThreadID, r.RunID, 0)
		if err != nil {
			t.Fatal(err)
		}
		fwg.Add(1)
		go func() {
			defer fwg.Done()
			defer sub.Close()
			fctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			for {
				ev, err := sub.Next(fctx)
				if err != nil {
					followed[i].err = err
					return
				}
				followed[i].evs = append(followed[i].evs, ev)
			}
		}()
	}
	var mu sync.Mutex
	next := make([]int64, len(runs)) // last seq handed to the writer, per run
	produce := func(rounds int) {
		for range rounds {
			mu.Lock()
			for i, r := range runs {
				next[i]++
				if err := recOf(t, w, r).Append(testEvent(r, next[i])); err != nil {
					t.Errorf("Append = %v", err)
				}
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}
	produce(50)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	produce(5) // in flight, or acknowledged but not yet replicated, when the master dies
	killedAt := time.Now()
	kill(runs[0].ThreadID)
	// Keep streaming while the failover happens; recording has resumed once a run holds an
	// event appended after the kill.
	mark := next[0]
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				produce(1)
			}
		}
	}()
	redistest.WaitFor(t, 60*time.Second, "recording to resume after the kill", func() bool {
		r, err := a.Run(ctx, runs[0].ThreadID, runs[0].RunID)
		if err == nil && r.LastSeq > mark {
			resume = time.Since(killedAt)
			return true
		}
		return false
	})
	if during != nil {
		during(runs)
	}
	time.Sleep(200 * time.Millisecond) // a little more streaming after the recovery
	close(stop)
	pwg.Wait()
	for i, r := range runs {
		recOf(t, w, r).Finish(recorder.StatusFinished, "", next[i])
	}
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := w.Flush(fctx); err != nil {
		t.Fatalf("Flush after the failover = %v", err)
	}
	fwg.Wait()
	for i, r := range runs {
		got, err := a.Run(ctx, r.ThreadID, r.RunID)
		if err != nil {
			t.Fatalf("Run(%s) = %v", r.ThreadID, err)
		}
		if got.Status != recorder.StatusFinished || got.LastSeq != next[i] {
			t.Errorf("%s: status %s last %d, want finished, %d", r.ThreadID, got.Status, got.LastSeq, next[i])
		}
		evs, err := a.Events(ctx, r.ThreadID, r.RunID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[int64]bool{}
		for _, e := range evs {
			if stored[e.Seq] {
				t.Errorf("%s: seq %d stored twice", r.ThreadID, e.Seq)
			}
			stored[e.Seq] = true
			if string(e.Frame) != string(testEvent(r, e.Seq).Frame) {
				t.Errorf("%s: seq %d frame differs", r.ThreadID, e.Seq)
			}
		}
		inGap := func(seq int64) bool {
			for _, g := range got.Gaps {
				if g.From <= seq && seq <= g.To {
					return true
				}
			}
			return false
		}
		for seq := int64(1); seq <= next[i]; seq++ {
			switch {
			case stored[seq] && inGap(seq):
				t.Errorf("%s: seq %d stored and reported lost", r.ThreadID, seq)
			case !stored[seq] && !inGap(seq):
				t.Errorf("%s: seq %d a client saw is neither stored nor in a gap (gaps %v)", r.ThreadID, seq, got.Gaps)
			case !stored[seq]:
				lost++
			}
		}
		f := followed[i]
		if !errors.Is(f.err, io.EOF) {
			t.Errorf("%s: follower on the other store ended with %v, want io.EOF", r.ThreadID, f.err)
		}
		var prev int64
		for _, e := range f.evs {
			if e.Seq <= prev {
				t.Errorf("%s: follower got seq %d after %d", r.ThreadID, e.Seq, prev)
			}
			if e.Seq > prev+1 && !inGap(prev+1) && !stored[prev+1] {
				t.Errorf("%s: follower skipped %d..%d, not a recorded gap", r.ThreadID, prev+1, e.Seq-1)
			}
			prev = e.Seq
			if string(e.Frame) != string(testEvent(r, e.Seq).Frame) {
				t.Errorf("%s: follower frame %d differs", r.ThreadID, e.Seq)
			}
		}
		if prev != next[i] {
			t.Errorf("%s: follower's last seq %d, want %d", r.ThreadID, prev, next[i])
		}
	}
	t.Logf("recording resumed %v after the kill; %d events lost (recorded as gaps); writer stats %+v", resume, lost, w.Stats())
	return resume, lost
}

// TestFaultClusterMasterKilled kills the master holding a streaming run's thread in a
// 3+3 cluster: its replica is promoted, recording resumes, the follower's tail moves its
// subscriptions to the promoted master (one subscriber connection per master again), a
// follower on another store sees every run through, and whatever the dead master had not
// replicated is a recorded gap.
func TestFaultClusterMasterKilled(t *testing.T) {
	c := redistest.StartCluster(t)
	prefix := uniquePrefix()
	a := newRedisStore(t, recorder.RedisConfig{ClusterAddrs: c.Addrs(), Prefix: prefix})
	b := newRedisStore(t, recorder.RedisConfig{ClusterAddrs: c.Addrs(), Prefix: prefix})
	failoverScenario(t, a, b, func(thread string) {
		m, err := c.MasterOf(t.Context(), prefix+":{"+thread+"}:thread")
		if err != nil {
			t.Fatal(err)
		}
		m.Kill()
	}, func(runs []recorder.Run) { waitBells(t, c, prefix, runs) })
}

// TestFaultSentinelFailover kills the master of a Sentinel setup mid-run: the sentinels
// promote the replica and the store follows.
func TestFaultSentinelFailover(t *testing.T) {
	sn := redistest.StartSentinel(t)
	prefix := uniquePrefix()
	cfg := recorder.RedisConfig{SentinelAddrs: sn.SentinelAddrs(), SentinelMaster: redistest.SentinelMaster, Prefix: prefix}
	a := newRedisStore(t, cfg)
	b := newRedisStore(t, cfg)
	failoverScenario(t, a, b, func(string) {
		m, err := sn.Master(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		m.Kill()
	}, nil)
}

// TestClusterSlotMigrationDuringTail moves the slot of a followed, streaming run to another
// master (CLUSTER SETSLOT MIGRATING/IMPORTING, MIGRATE, SETSLOT NODE) while events keep
// arriving: the writer follows MOVED/ASK, the follower's tail moves the run's subscription to
// the new owner, and the follower on another store gets every event once, in order, to the
// end.
func TestClusterSlotMigrationDuringTail(t *testing.T) {
	c := redistest.SharedCluster(t)
	ctx := t.Context()
	prefix := uniquePrefix()
	a := newRedisStore(t, recorder.RedisConfig{ClusterAddrs: c.Addrs(), Prefix: prefix})
	b := newRedisStore(t, recorder.RedisConfig{ClusterAddrs: c.Addrs(), Prefix: prefix})
	w := newTestWriter(t, a, recorder.WriterConfig{RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, FullWait: -1})
	r := testRun("mig", "r")
	if _, err := a.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sub, err := b.Follow(ctx, r.ThreadID, r.RunID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []recorder.Event
	var ferr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		fctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for {
			ev, err := sub.Next(fctx)
			if err != nil {
				ferr = err
				return
			}
			got = append(got, ev)
		}
	}()
	var seq int64
	produce := func(n int) {
		for range n {
			seq++
			recOf(t, w, r).Append(testEvent(r, seq))
			time.Sleep(time.Millisecond)
		}
	}
	produce(100)
	key := prefix + ":{" + r.ThreadID + "}:thread"
	src, err := c.MasterOf(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	masters, err := c.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dst *redistest.Node
	for _, m := range masters {
		if m != src {
			dst = m
		}
	}
	slot := int(recorder.KeySlot(key))
	if err := c.MigrateSlot(ctx, slot, dst, func() { produce(100) }); err != nil {
		t.Fatalf("migrating slot %d: %v", slot, err)
	}
	waitBells(t, c, prefix, []recorder.Run{r})
	produce(100)
	recOf(t, w, r).Finish(recorder.StatusFinished, "", seq)
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if now, _ := c.MasterOf(ctx, key); now != dst {
		t.Errorf("slot %d still on %v after the migration, want %s", slot, now, dst.Addr())
	}
	if !errors.Is(ferr, io.EOF) {
		t.Errorf("follower ended with %v, want io.EOF", ferr)
	}
	if int64(len(got)) != seq {
		t.Errorf("follower got %d events, want %d", len(got), seq)
	}
	for i, e := range got {
		if e.Seq != int64(i+1) || string(e.Frame) != string(testEvent(r, e.Seq).Frame) {
			t.Fatalf("follower event %d is seq %d, want %d byte-exact", i, e.Seq, i+1)
		}
	}
	t.Logf("writer stats across the migration: %+v", w.Stats())
}
