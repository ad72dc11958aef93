package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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

	req, _ := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(`{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"chat"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `"RUN_FINISHED"`) {
		t.Fatalf("run stream lacks RUN_FINISHED: %.200s", body)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		_, metrics := get("/metrics")
		if strings.Contains(metrics, `agui_proxy_runs_total{outcome="finished"} 1`) &&
			strings.Contains(metrics, `agui_proxy_upstream_events_total{event_type="TEXT_MESSAGE_CONTENT"}`) &&
			strings.Contains(metrics, "agui_proxy_recorder_batches_total") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed the run:\n%s", metrics)
		}
		time.Sleep(20 * time.Millisecond)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after shutdown", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not return after shutdown")
	}
}
