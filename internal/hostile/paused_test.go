package hostile

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/proxy"
)

// TestHostileRedisPaused freezes a private redis-server (SIGSTOP) under a proxy: reads and
// new runs answer 503 StoreUnavailable problems (with Retry-After) instead of hanging, nothing
// is answered from a half-read store, and once Redis continues everything recorded before is
// readable and new runs work. Class: redis-paused.
func TestHostileRedisPaused(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t, "redis", srv, nil)
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
	for _, path := range []string{"/agui/threads/" + before} {
		r := e.get(t, path)
		p := problemOf(t, r, http.StatusServiceUnavailable, proxy.CodeStoreUnavailable)
		if r.header.Get("Retry-After") == "" || strings.Contains(p.Detail, "127.0.0.1") {
			t.Errorf("GET %s while Redis is paused: %+v, Retry-After %q", path, p, r.header.Get("Retry-After"))
		}
	}
	paused := e.id("r")
	r := e.postRun(t, runBody(e.id("t"), paused, "chat"))
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
