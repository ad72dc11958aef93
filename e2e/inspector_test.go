package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/proxy"
)

// inspectorShots is where TestInspectorInBrowser writes its screenshots; the ones in docs/ are
// made with: go test ./e2e -run TestInspectorInBrowser -inspector.shots=../docs
var inspectorShots = flag.String("inspector.shots", "", "directory for the inspector screenshots (default: a temporary one)")

// getJSON decodes the JSON answer of GET base+path into v.
func getJSON(t testing.TB, base, path string, v any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s = %d %s", path, res.StatusCode, b)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// TestInspectorInBrowser serves the inspector page from a real proxy and has headless Chromium
// check what it shows for a thread with a branch (the runs tree, messages and state as of each
// run, each run's events in order, export) and for a live run (events arriving, Stop), with a
// screenshot of each view.
func TestInspectorInBrowser(t *testing.T) {
	requireBrowser(t)
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	t.Cleanup(agent.Close)
	u, _ := url.Parse(agent.URL + "/")
	h, err := proxy.New(proxy.Config{Upstream: u, Inspector: true})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	})

	// A thread with a branch: r2 continues r1, r3 branches from r1 (parentRunId), r4 continues
	// r2 and is interrupted (the agent's stream ends without RUN_FINISHED).
	const thread = "inspect-branched"
	a1 := assistantMessages(t, postRun(t, srv.URL, `{"threadId":"`+thread+`","runId":"r1","messages":[{"id":"u1","role":"user","content":"chat"}]}`))
	waitRunEnded(t, srv.URL, thread, "r1")
	hist, _ := json.Marshal([]message{{ID: "u1", Role: "user", Content: "chat"}, a1[0]})
	h1 := strings.TrimSuffix(string(hist), "]")
	postRun(t, srv.URL, `{"threadId":"`+thread+`","runId":"r2","messages":`+h1+`,{"id":"u2","role":"user","content":"tools"}]}`)
	waitRunEnded(t, srv.URL, thread, "r2")
	postRun(t, srv.URL, `{"threadId":"`+thread+`","runId":"r3","parentRunId":"r1","messages":`+h1+`,{"id":"u3","role":"user","content":"state"}]}`)
	waitRunEnded(t, srv.URL, thread, "r3")
	postRun(t, srv.URL, `{"threadId":"`+thread+`","runId":"r4","parentRunId":"r2","messages":[{"id":"u4","role":"user","content":"noend"}]}`)
	waitRunEnded(t, srv.URL, thread, "r4")

	var tree struct {
		HeadRunID string
		Runs      []struct {
			RunID, ParentRunID, Status, Detail string
			Events                             int
		}
	}
	getJSON(t, srv.URL, "/agui/threads/"+thread+"/runs", &tree)
	type runWant struct {
		Parent   string            `json:"parent"`
		Status   string            `json:"status"`
		Events   int               `json:"events"`
		Messages []json.RawMessage `json:"messages"`
		State    json.RawMessage   `json:"state"`
	}
	expect := struct {
		Head string             `json:"head"`
		Shot string             `json:"shot"`
		Runs map[string]runWant `json:"runs"`
	}{Head: tree.HeadRunID, Shot: "r3", Runs: map[string]runWant{}}
	for _, r := range tree.Runs {
		var snap struct {
			Messages []json.RawMessage
			State    json.RawMessage
		}
		getJSON(t, srv.URL, "/agui/threads/"+thread+"?run="+r.RunID, &snap)
		status := r.Status
		if r.Detail != "" {
			status += " (" + r.Detail + ")"
		}
		expect.Runs[r.RunID] = runWant{Parent: r.ParentRunID, Status: status, Events: r.Events, Messages: snap.Messages, State: snap.State}
	}
	if expect.Head != "r4" || expect.Runs["r2"].Parent != "r1" || expect.Runs["r3"].Parent != "r1" || expect.Runs["r4"].Parent != "r2" ||
		len(expect.Runs) != 4 || !strings.HasPrefix(expect.Runs["r4"].Status, "error") {
		t.Fatalf("thread set-up: runs tree %+v, want r2 and r3 under r1, r4 (error) under r2, head r4", tree)
	}
	if len(expect.Runs["r2"].Messages) == len(expect.Runs["r3"].Messages) && string(expect.Runs["r2"].State) == string(expect.Runs["r3"].State) {
		t.Fatalf("thread set-up: branches r2 and r3 look alike, the time-travel check could not fail")
	}

	// The live run is started by inspector.mjs, just before it opens the page.
	const liveThread, liveRun = "inspect-live", "live-1"

	shots := *inspectorShots
	if shots == "" {
		shots = t.TempDir()
	}
	want, _ := json.Marshal(expect)
	cmd := exec.CommandContext(t.Context(), "node", "browser/inspector.mjs",
		"--page", srv.URL+"/agui/ui/",
		"--thread", thread,
		"--expect", string(want),
		"--run-url", srv.URL+"/",
		"--live-thread", liveThread,
		"--live-run", liveRun,
		"--shots", shots,
		"--chromium", chromiumPath)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("inspector.mjs = %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	t.Logf("inspector.mjs saw: %s", stdout.String())
	for _, name := range []string{"inspector-branched.png", "inspector-live.png"} {
		if st, err := os.Stat(filepath.Join(shots, name)); err != nil || st.Size() < 1000 {
			t.Errorf("screenshot %s: %v, want a PNG", name, err)
		}
	}
	var stopped struct {
		Runs []struct{ Status, Detail string }
	}
	getJSON(t, srv.URL, "/agui/threads/"+liveThread+"/runs", &stopped)
	if len(stopped.Runs) != 1 || stopped.Runs[0].Status == "running" {
		t.Errorf("the live run after the page's Stop: %+v, want it ended", stopped.Runs)
	}
}
