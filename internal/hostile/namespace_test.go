package hostile

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// Class namespace: every identity has its own thread ids (docs/design.md, "Thread ids"). The
// same ids used by two identities are two threads; whatever another identity does with an id
// gets exactly what an unused id gets; what a client reads names the id, never the store key.
func init() { cases = append(cases, namespaceCases...) }

// sameAnswer checks that the answer to a foreign thread id equals the answer to an unused one:
// the same status and, once the id is replaced, the same body.
func sameAnswer(t *testing.T, what string, foreign, unused reply, foreignID, unusedID string) {
	t.Helper()
	fb := strings.ReplaceAll(string(foreign.body), foreignID, "ID")
	ub := strings.ReplaceAll(string(unused.body), unusedID, "ID")
	if foreign.status != unused.status || fb != ub {
		t.Fatalf("%s: foreign %d %q, unused %d %q", what, foreign.status, trunc(foreign.body), unused.status, trunc(unused.body))
	}
}

// threadList is GET /agui/threads.
type threadList struct {
	Threads []struct {
		ThreadID string `json:"threadId"`
		RunCount int    `json:"runCount"`
	} `json:"threads"`
}

func (e *env) list(t *testing.T, user string) threadList {
	t.Helper()
	r := e.get(t, "/agui/threads?limit=500", e.as(user)...)
	var v threadList
	if r.status != 200 || json.Unmarshal(r.body, &v) != nil {
		t.Fatalf("thread list of %s: %d %q", user, r.status, trunc(r.body))
	}
	return v
}

// listed reports how often thread appears in the list and its run count.
func (v threadList) listed(thread string) (n, runs int) {
	for _, th := range v.Threads {
		if th.ThreadID == thread {
			n, runs = n+1, th.RunCount
		}
	}
	return n, runs
}

// oneRun checks that thread, as user reads it, has exactly one run: run, ended, a root.
func (e *env) oneRun(t *testing.T, thread, run, user string) {
	t.Helper()
	v := e.waitEnded(t, thread, e.as(user)...)
	if len(v.Runs) != 1 || v.Runs[0].RunID != run || v.Runs[0].ParentRunID != "" {
		t.Fatalf("%s's thread %s = %+v, want the one root run %s", user, thread, v.Runs, run)
	}
}

var namespaceCases = []tcase{
	{class: "namespace", name: "same-ids-two-owners", multi: true, run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		for _, u := range []string{"alice", "bob"} {
			e.run(t, th, run, nil, e.as(u)...)
		}
		for _, u := range []string{"alice", "bob"} {
			e.oneRun(t, th, run, u)
			e.readable(t, th, e.as(u)...)
		}
	}},
	{class: "namespace", name: "id-taken-first-by-another", multi: true, run: func(t *testing.T, e *env) {
		// mallory uses the id before alice: alice's first run on it is still a root run of a
		// thread of her own, not a continuation of mallory's.
		th, r1, r2 := e.id("t"), e.id("r"), e.id("r")
		e.run(t, th, r1, nil, e.as("mallory")...)
		e.waitEnded(t, th, e.as("mallory")...)
		e.run(t, th, r2, nil, e.as("alice")...)
		e.oneRun(t, th, r2, "alice")
		e.oneRun(t, th, r1, "mallory")
	}},
	{class: "namespace", name: "concurrent-first-runs-two-owners", multi: true, run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		var wg sync.WaitGroup
		status := make([]int, 2)
		for i, u := range []string{"alice", "bob"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status[i] = e.postRun(t, runBody(th, run, "chat"), e.as(u)...).status
			}()
		}
		wg.Wait()
		if status[0] != 200 || status[1] != 200 {
			t.Fatalf("two identities starting the same ids at once: %v, want both 200", status)
		}
		e.oneRun(t, th, run, "alice")
		e.oneRun(t, th, run, "bob")
	}},
	{class: "namespace", name: "foreign-delete-like-unused", multi: true, run: func(t *testing.T, e *env) {
		th, run, unused := e.id("t"), e.id("r"), e.id("t")
		e.run(t, th, run, nil, e.as("alice")...)
		e.waitEnded(t, th, e.as("alice")...)
		foreign := e.do(t, http.MethodDelete, "/agui/threads/"+th, nil, e.as("mallory")...)
		fresh := e.do(t, http.MethodDelete, "/agui/threads/"+unused, nil, e.as("mallory")...)
		sameAnswer(t, "DELETE", foreign, fresh, th, unused)
		problemOf(t, foreign, 404, "")
		e.oneRun(t, th, run, "alice")
	}},
	{class: "namespace", name: "delete-own-leaves-foreign", multi: true, run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		e.run(t, th, run, nil, e.as("alice")...)
		e.run(t, th, run, nil, e.as("bob")...)
		e.waitEnded(t, th, e.as("bob")...)
		if r := e.do(t, http.MethodDelete, "/agui/threads/"+th, nil, e.as("bob")...); r.status != 204 {
			t.Fatalf("bob deleting his thread: %d %q", r.status, trunc(r.body))
		}
		problemOf(t, e.get(t, "/agui/threads/"+th, e.as("bob")...), 404, "")
		e.oneRun(t, th, run, "alice")
		e.readable(t, th, e.as("alice")...)
	}},
	{class: "namespace", name: "foreign-reads-like-unused", multi: true, run: func(t *testing.T, e *env) {
		// Every read of a foreign id, with or without cursor or follow, is byte for byte the
		// answer for an unused id.
		th, run, unused := e.id("t"), e.id("r"), e.id("t")
		live := events(t, e.run(t, th, run, nil, e.as("alice")...).body)
		e.waitEnded(t, th, e.as("alice")...)
		cursor := []string{"Last-Event-ID", live[1].id}
		for _, c := range []struct {
			path string
			hdr  []string
		}{
			{"", nil}, {"?run=" + run, nil}, {"/runs", nil}, {"/export", nil},
			{"/events", nil}, {"/events?follow=1", nil}, {"/events", cursor}, {"/events?after=" + live[1].id, nil},
			{"/runs/" + run + "/events", nil}, {"/runs/" + run + "/events", cursor},
		} {
			hdr := append(e.as("mallory"), c.hdr...)
			foreign := e.get(t, "/agui/threads/"+th+c.path, hdr...)
			fresh := e.get(t, "/agui/threads/"+unused+c.path, hdr...)
			sameAnswer(t, "GET "+c.path, foreign, fresh, th, unused)
			problemOf(t, foreign, 404, "")
		}
	}},
	{class: "namespace", name: "foreign-resume-repost", multi: true, run: func(t *testing.T, e *env) {
		// Re-POSTing alice's run with her last event id, as another identity, is a new run of
		// that identity's own (what an unused id gets), not a resume of alice's stream.
		th, run := e.id("t"), e.id("r")
		live := events(t, e.run(t, th, run, nil, e.as("alice")...).body)
		e.waitEnded(t, th, e.as("alice")...)
		r := e.postRun(t, runBody(th, run, "chat"), append(e.as("mallory"), "Last-Event-ID", live[1].id)...)
		evs := events(t, r.body)
		if r.status != 200 || len(evs) == 0 || evs[0].typ != "RUN_STARTED" || evs[0].id == live[0].id {
			t.Fatalf("foreign re-POST with Last-Event-ID: %d %v", r.status, types(evs))
		}
		e.oneRun(t, th, run, "alice")
		e.oneRun(t, th, run, "mallory")
	}},
	{class: "namespace", name: "foreign-import-then-owner-runs", multi: true, run: func(t *testing.T, e *env) {
		th, r1, r2 := e.id("t"), e.id("r"), e.id("r")
		e.run(t, th, r1, nil, e.as("mallory")...)
		e.waitEnded(t, th, e.as("mallory")...)
		doc := e.get(t, "/agui/threads/"+th+"/export", e.as("mallory")...).body
		other := e.id("t")
		if r := e.do(t, http.MethodPost, "/agui/threads/"+other+"/import", bytes.NewReader(doc), e.as("mallory")...); r.status != 201 {
			t.Fatalf("mallory's import: %d %q", r.status, trunc(r.body))
		}
		// alice imports into the id mallory imported into, and runs on the id mallory ran on.
		if r := e.do(t, http.MethodPost, "/agui/threads/"+other+"/import", bytes.NewReader(doc), e.as("alice")...); r.status != 201 {
			t.Fatalf("alice's import into an id mallory uses: %d %q, an unused id gets 201", r.status, trunc(r.body))
		}
		e.run(t, th, r2, nil, e.as("alice")...)
		e.oneRun(t, th, r2, "alice")
		e.oneRun(t, th, r1, "mallory")
		// Importing again into an own thread is refused, as before.
		if r := e.do(t, http.MethodPost, "/agui/threads/"+other+"/import", bytes.NewReader(doc), e.as("alice")...); r.status != 409 {
			t.Fatalf("alice's second import into her thread: %d, want 409", r.status)
		}
	}},
	{class: "namespace", name: "thread-list-own-only", multi: true, run: func(t *testing.T, e *env) {
		shared, own := e.id("t"), e.id("t")
		alice, carol := e.id("alice"), e.id("carol") // identities of this case alone
		e.run(t, shared, e.id("r"), nil, e.as(alice)...)
		e.run(t, shared, e.id("r"), nil, e.as(carol)...)
		e.run(t, own, e.id("r"), nil, e.as(carol)...)
		e.waitEnded(t, shared, e.as(carol)...)
		e.waitEnded(t, own, e.as(carol)...)
		a, c := e.list(t, alice), e.list(t, carol)
		if n, runs := a.listed(shared); n != 1 || runs != 1 || len(a.Threads) != 1 {
			t.Fatalf("alice's list %+v, want only %s with one run", a.Threads, shared)
		}
		if n, _ := c.listed(shared); n != 1 || len(c.Threads) != 2 {
			t.Fatalf("carol's list %+v, want %s and %s", c.Threads, shared, own)
		}
	}},
	{class: "namespace", name: "bulk-export-own-only", multi: true, run: func(t *testing.T, e *env) {
		th, dave, erin := e.id("t"), e.id("dave"), e.id("erin")
		e.run(t, th, e.id("r"), nil, e.as(dave)...)
		e.run(t, th, e.id("r"), nil, e.as(erin)...)
		e.waitEnded(t, th, e.as(erin)...)
		e.waitEnded(t, th, e.as(dave)...)
		r := e.get(t, "/agui/export", e.as(dave)...)
		lines := strings.Split(strings.TrimSpace(string(r.body)), "\n")
		if r.status != 200 || len(lines) != 2 || lines[1] != `{"agui-proxy.exportEnd":{"threads":1}}` {
			t.Fatalf("dave's bulk export: %d, %d lines (last %q), want 1 document and the end line", r.status, len(lines), lines[len(lines)-1])
		}
		var doc struct {
			ThreadID string            `json:"threadId"`
			Runs     []json.RawMessage `json:"runs"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &doc); err != nil || doc.ThreadID != th || len(doc.Runs) != 1 {
			t.Fatalf("dave's bulk export: %v %q", err, trunc(r.body))
		}
	}},
	{class: "namespace", name: "answers-name-the-id-not-the-key", multi: true, run: func(t *testing.T, e *env) {
		// The store files the thread under a key; no answer may show it.
		th, run, alice := e.id("t"), e.id("r"), e.id("alice")
		r := e.run(t, th, run, nil, e.as(alice)...)
		key := recorder.ThreadKey(alice, recorder.DefaultRoute, th)
		if got := r.header.Get("X-Agui-Thread-Id"); got != th {
			t.Fatalf("X-Agui-Thread-Id %q, want %q", got, th)
		}
		e.waitEnded(t, th, e.as(alice)...)
		for _, p := range []string{"/agui/threads/" + th, "/agui/threads/" + th + "/runs", "/agui/threads/" + th + "/export",
			"/agui/threads/" + th + "/events", "/agui/threads", "/agui/export"} {
			a := e.get(t, p, e.as(alice)...)
			if a.status != 200 || !strings.Contains(string(a.body), `"threadId":"`+th+`"`) && !strings.Contains(string(a.body), `\"threadId\":\"`+th+`\"`) {
				t.Fatalf("GET %s: %d %q, want the thread id named", p, a.status, trunc(a.body))
			}
			if bytes.Contains(a.body, []byte(key)) || strings.Contains(a.header.Get("Content-Disposition"), key) {
				t.Fatalf("GET %s shows the store key %q: %q", p, key, trunc(a.body))
			}
		}
		if bytes.Contains(r.body, []byte(key)) {
			t.Fatalf("the live stream shows the store key: %q", trunc(r.body))
		}
	}},
	{class: "namespace", name: "hostile-identities-own-threads", multi: true, run: func(t *testing.T, e *env) {
		// Identities holding key syntax ('{', '}', '/', ':', '#index/') or long values each
		// get their own thread of one id, and none reaches another's.
		th, run := e.id("t"), e.id("r")
		users := []string{"a}{b" + th, "x/../y" + th, "ns:" + th, "#index/0123456789abcdef0123456789abcdef", "用户", strings.Repeat("z", 256), "*"}
		for _, u := range users {
			e.run(t, th, run, nil, identityHeader, u)
		}
		for _, u := range users {
			e.oneRun(t, th, run, u)
		}
		if n := len(e.list(t, "*").Threads); n != 1 {
			t.Fatalf("identity * lists %d threads, want its one", n)
		}
	}},
	{class: "namespace", name: "store-keys-per-owner", multi: true, run: func(t *testing.T, e *env) {
		// In the store, alice's thread is under her key; the bare id is unused.
		th, run := e.id("t"), e.id("r")
		e.run(t, th, run, nil, e.as("alice")...)
		e.waitEnded(t, th, e.as("alice")...)
		if _, err := e.store.Thread(t.Context(), th); !errors.Is(err, recorder.ErrThreadNotFound) {
			t.Fatalf("the bare id in the store: %v, want ErrThreadNotFound", err)
		}
		got, err := e.store.Thread(t.Context(), recorder.ThreadKey("alice", recorder.DefaultRoute, th))
		if err != nil || got.Owner != "alice" || got.LatestRunID != run {
			t.Fatalf("alice's key in the store: %+v, %v", got, err)
		}
	}},
	{class: "namespace", name: "single-tenant-key-is-the-id", run: func(t *testing.T, e *env) {
		// Single-tenant on the default route, a thread keeps the key it had before
		// namespaces existed: its id.
		th, run := e.id("t"), e.id("r")
		e.run(t, th, run, nil)
		e.waitEnded(t, th)
		if runs, err := e.store.Runs(t.Context(), th); err != nil || len(runs) != 1 || runs[0].RunID != run {
			t.Fatalf("Runs(%s) in the store = %+v, %v", th, runs, err)
		}
	}},
}
