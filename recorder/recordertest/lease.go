package recordertest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// leaseTests are the subtests for stores implementing recorder.Leaser.
var leaseTests = []struct {
	name string
	fn   func(t *testing.T, s recorder.Store, l recorder.Leaser)
}{
	{"SetAndRenew", testLeaseRenew},
	{"StopRequest", testLeaseStop},
	{"IgnoredAfterFinish", testLeaseAfterFinish},
	{"NotFound", testLeaseNotFound},
	{"Batch", testLeaseBatch},
}

// runLease runs the lease subtests; stores that are not Leasers skip them.
func runLease(t *testing.T, newStore func(t *testing.T) recorder.Store) {
	for _, tc := range leaseTests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() })
			l, ok := s.(recorder.Leaser)
			if !ok {
				t.Skipf("%T does not implement recorder.Leaser", s)
			}
			tc.fn(t, s, l)
		})
	}
}

// leaseAt is a fixed instant with sub-millisecond digits (stores keep milliseconds).
var leaseAt = time.Date(2030, 1, 2, 3, 4, 5, 678_901_234, time.UTC)

func checkLease(t *testing.T, s recorder.Store, thread, run, node string, until time.Time) {
	t.Helper()
	got := mustRun(t, s, thread, run)
	if got.Node != node || !got.LeaseUntil.Equal(until.Truncate(time.Millisecond)) {
		t.Errorf("Run(%s/%s) lease = %q until %v, want %q until %v", thread, run, got.Node, got.LeaseUntil, node, until.Truncate(time.Millisecond))
	}
}

func mustRenew(t *testing.T, l recorder.Leaser, thread, run, node string, until time.Time) bool {
	t.Helper()
	stop, err := l.RenewLease(t.Context(), thread, run, node, until)
	if err != nil {
		t.Fatalf("RenewLease(%s/%s, %s) = %v, want nil", thread, run, node, err)
	}
	return stop
}

// testLeaseRenew: CreateRun stores the lease it is given, RenewLease replaces it, and a run
// created without one has none.
func testLeaseRenew(t *testing.T, s recorder.Store, l recorder.Leaser) {
	r := newRun("t1", "r1")
	r.Node, r.LeaseUntil = "node-a", leaseAt
	mustCreate(t, s, r)
	checkLease(t, s, "t1", "r1", "node-a", leaseAt)
	if stop := mustRenew(t, l, "t1", "r1", "node-b", leaseAt.Add(time.Minute)); stop {
		t.Errorf("RenewLease(t1/r1) = stop true, want false before any RequestStop")
	}
	checkLease(t, s, "t1", "r1", "node-b", leaseAt.Add(time.Minute))
	mustRenew(t, l, "t1", "r1", "node-b", leaseAt.Add(2*time.Minute))
	checkLease(t, s, "t1", "r1", "node-b", leaseAt.Add(2*time.Minute))
	// Events and the lease do not disturb each other.
	mustAppend(t, s, recorder.Batch{Run: r, Events: events(r, 1, 3)})
	checkLease(t, s, "t1", "r1", "node-b", leaseAt.Add(2*time.Minute))
	if got := mustRun(t, s, "t1", "r1"); got.LastSeq != 3 || got.Status != recorder.StatusRunning {
		t.Errorf("Run(t1/r1) after renewals = last %d status %s, want 3, running", got.LastSeq, got.Status)
	}
	mustCreate(t, s, newRun("t1", "r2"))
	checkLease(t, s, "t1", "r2", "", time.Time{})
	runs, err := s.Runs(t.Context(), "t1")
	if err != nil || len(runs) != 2 || runs[0].Node != "node-b" || runs[1].Node != "" {
		t.Errorf("Runs(t1) = %+v, %v, want the lease of r1 only", runs, err)
	}
}

// testLeaseStop: RequestStop is reported by the next renewals of that run only.
func testLeaseStop(t *testing.T, s recorder.Store, l recorder.Leaser) {
	mustCreate(t, s, newRun("t1", "r1"))
	mustCreate(t, s, newRun("t1", "r2"))
	mustRenew(t, l, "t1", "r1", "n", leaseAt)
	if err := l.RequestStop(t.Context(), "t1", "r1"); err != nil {
		t.Fatalf("RequestStop(t1/r1) = %v", err)
	}
	for range 2 {
		if stop := mustRenew(t, l, "t1", "r1", "n", leaseAt); !stop {
			t.Errorf("RenewLease(t1/r1) after RequestStop = stop false, want true")
		}
	}
	if stop := mustRenew(t, l, "t1", "r2", "n", leaseAt); stop {
		t.Errorf("RenewLease(t1/r2) = stop true, want false (the stop was for r1)")
	}
	if got := mustRun(t, s, "t1", "r1"); got.Status != recorder.StatusRunning {
		t.Errorf("Run(t1/r1) after RequestStop = status %s, want running (the pumping node ends it)", got.Status)
	}
}

// testLeaseAfterFinish: once a run ended, renewals and stop requests change nothing.
func testLeaseAfterFinish(t *testing.T, s recorder.Store, l recorder.Leaser) {
	mustCreate(t, s, newRun("t1", "r1"))
	mustRenew(t, l, "t1", "r1", "node-a", leaseAt)
	if err := s.FinishRun(t.Context(), "t1", "r1", recorder.StatusFinished, "", 0); err != nil {
		t.Fatal(err)
	}
	if stop := mustRenew(t, l, "t1", "r1", "node-b", leaseAt.Add(time.Hour)); stop {
		t.Errorf("RenewLease on a finished run = stop true, want false")
	}
	if err := l.RequestStop(t.Context(), "t1", "r1"); err != nil {
		t.Errorf("RequestStop on a finished run = %v, want nil (nothing to do)", err)
	}
	if stop := mustRenew(t, l, "t1", "r1", "node-b", leaseAt.Add(time.Hour)); stop {
		t.Errorf("RenewLease on a finished run after RequestStop = stop true, want false")
	}
	checkLease(t, s, "t1", "r1", "node-a", leaseAt)
	if got := mustRun(t, s, "t1", "r1"); got.Status != recorder.StatusFinished {
		t.Errorf("Run(t1/r1) = status %s, want finished (a renewal never revives a run)", got.Status)
	}
}

// testLeaseNotFound: leases of unknown runs are refused and create nothing.
func testLeaseNotFound(t *testing.T, s recorder.Store, l recorder.Leaser) {
	mustCreate(t, s, newRun("t1", "r1"))
	if _, err := l.RenewLease(t.Context(), "t1", "nope", "n", leaseAt); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("RenewLease(t1/nope) = %v, want ErrRunNotFound", err)
	}
	if err := l.RequestStop(t.Context(), "t1", "nope"); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("RequestStop(t1/nope) = %v, want ErrRunNotFound", err)
	}
	for _, thread := range []string{"nope", HostileIDs[0]} {
		if _, err := l.RenewLease(t.Context(), thread, "r1", "n", leaseAt); err == nil {
			t.Errorf("RenewLease(%.20q/r1) = nil, want an error", thread)
		}
		if err := l.RequestStop(t.Context(), thread, "r1"); err == nil {
			t.Errorf("RequestStop(%.20q/r1) = nil, want an error", thread)
		}
	}
	if _, err := s.Run(t.Context(), "t1", "nope"); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("Run(t1/nope) after refused lease calls = %v, want ErrRunNotFound (nothing created)", err)
	}
	if _, err := s.Thread(t.Context(), "nope"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("Thread(nope) after refused lease calls = %v, want ErrThreadNotFound", err)
	}
}

// testLeaseBatch: a BatchLeaser's RenewLeases answers each run as RenewLease would, in order,
// across more runs and threads than one call of the store takes.
func testLeaseBatch(t *testing.T, s recorder.Store, l recorder.Leaser) {
	bl, ok := l.(recorder.BatchLeaser)
	if !ok {
		t.Skipf("%T does not implement recorder.BatchLeaser", s)
	}
	if out, err := bl.RenewLeases(t.Context(), "n", leaseAt, nil); err != nil || len(out) != 0 {
		t.Errorf("RenewLeases(no runs) = %v, %v, want nothing", out, err)
	}
	var refs []recorder.RunRef
	want := map[recorder.RunRef]recorder.LeaseOutcome{}
	for i := range 600 {
		ref := recorder.RunRef{ThreadID: fmt.Sprintf("t%d", i%7), RunID: fmt.Sprintf("r%d", i)}
		refs = append(refs, ref)
		if i%100 == 42 {
			want[ref] = recorder.LeaseNoRun // never created
			continue
		}
		mustCreate(t, s, newRun(ref.ThreadID, ref.RunID))
		want[ref] = recorder.LeaseRenewed
		switch i % 100 {
		case 7:
			if err := l.RequestStop(t.Context(), ref.ThreadID, ref.RunID); err != nil {
				t.Fatal(err)
			}
			want[ref] = recorder.LeaseStop
		case 9:
			if err := s.FinishRun(t.Context(), ref.ThreadID, ref.RunID, recorder.StatusFinished, "", 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, err := bl.RenewLeases(t.Context(), "node-z", leaseAt, refs)
	if err != nil || len(out) != len(refs) {
		t.Fatalf("RenewLeases(600 runs) = %d outcomes, %v", len(out), err)
	}
	for i, ref := range refs {
		if out[i] != want[ref] {
			t.Errorf("RenewLeases outcome of %s/%s = %d, want %d", ref.ThreadID, ref.RunID, out[i], want[ref])
		}
		switch i % 100 {
		case 42:
		case 9: // finished: keeps the lease it had (none)
			checkLease(t, s, ref.ThreadID, ref.RunID, "", time.Time{})
		default:
			checkLease(t, s, ref.ThreadID, ref.RunID, "node-z", leaseAt)
		}
	}
	if _, err := bl.RenewLeases(t.Context(), "n", leaseAt, append(refs[:1:1], recorder.RunRef{ThreadID: HostileIDs[0], RunID: "r1"})); err == nil {
		t.Errorf("RenewLeases with a hostile thread id = nil error, want one")
	}
	checkLease(t, s, refs[0].ThreadID, refs[0].RunID, "node-z", leaseAt) // nothing sent
}
