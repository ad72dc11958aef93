package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
)

// TestDiskFullProxy: the proxy on AGUI_STORE_PATH in a 2 MB tmpfs that its runs fill. Once
// full, /readyz answers 503 "store disk full" and history is still served. Stopped and
// started again on the file system filled to the last byte, the proxy starts, serves the
// history it holds, DELETE of a thread answers 204 (a full disk must not lock the data away),
// and the pages the deletes freed take a new run.
func TestDiskFullProxy(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=2097152"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): the full disk is tested where tests may mount", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer agent.Close()
	cfg, err := loadConfig(map[string]string{"AGUI_UPSTREAM": agent.URL, "AGUI_LISTEN": "127.0.0.1:0",
		"AGUI_STORE_PATH": dir + "/store", "AGUI_DRAIN_TIMEOUT": "2s", "AGUI_RECORDER_FULL_WAIT": "-1s", "AGUI_STORE_TIMEOUT": "10s"})
	if err != nil {
		t.Fatal(err)
	}
	start := func() (string, context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(t.Context())
		ready := make(chan string, 1)
		done := make(chan error, 1)
		go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
		select {
		case addr := <-ready:
			return "http://" + addr, cancel, done
		case err := <-done:
			t.Fatalf("serve on a full disk: %v, want it to start", err)
		}
		return "", cancel, done
	}
	do := func(method, url, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "text/event-stream")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	base, cancel, done := start()
	full := false
	n := 0
	for ; n < 200 && !full; n++ {
		body := fmt.Sprintf(`{"threadId":"t%d","runId":"r1","messages":[{"id":"u","role":"user","content":"large"}],"forwardedProps":{"size":100000}}`, n)
		do(http.MethodPost, base+"/", body)
		deadline := time.Now().Add(5 * time.Second)
		for !full && time.Now().Before(deadline) {
			code, text := do(http.MethodGet, base+"/readyz", "")
			full = code == http.StatusServiceUnavailable && text == "not ready: store disk full\n"
			if code, runs := do(http.MethodGet, fmt.Sprintf("%s/agui/threads/t%d/runs", base, n), ""); full || (code == 200 && !strings.Contains(runs, `"running"`)) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if !full {
		t.Fatalf("/readyz never said the disk was full after %d runs of 100 KB on 2 MB", n)
	}
	if code, body := do(http.MethodGet, base+"/agui/threads/t0", ""); code != 200 || !strings.Contains(body, `"messages"`) {
		t.Fatalf("history on a full disk: %d %.200s", code, body)
	}
	cancel()
	waitServed(t, done, " (on a full disk)")
	// What the store's last failed write left free is taken too (by another program, say):
	// the file system has no byte left at the restart.
	if f, err := os.Create(dir + "/ballast"); err == nil {
		for _, err := f.Write(make([]byte, 4096)); err == nil; _, err = f.Write(make([]byte, 4096)) {
		}
		f.Close()
	}

	base, cancel, done = start()
	defer func() { cancel(); waitServed(t, done, " (restarted on a full disk)") }()
	// Ready or not depends on what the store's free pages take: the run the first proxy left
	// running is ended at the start, and when that small write fits, writes succeed (a later
	// one that does not fit says so again). Either answer, never another.
	code, text := do(http.MethodGet, base+"/readyz", "")
	if !(code == http.StatusServiceUnavailable && text == "not ready: store disk full\n") && !(code == 200 && text == "ready\n") {
		t.Errorf("/readyz after a restart on the full disk = %d %q, want 503 not ready: store disk full, or ready", code, text)
	}
	t.Logf("/readyz after the restart: %d %q", code, text)
	if code, body := do(http.MethodGet, base+"/agui/threads/t1", ""); code != 200 || !strings.Contains(body, `"messages"`) {
		t.Fatalf("history after a restart on the full disk: %d %.200s", code, body)
	}
	for _, th := range []string{"t0", "t1", "t2", "t3"} {
		if code, body := do(http.MethodDelete, base+"/agui/threads/"+th, ""); code != http.StatusNoContent {
			t.Fatalf("DELETE %s on a full disk: %d %.300s, want 204", th, code, body)
		}
	}
	// The deleted threads' pages are free for new runs: ready again, and a run is recorded.
	if code, text := do(http.MethodGet, base+"/readyz", ""); code != 200 {
		t.Fatalf("/readyz after the deletes = %d %q, want ready", code, text)
	}
	do(http.MethodPost, base+"/", `{"threadId":"after","runId":"r1","messages":[{"id":"u","role":"user","content":"chat"}]}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, runs := do(http.MethodGet, base+"/agui/threads/after/runs", "")
		if code == 200 && strings.Contains(runs, `"status":"finished"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run after the deletes: %d %.300s", code, runs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the disk filled after %d runs of 100 KB", n)
}
