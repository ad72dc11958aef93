package recordertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// MaxEventsPerRun is the retention the factory's stores must be configured with. Stores may
// keep more than this many events (Redis trims approximately) but must trim well before
// RetentionEvents.
const MaxEventsPerRun = 300

// RetentionEvents is how many events the retention subtest appends to one run.
const RetentionEvents = 2000

// Run runs the contract suite against stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) recorder.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s recorder.Store)
	}{
		{"CreateRunNewThread", testCreateRunNewThread},
		{"CreateRunReturnsPreviousThread", testCreateRunReturnsPrevious},
		{"DuplicateRun", testDuplicateRun},
		{"OwnerMismatch", testOwnerMismatch},
		{"RouteMismatch", testRouteMismatch},
		{"Parent", testParent},
		{"ConcurrentFirstRuns", testConcurrentFirstRuns},
		{"BusyRule", testBusyRule},
		{"BusyRuleConcurrentStarts", testBusyRuleConcurrentStarts},
		{"ContinueLatest", testContinueLatest},
		{"AppendAndEvents", testAppendAndEvents},
		{"AppendIdempotent", testAppendIdempotent},
		{"AppendSeveralBatches", testAppendSeveralBatches},
		{"SeqJumpGap", testSeqJumpGap},
		{"LostMetaRecreated", testLostMetaRecreated},
		{"OtherEpochIgnored", testOtherEpochIgnored},
		{"FinishRun", testFinishRun},
		{"FinishRunMissingTail", testFinishRunMissingTail},
		{"EventsAfterWithLimit", testEventsAfterWithLimit},
		{"ByteExactFrames", testByteExactFrames},
		{"RunsOrder", testRunsOrder},
		{"Checkpoints", testCheckpoints},
		{"DeleteRun", testDeleteRun},
		{"NotFound", testNotFound},
		{"HostileIDs", testHostileIDs},
		{"Namespaces", testNamespaces},
		{"InvalidEpoch", testInvalidEpoch},
		{"Concurrency", testConcurrency},
		{"Retention", testRetention},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
	t.Run("Follow", func(t *testing.T) { runFollow(t, newStore) })
	t.Run("Lease", func(t *testing.T) { runLease(t, newStore) })
	t.Run("Index", func(t *testing.T) { runIndex(t, newStore) })
	t.Run("CompactAtRest", func(t *testing.T) { runCompactAtRest(t, newStore) })
}

// newRun returns a run with a fresh epoch.
func newRun(thread, run string) recorder.Run {
	return recorder.Run{ThreadID: thread, RunID: run, Epoch: recorder.NewEpoch(), Owner: "alice", Route: "/agent"}
}

func mustCreate(t *testing.T, s recorder.Store, r recorder.Run) recorder.Thread {
	t.Helper()
	th, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{})
	if err != nil {
		t.Fatalf("CreateRun(%s/%s) = %v, want nil", r.ThreadID, r.RunID, err)
	}
	return th
}

// frame builds the frame the proxy would send for event seq of run r.
func frame(r recorder.Run, seq int64, typ string) []byte {
	id := recorder.AppendCursor([]byte("id: "), r.RunID, r.Epoch, seq)
	return fmt.Appendf(id, "\ndata: {\"type\":%q,\"n\":%d}\n\n", typ, seq)
}

func events(r recorder.Run, from, to int64) []recorder.Event {
	var out []recorder.Event
	for seq := from; seq <= to; seq++ {
		out = append(out, recorder.Event{Seq: seq, Type: "CUSTOM", Frame: frame(r, seq, "CUSTOM")})
	}
	return out
}

func mustAppend(t *testing.T, s recorder.Store, batches ...recorder.Batch) {
	t.Helper()
	if err := s.Append(t.Context(), batches); err != nil {
		t.Fatalf("Append(%d batches) = %v, want nil", len(batches), err)
	}
}

func mustRun(t *testing.T, s recorder.Store, thread, run string) recorder.Run {
	t.Helper()
	r, err := s.Run(t.Context(), thread, run)
	if err != nil {
		t.Fatalf("Run(%s/%s) = %v, want nil", thread, run, err)
	}
	return r
}

func mustEvents(t *testing.T, s recorder.Store, thread, run string, after int64, limit int) []recorder.Event {
	t.Helper()
	evs, err := s.Events(t.Context(), thread, run, after, limit)
	if err != nil {
		t.Fatalf("Events(%s/%s, %d, %d) = %v, want nil", thread, run, after, limit, err)
	}
	return evs
}

// checkEvents compares stored events with want, byte for byte.
func checkEvents(t *testing.T, got, want []recorder.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("Events returned %d events (seqs %v), want %d (seqs %v)", len(got), seqs(got), len(want), seqs(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || !bytes.Equal(got[i].Frame, want[i].Frame) {
			t.Errorf("event %d = {%d %q %q}, want {%d %q %q}", i, got[i].Seq, got[i].Type, got[i].Frame, want[i].Seq, want[i].Type, want[i].Frame)
		}
	}
}

func seqs(evs []recorder.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	if len(out) > 12 {
		out = append(out[:6], out[len(out)-6:]...)
	}
	return out
}

func testCreateRunNewThread(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	if th := mustCreate(t, s, r); th != (recorder.Thread{}) {
		t.Errorf("CreateRun on a new thread = %+v, want the zero Thread", th)
	}
	th, err := s.Thread(t.Context(), "t1")
	if err != nil {
		t.Fatalf("Thread(t1) = %v", err)
	}
	if th.ID != "t1" || th.Owner != "alice" || th.Route != "/agent" || th.LatestRunID != "r1" || th.RunCount != 1 || th.CreatedAt.IsZero() {
		t.Errorf("Thread(t1) = %+v, want owner alice, route /agent, latest r1, 1 run, a creation time", th)
	}
	got := mustRun(t, s, "t1", "r1")
	if got.ThreadID != "t1" || got.RunID != "r1" || got.Epoch != r.Epoch || got.Status != recorder.StatusRunning ||
		got.Owner != "alice" || got.Route != "/agent" || got.ParentRunID != "" || got.LastSeq != 0 ||
		got.FirstSeq != 0 || len(got.Gaps) != 0 || got.CreatedAt.IsZero() || got.UpdatedAt.Before(got.CreatedAt) {
		t.Errorf("Run(t1/r1) = %+v, want a running root run with epoch %s and no events", got, r.Epoch)
	}
	if !got.Complete(0) {
		t.Errorf("Run(t1/r1).Complete(0) = false, want true for a run without events")
	}
	// Single-tenant: an empty owner is an owner like any other.
	anon := newRun("t2", "r1")
	anon.Owner = ""
	mustCreate(t, s, anon)
	if th, err := s.Thread(t.Context(), "t2"); err != nil || th.Owner != "" {
		t.Errorf("Thread(t2) = %+v, %v, want owner \"\"", th, err)
	}
}

func testCreateRunReturnsPrevious(t *testing.T, s recorder.Store) {
	mustCreate(t, s, newRun("t1", "r1"))
	prev := mustCreate(t, s, newRun("t1", "r2"))
	if prev.ID != "t1" || prev.LatestRunID != "r1" || prev.RunCount != 1 || prev.Owner != "alice" || prev.Route != "/agent" || prev.CreatedAt.IsZero() || prev.ParentEpoch != "" {
		t.Errorf("CreateRun(t1/r2, recorder.CreateOptions{}) = %+v, want the thread before: latest r1, 1 run, no parent epoch (a root run)", prev)
	}
	prev = mustCreate(t, s, newRun("t1", "r3"))
	if prev.LatestRunID != "r2" || prev.RunCount != 2 {
		t.Errorf("CreateRun(t1/r3, recorder.CreateOptions{}) = %+v, want latest r2, 2 runs", prev)
	}
}

func testDuplicateRun(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 1, 3)})
	again := newRun("t1", "r1")
	if _, err := s.CreateRun(t.Context(), again, recorder.CreateOptions{}); !errors.Is(err, recorder.ErrRunAlreadyStarted) {
		t.Errorf("CreateRun(t1/r1, recorder.CreateOptions{}) again = %v, want ErrRunAlreadyStarted", err)
	}
	if got := mustRun(t, s, "t1", "r1"); got.Epoch != r.Epoch || got.LastSeq != 3 {
		t.Errorf("Run(t1/r1) after the refused duplicate = epoch %s last %d, want %s, 3 (unchanged)", got.Epoch, got.LastSeq, r.Epoch)
	}
}

func testOwnerMismatch(t *testing.T, s recorder.Store) {
	mustCreate(t, s, newRun("t1", "r1"))
	for _, owner := range []string{"mallory", "", "Alice", "alice "} {
		r := newRun("t1", "r2")
		r.Owner = owner
		if _, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{}); !errors.Is(err, recorder.ErrThreadNotFound) {
			t.Errorf("CreateRun(t1/r2, recorder.CreateOptions{}) by %q = %v, want ErrThreadNotFound", owner, err)
		}
	}
	// Even a reused run id answers as for an unknown thread: no hint that the run exists.
	r := newRun("t1", "r1")
	r.Owner = "mallory"
	if _, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{}); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("CreateRun(t1/r1, recorder.CreateOptions{}) by mallory = %v, want ErrThreadNotFound", err)
	}
	if th, _ := s.Thread(t.Context(), "t1"); th.RunCount != 1 {
		t.Errorf("Thread(t1).RunCount = %d after refused runs, want 1", th.RunCount)
	}
}

func testRouteMismatch(t *testing.T, s recorder.Store) {
	mustCreate(t, s, newRun("t1", "r1"))
	r := newRun("t1", "r2")
	r.Route = "/other"
	if _, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{}); !errors.Is(err, recorder.ErrThreadRoomMismatch) {
		t.Errorf("CreateRun(t1/r2, recorder.CreateOptions{}) via /other = %v, want ErrThreadRoomMismatch", err)
	}
	if _, err := s.Run(t.Context(), "t1", "r2"); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("Run(t1/r2) after the refused route = %v, want ErrRunNotFound", err)
	}
}

func testParent(t *testing.T, s recorder.Store) {
	mustCreate(t, s, newRun("t1", "r1"))
	mustCreate(t, s, newRun("t2", "x1"))
	tests := []struct {
		name, thread, run, parent string
		want                      error
	}{
		{"in another thread", "t1", "r2", "x1", recorder.ErrRunNotFound},
		{"unknown", "t1", "r2", "nope", recorder.ErrRunNotFound},
		{"on a new thread", "t3", "r1", "r1", recorder.ErrRunNotFound},
		{"valid", "t1", "r2", "r1", nil},
		{"child of child", "t1", "r3", "r2", nil},
	}
	for _, tc := range tests {
		r := newRun(tc.thread, tc.run)
		r.ParentRunID = tc.parent
		_, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{})
		if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: CreateRun(%s/%s, parent %s, recorder.CreateOptions{}) = %v, want %v", tc.name, tc.thread, tc.run, tc.parent, err, tc.want)
		}
	}
	if _, err := s.Thread(t.Context(), "t3"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("Thread(t3) after a refused first run = %v, want ErrThreadNotFound (nothing created)", err)
	}
	if got := mustRun(t, s, "t1", "r3"); got.ParentRunID != "r2" {
		t.Errorf("Run(t1/r3).ParentRunID = %q, want r2", got.ParentRunID)
	}
}

// testConcurrentFirstRuns: of many identities racing to create the same thread, exactly one
// owns it and every other gets ErrThreadNotFound.
func testConcurrentFirstRuns(t *testing.T, s recorder.Store) {
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := newRun("contested", fmt.Sprintf("r%d", i))
			r.Owner = fmt.Sprintf("user%d", i)
			_, errs[i] = s.CreateRun(context.Background(), r, recorder.CreateOptions{})
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, recorder.ErrThreadNotFound):
			t.Errorf("CreateRun by user%d = %v, want nil or ErrThreadNotFound", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d identities created the contested thread, want exactly 1", won)
	}
}

// exclusive is the busy rule as the proxy applies it.
var exclusive = recorder.CreateOptions{Exclusive: true, LeaseGrace: time.Second, ContinueLatest: true}

// testBusyRule: with Exclusive, a run is refused while the thread's latest run is running and
// alive, and accepted as soon as the store says it ended or its lease expired past the grace.
func testBusyRule(t *testing.T, s recorder.Store) {
	ctx := t.Context()
	r1 := newRun("t1", "r1")
	r1.Node, r1.LeaseUntil = "n1", time.Now().Add(time.Minute)
	if _, err := s.CreateRun(ctx, r1, exclusive); err != nil {
		t.Fatalf("CreateRun(t1/r1) on a new thread = %v, want nil", err)
	}
	if _, err := s.CreateRun(ctx, newRun("t1", "r2"), exclusive); !errors.Is(err, recorder.ErrThreadBusy) {
		t.Fatalf("CreateRun(t1/r2) while r1 runs = %v, want ErrThreadBusy", err)
	}
	// The same run id again is a duplicate, not a busy thread (the client may resume it).
	if _, err := s.CreateRun(ctx, newRun("t1", "r1"), exclusive); !errors.Is(err, recorder.ErrRunAlreadyStarted) {
		t.Errorf("CreateRun(t1/r1) again while it runs = %v, want ErrRunAlreadyStarted", err)
	}
	// Without the rule a second run may start (AGUI_ALLOW_CONCURRENT_RUNS).
	if _, err := s.CreateRun(ctx, newRun("t1", "side"), recorder.CreateOptions{}); err != nil {
		t.Errorf("CreateRun(t1/side) without Exclusive = %v, want nil", err)
	}
	if err := s.FinishRun(ctx, "t1", "side", recorder.StatusFinished, "", 0); err != nil {
		t.Fatal(err)
	}
	// The latest run ended: the next run is accepted at once.
	if _, err := s.CreateRun(ctx, newRun("t1", "r2"), exclusive); err != nil {
		t.Fatalf("CreateRun(t1/r2) right after the latest run finished = %v, want nil", err)
	}
	for _, st := range []recorder.RunStatus{recorder.StatusError, recorder.StatusInterrupted} {
		if err := s.FinishRun(ctx, "t1", mustThread(t, s, "t1").LatestRunID, st, "X", 0); err != nil {
			t.Fatal(err)
		}
		id := "after-" + string(st)
		if _, err := s.CreateRun(ctx, newRun("t1", id), exclusive); err != nil {
			t.Errorf("CreateRun(t1/%s) after a run ended %s = %v, want nil", id, st, err)
		}
	}
	// A running run whose lease expired longer ago than the grace lost its replica.
	dead := newRun("t2", "r1")
	dead.Node, dead.LeaseUntil = "gone", time.Now().Add(-time.Minute)
	mustCreate(t, s, dead)
	if _, err := s.CreateRun(ctx, newRun("t2", "r2"), exclusive); err != nil {
		t.Errorf("CreateRun(t2/r2) after the latest run's lease expired = %v, want nil", err)
	}
	// Within the grace it still counts as alive.
	late := newRun("t3", "r1")
	late.Node, late.LeaseUntil = "late", time.Now().Add(-100*time.Millisecond)
	mustCreate(t, s, late)
	if _, err := s.CreateRun(ctx, newRun("t3", "r2"), exclusive); !errors.Is(err, recorder.ErrThreadBusy) {
		t.Errorf("CreateRun(t3/r2) within the lease grace = %v, want ErrThreadBusy", err)
	}
	// A refused run leaves nothing behind.
	if _, err := s.Run(ctx, "t3", "r2"); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("Run(t3/r2) after the refusal = %v, want ErrRunNotFound", err)
	}
}

// testBusyRuleConcurrentStarts: of many starts racing on one thread, exactly one wins, whether
// the thread is new or its previous run just ended.
func testBusyRuleConcurrentStarts(t *testing.T, s recorder.Store) {
	const n = 16
	race := func(thread string) {
		t.Helper()
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, errs[i] = s.CreateRun(context.Background(), newRun(thread, fmt.Sprintf("%s-r%d", thread, i)), exclusive)
			})
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, recorder.ErrThreadBusy):
				t.Errorf("%s: start %d = %v, want nil or ErrThreadBusy", thread, i, err)
			}
		}
		if won != 1 {
			t.Errorf("%s: %d concurrent starts won, want exactly 1", thread, won)
		}
	}
	race("fresh")
	r := newRun("ended", "first")
	mustCreate(t, s, r)
	if err := s.FinishRun(t.Context(), "ended", "first", recorder.StatusFinished, "", 0); err != nil {
		t.Fatal(err)
	}
	race("ended")
}

// testContinueLatest: a run without parent continues the latest run; an explicit parent wins;
// without the option it is a root.
func testContinueLatest(t *testing.T, s recorder.Store) {
	ctx := t.Context()
	cont := recorder.CreateOptions{ContinueLatest: true}
	if _, err := s.CreateRun(ctx, newRun("t1", "r1"), cont); err != nil {
		t.Fatal(err)
	}
	r1 := mustRun(t, s, "t1", "r1")
	prev, err := s.CreateRun(ctx, newRun("t1", "r2"), cont)
	if err != nil || prev.LatestRunID != "r1" || prev.ParentEpoch != r1.Epoch {
		t.Fatalf("CreateRun(t1/r2) = %+v, %v, want the previous latest r1 and its epoch %s", prev, err, r1.Epoch)
	}
	explicit := newRun("t1", "r3")
	explicit.ParentRunID = "r1"
	if prev := mustCreate(t, s, explicit); prev.ParentEpoch != r1.Epoch {
		t.Errorf("CreateRun(t1/r3, parent r1).ParentEpoch = %q, want r1's %q", prev.ParentEpoch, r1.Epoch)
	}
	if prev := mustCreate(t, s, newRun("t1", "root")); prev.ParentEpoch != "" {
		t.Errorf("CreateRun(t1/root).ParentEpoch = %q, want none", prev.ParentEpoch)
	}
	for run, want := range map[string]string{"r1": "", "r2": "r1", "r3": "r1", "root": ""} {
		if got := mustRun(t, s, "t1", run); got.ParentRunID != want {
			t.Errorf("Run(t1/%s).ParentRunID = %q, want %q", run, got.ParentRunID, want)
		}
	}
	// The busy rule reads the latest run too (exclusive, as the proxy creates runs).
	if err := s.FinishRun(ctx, "t1", "root", recorder.StatusFinished, "", 0); err != nil {
		t.Fatal(err)
	}
	root := mustRun(t, s, "t1", "root")
	prev, err = s.CreateRun(ctx, newRun("t1", "r4"), recorder.CreateOptions{ContinueLatest: true, Exclusive: true})
	if err != nil || prev.LatestRunID != "root" || prev.ParentEpoch != root.Epoch {
		t.Fatalf("CreateRun(t1/r4, exclusive) = %+v, %v, want the previous latest root and its epoch %s", prev, err, root.Epoch)
	}
}

func mustThread(t *testing.T, s recorder.Store, id string) recorder.Thread {
	t.Helper()
	th, err := s.Thread(t.Context(), id)
	if err != nil {
		t.Fatalf("Thread(%s) = %v", id, err)
	}
	return th
}

func testAppendAndEvents(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	want := events(r, 1, 10)
	mustAppend(t, s, recorder.Batch{Run: r, Events: want[:4]})
	mustAppend(t, s, recorder.Batch{Run: r, Events: want[4:]})
	checkEvents(t, mustEvents(t, s, "t1", "r1", 0, 0), want)
	got := mustRun(t, s, "t1", "r1")
	if got.LastSeq != 10 || got.FirstSeq != 1 || len(got.Gaps) != 0 || !got.Complete(0) {
		t.Errorf("Run(t1/r1) = last %d first %d gaps %v complete %v, want 10, 1, none, true", got.LastSeq, got.FirstSeq, got.Gaps, got.Complete(0))
	}
	if got.Status != recorder.StatusRunning {
		t.Errorf("Run(t1/r1).Status = %q, want running", got.Status)
	}
}

// testAppendIdempotent: a batch appended twice (a retry after a lost reply) is stored once.
func testAppendIdempotent(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	b := recorder.Batch{Run: r, Events: events(r, 1, 5)}
	mustAppend(t, s, b)
	mustAppend(t, s, b)
	// Overlapping retry: 3..7 after 1..5 adds only 6 and 7.
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 3, 7)})
	checkEvents(t, mustEvents(t, s, "t1", "r1", 0, 0), events(r, 1, 7))
	if got := mustRun(t, s, "t1", "r1"); got.LastSeq != 7 || len(got.Gaps) != 0 {
		t.Errorf("Run(t1/r1) = last %d gaps %v, want 7, none", got.LastSeq, got.Gaps)
	}
}

func testAppendSeveralBatches(t *testing.T, s recorder.Store) {
	var runs []recorder.Run
	var batches []recorder.Batch
	for i := range 5 {
		r := newRun(fmt.Sprintf("t%d", i%2), fmt.Sprintf("r%d", i))
		mustCreate(t, s, r)
		runs = append(runs, r)
		batches = append(batches, recorder.Batch{Run: r, Events: events(r, 1, int64(i+1))})
	}
	mustAppend(t, s, batches...)
	for i, r := range runs {
		checkEvents(t, mustEvents(t, s, r.ThreadID, r.RunID, 0, 0), events(r, 1, int64(i+1)))
	}
	if err := s.Append(t.Context(), nil); err != nil {
		t.Errorf("Append(nil) = %v, want nil", err)
	}
}

func testSeqJumpGap(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	evs := append(events(r, 1, 3), events(r, 7, 8)...)
	evs = append(evs, events(r, 10, 10)...)
	mustAppend(t, s, recorder.Batch{Run: r, Events: evs})
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 12, 12)})
	checkEvents(t, mustEvents(t, s, "t1", "r1", 0, 0), append(evs, events(r, 12, 12)...))
	got := mustRun(t, s, "t1", "r1")
	want := []recorder.Gap{{From: 4, To: 6}, {From: 9, To: 9}, {From: 11, To: 11}}
	if !slices.Equal(got.Gaps, want) || got.LastSeq != 12 {
		t.Errorf("Run(t1/r1) = gaps %v last %d, want %v, 12", got.Gaps, got.LastSeq, want)
	}
	for after, want := range map[int64]bool{0: false, 3: false, 6: false, 10: false, 11: true, 12: true} {
		if c := got.Complete(after); c != want {
			t.Errorf("Run(t1/r1).Complete(%d) = %v, want %v", after, c, want)
		}
	}
}

// testLostMetaRecreated: events for a run the store does not know (its data was lost) re-create
// the thread and the run from Batch.Run, with the unseen head recorded as a gap.
func testLostMetaRecreated(t *testing.T, s recorder.Store) {
	r := newRun("lost", "r1")
	r.ParentRunID = "r0"
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 5, 7)})
	got := mustRun(t, s, "lost", "r1")
	if got.Epoch != r.Epoch || got.Owner != "alice" || got.Route != "/agent" || got.ParentRunID != "r0" ||
		got.Status != recorder.StatusRunning || got.LastSeq != 7 || got.FirstSeq != 5 ||
		!slices.Equal(got.Gaps, []recorder.Gap{{From: 1, To: 4}}) {
		t.Errorf("Run(lost/r1) = %+v, want epoch %s, alice, /agent, parent r0, running, 5..7 with gap 1-4", got, r.Epoch)
	}
	if got.Complete(0) || !got.Complete(4) {
		t.Errorf("Run(lost/r1).Complete(0), Complete(4) = %v, %v, want false, true", got.Complete(0), got.Complete(4))
	}
	th, err := s.Thread(t.Context(), "lost")
	if err != nil || th.Owner != "alice" || th.Route != "/agent" || th.LatestRunID != "r1" || th.RunCount != 1 {
		t.Errorf("Thread(lost) = %+v, %v, want alice, /agent, latest r1, 1 run", th, err)
	}
	checkEvents(t, mustEvents(t, s, "lost", "r1", 0, 0), events(r, 5, 7))
	// A lost run whose first event is seq 1 has nothing missing.
	r2 := newRun("lost", "r2")
	mustAppend(t, s, recorder.Batch{Run: r2, Events: events(r2, 1, 2)})
	if got := mustRun(t, s, "lost", "r2"); len(got.Gaps) != 0 || !got.Complete(0) {
		t.Errorf("Run(lost/r2) = gaps %v, want none", got.Gaps)
	}
	// An empty batch re-creates the metadata without inventing a gap.
	r3 := newRun("lost", "r3")
	mustAppend(t, s, recorder.Batch{Run: r3})
	if got := mustRun(t, s, "lost", "r3"); got.LastSeq != 0 || len(got.Gaps) != 0 {
		t.Errorf("Run(lost/r3) = last %d gaps %v, want 0, none", got.LastSeq, got.Gaps)
	}
	if runs, err := s.Runs(t.Context(), "lost"); err != nil || len(runs) != 3 {
		t.Errorf("Runs(lost) = %d runs, %v, want 3", len(runs), err)
	}
}

// testOtherEpochIgnored: after a run id was deleted and created again, late events of the old
// run (old epoch) must not land in the new one.
func testOtherEpochIgnored(t *testing.T, s recorder.Store) {
	old := newRun("t1", "r1")
	mustCreate(t, s, newRun("t1", "r0"))
	mustCreate(t, s, old)
	if err := s.DeleteRun(t.Context(), "t1", "r1"); err != nil {
		t.Fatalf("DeleteRun(t1/r1) = %v", err)
	}
	cur := newRun("t1", "r1")
	mustCreate(t, s, cur)
	mustAppend(t, s, recorder.Batch{Run: old, Events: events(old, 1, 3)})
	mustAppend(t, s, recorder.Batch{Run: cur, Events: events(cur, 1, 1)})
	checkEvents(t, mustEvents(t, s, "t1", "r1", 0, 0), events(cur, 1, 1))
	if got := mustRun(t, s, "t1", "r1"); got.Epoch != cur.Epoch {
		t.Errorf("Run(t1/r1).Epoch = %s, want the new run's %s", got.Epoch, cur.Epoch)
	}
}

func testFinishRun(t *testing.T, s recorder.Store) {
	tests := []struct {
		status recorder.RunStatus
		detail string
	}{
		{recorder.StatusFinished, ""},
		{recorder.StatusError, "upstream closed the stream without RUN_FINISHED"},
		{recorder.StatusInterrupted, "replica stopped"},
		{recorder.StatusCancelled, ""},
	}
	for i, tc := range tests {
		r := newRun("t1", fmt.Sprintf("r%d", i))
		mustCreate(t, s, r)
		mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 1, 2)})
		if err := s.FinishRun(t.Context(), "t1", r.RunID, tc.status, tc.detail, 2); err != nil {
			t.Fatalf("FinishRun(t1/%s) = %v", r.RunID, err)
		}
		got := mustRun(t, s, "t1", r.RunID)
		if got.Status != tc.status || got.Detail != tc.detail || got.LastSeq != 2 || len(got.Gaps) != 0 || got.UpdatedAt.Before(got.CreatedAt) {
			t.Errorf("Run(t1/%s) = %+v, want status %s detail %q, last 2, no gap", r.RunID, got, tc.status, tc.detail)
		}
		// Finishing again (a retried call) is harmless.
		if err := s.FinishRun(t.Context(), "t1", r.RunID, tc.status, tc.detail, 2); err != nil {
			t.Errorf("FinishRun(t1/%s) again = %v, want nil", r.RunID, err)
		}
	}
	if err := s.FinishRun(t.Context(), "t1", "nope", recorder.StatusFinished, "", 0); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("FinishRun(t1/nope) = %v, want ErrRunNotFound", err)
	}
}

func testFinishRunMissingTail(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 1, 3)})
	if err := s.FinishRun(t.Context(), "t1", "r1", recorder.StatusFinished, "", 8); err != nil {
		t.Fatalf("FinishRun(t1/r1, lastSeq 8) = %v", err)
	}
	got := mustRun(t, s, "t1", "r1")
	if !slices.Equal(got.Gaps, []recorder.Gap{{From: 4, To: 8}}) || got.LastSeq != 3 || got.Complete(0) || got.Complete(3) {
		t.Errorf("Run(t1/r1) = gaps %v last %d, want [{4 8}], 3, incomplete", got.Gaps, got.LastSeq)
	}
	// A run finished before any event, with events announced: all of them are missing.
	r2 := newRun("t1", "r2")
	mustCreate(t, s, r2)
	if err := s.FinishRun(t.Context(), "t1", "r2", recorder.StatusError, "lost", 2); err != nil {
		t.Fatalf("FinishRun(t1/r2) = %v", err)
	}
	if got := mustRun(t, s, "t1", "r2"); !slices.Equal(got.Gaps, []recorder.Gap{{From: 1, To: 2}}) {
		t.Errorf("Run(t1/r2).Gaps = %v, want [{1 2}]", got.Gaps)
	}
}

func testEventsAfterWithLimit(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	all := events(r, 1, 20)
	mustAppend(t, s, recorder.Batch{Run: r, Events: all})
	tests := []struct {
		after int64
		limit int
		want  []recorder.Event
	}{
		{0, 0, all},
		{0, -1, all},
		{0, 5, all[:5]},
		{5, 5, all[5:10]},
		{17, 10, all[17:]},
		{19, 0, all[19:]},
		{20, 0, nil},
		{25, 3, nil},
		{-4, 2, all[:2]},
	}
	for _, tc := range tests {
		got := mustEvents(t, s, "t1", "r1", tc.after, tc.limit)
		if len(got) != len(tc.want) {
			t.Errorf("Events(t1/r1, %d, %d) = seqs %v, want %v", tc.after, tc.limit, seqs(got), seqs(tc.want))
			continue
		}
		checkEvents(t, got, tc.want)
	}
	// Events after a gap start at the next stored one.
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 30, 31)})
	if got := mustEvents(t, s, "t1", "r1", 20, 0); len(got) != 2 || got[0].Seq != 30 {
		t.Errorf("Events(t1/r1, 20, 0) = seqs %v, want [30 31]", seqs(got))
	}
}

// testByteExactFrames: frames are stored as bytes, not text.
func testByteExactFrames(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	want := []recorder.Event{
		{Seq: 1, Type: "RUN_STARTED", Frame: []byte("id: x\r\ndata: {\"type\":\"RUN_STARTED\"}\r\n\r\n")},
		{Seq: 2, Type: "", Frame: []byte("data: {oops}\n\n")},
		{Seq: 3, Type: "", Frame: []byte("data: \x00\xff\xfe\xc3\x28 \xed\xa0\x80\r\r\n\n")},
		{Seq: 4, Type: "TEXT_MESSAGE_CONTENT", Frame: []byte("data: {\"delta\":\"h\u00e9llo \u2028 \U0001F600\"}\n\n")},
		{Seq: 5, Type: "CUSTOM", Frame: all},
		{Seq: 6, Type: "X", Frame: []byte{}},
		{Seq: 7, Type: "BIG", Frame: bytes.Repeat([]byte("0123456789abcdef"), 1<<14)},
	}
	mustAppend(t, s, recorder.Batch{Run: r, Events: want})
	got := mustEvents(t, s, "t1", "r1", 0, 0)
	if len(got) != len(want) {
		t.Fatalf("Events(t1/r1) = %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || !bytes.Equal(got[i].Frame, want[i].Frame) {
			t.Errorf("event %d = {%d %q %.60q}, want {%d %q %.60q}", i, got[i].Seq, got[i].Type, got[i].Frame, want[i].Seq, want[i].Type, want[i].Frame)
		}
	}
	// The store keeps its own copy: the caller may reuse its buffer after Append.
	buf := []byte("data: {\"type\":\"A\"}\n\n")
	mustAppend(t, s, recorder.Batch{Run: r, Events: []recorder.Event{{Seq: 8, Type: "A", Frame: buf}}})
	copy(buf, "XXXXXX")
	if got := mustEvents(t, s, "t1", "r1", 7, 0); len(got) != 1 || string(got[0].Frame) != "data: {\"type\":\"A\"}\n\n" {
		t.Errorf("Events(t1/r1, 7) after the caller reused its buffer = %d events %v, want the original bytes", len(got), got)
	}
}

func testRunsOrder(t *testing.T, s recorder.Store) {
	ids := []string{"zz", "aa", "mm", "r:1", "r-0"}
	for _, id := range ids {
		mustCreate(t, s, newRun("t1", id))
	}
	runs, err := s.Runs(t.Context(), "t1")
	if err != nil {
		t.Fatalf("Runs(t1) = %v", err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.RunID)
	}
	if !slices.Equal(got, ids) {
		t.Errorf("Runs(t1) = %v, want creation order %v", got, ids)
	}
}

func testCheckpoints(t *testing.T, s recorder.Store) {
	mustCreate(t, s, newRun("t1", "r1"))
	if _, err := s.Checkpoint(t.Context(), "t1", "r1"); !errors.Is(err, recorder.ErrNotFound) {
		t.Errorf("Checkpoint(t1/r1) before any = %v, want ErrNotFound", err)
	}
	for _, data := range [][]byte{[]byte(`{"state":{}}`), []byte("\x00\xffbinary\r\n"), bytes.Repeat([]byte("x"), 1<<17)} {
		if err := s.PutCheckpoint(t.Context(), "t1", "r1", data); err != nil {
			t.Fatalf("PutCheckpoint(t1/r1) = %v", err)
		}
		got, err := s.Checkpoint(t.Context(), "t1", "r1")
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("Checkpoint(t1/r1) = %.40q, %v, want %.40q", got, err, data)
		}
	}
	if err := s.PutCheckpoint(t.Context(), "t1", "nope", []byte("x")); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("PutCheckpoint(t1/nope) = %v, want ErrRunNotFound", err)
	}
	if _, err := s.Checkpoint(t.Context(), "t9", "r1"); !errors.Is(err, recorder.ErrNotFound) {
		t.Errorf("Checkpoint(t9/r1) = %v, want ErrNotFound", err)
	}
	testAppendCheckpoint(t, s)
	testWriteCheckpoints(t, s)
}

// testWriteCheckpoints: WriteCheckpoints makes its writes in order and stops at the first that
// fails, reporting how many it made.
func testWriteCheckpoints(t *testing.T, s recorder.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("t1", "w1"))
	mustCreate(t, s, newRun("t1", "w2"))
	seg := recorder.CheckpointWrite{RunID: "w1", Data: []byte("SEG|base")}
	n, err := s.WriteCheckpoints(ctx, "t1", []recorder.CheckpointWrite{
		seg,
		{RunID: "w1", Data: []byte("+d2"), Append: true, Prefix: []byte("SEG|")},
		{RunID: "w2", Data: []byte("ptr w1")},
	})
	if n != 3 || err != nil {
		t.Fatalf("WriteCheckpoints(put, append, put) = %d, %v, want 3, nil", n, err)
	}
	want := map[string]string{"w1": "SEG|base+d2", "w2": "ptr w1"}
	check := func(when string) {
		t.Helper()
		for run, data := range want {
			if got, err := s.Checkpoint(ctx, "t1", run); err != nil || string(got) != data {
				t.Errorf("%s: Checkpoint(t1/%s) = %q, %v, want %q", when, run, got, err, data)
			}
		}
	}
	check("after three writes")
	// A refused append stops the writes: the one before it stays, the one after is not made.
	n, err = s.WriteCheckpoints(ctx, "t1", []recorder.CheckpointWrite{
		{RunID: "w2", Data: []byte("ptr w1 again")},
		{RunID: "w1", Data: []byte("+no"), Append: true, Prefix: []byte("OTHER")},
		{RunID: "w1", Data: []byte("overwritten")},
	})
	if n != 1 || !errors.Is(err, recorder.ErrNotFound) {
		t.Errorf("WriteCheckpoints(put, refused append, put) = %d, %v, want 1, ErrNotFound", n, err)
	}
	want["w2"] = "ptr w1 again"
	check("after a refused append")
	n, err = s.WriteCheckpoints(ctx, "t1", []recorder.CheckpointWrite{{RunID: "w1", Data: []byte("+d3"), Append: true}, {RunID: "gone", Data: []byte("x")}})
	if n != 1 || !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("WriteCheckpoints(append, put to an unknown run) = %d, %v, want 1, ErrRunNotFound", n, err)
	}
	want["w1"] += "+d3"
	check("after a write to an unknown run")
	if n, err := s.WriteCheckpoints(ctx, "t1", nil); n != 0 || err != nil {
		t.Errorf("WriteCheckpoints(none) = %d, %v, want 0, nil", n, err)
	}
}

// appendCheckpoint is one append by WriteCheckpoints.
func appendCheckpoint(ctx context.Context, s recorder.Store, threadID, runID string, prefix, data []byte) error {
	_, err := s.WriteCheckpoints(ctx, threadID, []recorder.CheckpointWrite{{RunID: runID, Data: data, Append: true, Prefix: prefix}})
	return err
}

// testAppendCheckpoint: an append (WriteCheckpoints) appends to a checkpoint that starts with
// the prefix given, and to nothing else; what PutCheckpoint stores next replaces it all.
func testAppendCheckpoint(t *testing.T, s recorder.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("t1", "a1"))
	if err := appendCheckpoint(ctx, s, "t1", "a1", nil, []byte("x")); !errors.Is(err, recorder.ErrNotFound) {
		t.Errorf("append to t1/a1 without a checkpoint = %v, want ErrNotFound", err)
	}
	if err := appendCheckpoint(ctx, s, "t1", "nope", nil, []byte("x")); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("append to t1/nope = %v, want ErrRunNotFound", err)
	}
	want := []byte("SEG\x00base")
	if err := s.PutCheckpoint(ctx, "t1", "a1", want); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Checkpoint(ctx, "t1", "a1") // (a copy handed out before the appends stays as it was)
	for i, add := range [][]byte{[]byte("+d1"), {}, bytes.Repeat([]byte("\xff"), 1<<16), []byte("+d3")} {
		prefix := []byte("SEG\x00")
		if i == 1 {
			prefix = nil // (no prefix: any checkpoint)
		}
		if err := appendCheckpoint(ctx, s, "t1", "a1", prefix, add); err != nil {
			t.Fatalf("append of %.20q to t1/a1 = %v", add, err)
		}
		want = append(want, add...)
	}
	if !bytes.Equal(got, []byte("SEG\x00base")) {
		t.Errorf("a checkpoint read before the appends became %.40q", got)
	}
	if got, err := s.Checkpoint(ctx, "t1", "a1"); err != nil || !bytes.Equal(got, want) {
		t.Errorf("Checkpoint(t1/a1) after appends = %d bytes %.40q, %v, want %d bytes %.40q", len(got), got, err, len(want), want)
	}
	for _, prefix := range []string{"SEG\x01", "SEG\x00base+d1+d3 and more than it holds"} {
		if err := appendCheckpoint(ctx, s, "t1", "a1", []byte(prefix), []byte("no")); !errors.Is(err, recorder.ErrNotFound) {
			t.Errorf("append to t1/a1 with prefix %q = %v, want ErrNotFound", prefix, err)
		}
	}
	if got, _ := s.Checkpoint(ctx, "t1", "a1"); !bytes.Equal(got, want) {
		t.Errorf("Checkpoint(t1/a1) after refused appends = %d bytes, want %d unchanged", len(got), len(want))
	}
	if err := s.PutCheckpoint(ctx, "t1", "a1", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Checkpoint(ctx, "t1", "a1"); string(got) != "new" {
		t.Errorf("Checkpoint(t1/a1) after PutCheckpoint = %.40q, want %q", got, "new")
	}
}

func testDeleteRun(t *testing.T, s recorder.Store) {
	for _, id := range []string{"r1", "r2", "r3"} {
		r := newRun("t1", id)
		mustCreate(t, s, r)
		mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 1, 2)})
	}
	if err := s.PutCheckpoint(t.Context(), "t1", "r3", []byte("cp")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRun(t.Context(), "t1", "r3"); err != nil {
		t.Fatalf("DeleteRun(t1/r3) = %v", err)
	}
	th, err := s.Thread(t.Context(), "t1")
	if err != nil || th.LatestRunID != "r2" || th.RunCount != 2 {
		t.Errorf("Thread(t1) after deleting r3 = %+v, %v, want latest r2, 2 runs", th, err)
	}
	if _, err := s.Events(t.Context(), "t1", "r3", 0, 0); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("Events(t1/r3) after delete = %v, want ErrRunNotFound", err)
	}
	if _, err := s.Checkpoint(t.Context(), "t1", "r3"); !errors.Is(err, recorder.ErrNotFound) {
		t.Errorf("Checkpoint(t1/r3) after delete = %v, want ErrNotFound", err)
	}
	// The id can be used again, and starts empty.
	r3 := newRun("t1", "r3")
	mustCreate(t, s, r3)
	if evs := mustEvents(t, s, "t1", "r3", 0, 0); len(evs) != 0 {
		t.Errorf("Events(t1/r3) of the re-created run = seqs %v, want none", seqs(evs))
	}
	if err := s.DeleteRun(t.Context(), "t1", "nope"); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("DeleteRun(t1/nope) = %v, want ErrRunNotFound", err)
	}
	if err := s.DeleteRun(t.Context(), "t9", "r1"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("DeleteRun(t9/r1) = %v, want ErrThreadNotFound", err)
	}
	for _, id := range []string{"r1", "r2", "r3"} {
		if err := s.DeleteRun(t.Context(), "t1", id); err != nil {
			t.Errorf("DeleteRun(t1/%s) = %v", id, err)
		}
	}
	if _, err := s.Thread(t.Context(), "t1"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("Thread(t1) after deleting every run = %v, want ErrThreadNotFound", err)
	}
	// A thread removed that way is free for anyone again.
	r := newRun("t1", "r1")
	r.Owner, r.Route = "bob", "/other"
	mustCreate(t, s, r)
}

func testNotFound(t *testing.T, s recorder.Store) {
	mustCreate(t, s, newRun("t1", "r1"))
	ctx := t.Context()
	if _, err := s.Thread(ctx, "t9"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("Thread(t9) = %v, want ErrThreadNotFound", err)
	}
	if _, err := s.Runs(ctx, "t9"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("Runs(t9) = %v, want ErrThreadNotFound", err)
	}
	if _, err := s.Run(ctx, "t9", "r1"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("Run(t9/r1) = %v, want ErrThreadNotFound", err)
	}
	if _, err := s.Run(ctx, "t1", "r9"); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("Run(t1/r9) = %v, want ErrRunNotFound", err)
	}
	for _, tr := range [][2]string{{"t1", "r9"}, {"t9", "r1"}} {
		if _, err := s.Events(ctx, tr[0], tr[1], 0, 0); !errors.Is(err, recorder.ErrRunNotFound) {
			t.Errorf("Events(%s/%s) = %v, want ErrRunNotFound", tr[0], tr[1], err)
		}
	}
}

// HostileIDs are ids every Store method must refuse with an error wrapping agui.ErrInvalidID
// before anything reaches storage.
var HostileIDs = []string{
	"", "a\nb", "a\r\nb", "{t}", "a{b", "a}b", "*", "a*", "?", "[x]", "a b", "a\x00b", "a\tb",
	"é", "../x", "a/b", "a\"b", strings.Repeat("a", 10<<10), strings.Repeat("a", agui.MaxIDLength+1),
}

// hostileThreadKeys are the thread keys the suite's hostile cases try: HostileIDs and
// NamespaceHostileKeys.
func hostileThreadKeys() []string { return append(slices.Clone(HostileIDs), NamespaceHostileKeys...) }

func testHostileIDs(t *testing.T, s recorder.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("t1", "r1"))
	for _, id := range hostileThreadKeys() {
		name := fmt.Sprintf("%.40q", id)
		check := func(call string, err error) {
			t.Helper()
			if !errors.Is(err, agui.ErrInvalidID) {
				t.Errorf("%s with id %s = %v, want agui.ErrInvalidID", call, name, err)
			}
		}
		_, err := s.CreateRun(ctx, newRun(id, "r1"), recorder.CreateOptions{})
		check("CreateRun(thread, recorder.CreateOptions{})", err)
		_, err = s.CreateRun(ctx, newRun("t1", id), recorder.CreateOptions{})
		check("CreateRun(run, recorder.CreateOptions{})", err)
		if id != "" {
			r := newRun("t1", "r2")
			r.ParentRunID = id
			_, err = s.CreateRun(ctx, r, recorder.CreateOptions{})
			check("CreateRun(parent, recorder.CreateOptions{})", err)
		}
		check("Append(thread)", s.Append(ctx, []recorder.Batch{{Run: newRun(id, "r1")}}))
		check("Append(run)", s.Append(ctx, []recorder.Batch{{Run: newRun("t1", "r1")}, {Run: newRun("t1", id)}}))
		check("FinishRun", s.FinishRun(ctx, "t1", id, recorder.StatusFinished, "", 0))
		check("DeleteRun", s.DeleteRun(ctx, id, "r1"))
		_, err = s.Thread(ctx, id)
		check("Thread", err)
		_, err = s.Run(ctx, "t1", id)
		check("Run", err)
		_, err = s.Runs(ctx, id)
		check("Runs", err)
		_, err = s.Events(ctx, id, "r1", 0, 0)
		check("Events", err)
		check("PutCheckpoint", s.PutCheckpoint(ctx, "t1", id, nil))
		check("WriteCheckpoints(append)", appendCheckpoint(ctx, s, "t1", id, nil, nil))
		_, err = s.WriteCheckpoints(ctx, id, []recorder.CheckpointWrite{{RunID: id}})
		check("WriteCheckpoints", err)
		_, err = s.Checkpoint(ctx, id, "r1")
		check("Checkpoint", err)
	}
	if runs, err := s.Runs(ctx, "t1"); err != nil || len(runs) != 1 {
		t.Errorf("Runs(t1) after hostile calls = %d runs, %v, want 1", len(runs), err)
	}
}

func testInvalidEpoch(t *testing.T, s recorder.Store) {
	for _, epoch := range []string{"", "short", "ABCDEFGH", "abcdefg1", "abcdefghi"} {
		r := newRun("t1", "r1")
		r.Epoch = epoch
		if _, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{}); !errors.Is(err, recorder.ErrInvalidEpoch) {
			t.Errorf("CreateRun with epoch %q = %v, want ErrInvalidEpoch", epoch, err)
		}
		if err := s.Append(t.Context(), []recorder.Batch{{Run: r}}); !errors.Is(err, recorder.ErrInvalidEpoch) {
			t.Errorf("Append with epoch %q = %v, want ErrInvalidEpoch", epoch, err)
		}
	}
}

// testConcurrency: many goroutines append to many runs on shared threads while others read;
// every run ends with exactly its events, in order.
func testConcurrency(t *testing.T, s recorder.Store) {
	const runs, perRun, chunk = 24, 60, 7
	rs := make([]recorder.Run, runs)
	for i := range rs {
		rs[i] = newRun(fmt.Sprintf("t%d", i%6), fmt.Sprintf("r%d", i))
		mustCreate(t, s, rs[i])
	}
	ctx := context.Background()
	errs := make(chan error, 2*runs)
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			for from := int64(1); from <= perRun; from += chunk {
				to := min(from+chunk-1, perRun)
				// Each chunk twice: concurrent retries must not duplicate.
				for range 2 {
					if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: events(r, from, to)}}); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- s.FinishRun(ctx, r.ThreadID, r.RunID, recorder.StatusFinished, "", perRun)
		})
		wg.Go(func() {
			for range 5 {
				if _, err := s.Events(ctx, r.ThreadID, r.RunID, 0, 10); err != nil {
					errs <- err
					return
				}
				if _, err := s.Runs(ctx, r.ThreadID); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent call: %v", err)
		}
	}
	for _, r := range rs {
		checkEvents(t, mustEvents(t, s, r.ThreadID, r.RunID, 0, 0), events(r, 1, perRun))
		if got := mustRun(t, s, r.ThreadID, r.RunID); got.Status != recorder.StatusFinished || !got.Complete(0) {
			t.Errorf("Run(%s/%s) = status %s gaps %v, want finished and complete", r.ThreadID, r.RunID, got.Status, got.Gaps)
		}
	}
}

// testRetention: MaxEventsPerRun drops the oldest events; FirstSeq says where the run starts
// now and Complete reports the loss.
func testRetention(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	for from := int64(1); from <= RetentionEvents; from += 100 {
		mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, from, from+99)})
	}
	got := mustRun(t, s, "t1", "r1")
	if got.LastSeq != RetentionEvents || got.FirstSeq <= 1 || RetentionEvents-got.FirstSeq+1 < MaxEventsPerRun || len(got.Gaps) != 0 {
		t.Fatalf("Run(t1/r1) = first %d last %d gaps %v, want last %d, first in (1, %d]", got.FirstSeq, got.LastSeq, got.Gaps, RetentionEvents, RetentionEvents-MaxEventsPerRun+1)
	}
	if got.Complete(0) || got.Complete(got.FirstSeq-2) || !got.Complete(got.FirstSeq-1) {
		t.Errorf("Run(t1/r1).Complete(0, first-2, first-1) = %v, %v, %v, want false, false, true", got.Complete(0), got.Complete(got.FirstSeq-2), got.Complete(got.FirstSeq-1))
	}
	checkEvents(t, mustEvents(t, s, "t1", "r1", 0, 0), events(r, got.FirstSeq, RetentionEvents))
}

func testClose(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping() = %v, want nil", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	ctx := t.Context()
	check := func(call string, err error) {
		t.Helper()
		if !errors.Is(err, recorder.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", call, err)
		}
	}
	_, err := s.CreateRun(ctx, newRun("t1", "r2"), recorder.CreateOptions{})
	check("CreateRun", err)
	check("Append", s.Append(ctx, []recorder.Batch{{Run: r, Events: events(r, 1, 1)}}))
	check("FinishRun", s.FinishRun(ctx, "t1", "r1", recorder.StatusFinished, "", 0))
	check("DeleteRun", s.DeleteRun(ctx, "t1", "r1"))
	_, err = s.Thread(ctx, "t1")
	check("Thread", err)
	_, err = s.Run(ctx, "t1", "r1")
	check("Run", err)
	_, err = s.Runs(ctx, "t1")
	check("Runs", err)
	_, err = s.Events(ctx, "t1", "r1", 0, 0)
	check("Events", err)
	check("PutCheckpoint", s.PutCheckpoint(ctx, "t1", "r1", nil))
	check("WriteCheckpoints(append)", appendCheckpoint(ctx, s, "t1", "r1", nil, nil))
	_, err = s.WriteCheckpoints(ctx, "t1", []recorder.CheckpointWrite{{RunID: "r1"}})
	check("WriteCheckpoints", err)
	_, err = s.Checkpoint(ctx, "t1", "r1")
	check("Checkpoint", err)
	check("Ping", s.Ping(ctx))
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
}
