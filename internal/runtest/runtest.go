// Package runtest holds the helpers the proxy's and the attach endpoints' tests share: the demo
// agent on a real socket with its run reports, run request bodies, POSTing a run, waiting for a
// run to end in the store, reading problem answers, and a loopback TCP connection's two ends. It imports neither proxy nor attach,
// so the tests of both (and of packages below them) can use it.
package runtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/keepalive"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// Agent is the scripted demo agent behind a real socket, with its run reports.
type Agent struct {
	*httptest.Server
	mu      sync.Mutex
	reports map[string]demoagent.RunReport // by run id
	done    chan demoagent.RunReport
}

// StartAgent starts the demo agent; it is closed when the test ends.
func StartAgent(t testing.TB) *Agent {
	t.Helper()
	a := &Agent{reports: map[string]demoagent.RunReport{}, done: make(chan demoagent.RunReport, 1024)}
	agent := demoagent.New(demoagent.Config{OnRunDone: func(r demoagent.RunReport) {
		a.mu.Lock()
		a.reports[r.RunID] = r
		a.mu.Unlock()
		select {
		case a.done <- r:
		default:
		}
	}})
	a.Server = httptest.NewServer(agent)
	t.Cleanup(a.Close)
	return a
}

// WaitReport waits (up to 20 s) for the agent's report on runID.
func (a *Agent) WaitReport(t testing.TB, runID string) demoagent.RunReport {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		a.mu.Lock()
		r, ok := a.reports[runID]
		a.mu.Unlock()
		if ok {
			return r
		}
		select {
		case <-a.done:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("the agent never finished run %q", runID)
		}
	}
}

// RunBody is a RunAgentInput for the demo agent: one user message "u-<runID>", the scenario
// and extra members (`,"intervalMs":5`) in forwardedProps.
func RunBody(threadID, runID, scenario string, extra ...string) string {
	props := `{"scenario":"` + scenario + `"` + strings.Join(extra, "") + `}`
	return fmt.Sprintf(`{"threadId":%q,"runId":%q,"state":{},"messages":[{"id":"u-%s","role":"user","content":"hello"}],"tools":[],"context":[],"forwardedProps":%s}`,
		threadID, runID, runID, props)
}

// PostRun POSTs a run body to url as the official client does (JSON, Accept: event stream).
func PostRun(t testing.TB, ctx context.Context, url, body string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return res
}

// WaitRunEnded polls the store (up to 20 s) until the run is no longer running.
func WaitRunEnded(t testing.TB, store recorder.Store, threadID, runID string) recorder.Run {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := store.Run(context.Background(), threadID, runID)
		if err == nil && r.Status != recorder.StatusRunning {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s/%s did not end: %+v, %v", threadID, runID, r, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// DecodeProblem reads a problem+json answer and checks that its status is the response's.
func DecodeProblem(t testing.TB, res *http.Response) problem.Problem {
	t.Helper()
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("Content-Type = %q, want application/problem+json (status %d, body %q)", ct, res.StatusCode, b)
	}
	var p problem.Problem
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
		t.Fatalf("decoding problem: %v", err)
	}
	if p.Status != res.StatusCode {
		t.Errorf("problem status %d != response status %d", p.Status, res.StatusCode)
	}
	return p
}

// SkipEvents reads frames from rd until n events (frames with data) went by.
func SkipEvents(t testing.TB, rd *sse.Reader, n int) {
	t.Helper()
	for n > 0 {
		f, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if f.HasData {
			n--
		}
	}
}

// ServeLikeCmd serves h on a real socket as cmd/agui-proxy serves it: with a
// keepalive.Listener beside the listener, so the connection of a stream the proxy took over
// carries the client's next request. The server and the Listener are closed when the test
// ends (after the cleanups registered later, such as the Handler's Shutdown).
func ServeLikeCmd(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	ka := keepalive.New(srv.Listener.Addr(), time.Minute)
	srv.Config.ConnContext = ka.ConnContext
	srv.Start()
	go srv.Config.Serve(ka)
	t.Cleanup(func() {
		ka.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

// TCPPair returns the two ends of a loopback TCP connection, both closed when the test ends.
func TCPPair(t testing.TB) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		c.Close()
		t.Fatal("accept failed")
	}
	client, server = c.(*net.TCPConn), s.(*net.TCPConn)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}
