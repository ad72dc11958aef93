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
	recs := map[int]*Recording{} // one per run, as a Writer's Open gives
	run := func(i int) *Recording {
		if recs[i] == nil {
			recs[i] = &Recording{run: Run{ThreadID: fmt.Sprintf("t%d", i), RunID: fmt.Sprintf("r%d", i)}}
		}
		return recs[i]
	}
	ev := func(seq int64) Event { return Event{Seq: seq, Frame: fmt.Appendf(nil, "f%d", seq)} }
	for round, shape := range [][]int{{0, 1, 0, 2, 1, 0}, {3}, {4, 4, 5, 4, 6, 5, 7, 8, 9, 4}, {}} {
		var take []item
		want := map[string][]int64{}
		for k, r := range shape {
			seq := int64(100*round + k + 1)
			take = append(take, item{rec: run(r), ev: ev(seq)})
			want[run(r).run.RunID] = append(want[run(r).run.RunID], seq)
			if k == 1 {
				take = append(take, item{rec: run(r), finish: &finishOp{status: StatusFinished}})
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
			if b.Run.RunID != "" || b.Events != nil || b.rec != nil {
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
	recs := map[string]*Recording{}
	run := func(id string) *Recording {
		if recs[id] == nil {
			recs[id] = &Recording{run: Run{ThreadID: "t", RunID: id}}
		}
		return recs[id]
	}
	fa, fc := &finishOp{status: StatusFinished, lastSeq: 2}, &finishOp{status: StatusError, lastSeq: 7}
	take := []item{
		{rec: run("a"), ev: Event{Seq: 1}}, {rec: run("b"), ev: Event{Seq: 1}}, {rec: run("a"), ev: Event{Seq: 2}},
		{rec: run("a"), finish: fa}, {rec: run("c"), finish: fc}, {rec: run("b"), ev: Event{Seq: 2}},
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
