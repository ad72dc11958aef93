package recordertest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// nsRun is one thread id "t" in the namespace of owner on route.
type nsRun struct {
	owner, route string
	run          recorder.Run
}

// namespaces returns run "r1" of thread id "t" in four namespaces: alice and bob on /agent,
// alice on /other, and the single-tenant default route (whose key is the bare id).
func namespaces() []nsRun {
	var out []nsRun
	for _, ns := range [][2]string{{"alice", "/agent"}, {"bob", "/agent"}, {"alice", "/other"}, {"", recorder.DefaultRoute}} {
		r := recorder.Run{ThreadID: recorder.ThreadKey(ns[0], ns[1], "t"), RunID: "r1", Epoch: recorder.NewEpoch(), Owner: ns[0], Route: ns[1]}
		out = append(out, nsRun{ns[0], ns[1], r})
	}
	return out
}

// testNamespaces: the keys of one thread id in different namespaces (recorder.ThreadKey) are
// different threads: each takes the same run id, holds its own events and checkpoint, lists
// and deletes apart, and comes back under its own key.
func testNamespaces(t *testing.T, s recorder.Store) {
	ctx := t.Context()
	nss := namespaces()
	if nss[3].run.ThreadID != "t" {
		t.Fatalf("ThreadKey of the single-tenant default route = %q, want the bare id", nss[3].run.ThreadID)
	}
	for i, ns := range nss {
		if prev := mustCreate(t, s, ns.run); prev.ID != "" {
			t.Fatalf("CreateRun in namespace %d found a thread: %+v", i, prev)
		}
		mustAppend(t, s, recorder.Batch{Run: ns.run, Events: events(ns.run, 1, int64(i+1))})
		if err := s.PutCheckpoint(ctx, ns.run.ThreadID, "r1", []byte{byte('a' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, ns := range nss {
		k := ns.run.ThreadID
		th := mustThread(t, s, k)
		if th.ID != k || th.Owner != ns.owner || th.Route != ns.route || th.RunCount != 1 {
			t.Errorf("Thread(%q) = %+v, want its own owner %q and route %q, one run", k, th, ns.owner, ns.route)
		}
		if recorder.ThreadIDOf(th.ID) != "t" {
			t.Errorf("ThreadIDOf(%q) = %q, want t", th.ID, recorder.ThreadIDOf(th.ID))
		}
		if r := mustRun(t, s, k, "r1"); r.ThreadID != k || r.Epoch != ns.run.Epoch || r.LastSeq != int64(i+1) {
			t.Errorf("Run(%q, r1) = %+v, want this namespace's run with %d events", k, r, i+1)
		}
		checkEvents(t, mustEvents(t, s, k, "r1", 0, 0), events(ns.run, 1, int64(i+1)))
		if cp, err := s.Checkpoint(ctx, k, "r1"); err != nil || !bytes.Equal(cp, []byte{byte('a' + i)}) {
			t.Errorf("Checkpoint(%q) = %q, %v, want this namespace's", k, cp, err)
		}
		page, err := s.ListThreads(ctx, recorder.ThreadQuery{Owner: ns.owner, Route: ns.route})
		if err != nil || len(page.Threads) != 1 || page.Threads[0].ID != k {
			t.Errorf("ListThreads(%q, %q) = %+v, %v, want only %q", ns.owner, ns.route, page.Threads, err, k)
		}
	}
	// A run of one namespace is not a parent in another, and finishing or deleting in one
	// leaves the others alone.
	child := nss[1].run
	child.RunID, child.ParentRunID, child.Epoch = "r2", "r9", recorder.NewEpoch()
	mustCreate(t, s, recorder.Run{ThreadID: nss[0].run.ThreadID, RunID: "r9", Epoch: recorder.NewEpoch(), Owner: "alice", Route: "/agent"})
	if _, err := s.CreateRun(ctx, child, recorder.CreateOptions{}); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("CreateRun with a parent of another namespace = %v, want ErrRunNotFound", err)
	}
	if err := s.FinishRun(ctx, nss[0].run.ThreadID, "r1", recorder.StatusFinished, "", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, nss[1].run.ThreadID, "r1", recorder.StatusFinished, "", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteThread(ctx, nss[1].run.ThreadID, "bob", "/agent"); err != nil {
		t.Fatalf("DeleteThread(bob's t) = %v", err)
	}
	if _, err := s.Thread(ctx, nss[1].run.ThreadID); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("Thread(bob's t) after delete = %v, want ErrThreadNotFound", err)
	}
	for _, i := range []int{0, 2, 3} {
		k := nss[i].run.ThreadID
		want := recorder.StatusRunning
		if i == 0 {
			want = recorder.StatusFinished
		}
		if r := mustRun(t, s, k, "r1"); r.Status != want {
			t.Errorf("Run(%q, r1) status %s, want %s", k, r.Status, want)
		}
	}
	// The deleted id is free in its namespace again.
	again := nss[1].run
	again.Epoch = recorder.NewEpoch()
	mustCreate(t, s, again)
}

// NamespaceHostileKeys are thread keys shaped like recorder.ThreadKey's but malformed; every
// Store method refuses them with agui.ErrInvalidID, like HostileIDs.
var NamespaceHostileKeys = []string{
	"0123456789abcdef0123456789abcdeF/t", // upper-case tag
	"0123456789abcdef0123456789abcde/t",  // short tag
	"0123456789abcdef0123456789abcdef0/t",
	"0123456789abcdef0123456789abcdef/",    // no id
	"0123456789abcdef0123456789abcdef/a/b", // '/' in the id
	"0123456789abcdef0123456789abcdef/{t}",
	"#index/0123456789abcdef0123456789abcdef",
	"/t",
}
