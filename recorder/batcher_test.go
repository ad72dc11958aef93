package recorder

import (
	"fmt"
	"testing"
)

// TestBatcherReuse: successive batches grouped by one batcher (its memory reused) each hold
// their own runs' events in queue order, finishes left out, and release lets go of every
// frame and run.
func TestBatcherReuse(t *testing.T) {
	var g batcher
	run := func(i int) Run { return Run{ThreadID: fmt.Sprintf("t%d", i), RunID: fmt.Sprintf("r%d", i)} }
	ev := func(seq int64) Event { return Event{Seq: seq, Frame: fmt.Appendf(nil, "f%d", seq)} }
	for round, shape := range [][]int{{0, 1, 0, 2, 1, 0}, {3}, {4, 4, 5, 4, 6, 5, 7, 8, 9, 4}, {}} {
		var take []item
		want := map[string][]int64{}
		for k, r := range shape {
			seq := int64(100*round + k + 1)
			take = append(take, item{run: run(r), ev: ev(seq)})
			want[run(r).RunID] = append(want[run(r).RunID], seq)
			if k == 1 {
				take = append(take, item{run: run(r), finish: &finishOp{status: StatusFinished}})
			}
		}
		batches := g.group(take)
		if len(batches) != len(want) {
			t.Fatalf("round %d: %d batches, want %d", round, len(batches), len(want))
		}
		for _, b := range batches {
			var got []int64
			for _, e := range b.Events {
				if string(e.Frame) != fmt.Sprintf("f%d", e.Seq) {
					t.Errorf("round %d run %s: event %d has frame %q", round, b.Run.RunID, e.Seq, e.Frame)
				}
				got = append(got, e.Seq)
			}
			if fmt.Sprint(got) != fmt.Sprint(want[b.Run.RunID]) {
				t.Errorf("round %d run %s: seqs %v, want %v", round, b.Run.RunID, got, want[b.Run.RunID])
			}
		}
		g.release()
		for i, e := range g.events[:cap(g.events)] {
			if e.Frame != nil {
				t.Fatalf("round %d: released batcher still holds frame %d", round, i)
			}
		}
		for _, b := range g.batches[:cap(g.batches)] {
			if b.Run.RunID != "" || b.Events != nil {
				t.Fatalf("round %d: released batcher still holds run %q", round, b.Run.RunID)
			}
		}
	}
}

// TestBatcherFinishes: each finish of a take goes with its run's batch, after its events, and
// a run finished without events in the take gets a batch of its own; a take without finishes
// has none.
func TestBatcherFinishes(t *testing.T) {
	var g batcher
	run := func(id string) Run { return Run{ThreadID: "t", RunID: id} }
	fa, fc := &finishOp{status: StatusFinished, lastSeq: 2}, &finishOp{status: StatusError, lastSeq: 7}
	take := []item{
		{run: run("a"), ev: Event{Seq: 1}}, {run: run("b"), ev: Event{Seq: 1}}, {run: run("a"), ev: Event{Seq: 2}},
		{run: run("a"), finish: fa}, {run: run("c"), finish: fc}, {run: run("b"), ev: Event{Seq: 2}},
	}
	g.group(take)
	batches, fins := g.finishes(take)
	if len(batches) != 3 || len(fins) != 3 {
		t.Fatalf("%d batches, %d finishes, want 3 of each", len(batches), len(fins))
	}
	for i, want := range []struct {
		run    string
		events int
		fin    *finishOp
	}{{"a", 2, fa}, {"b", 2, nil}, {"c", 0, fc}} {
		if b := batches[i]; b.Run.RunID != want.run || len(b.Events) != want.events || fins[i] != want.fin {
			t.Errorf("batch %d = run %s, %d events, finish %v; want %s, %d, %v", i, b.Run.RunID, len(b.Events), fins[i], want.run, want.events, want.fin)
		}
	}
	g.release()
	g.group(take[:3])
	if batches, fins := g.finishes(take[:3]); len(batches) != 2 || fins != nil {
		t.Errorf("a take without finishes: %d batches, finishes %v, want 2 and none", len(batches), fins)
	}
	g.release()
}

// TestRunKeyCache: the cached run hash key is the one key() builds, a finished or deleted run
// is forgotten, and the cache starts over instead of growing past its bound.
func TestRunKeyCache(t *testing.T) {
	var c runKeyCache
	if got, want := c.get("p", "t1", "r1"), key("p", "t1", kindRun, "r1"); got != want {
		t.Fatalf("get = %q, want %q", got, want)
	}
	if got := c.get("p", "t1", "r1"); got != key("p", "t1", kindRun, "r1") || len(c.keys) != 1 {
		t.Errorf("second get = %q with %d cached", got, len(c.keys))
	}
	c.forget("t1", "r1")
	if len(c.keys) != 0 {
		t.Errorf("after forget: %d cached", len(c.keys))
	}
	for i := range maxCachedRunKeys + 10 {
		c.get("p", "t", fmt.Sprintf("r%d", i))
	}
	if n := len(c.keys); n > maxCachedRunKeys || n == 0 {
		t.Errorf("%d cached after %d runs, want at most %d", n, maxCachedRunKeys+10, maxCachedRunKeys)
	}
}
