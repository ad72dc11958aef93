package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// countingUpstream counts the requests that reached it and answers with a short valid run.
func countingUpstream(t *testing.T) (*atomic.Int64, string) {
	var n atomic.Int64
	s := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n")
	}))
	return &n, s.URL
}

// TestBadRunInput checks that malformed, ambiguous or oversized run requests get a problem and
// never reach the agent (docs/design.md B1-B6).
func TestBadRunInput(t *testing.T) {
	calls, upstream := countingUpstream(t)
	_, px := startProxy(t, upstream, Config{MaxBodyBytes: 1 << 10})
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"not json", `hello`, 400, CodeInvalidRunInput},
		{"truncated", `{"threadId":"t","runId":`, 400, CodeInvalidRunInput},
		{"case variant key", `{"threadId":"victim","THREADID":"mine","runId":"r","messages":[]}`, 400, CodeInvalidRunInput},
		{"snake variant", `{"threadId":"a","thread_id":"b","runId":"r","messages":[]}`, 400, CodeInvalidRunInput},
		{"duplicate runId", `{"threadId":"t","runId":"a","runId":"b","messages":[]}`, 400, CodeInvalidRunInput},
		{"newline in id", `{"threadId":"a\nb","runId":"r","messages":[]}`, 400, CodeInvalidRunInput},
		{"brace in id", `{"threadId":"{t}","runId":"r","messages":[]}`, 400, CodeInvalidRunInput},
		{"star in id", `{"threadId":"t*","runId":"r","messages":[]}`, 400, CodeInvalidRunInput},
		{"long id", `{"threadId":"` + strings.Repeat("x", 900) + `","runId":"r"}`, 400, CodeInvalidRunInput},
		{"too large", `{"threadId":"t","runId":"r","state":"` + strings.Repeat("x", 2000) + `"}`, 413, CodeBodyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runtest.PostRun(t, t.Context(), px.URL, tt.body, nil)
			p := runtest.DecodeProblem(t, res)
			if res.StatusCode != tt.status || p.Code != tt.code {
				t.Errorf("POST %.40q = %d %s, want %d %s", tt.body, res.StatusCode, p.Code, tt.status, tt.code)
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the agent was contacted %d times by refused requests", n)
	}
}

// TestRunAlreadyStarted checks that a run id is used once (Soliplex "Single Execution").
func TestRunAlreadyStarted(t *testing.T) {
	calls, upstream := countingUpstream(t)
	h, px := startProxy(t, upstream, Config{})
	body := `{"threadId":"t","runId":"r","messages":[]}`
	res := runtest.PostRun(t, t.Context(), px.URL, body, nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	runtest.WaitRunEnded(t, h.Store(), "t", "r")
	res = runtest.PostRun(t, t.Context(), px.URL, body, nil)
	if p := runtest.DecodeProblem(t, res); res.StatusCode != http.StatusConflict || p.Code != CodeRunAlreadyStarted {
		t.Errorf("second POST = %d %s, want 409 %s", res.StatusCode, p.Code, CodeRunAlreadyStarted)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("agent called %d times, want 1", n)
	}
}

// TestRoutesHaveTheirOwnThreads checks that each route has its own namespace of thread ids: a
// thread id used through one route is unused through another, and the two threads stay apart.
func TestRoutesHaveTheirOwnThreads(t *testing.T) {
	_, upstream := countingUpstream(t)
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	ha, pa := startProxy(t, upstream, Config{Store: store, Route: "room-a"})
	hb, pb := startProxy(t, upstream, Config{Store: store, Route: "room-b"})
	res := runtest.PostRun(t, t.Context(), pa.URL, `{"threadId":"t","runId":"r1","messages":[]}`, nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	runtest.WaitRunEnded(t, ha.Store(), recorder.ThreadKey("", "room-a", "t"), "r1")
	res = runtest.PostRun(t, t.Context(), pb.URL, `{"threadId":"t","runId":"r1","messages":[]}`, nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST of the same ids through another route = %d, want 200 (a thread of its own)", res.StatusCode)
	}
	runtest.WaitRunEnded(t, hb.Store(), recorder.ThreadKey("", "room-b", "t"), "r1")
	for _, route := range []string{"room-a", "room-b"} {
		if runs, err := store.Runs(t.Context(), recorder.ThreadKey("", route, "t")); err != nil || len(runs) != 1 {
			t.Errorf("thread t of %s = %d runs, %v; want 1", route, len(runs), err)
		}
	}
}

// TestIdentity checks thread ownership by the trusted identity header and its hygiene
// (docs/design.md B8, B9; the Caddy CVE-2026-30851 class).
func TestIdentity(t *testing.T) {
	var seen atomic.Value
	upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Clone())
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n")
	}))
	h, px := startProxy(t, upstream.URL, Config{IdentityHeader: "X-Agui-User"})
	run := func(runID string, hdr http.Header) *http.Response {
		return runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"owned","runId":"`+runID+`","messages":[]}`, hdr)
	}
	res := run("r1", http.Header{"X-Agui-User": {"alice"}, "X_agui_user": {"mallory"}})
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("owner's run = %d", res.StatusCode)
	}
	hdr := seen.Load().(http.Header)
	if hdr.Get("X-Agui-User") != "alice" || len(hdr["X_agui_user"]) != 0 {
		t.Errorf("upstream saw identity headers %v, want only X-Agui-User: alice", hdr)
	}
	runtest.WaitRunEnded(t, h.Store(), recorder.ThreadKey("alice", DefaultRoute, "owned"), "r1")

	tests := []struct {
		name   string
		hdr    http.Header
		status int
		code   string
	}{
		{"look-alike only", http.Header{"X_agui_user": {"alice"}}, 401, CodeIdentityRequired},
		{"anonymous", nil, 401, CodeIdentityRequired},
		{"duplicated", http.Header{"X-Agui-User": {"alice", "bob"}}, 400, CodeInvalidIdentity},
	}
	// Another identity using the same thread id gets a thread of its own, as for an unused id.
	res = run("r1", http.Header{"X-Agui-User": {"bob"}})
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("another identity's run on the same ids = %d, want 200", res.StatusCode)
	}
	runtest.WaitRunEnded(t, h.Store(), recorder.ThreadKey("bob", DefaultRoute, "owned"), "r1")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run("x"+string(rune('a'+i)), tt.hdr)
			if p := runtest.DecodeProblem(t, res); res.StatusCode != tt.status || p.Code != tt.code {
				t.Errorf("= %d %s, want %d %s", res.StatusCode, p.Code, tt.status, tt.code)
			}
		})
	}
}

// TestUpstreamFailures checks the answers before a stream starts, and that a failed run does
// not consume its run id (docs/design.md F6, F8, F9).
func TestUpstreamFailures(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		h, px := startProxy(t, deadUpstreamAddr(t), Config{})
		res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t","runId":"r","messages":[]}`, nil)
		if p := runtest.DecodeProblem(t, res); res.StatusCode != http.StatusBadGateway || p.Code != CodeUpstreamUnavailable {
			t.Errorf("= %d %s, want 502 %s", res.StatusCode, p.Code, CodeUpstreamUnavailable)
		}
		if _, err := h.Store().Run(context.Background(), "t", "r"); !errors.Is(err, recorder.ErrRunNotFound) && !errors.Is(err, recorder.ErrThreadNotFound) {
			t.Errorf("run id kept after a refused upstream: %v", err)
		}
	})
	t.Run("header timeout", func(t *testing.T) {
		release := make(chan struct{})
		slow := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer close(release)
		_, px := startProxy(t, slow.URL, Config{UpstreamHeaderTimeout: 50 * time.Millisecond})
		res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t","runId":"r","messages":[]}`, nil)
		if p := runtest.DecodeProblem(t, res); res.StatusCode != http.StatusGatewayTimeout || p.Code != CodeUpstreamTimeout {
			t.Errorf("= %d %s, want 504 %s", res.StatusCode, p.Code, CodeUpstreamTimeout)
		}
	})
	t.Run("not an event stream", func(t *testing.T) {
		calls := 0
		up := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls++
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"no"}`)
		}))
		_, px := startProxy(t, up.URL, Config{})
		for range 2 { // the run id is not consumed: the same request passes through again
			res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t","runId":"r","messages":[]}`, nil)
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized || string(b) != `{"error":"no"}` {
				t.Errorf("= %d %q, want the agent's 401 untouched", res.StatusCode, b)
			}
		}
		if calls != 2 {
			t.Errorf("agent called %d times, want 2", calls)
		}
	})
}

// TestUpstreamBreaks checks that a stream that breaks mid-frame ends cleanly with a RUN_ERROR,
// without the partial frame, and is recorded as the client saw it (docs/design.md F3).
func TestUpstreamBreaks(t *testing.T) {
	up := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\ndata: {\"type\":\"TEXT_MESS")
		http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	h, px := startProxy(t, up.URL, Config{})
	res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t","runId":"r","messages":[]}`, nil)
	frames, err := readFrames(t, res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("client stream: %v", err)
	}
	got := dataFrames(frames)
	if len(got) != 3 || got[2].eventType() != agui.RunError || !bytes.Contains(got[2].data, []byte(CodeUpstreamDisconnected)) {
		t.Fatalf("client saw %d events, last %s; want RUN_STARTED, TEXT_MESSAGE_START, RUN_ERROR %s", len(got), got[len(got)-1].data, CodeUpstreamDisconnected)
	}
	run := runtest.WaitRunEnded(t, h.Store(), "t", "r")
	stored := storedEvents(t, h.Store(), "t", "r")
	if run.Status != recorder.StatusError || len(stored) != 3 || !bytes.Equal(stored[2].Frame, got[2].raw) {
		t.Errorf("run %+v, %d stored events; want error with the 3 the client saw", run, len(stored))
	}
}

// TestSynthesizedRunStarted checks that a run whose agent never sends RUN_STARTED still starts
// with one, carrying the lineage and input.
func TestSynthesizedRunStarted(t *testing.T) {
	up := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": hello\n\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n")
	}))
	_, px := startProxy(t, up.URL, Config{})
	res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"hi"}]}`, nil)
	frames, _ := readFrames(t, res.Body)
	res.Body.Close()
	if len(frames) == 0 || frames[0].hasData || string(frames[0].raw) != ": hello\n\n" {
		t.Errorf("comment frame not forwarded first: %d frames", len(frames))
	}
	got := dataFrames(frames)
	want := `{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"hi"}]}}`
	if len(got) != 4 || string(got[0].data) != want {
		t.Fatalf("events %d, first %s; want 4 starting with %s", len(got), got[0].data, want)
	}
}

// TestForwardedHeaders checks header hygiene on the way to the agent: a client's
// X-Forwarded-For is replaced, not trusted (B14); naming the identity header in Connection
// cannot make the proxy drop it (B13); Accept-Encoding is not forwarded on runs (B16).
func TestForwardedHeaders(t *testing.T) {
	var seen atomic.Value
	upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Clone())
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n")
	}))
	_, px := startProxy(t, upstream.URL, Config{IdentityHeader: "X-Agui-User"})
	res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t","runId":"r","messages":[]}`, http.Header{
		"X-Forwarded-For": {"1.2.3.4"},
		"Connection":      {"X-Agui-User"},
		"X-Agui-User":     {"alice"},
		"Accept-Encoding": {"gzip"},
	})
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	hdr := seen.Load().(http.Header)
	if got := hdr.Get("X-Forwarded-For"); got != "127.0.0.1" {
		t.Errorf("upstream X-Forwarded-For = %q, want the peer address only", got)
	}
	if got := hdr.Get("X-Agui-User"); got != "alice" {
		t.Errorf("upstream identity = %q, want alice despite Connection: X-Agui-User", got)
	}
	if got := hdr.Get("Accept-Encoding"); got != "" && got != "gzip" {
		t.Errorf("upstream Accept-Encoding = %q", got)
	}
	if res.Header.Get("Content-Encoding") != "" {
		t.Errorf("client got Content-Encoding %q on an event stream", res.Header.Get("Content-Encoding"))
	}
}
