package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
)

// TestStoreThreadsGauge: agui_proxy_store_threads counts the threads of every owner on each
// store kind, and follows a deletion where it is read at each scrape (memory, disk).
func TestStoreThreadsGauge(t *testing.T) {
	for _, tc := range []struct {
		kind string
		env  func(t *testing.T) map[string]string
	}{
		{"memory", func(t *testing.T) map[string]string { return map[string]string{} }},
		{"disk", func(t *testing.T) map[string]string { return map[string]string{"AGUI_STORE_PATH": t.TempDir()} }},
		{"redis", func(t *testing.T) map[string]string {
			return map[string]string{"AGUI_REDIS_URL": redistest.Start(t).URL()}
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
			defer agent.Close()
			env := tc.env(t)
			env["AGUI_UPSTREAM"], env["AGUI_LISTEN"], env["AGUI_IDENTITY_HEADER"] = agent.URL, "127.0.0.1:0", "X-User"
			cfg, err := loadConfig(env)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			ready := make(chan string, 1)
			done := make(chan error, 1)
			go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
			defer func() { cancel(); <-done }()
			base := "http://" + <-ready
			for i, user := range []string{"alice", "bob", "carol"} {
				res := runtest.PostRun(t, t.Context(), base+"/", runtest.RunBody(fmt.Sprintf("g%d", i), "r1", "chat"), http.Header{"X-User": {user}})
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			waitGauge := func(want int) {
				t.Helper()
				line := fmt.Sprintf(`agui_proxy_store_threads{store=%q} %d`, tc.kind, want)
				var metrics string
				redistest.WaitFor(t, 10*time.Second, line, func() bool {
					res, err := http.Get(base + "/metrics")
					if err != nil {
						return false
					}
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					metrics = string(b)
					return strings.Contains(metrics, line+"\n")
				})
			}
			waitGauge(3)
			if tc.kind == "redis" {
				return // counted again only after threadScanEvery
			}
			req, _ := http.NewRequest(http.MethodDelete, base+"/agui/threads/g1", nil)
			req.Header.Set("X-User", "bob")
			res, err := http.DefaultClient.Do(req)
			if err != nil || res.StatusCode != http.StatusNoContent {
				t.Fatalf("DELETE = %v, %v", res, err)
			}
			res.Body.Close()
			waitGauge(2)
		})
	}
}
