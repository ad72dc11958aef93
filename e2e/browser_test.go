package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/sse"
)

// chromiumPath is Debian's Chromium: the check never downloads a browser.
const chromiumPath = "/usr/bin/chromium"

// requireBrowser fails (never skips) when node, the pinned playwright-core or Chromium is
// missing, with the command that installs it.
func requireBrowser(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH (%v): install Node.js 20+ (apt-get install -y nodejs npm)", err)
	}
	if _, err := os.Stat(filepath.Join("browser", "node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatalf("e2e/browser/node_modules lacks playwright-core (%v): run `cd e2e/browser && npm ci`", err)
	}
	if _, err := exec.LookPath(chromiumPath); err != nil {
		t.Fatalf("%s is missing (%v): run `apt-get install -y chromium` (Debian's package; no browser download)", chromiumPath, err)
	}
}

// sseEvent is one event of a run's stream as the POST answered it.
type sseEvent struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	data []byte
}

// message is what the page renders for one AG-UI message.
type message struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Content string `json:"content"`
}

// postRun starts a run through the proxy and returns every event of its stream.
func postRun(t testing.TB, base, body string) []sseEvent {
	t.Helper()
	res := runtest.PostRun(t, t.Context(), base+"/", body, nil)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(res.Body)
		t.Fatalf("POST run = %d %s, want 200", res.StatusCode, msg)
	}
	var out []sseEvent
	rd := sse.NewReader(res.Body, sse.Limits{})
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading the run stream: %v", err)
		}
		if !f.HasData {
			continue
		}
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(f.Data, &ev); err != nil {
			t.Fatalf("run stream event %q: %v", f.Data, err)
		}
		out = append(out, sseEvent{Type: ev.Type, ID: f.ID, data: bytes.Clone(f.Data)})
	}
}

// waitRunEnded polls the thread's history until run runID has left the running status: the
// proxy records a run's end just after the client's stream ends, and a new run on a thread whose
// latest run is still running is refused (ThreadBusy).
func waitRunEnded(t testing.TB, base, threadID, runID string) {
	t.Helper()
	for range 1000 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/agui/threads/"+threadID+"/runs", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET runs: %v", err)
		}
		var runs struct {
			Runs []struct{ RunID, Status string }
		}
		err = json.NewDecoder(res.Body).Decode(&runs)
		res.Body.Close()
		if err != nil {
			t.Fatalf("GET runs: %v", err)
		}
		for _, r := range runs.Runs {
			if r.RunID == runID && r.Status != "running" {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("run %s of thread %s still running after 1000 polls", runID, threadID)
}

// threadMessages returns the thread's messages at its head from the history endpoint.
func threadMessages(t testing.TB, base, threadID string) []message {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/agui/threads/"+threadID, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET thread: %v", err)
	}
	defer res.Body.Close()
	var th struct{ Messages []message }
	if err := json.NewDecoder(res.Body).Decode(&th); err != nil {
		t.Fatalf("GET thread %s: %v", threadID, err)
	}
	return th.Messages
}

// assistantMessages folds a run's TEXT_MESSAGE_* events into messages, in start order.
func assistantMessages(t testing.TB, events []sseEvent) []message {
	t.Helper()
	var out []message
	for _, e := range events {
		var ev struct {
			MessageID string `json:"messageId"`
			Role      string `json:"role"`
			Delta     string `json:"delta"`
		}
		if err := json.Unmarshal(e.data, &ev); err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case "TEXT_MESSAGE_START":
			out = append(out, message{ID: ev.MessageID, Role: ev.Role})
		case "TEXT_MESSAGE_CONTENT":
			i := slices.IndexFunc(out, func(m message) bool { return m.ID == ev.MessageID })
			if i < 0 {
				t.Fatalf("TEXT_MESSAGE_CONTENT for unstarted message %q", ev.MessageID)
			}
			out[i].Content += ev.Delta
		}
	}
	return out
}

// attachLog records the cursor of every thread attach request the browser makes.
type attachLog struct {
	mu   sync.Mutex
	reqs []attachRequest
}

type attachRequest struct{ lastEventID, after string }

func (l *attachLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/events") {
			l.mu.Lock()
			l.reqs = append(l.reqs, attachRequest{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")})
			l.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (l *attachLog) requests() []attachRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

// TestBrowserEventSource proves the GET/Last-Event-ID path in a real browser: headless
// Chromium loads a page that attaches to a two-run thread with EventSource and renders the
// resumed conversation; when the proxy ends the finished thread's stream the browser
// reconnects with Last-Event-ID on its own; and an EventSource opened with ?after=<id>
// receives exactly the events after that id.
func TestBrowserEventSource(t *testing.T) {
	requireBrowser(t)
	page, err := os.ReadFile(filepath.Join("browser", "page.html"))
	if err != nil {
		t.Fatal(err)
	}

	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	t.Cleanup(agent.Close)
	u, _ := url.Parse(agent.URL + "/")
	h, err := proxy.New(proxy.Config{Upstream: u})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	var log attachLog
	// One origin for the page and the proxy, so EventSource needs no CORS: /page is ours,
	// everything else is the proxy's.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
	mux.Handle("/", log.wrap(h))
	srv := runtest.ServeLikeCmd(t, mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	})

	const thread = "browser-thread"
	run1 := postRun(t, srv.URL, `{"threadId":"`+thread+`","runId":"r1","messages":[{"id":"u1","role":"user","content":"chat"}]}`)
	a1 := assistantMessages(t, run1)
	if len(a1) != 1 || a1[0].Content == "" {
		t.Fatalf("run r1 (chat) assistant messages = %+v, want one with text", a1)
	}
	waitRunEnded(t, srv.URL, thread, "r1")
	history, _ := json.Marshal([]message{{ID: "u1", Role: "user", Content: "chat"}, a1[0], {ID: "u2", Role: "user", Content: "unicode"}})
	run2 := postRun(t, srv.URL, `{"threadId":"`+thread+`","runId":"r2","messages":`+string(history)+`}`)
	a2 := assistantMessages(t, run2)
	if len(a2) != 1 || a2[0].Content == "" {
		t.Fatalf("run r2 (unicode) assistant messages = %+v, want one with text", a2)
	}
	waitRunEnded(t, srv.URL, thread, "r2")
	// The expected text comes from the history endpoint: the unicode scenario splits an emoji
	// between two deltas as UTF-16 surrogate halves, which only a JavaScript string (the
	// browser, the official client) joins back; Go's JSON decoder turns each half into U+FFFD.
	want := threadMessages(t, srv.URL, thread)
	wantShape := []message{{ID: "u1", Role: "user"}, {ID: a1[0].ID, Role: "assistant"}, {ID: "u2", Role: "user"}, {ID: a2[0].ID, Role: "assistant"}}
	var shape []message
	for _, m := range want {
		shape = append(shape, message{ID: m.ID, Role: m.Role})
	}
	if !slices.Equal(shape, wantShape) || want[0].Content != "chat" || want[1].Content != a1[0].Content || want[3].Content == "" {
		t.Fatalf("history of %s = %+v, want messages %+v with r1's text %q", thread, want, wantShape, a1[0].Content)
	}

	// Resume from the third event of run r2: the page must get exactly the rest of r2.
	const cut = 2
	if len(run2) < cut+2 || run2[cut].ID == "" {
		t.Fatalf("run r2 events = %+v, want more than %d, all with ids", run2, cut+1)
	}
	after := run2[cut].ID
	later := run2[cut+1:]
	lastID := run2[len(run2)-1].ID

	wantMessages, _ := json.Marshal(want)
	wantLater, _ := json.Marshal(later)
	shot := filepath.Join(t.TempDir(), "page.png")
	cmd := exec.CommandContext(t.Context(), "node", "browser/check.mjs",
		"--page", srv.URL+"/page?thread="+thread,
		"--messages", string(wantMessages),
		"--after", after,
		"--later", string(wantLater),
		"--screenshot", shot,
		"--chromium", chromiumPath)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("check.mjs = %v\nstdout: %s\nstderr: %s\nattach requests: %+v", err, stdout.String(), stderr.String(), log.requests())
	}
	var seen struct {
		Rendered []struct{ Role, Text string }
		Later    []sseEvent
	}
	if err := json.Unmarshal(stdout.Bytes(), &seen); err != nil {
		t.Fatalf("check.mjs output %q: %v", stdout.String(), err)
	}
	if len(seen.Rendered) != len(want) {
		t.Errorf("browser rendered %d messages, want %d: %+v", len(seen.Rendered), len(want), seen.Rendered)
	}
	if got, wantIDs := ids(seen.Later), ids(later); !slices.Equal(got, wantIDs) {
		t.Errorf("browser events after %s = %q, want %q", after, got, wantIDs)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Errorf("screenshot %s: %v, want a PNG", shot, err)
	}

	// What the browser asked for: a plain attach, then its own reconnect carrying the id of
	// the last event it had, then the ?after= attach.
	reqs := log.requests()
	if len(reqs) < 3 {
		t.Fatalf("attach requests = %+v, want at least 3", reqs)
	}
	if reqs[0] != (attachRequest{}) {
		t.Errorf("first attach request = %+v, want no cursor", reqs[0])
	}
	if reqs[1] != (attachRequest{lastEventID: lastID}) {
		t.Errorf("browser reconnect = %+v, want Last-Event-ID %q (last event of the thread)", reqs[1], lastID)
	}
	if !slices.Contains(reqs, attachRequest{after: after}) {
		t.Errorf("attach requests = %+v, want one with ?after=%s", reqs, after)
	}
}

func ids(events []sseEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.ID)
	}
	return out
}
