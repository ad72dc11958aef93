package recorder_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// TestRedisStreamEntries: a batch's consecutive events of a run are one version 2 stream
// entry (id: the last seq; fields n and p), a lone event a version 1 entry (t, f); every read
// (Events from any position, Run's FirstSeq, Follow's history and live tail) addresses single
// events in both, and a stream of version 1 entries written before version 2 reads the same.
// A retried batch that overlaps what is stored (from the middle of an entry) stores only the
// rest, without duplicates.
func TestRedisStreamEntries(t *testing.T) {
	srv := redistest.Start(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "e"})
	c := srv.Client(t)
	ctx := t.Context()
	r := testRun("t1", "r1")
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	events := func(from, to int64) []recorder.Event {
		var evs []recorder.Event
		for seq := from; seq <= to; seq++ {
			evs = append(evs, testEvent(r, seq))
		}
		return evs
	}
	appendEvs := func(evs []recorder.Event) {
		t.Helper()
		if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: evs}}); err != nil {
			t.Fatal(err)
		}
	}
	appendEvs(events(1, 1))   // version 1
	appendEvs(events(2, 10))  // one version 2 entry
	appendEvs(events(6, 14))  // overlaps 6..10: stores 11..14
	appendEvs(events(20, 22)) // a gap 15..19, then one entry
	msgs, err := c.XRange(ctx, "e:{t1}:events:r1", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, fmt.Sprintf("%s:%v", m.ID, m.Values["n"]))
	}
	if got, want := fmt.Sprint(ids), "[1-0:<nil> 10-0:9 14-0:4 22-0:3]"; got != want {
		t.Fatalf("stream entries (id:n) = %s; want %s", got, want)
	}
	want := append(events(1, 14), events(20, 22)...)
	for after := int64(0); after <= 22; after++ {
		for _, limit := range []int{0, 1, 3} {
			got, err := s.Events(ctx, r.ThreadID, r.RunID, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			var exp []recorder.Event
			for _, e := range want {
				if e.Seq > after && (limit == 0 || len(exp) < limit) {
					exp = append(exp, e)
				}
			}
			if fmt.Sprint(seqsOf(got)) != fmt.Sprint(seqsOf(exp)) {
				t.Fatalf("Events(after %d, limit %d) = seqs %v; want %v", after, limit, seqsOf(got), seqsOf(exp))
			}
			for i := range got {
				if string(got[i].Frame) != string(exp[i].Frame) || got[i].Type != exp[i].Type {
					t.Fatalf("Events(after %d)[%d] = %q %q; want %q %q", after, i, got[i].Type, got[i].Frame, exp[i].Type, exp[i].Frame)
				}
			}
		}
	}
	run, err := s.Run(ctx, r.ThreadID, r.RunID)
	if err != nil || run.FirstSeq != 1 || run.LastSeq != 22 || fmt.Sprint(run.Gaps) != fmt.Sprint([]recorder.Gap{{From: 15, To: 19}}) {
		t.Fatalf("Run = %+v, %v; want first 1, last 22, gap 15-19", run, err)
	}

	// Follow from the middle of an entry, then the live tail of a packed entry.
	sub, err := s.Follow(ctx, r.ThreadID, r.RunID, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	appendEvs(events(23, 25))
	var seqs []int64
	for len(seqs) < 11 {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %v = %v", seqs, err)
		}
		seqs = append(seqs, ev.Seq)
	}
	if got, want := fmt.Sprint(seqs), "[8 9 10 11 12 13 14 20 21 22 23]"; got != want {
		t.Fatalf("Follow(after 7) = %s...; want %s...", got, want)
	}

	// A run written as version 1 entries only (by an earlier build) reads the same.
	old := testRun("t2", "r2")
	if _, err := s.CreateRun(ctx, old, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 5; seq++ {
		e := testEvent(old, seq)
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: "e:{t2}:events:r2", ID: fmt.Sprintf("%d-0", seq), Values: []any{"t", e.Type, "f", e.Frame}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.HSet(ctx, "e:{t2}:run:r2", "last", 5).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, []recorder.Batch{{Run: old, Events: []recorder.Event{testEvent(old, 6), testEvent(old, 7)}}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Events(context.Background(), old.ThreadID, old.RunID, 3, 0)
	if err != nil || fmt.Sprint(seqsOf(got)) != "[4 5 6 7]" {
		t.Fatalf("Events(version 1 then 2, after 3) = %v, %v; want seqs 4-7", seqsOf(got), err)
	}
}

func seqsOf(evs []recorder.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// TestRedisFastPathFallback: a Writer's streaming run takes the fast path (plain XADDs);
// when its stream vanishes behind its back (evicted) the next batch goes the full path and
// records the lost events as a gap, and when the stream already holds the batch's entry (a
// write whose answer was lost) the full path stores nothing twice.
func TestRedisFastPathFallback(t *testing.T) {
	srv := redistest.Start(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "f"})
	c := srv.Client(t)
	ctx := t.Context()
	w := newTestWriter(t, s, recorder.WriterConfig{})
	r := testRun("t1", "r1")
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	send := func(from, to int64) {
		t.Helper()
		for seq := from; seq <= to; seq++ {
			if err := recOf(t, w, r).Append(testEvent(r, seq)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	send(1, 5)
	send(6, 10) // the fast path
	if err := c.Del(ctx, "f:{t1}:events:r1").Err(); err != nil {
		t.Fatal(err)
	}
	send(11, 12) // the stream vanished: events 1-10 are a gap
	// The same entry written before, as by a write whose answer was lost.
	if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{testEvent(r, 13), testEvent(r, 14), testEvent(r, 15)}}}); err != nil {
		t.Fatal(err)
	}
	send(13, 15) // stored already
	if err := recOf(t, w, r).FinishSync(ctx, recorder.StatusFinished, "", 15); err != nil {
		t.Fatal(err)
	}
	run, err := s.Run(ctx, r.ThreadID, r.RunID)
	if err != nil || run.LastSeq != 15 || run.Status != recorder.StatusFinished || fmt.Sprint(run.Gaps) != fmt.Sprint([]recorder.Gap{{From: 1, To: 10}}) {
		t.Fatalf("Run = %+v, %v; want finished at 15 with the gap 1-10", run, err)
	}
	got, err := s.Events(ctx, r.ThreadID, r.RunID, 0, 0)
	if err != nil || fmt.Sprint(seqsOf(got)) != "[11 12 13 14 15]" {
		t.Fatalf("Events = %v, %v; want 11-15 once each", seqsOf(got), err)
	}
}
