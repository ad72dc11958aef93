package attach_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// bothStores runs f on the memory store and on a private redis-server.
func bothStores(t *testing.T, f func(t *testing.T, store recorder.Store)) {
	t.Run("memory", func(t *testing.T) {
		s := recorder.NewMemoryStore(recorder.MemoryConfig{})
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		s, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{URL: srv.URL(), Prefix: "hist"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
}

func as(user string) http.Header { return http.Header{"X-User": {user}} }

// runTo posts a run and reads it to its end.
func (e *env) runTo(t *testing.T, user, thread, run, scenario string) {
	t.Helper()
	res := e.post(t, t.Context(), runtest.RunBody(thread, run, scenario, ""), as(user))
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("run %s/%s as %s: %d %s", thread, run, user, res.StatusCode, b)
	}
	io.Copy(io.Discard, res.Body)
}

// do makes a request without a body (see send).
func (e *env) do(t *testing.T, method, path string, hdr http.Header) (int, []byte) {
	t.Helper()
	return e.send(t, method, path, nil, hdr)
}

func (e *env) list(t *testing.T, user, query string) attach.ThreadListView {
	t.Helper()
	code, b := e.do(t, http.MethodGet, "/agui/threads"+query, as(user))
	if code != http.StatusOK {
		t.Fatalf("GET threads%s as %s: %d %s", query, user, code, b)
	}
	var v attach.ThreadListView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func listIDs(v attach.ThreadListView) string {
	var ids []string
	for _, t := range v.Threads {
		ids = append(ids, t.ThreadID)
	}
	return strings.Join(ids, " ")
}

// nextMilli returns once the wall clock's millisecond changed: a thread's activity is
// stored in milliseconds, so two runs started within one would tie (and order by thread id).
func nextMilli() {
	for ms := time.Now().UnixMilli(); time.Now().UnixMilli() == ms; {
		time.Sleep(50 * time.Microsecond)
	}
}

func TestThreadListAndDelete(t *testing.T) {
	bothStores(t, func(t *testing.T, store recorder.Store) {
		e := newEnv(t, proxy.Config{Store: store, IdentityHeader: "X-User"})
		e.runTo(t, "alice", "a1", "r1", "chat")
		e.runTo(t, "alice", "a2", "r1", "tools")
		nextMilli()                             // (activity is kept in ms: a tie would order by id)
		e.runTo(t, "alice", "a1", "r2", "chat") // a1 becomes the most recently active
		e.runTo(t, "bob", "b1", "r1", "chat")

		v := e.list(t, "alice", "")
		if got := listIDs(v); got != "a1 a2" || v.NextCursor != "" {
			t.Fatalf("alice's threads = %q (cursor %q), want \"a1 a2\"", got, v.NextCursor)
		}
		a1 := v.Threads[0]
		if a1.RunCount != 2 || a1.LatestRunID != "r2" || a1.LatestStatus != "finished" || a1.Title != "hello" || a1.CreatedAt.IsZero() {
			t.Errorf("a1 summary = %+v, want 2 runs, latest r2 finished, title \"hello\"", a1)
		}
		page := e.list(t, "alice", "?limit=1")
		next := e.list(t, "alice", "?limit=1&cursor="+url.QueryEscape(page.NextCursor))
		if listIDs(page)+" "+listIDs(next) != "a1 a2" || next.NextCursor != "" {
			t.Errorf("pages of 1 = %q then %q (cursor %q), want a1 then a2", listIDs(page), listIDs(next), next.NextCursor)
		}
		if got := listIDs(e.list(t, "bob", "")); got != "b1" {
			t.Errorf("bob's threads = %q, want b1", got)
		}
		if got := listIDs(e.list(t, "mallory", "")); got != "" {
			t.Errorf("mallory's threads = %q, want none", got)
		}

		// Refusals: bad queries 400, anonymous 401, foreign and unknown threads 404 alike.
		for _, q := range []string{"?limit=0", "?limit=501", "?limit=x", "?cursor=%21%21", "?since=yesterday", "?until=2026-13-01T00:00:00Z"} {
			if code, b := e.do(t, http.MethodGet, "/agui/threads"+q, as("alice")); code != http.StatusBadRequest || !strings.Contains(string(b), "InvalidQuery") {
				t.Errorf("GET threads%s = %d %s, want 400 InvalidQuery", q, code, b)
			}
		}
		if code, _ := e.do(t, http.MethodGet, "/agui/threads", nil); code != http.StatusUnauthorized {
			t.Errorf("anonymous GET threads = %d, want 401", code)
		}
		foreign, fb := e.do(t, http.MethodDelete, "/agui/threads/a1", as("bob"))
		unknown, ub := e.do(t, http.MethodDelete, "/agui/threads/nope", as("bob"))
		if foreign != http.StatusNotFound || unknown != http.StatusNotFound || string(fb) != strings.Replace(string(ub), "nope", "a1", -1) && !strings.Contains(string(fb), "ThreadNotFound") {
			t.Errorf("DELETE a foreign thread = %d %s, an unknown one = %d %s: want the same 404", foreign, fb, unknown, ub)
		}
		if code, _ := e.do(t, http.MethodDelete, "/agui/threads/a%7Bb%7D", as("alice")); code != http.StatusBadRequest {
			t.Errorf("DELETE a hostile id = %d, want 400", code)
		}

		// Delete, then the id is free again and starts an empty history.
		if code, b := e.do(t, http.MethodDelete, "/agui/threads/a1", as("alice")); code != http.StatusNoContent {
			t.Fatalf("DELETE a1 = %d %s, want 204", code, b)
		}
		if code, _ := e.do(t, http.MethodGet, "/agui/threads/a1", as("alice")); code != http.StatusNotFound {
			t.Errorf("GET a1 after delete = %d, want 404", code)
		}
		if got := listIDs(e.list(t, "alice", "")); got != "a2" {
			t.Errorf("alice's threads after delete = %q, want a2", got)
		}
		e.runTo(t, "bob", "a1", "r1", "chat")
		if got := listIDs(e.list(t, "bob", "")); got != "a1 b1" {
			t.Errorf("bob's threads after re-using a1 = %q, want \"a1 b1\"", got)
		}
	})
}

func TestDeleteRunningThreadIsRefused(t *testing.T) {
	bothStores(t, func(t *testing.T, store recorder.Store) {
		e := newEnv(t, proxy.Config{Store: store})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		res := e.post(t, ctx, runtest.RunBody("t1", "r1", "slow", `,"events":400,"intervalMs":20`), nil)
		defer res.Body.Close()
		br := bufio.NewReader(res.Body)
		if _, err := br.ReadString('\n'); err != nil { // the run is streaming
			t.Fatal(err)
		}
		if code, b := e.do(t, http.MethodDelete, "/agui/threads/t1", nil); code != http.StatusConflict || !strings.Contains(string(b), "ThreadBusy") {
			t.Errorf("DELETE a thread with a running run = %d %s, want 409 ThreadBusy", code, b)
		}
		if code, b := e.do(t, http.MethodPost, "/agui/threads/t1/runs/r1/stop", nil); code >= 300 {
			t.Fatalf("stop = %d %s", code, b)
		}
		runtest.WaitRunEnded(t, store, "t1", "r1")
		if code, b := e.do(t, http.MethodDelete, "/agui/threads/t1", nil); code != http.StatusNoContent {
			t.Errorf("DELETE after stop = %d %s, want 204", code, b)
		}
	})
}

func TestBulkExport(t *testing.T) {
	bothStores(t, func(t *testing.T, store recorder.Store) {
		e := newEnv(t, proxy.Config{Store: store, IdentityHeader: "X-User"})
		const n = 7
		for i := 0; i < n; i++ {
			e.runTo(t, "alice", fmt.Sprintf("t%d", i), "r1", "chat")
		}
		e.runTo(t, "bob", "bobs", "r1", "chat")
		code, b := e.do(t, http.MethodGet, "/agui/export", as("alice"))
		if code != http.StatusOK {
			t.Fatalf("GET export = %d %s", code, b)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(lines) != n+1 {
			t.Fatalf("bulk export has %d lines, want %d and the end line:\n%s", len(lines), n, b)
		}
		// The last line says the export is whole, and how many documents came before it.
		if got, ok := attach.ParseExportEnd([]byte(lines[n])); !ok || got != n {
			t.Fatalf("the export's last line %q: end %v, %d threads; want the end line of %d", lines[n], ok, got, n)
		}
		lines = lines[:n]
		var docs []attach.ExportDoc
		for _, l := range lines {
			var d attach.ExportDoc
			if err := json.Unmarshal([]byte(l), &d); err != nil {
				t.Fatal(err)
			}
			if d.FormatVersion != attach.ExportFormatVersion || len(d.Runs) != 1 || len(d.Runs[0].EventList) == 0 || d.Cursor == "" {
				t.Errorf("line for %s = %d runs, version %d, cursor %q", d.ThreadID, len(d.Runs), d.FormatVersion, d.Cursor)
			}
			if d.ThreadID == "bobs" {
				t.Errorf("alice's export holds bob's thread")
			}
			docs = append(docs, d)
		}
		// Resuming after the third thread gives exactly the rest.
		code, b = e.do(t, http.MethodGet, "/agui/export?cursor="+url.QueryEscape(docs[2].Cursor), as("alice"))
		rest := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if end, ok := attach.ParseExportEnd([]byte(rest[len(rest)-1])); !ok || end != n-3 {
			t.Errorf("the continued export's last line %q, want the end line of %d", rest[len(rest)-1], n-3)
		}
		rest = rest[:len(rest)-1]
		if code != http.StatusOK || len(rest) != n-3 || !strings.Contains(rest[0], `"threadId":"`+docs[3].ThreadID+`"`) {
			t.Errorf("export after the 3rd thread = %d, %d lines, want %d starting with %s", code, len(rest), n-3, docs[3].ThreadID)
		}
		// Each line imports as a thread again.
		if code, b := e.doBody(t, http.MethodPost, "/agui/threads/copy/import", lines[0], as("alice")); code != http.StatusCreated {
			t.Errorf("import of a bulk export line = %d %s, want 201", code, b)
		}
		if code, _ := e.do(t, http.MethodGet, "/agui/export?since=bad", as("alice")); code != http.StatusBadRequest {
			t.Errorf("export?since=bad = %d, want 400", code)
		}
	})
}

// doBody is do with a JSON body.
func (e *env) doBody(t *testing.T, method, path, body string, hdr http.Header) (int, []byte) {
	t.Helper()
	return e.send(t, method, path, strings.NewReader(body), hdr)
}

// send makes one request to the proxy (a JSON body when body is not nil) and returns the
// status and the whole answer.
func (e *env) send(t *testing.T, method, path string, body io.Reader, hdr http.Header) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, e.px.URL+path, body)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// TestBulkExportOutlivesStoreTimeout: the bulk export is a stream. A client that reads it for
// longer than StoreTimeout gets every thread (each store read is bounded, not the stream).
// Redis, whose reads honour their context.
func TestBulkExportOutlivesStoreTimeout(t *testing.T) {
	agent := runtest.StartAgent(t)
	u, _ := url.Parse(agent.URL)
	store, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{URL: redistest.Start(t).URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	const storeTimeout = 100 * time.Millisecond
	h, err := proxy.New(proxy.Config{Upstream: u, Store: store, Route: "r", StoreTimeout: storeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	px := httptest.NewServer(h)
	defer func() { px.Close(); h.Shutdown(context.Background()) }()
	res := runtest.PostRun(t, t.Context(), px.URL+"/", runtest.RunBody("seed", "r1", "chat"), nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	runtest.WaitRunEnded(t, store, recorder.ThreadKey("", "r", "seed"), "r1")
	doc, err := attach.ExportThread(t.Context(), store, recorder.ThreadKey("", "r", "seed"))
	if err != nil {
		t.Fatal(err)
	}
	const threads = 400 // about 2.5 MB of NDJSON: more than the socket buffers hold
	for i := 1; i < threads; i++ {
		if _, err := attach.ImportThread(t.Context(), store, attach.ImportTarget{ThreadID: fmt.Sprintf("x%03d", i), Route: "r"}, doc); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	res, err = http.Get(px.URL + "/agui/export")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	lines := 0
	rd := bufio.NewReaderSize(res.Body, 1<<20)
	for {
		line, err := rd.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			lines++
			if lines%40 == 0 {
				time.Sleep(storeTimeout / 4) // a slow reader: the server waits on its writes
			}
		}
		if err != nil {
			break
		}
	}
	if took := time.Since(start); took < storeTimeout {
		t.Fatalf("the export took %v, less than the store timeout %v: the test proves nothing", took, storeTimeout)
	}
	if lines != threads+1 {
		t.Fatalf("a bulk export read for longer than StoreTimeout has %d lines, want %d and the end line", lines, threads)
	}
}
