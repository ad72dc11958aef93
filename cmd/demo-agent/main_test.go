package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"
)

func TestConfigFromEnvironment(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want config
	}{
		{"defaults", nil, config{Listen: "127.0.0.1:8000", ShutdownTimeout: 10 * time.Second}},
		{"set", map[string]string{"DEMO_LISTEN": ":9", "DEMO_DELAY": "5ms", "DEMO_LOG_LEVEL": "debug", "DEMO_SHUTDOWN_TIMEOUT": "1s"},
			config{Listen: ":9", Delay: 5 * time.Millisecond, LogLevel: slog.LevelDebug, ShutdownTimeout: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := env.ParseAsWithOptions[config](env.Options{Environment: tt.env})
			if err != nil || got != tt.want {
				t.Errorf("ParseAs(%v) = %+v, %v, want %+v", tt.env, got, err, tt.want)
			}
		})
	}
}

func TestUsageListsVariables(t *testing.T) {
	var b bytes.Buffer
	usage(&b)
	for _, v := range []string{"DEMO_LISTEN", "DEMO_DELAY", "DEMO_LOG_LEVEL", "DEMO_SHUTDOWN_TIMEOUT", "unicode"} {
		if !strings.Contains(b.String(), v) {
			t.Errorf("usage() = %q, want it to mention %s", b.String(), v)
		}
	}
}

// TestRunServesAndShutsDown starts the server on a free port, runs a scenario, and checks
// that a stream still running at shutdown is cancelled after the timeout and run returns.
func TestRunServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	cfg := config{Listen: "127.0.0.1:0", ShutdownTimeout: 50 * time.Millisecond}
	go func() { done <- run(ctx, cfg, slog.New(slog.DiscardHandler), func(a net.Addr) { addrs <- a }) }()
	url := "http://" + (<-addrs).String()

	res, err := http.Post(url, "application/json", strings.NewReader(`{"threadId":"t","runId":"r","forwardedProps":{"scenario":"tools"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !bytes.HasPrefix(body, []byte(`data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}`)) ||
		!bytes.HasSuffix(body, []byte(`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`+"\n\n")) {
		t.Errorf("POST tools = %q, want a whole run", body)
	}

	// A stream that would last 1000 s: shutdown must cut it.
	res, err = http.Post(url, "application/json", strings.NewReader(`{"threadId":"t","runId":"r2","forwardedProps":{"scenario":"slow","events":1000,"intervalMs":1000}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	first := make([]byte, 10)
	if _, err := io.ReadFull(res.Body, first); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run() after shutdown = %v, want nil", err)
	}
}
