package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
)

// serveChildEnv makes TestServeChild serve with the environment's configuration.
const serveChildEnv = "AGUI_TEST_SERVE_CHILD"

// TestServeChild is the proxy process TestDiskStoreKilledProxy starts and kills: it serves
// with the configuration in its environment and prints "listening <addr>".
func TestServeChild(t *testing.T) {
	if os.Getenv(serveChildEnv) == "" {
		t.Skip("run by TestDiskStoreKilledProxy")
	}
	cfg, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		fmt.Printf("listening %s\n", <-ready)
	}()
	if err := serve(context.Background(), cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)), ready); err != nil {
		t.Fatal(err)
	}
}

// startProxyProcess starts TestServeChild with env and returns its process and base URL.
func startProxyProcess(t *testing.T, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeChild$")
	cmd.Env = append(append(os.Environ(), serveChildEnv+"=1", "AGUI_LISTEN=127.0.0.1:0", "AGUI_LOG_LEVEL=warn"), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
			go io.Copy(io.Discard, out)
			return cmd, "http://" + addr
		}
	}
	t.Fatalf("the proxy process exited before listening: %v", sc.Err())
	return nil, ""
}

// TestDiskStoreKilledProxy: a proxy recording into AGUI_STORE_PATH is killed with SIGKILL in
// the middle of a run. A new proxy process on the same directory serves the run's events up
// to the last one stored, byte for byte as the client saw them, followed by a RUN_ERROR with
// code INTERRUPTED, and lists the run as interrupted.
func TestDiskStoreKilledProxy(t *testing.T) {
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer agent.Close()
	dir := t.TempDir()
	env := []string{"AGUI_UPSTREAM=" + agent.URL, "AGUI_STORE_PATH=" + dir}
	proc, base := startProxyProcess(t, env...)

	body := `{"threadId":"t1","runId":"r1","messages":[{"id":"u1","role":"user","content":"hi"}],"forwardedProps":{"scenario":"slow","events":2000,"intervalMs":2}}`
	req, _ := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read 100 frames as the client sees them.
	br := bufio.NewReader(res.Body)
	var seen []string
	var frame strings.Builder
	for len(seen) < 100 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the live stream after %d frames: %v", len(seen), err)
		}
		frame.WriteString(line)
		if line == "\n" {
			seen = append(seen, frame.String())
			frame.Reset()
		}
	}
	time.Sleep(50 * time.Millisecond) // a few more events reach the store; none need to
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proc.Wait()
	res.Body.Close()

	_, base = startProxyProcess(t, env...)
	get := func(path string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d, %v: %.300s", path, res.StatusCode, err, b)
		}
		return string(b)
	}
	if runs := get("/agui/threads/t1/runs"); !strings.Contains(runs, `"status":"interrupted"`) {
		t.Errorf("runs after the restart = %.400s, want r1 interrupted", runs)
	}
	var stored []string // the event frames (the stream also has a retry: field and may have comments)
	for _, f := range strings.SplitAfter(get("/agui/threads/t1/runs/r1/events"), "\n\n") {
		if strings.HasPrefix(f, "data:") {
			stored = append(stored, f)
		}
	}
	if len(stored) < 2 {
		t.Fatalf("only %d frames stored", len(stored))
	}
	last := stored[len(stored)-1]
	if !strings.Contains(last, `"type":"RUN_ERROR"`) || !strings.Contains(last, `"code":"INTERRUPTED"`) {
		t.Errorf("last stored frame = %q, want RUN_ERROR INTERRUPTED", last)
	}
	for i, f := range stored[:len(stored)-1] {
		if i < len(seen) && f != seen[i] {
			t.Fatalf("stored frame %d = %q, the client saw %q", i, f, seen[i])
		}
	}
	t.Logf("client saw %d frames before the kill; %d stored, then RUN_ERROR INTERRUPTED", len(seen), len(stored)-1)
}
