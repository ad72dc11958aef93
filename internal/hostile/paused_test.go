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
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/redis/go-redis/v9"
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
	e.postRunRefused(t)

	srv.Continue()
	stopped = false
	e.readable(t, before)
	after := e.id("t")
	e.run(t, after, e.id("r"), nil)
	e.readable(t, after)
}

// TestHostileRedisPausedStreams freezes a private redis-server (SIGSTOP) under a proxy whose
// Redis client would wait a minute for an answer: the event streams (thread attach with and
// without a cursor or follow, run attach with and without a cursor) answer 503
// StoreUnavailable problems once StoreTimeout passed, before any byte of a stream, and so does a
// run POST (its creation), so only AGUI_STORE_TIMEOUT bounds them (a stream that waited for the client's own timeout would
// outlast the test's 30 s request limit). Once Redis continues they stream again. Class:
// redis-paused.
func TestHostileRedisPausedStreams(t *testing.T) {
	srv := redistest.Start(t)
	opts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout, opts.ContextTimeoutEnabled = time.Minute, time.Minute, time.Minute, true
	store, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{Options: opts, Prefix: "paused-streams"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "redis", srv, func(c *proxy.Config) { c.Store, c.StoreTimeout = store, 300*time.Millisecond })
	th, run := e.id("t"), e.id("r")
	live := events(t, e.run(t, th, run, nil).body)
	e.readable(t, th)
	after := live[1].id

	srv.Stop()
	stopped := true
	defer func() {
		if stopped {
			srv.Continue()
		}
	}()
	base := "/agui/threads/" + th
	requests := []struct {
		path string
		hdr  []string
	}{
		{base + "/events", nil},
		{base + "/events?follow=1", nil},
		{base + "/events", []string{"Last-Event-ID", after}},
		{base + "/events?after=" + after, nil},
		{base + "/runs/" + run + "/events", nil},
		{base + "/runs/" + run + "/events", []string{"Last-Event-ID", after}},
	}
	for _, q := range requests {
		start := time.Now()
		r := e.get(t, q.path, q.hdr...)
		t.Logf("GET %s %v while Redis is paused: %d after %v", q.path, q.hdr, r.status, time.Since(start))
		p := problemOf(t, r, http.StatusServiceUnavailable, proxy.CodeStoreUnavailable)
		if r.header.Get("Retry-After") == "" || strings.Contains(p.Detail, "127.0.0.1") {
			t.Errorf("GET %s while Redis is paused: %+v, Retry-After %q", q.path, p, r.header.Get("Retry-After"))
		}
	}
	e.postRunRefused(t) // its creation is bounded by StoreTimeout too, not by the client's minute

	srv.Continue()
	stopped = false
	fresh := e.id("t")
	e.run(t, fresh, e.id("r"), nil)
	e.readable(t, fresh)
	for _, q := range requests {
		if strings.Contains(q.path, "follow=1") {
			continue // stays open for the next run
		}
		r := e.get(t, q.path, q.hdr...)
		if evs := events(t, r.body); r.status != http.StatusOK || len(evs) == 0 {
			t.Errorf("GET %s %v after Redis continued: %d, %d events", q.path, q.hdr, r.status, len(evs))
		}
	}
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

// postRunRefused POSTs a run on a new thread while the store is paused: it is refused with a
// 503 StoreUnavailable problem and never reaches the agent.
func (e *env) postRunRefused(t *testing.T) {
	t.Helper()
	paused := e.id("r")
	start := time.Now()
	r := e.postRun(t, runBody(e.id("t"), paused, "chat"))
	t.Logf("run POST while Redis is paused: %d after %v", r.status, time.Since(start))
	problemOf(t, r, http.StatusServiceUnavailable, proxy.CodeStoreUnavailable)
	if e.up.contacted(paused) {
		t.Error("a run the store could not register reached the agent")
	}
}
