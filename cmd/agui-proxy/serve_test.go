package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
)

// TestServeOperations runs the real binary's serve loop in front of the demo agent and checks
// the operational endpoints, a run, the metrics it leaves, and the drain on shutdown.
func TestServeOperations(t *testing.T) {
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer agent.Close()
	cfg, err := loadConfig(map[string]string{"AGUI_UPSTREAM": agent.URL, "AGUI_LISTEN": "127.0.0.1:0", "AGUI_DRAIN_TIMEOUT": "5s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	var base string
	select {
	case addr := <-ready:
		base = "http://" + addr
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}

	get := func(path string) (int, string) {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz = %d %q", code, body)
	}

	// Two runs on one client: the stream's connection, taken over, goes back to the server
	// at its end and carries the second run.
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for i, body := range []string{
		`{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"chat"}]}`,
		`{"threadId":"t","runId":"r2","parentRunId":"r","messages":[{"id":"u","role":"user","content":"chat"},{"id":"u2","role":"user","content":"chat"}]}`,
	} {
		reused := false
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { reused = c.Reused }})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		stream, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(stream), `"RUN_FINISHED"`) {
			t.Fatalf("run %d: stream lacks RUN_FINISHED: %.200s", i, stream)
		}
		if res.Close || reused != (i == 1) {
			t.Errorf("run %d: Connection: close %v, on a reused connection %v", i, res.Close, reused)
		}
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		_, metrics := get("/metrics")
		if strings.Contains(metrics, `agui_proxy_runs_total{outcome="finished",route="default"} 2`) &&
			strings.Contains(metrics, `agui_proxy_upstream_events_total{event_type="TEXT_MESSAGE_CONTENT",route="default"}`) &&
			strings.Contains(metrics, "agui_proxy_recorder_batches_total") &&
			strings.Contains(metrics, `agui_proxy_recorder_queue_bytes{route="default"}`) &&
			strings.Contains(metrics, `agui_proxy_recorder_queue_high_water_bytes{route="default"}`) &&
			!strings.Contains(metrics, `agui_proxy_recorder_queue_high_water_bytes{route="default"} 0`+"\n") &&
			strings.Contains(metrics, `agui_proxy_checkpoint_branches_total{how="compacted",route="default"} 2`) &&
			strings.Contains(metrics, `agui_proxy_checkpoint_branches_total{how="folded",route="default"} 0`) &&
			strings.Contains(metrics, `agui_proxy_store_bytes{store="memory"}`) &&
			strings.Contains(metrics, `agui_proxy_store_evictions_total{store="memory"} 0`) &&
			strings.Contains(metrics, "agui_proxy_connections_returned_total 2") &&
			strings.Contains(metrics, "agui_proxy_connections_reused_total 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed the run:\n%s", metrics)
		}
		time.Sleep(20 * time.Millisecond)
	}

	cancel() // (the client's connection waits for its next request: the shutdown closes it)
	waitServed(t, done, "")
}

// waitServed waits for serve, whose context was cancelled, to return (done) without error;
// hint is added to the failure when it does not return.
func waitServed(t *testing.T, done <-chan error, hint string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after shutdown", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not return after shutdown" + hint)
	}
}

// TestServeRoutes runs two agents behind one proxy by path prefix: each prefix is a room, so a
// thread created through one is refused on the other, and each has its own attach endpoints.
func TestServeRoutes(t *testing.T) {
	a := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer a.Close()
	b := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer b.Close()
	cfg, err := loadConfig(map[string]string{"AGUI_ROUTES": "/agents/a=" + a.URL + ",/agents/b/=" + b.URL, "AGUI_LISTEN": "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	base := "http://" + <-ready
	post := func(path, runID string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(`{"threadId":"shared","runId":"`+runID+`","messages":[{"id":"u-`+runID+`","role":"user","content":"chat"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	if code, body := post("/agents/a/", "r1"); code != 200 || !strings.Contains(body, "RUN_FINISHED") {
		t.Fatalf("run through /agents/a/ = %d %.200s", code, body)
	}
	// Each route has its own thread ids: "shared" through /agents/b/ is a thread of its own.
	if code, body := post("/agents/b/", "r1"); code != 200 || !strings.Contains(body, "RUN_FINISHED") {
		t.Errorf("same ids through /agents/b/ = %d %.200s, want 200 (a thread of route b)", code, body)
	}
	for _, prefix := range []string{"/agents/a/", "/agents/b/"} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			res, err := http.Get(base + prefix + "agui/threads/shared/runs")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == 200 && strings.Contains(string(body), `"status":"finished"`) {
				if n := strings.Count(string(body), `"runId"`); n != 1 {
					t.Errorf("runs through %sagui/ = %s, want the route's one run", prefix, body)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("runs through %sagui/ = %d %s", prefix, res.StatusCode, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := loadConfig(map[string]string{"AGUI_ROUTES": "agents=http://x"}); err == nil || !strings.Contains(err.Error(), "AGUI_ROUTES") {
		t.Errorf("bad AGUI_ROUTES accepted: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve = %v", err)
	}
}
