package hostile

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/proxy"
)

// TestHostileRedisPaused freezes a private redis-server (SIGSTOP) under a proxy: reads and
// new runs answer 503 StoreUnavailable problems (with Retry-After) once StoreTimeout passed
// instead of hanging, nothing is answered from a half-read store, and once Redis continues
// everything recorded before is readable and new runs work. Class: redis-paused.
func TestHostileRedisPaused(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t, "redis", srv, func(c *proxy.Config) { c.StoreTimeout = 300 * time.Millisecond })
	before, run := e.id("t"), e.id("r")
	e.run(t, before, run, nil)
	e.readable(t, before)

	srv.Stop()
	stopped := true
	defer func() {
		if stopped {
			srv.Continue()
		}
	}()
	for _, path := range []string{"/agui/threads/" + before, "/agui/threads/" + before + "/runs",
		"/agui/threads/" + before + "/export", "/agui/threads/" + before + "?run=" + run} {
		start := time.Now()
		r := e.get(t, path)
		t.Logf("GET %s while Redis is paused: %d after %v", path, r.status, time.Since(start))
		p := problemOf(t, r, http.StatusServiceUnavailable, proxy.CodeStoreUnavailable)
		if r.header.Get("Retry-After") == "" || strings.Contains(p.Detail, "127.0.0.1") {
			t.Errorf("GET %s while Redis is paused: %+v, Retry-After %q", path, p, r.header.Get("Retry-After"))
		}
	}
	imp := e.do(t, http.MethodPost, "/agui/threads/"+e.id("t")+"/import",
		strings.NewReader(`{"formatVersion":1,"runs":[{"runId":"r1","status":"finished","eventList":[]}]}`))
	problemOf(t, imp, http.StatusServiceUnavailable, proxy.CodeStoreUnavailable)
	paused := e.id("r")
	start := time.Now()
	r := e.postRun(t, runBody(e.id("t"), paused, "chat"))
	t.Logf("run POST while Redis is paused: %d after %v", r.status, time.Since(start))
	problemOf(t, r, http.StatusServiceUnavailable, proxy.CodeStoreUnavailable)
	if e.up.contacted(paused) {
		t.Error("a run the store could not register reached the agent")
	}

	srv.Continue()
	stopped = false
	e.readable(t, before)
	after := e.id("t")
	e.run(t, after, e.id("r"), nil)
	e.readable(t, after)
}

// TestHostileLimitsContradict: limits that contradict each other are refused at start-up
// (a client queue smaller than the body limit would drop every client of a large run on its
// RUN_STARTED). Class: limits.
func TestHostileLimitsContradict(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	for _, cfg := range []proxy.Config{
		{Upstream: u, ClientQueueBytes: 1 << 20, MaxBodyBytes: 2 << 20, MaxEventBytes: 1 << 20},
		{Upstream: u, ClientQueueBytes: 1 << 20, MaxBodyBytes: 1 << 20, MaxEventBytes: 2 << 20},
		{Upstream: u, ClientQueueBytes: 1 << 20}, // the default body and event limits are larger
	} {
		if _, err := proxy.New(cfg); !errors.Is(err, proxy.ErrInvalidConfig) || !strings.Contains(err.Error(), "ClientQueueBytes") {
			t.Errorf("New(queue %d, body %d, event %d) = %v, want ErrInvalidConfig naming ClientQueueBytes",
				cfg.ClientQueueBytes, cfg.MaxBodyBytes, cfg.MaxEventBytes, err)
		}
	}
	h, err := proxy.New(proxy.Config{Upstream: u})
	if err != nil {
		t.Fatalf("the default limits contradict each other: %v", err)
	}
	h.Shutdown(t.Context())
}
