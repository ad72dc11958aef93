package thread_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

func newService(t testing.TB, cfg thread.Config) *thread.Service {
	t.Helper()
	if cfg.Store == nil {
		store := recorder.NewMemoryStore(recorder.MemoryConfig{})
		t.Cleanup(func() { store.Close() })
		cfg.Store = store
	}
	s, err := thread.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAccess(t *testing.T) {
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	defer store.Close()
	s := newService(t, thread.Config{Store: store, Route: "a", IdentityHeader: "X-User"})
	other := newService(t, thread.Config{Store: store, Route: "b", IdentityHeader: "X-User"})
	if _, err := s.StartRun(t.Context(), recorder.Run{ThreadID: "t", RunID: "r1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		s     *thread.Service
		owner string
		id    string
		want  error
	}{
		{"owner", s, "alice", "t", nil},
		{"foreign owner answers like an unknown thread", s, "mallory", "t", recorder.ErrThreadNotFound},
		{"unknown", s, "alice", "nope", recorder.ErrThreadNotFound},
		{"anonymous in multi-tenant mode", s, "", "t", problem.ErrIdentityRequired},
		{"another route answers like an unknown thread", other, "alice", "t", recorder.ErrThreadNotFound},
		{"invalid id", s, "alice", "a\nb", nil},
	}
	for _, tt := range tests {
		th, err := tt.s.Access(t.Context(), tt.owner, tt.id)
		switch {
		case tt.name == "invalid id":
			if err == nil {
				t.Errorf("%s: Access = nil, want an error", tt.name)
			}
		case !errors.Is(err, tt.want) || (tt.want == nil && (err != nil || th.LatestRunID != "r1")):
			t.Errorf("%s: Access = %+v, %v, want %v", tt.name, th, err, tt.want)
		}
	}
	if _, _, err := s.AccessRun(t.Context(), "alice", "t", "r9"); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("AccessRun(unknown run) = %v, want ErrRunNotFound", err)
	}
}

func TestOwnerIsComputedOnce(t *testing.T) {
	s := newService(t, thread.Config{IdentityHeader: "X-User"})
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-User", "alice")
	r.Header.Set("X_User", "mallory") // a look-alike is removed
	id, err := s.Identify(r)
	if err != nil || id != "alice" || r.Header.Get("X_User") != "" {
		t.Fatalf("Identify = %q, %v; look-alike header %q", id, err, r.Header.Get("X_User"))
	}
	r = r.WithContext(thread.WithOwner(r.Context(), id, nil))
	r.Header.Set("X-User", "changed later")
	if got, _ := s.Owner(r); got != "alice" {
		t.Errorf("Owner = %q, want the identity stored on the context", got)
	}
}

func TestStartRun(t *testing.T) {
	s := newService(t, thread.Config{})
	ctx := t.Context()
	r1, err := s.StartRun(ctx, recorder.Run{ThreadID: "t", RunID: "r1"})
	if err != nil || r1.ParentRunID != "" || r1.Route != thread.DefaultRoute || !recorder.ValidEpoch(r1.Epoch) || r1.Status != recorder.StatusRunning {
		t.Fatalf("StartRun(r1) = %+v, %v", r1, err)
	}
	if _, err := s.StartRun(ctx, recorder.Run{ThreadID: "t", RunID: "r2"}); !errors.Is(err, recorder.ErrThreadBusy) {
		t.Fatalf("StartRun(r2) while r1 runs = %v, want ErrThreadBusy", err)
	}
	if err := s.Store().FinishRun(ctx, "t", "r1", recorder.StatusFinished, "", 0); err != nil {
		t.Fatal(err)
	}
	r2, err := s.StartRun(ctx, recorder.Run{ThreadID: "t", RunID: "r2"})
	if err != nil || r2.ParentRunID != "r1" {
		t.Fatalf("StartRun(r2) after r1 ended = %+v, %v, want parent r1", r2, err)
	}
	concurrent := newService(t, thread.Config{Store: s.Store(), AllowConcurrentRuns: true})
	if _, err := concurrent.StartRun(ctx, recorder.Run{ThreadID: "t", RunID: "r3"}); err != nil {
		t.Errorf("StartRun(r3) with AllowConcurrentRuns = %v", err)
	}
}

func TestRunError(t *testing.T) {
	var ev struct{ Type, Message, Code string }
	data := thread.RunError(thread.CodeInterrupted, "agui-proxy: \"quoted\"\n\u2028")
	if err := json.Unmarshal(data, &ev); err != nil || ev.Type != "RUN_ERROR" || ev.Code != "INTERRUPTED" || ev.Message != "agui-proxy: \"quoted\"\n\u2028" {
		t.Errorf("RunError = %s (%v)", data, err)
	}
	if thread.StatusFor(thread.CodeInterrupted) != recorder.StatusInterrupted || thread.StatusFor(thread.CodeCancelled) != recorder.StatusError {
		t.Error("StatusFor: INTERRUPTED is interrupted, every other code error")
	}
}

func TestReapOrphan(t *testing.T) {
	s := newService(t, thread.Config{LeaseGrace: time.Second})
	ctx := t.Context()
	alive := time.Now().Add(time.Minute)
	if _, err := s.StartRun(ctx, recorder.Run{ThreadID: "live", RunID: "r", Node: "n", LeaseUntil: alive}); err != nil {
		t.Fatal(err)
	}
	if s.ReapOrphan(ctx, "live", "r") {
		t.Error("ReapOrphan ended a run whose lease is alive")
	}
	if _, err := s.StartRun(ctx, recorder.Run{ThreadID: "dead", RunID: "r", Node: "n", LeaseUntil: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if !s.ReapOrphan(ctx, "dead", "r") {
		t.Fatal("ReapOrphan did not end a run whose lease expired")
	}
	run, _ := s.Store().Run(ctx, "dead", "r")
	evs, _ := s.Store().Events(ctx, "dead", "r", 0, 0)
	if run.Status != recorder.StatusInterrupted || run.Detail != thread.CodeInterrupted || len(evs) != 1 || evs[0].Type != "RUN_ERROR" {
		t.Errorf("reaped run = %+v with %d events, want interrupted with one RUN_ERROR", run, len(evs))
	}
}

// TestLeaseGrace: a running run whose replica stopped renewing its lease still holds its
// thread (busy rule) and is not reaped until the lease grace after the lease has passed, to
// the millisecond; then it is reaped and the thread takes a new run. The clock is fake
// (testing/synctest): the lease runs out without a wall-clock wait.
func TestLeaseGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease, grace = 10 * time.Second, 2 * time.Second
		s := newService(t, thread.Config{LeaseGrace: grace})
		ctx := t.Context()
		if _, err := s.StartRun(ctx, recorder.Run{ThreadID: "t", RunID: "r1", Node: "n", LeaseUntil: time.Now().Add(lease)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease + grace - time.Millisecond)
		if s.ReapOrphan(ctx, "t", "r1") {
			t.Fatal("ReapOrphan ended a run within the lease grace")
		}
		if _, err := s.StartRun(ctx, recorder.Run{ThreadID: "t", RunID: "r2"}); !errors.Is(err, recorder.ErrThreadBusy) {
			t.Fatalf("StartRun within the lease grace = %v, want ErrThreadBusy", err)
		}
		time.Sleep(time.Millisecond)
		if !s.ReapOrphan(ctx, "t", "r1") {
			t.Fatal("ReapOrphan did not end a run once its lease and the grace passed")
		}
		if _, err := s.StartRun(ctx, recorder.Run{ThreadID: "t", RunID: "r2"}); err != nil {
			t.Fatalf("StartRun after the orphan was reaped = %v", err)
		}
	})
}

func TestStop(t *testing.T) {
	s := newService(t, thread.Config{})
	ctx := t.Context()
	run, err := s.StartRun(ctx, recorder.Run{ThreadID: "t", RunID: "r", Node: "n", LeaseUntil: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	stopped := 0
	_, release := s.Pumping("t", "r", func() { stopped++ })
	if err := s.Stop(ctx, run); err != nil || stopped != 1 {
		t.Fatalf("Stop of a local run = %v, cancelled %d times", err, stopped)
	}
	release()
	// Not pumped here any more: the request goes through the store's lease.
	if err := s.Stop(ctx, run); err != nil || stopped != 1 {
		t.Fatalf("Stop of a remote run = %v", err)
	}
	if stop, err := s.Store().(recorder.Leaser).RenewLease(ctx, "t", "r", "n", time.Now().Add(time.Minute)); err != nil || !stop {
		t.Errorf("RenewLease after Stop = %v, %v, want a stop request", stop, err)
	}
	run.Status = recorder.StatusFinished
	if err := s.Stop(ctx, run); !errors.Is(err, problem.ErrRunNotRunning) {
		t.Errorf("Stop of an ended run = %v, want ErrRunNotRunning", err)
	}
}
