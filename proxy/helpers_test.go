package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// testAgent is the scripted demo agent behind a real socket, with its run reports.
type testAgent struct {
	*httptest.Server
	mu      sync.Mutex
	reports map[string]demoagent.RunReport // by run id
	done    chan demoagent.RunReport
}

func startAgent(t testing.TB) *testAgent {
	t.Helper()
	a := &testAgent{reports: map[string]demoagent.RunReport{}, done: make(chan demoagent.RunReport, 1024)}
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

// waitReport waits for the agent's report on runID.
func (a *testAgent) waitReport(t testing.TB, runID string) demoagent.RunReport {
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

// startProxy runs a Handler for cfg in front of upstream, on a real socket.
func startProxy(t testing.TB, upstream string, cfg Config) (*Handler, *httptest.Server) {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstream = u
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	})
	return h, srv
}

// runBody is a RunAgentInput for the demo agent.
func runBody(threadID, runID, scenario string, extra ...string) string {
	props := `{"scenario":"` + scenario + `"` + strings.Join(extra, "") + `}`
	return fmt.Sprintf(`{"threadId":%q,"runId":%q,"state":{},"messages":[{"id":"u-%s","role":"user","content":"hello"}],"tools":[],"context":[],"forwardedProps":%s}`,
		threadID, runID, runID, props)
}

func postRun(t testing.TB, ctx context.Context, url, body string, header http.Header) *http.Response {
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

// frame is a copy of an sse.Frame.
type frame struct {
	raw        []byte
	data       []byte
	id         string
	hasData    bool
	terminated bool
}

func (f frame) eventType() string {
	t, _ := agui.EventType(f.data)
	return t
}

// readFrames reads every frame of r until EOF or error.
func readFrames(t testing.TB, r io.Reader) ([]frame, error) {
	t.Helper()
	rd := sse.NewReader(r, sse.Limits{MaxLineBytes: 64 << 20, MaxFrameBytes: 64 << 20})
	var out []frame
	for {
		f, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, frame{raw: bytes.Clone(f.Raw), data: bytes.Clone(f.Data), id: f.ID, hasData: f.HasData, terminated: f.Terminated})
	}
}

// dataFrames keeps the frames that carry events.
func dataFrames(fs []frame) []frame {
	var out []frame
	for _, f := range fs {
		if f.hasData {
			out = append(out, f)
		}
	}
	return out
}

// waitRunEnded polls the store until the run is no longer running.
func waitRunEnded(t testing.TB, store recorder.Store, threadID, runID string) recorder.Run {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := store.Run(context.Background(), threadID, runID)
		if err == nil && r.Status != recorder.StatusRunning {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s/%s still not ended in the store: %+v, %v", threadID, runID, r, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// storedEvents returns the run's recorded events.
func storedEvents(t testing.TB, store recorder.Store, threadID, runID string) []recorder.Event {
	t.Helper()
	evs, err := store.Events(context.Background(), threadID, runID, 0, 0)
	if err != nil {
		t.Fatalf("Events(%s, %s): %v", threadID, runID, err)
	}
	return evs
}

// decodeProblem reads a problem+json answer.
func decodeProblem(t testing.TB, res *http.Response) Problem {
	t.Helper()
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("Content-Type = %q, want application/problem+json (status %d, body %q)", ct, res.StatusCode, b)
	}
	var p Problem
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
		t.Fatalf("decoding problem: %v", err)
	}
	if p.Status != res.StatusCode {
		t.Errorf("problem status %d != response status %d", p.Status, res.StatusCode)
	}
	return p
}

func newTestServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// deadUpstreamAddr returns an address on which nothing listens.
func deadUpstreamAddr(t testing.TB) string {
	t.Helper()
	s := httptest.NewServer(http.NotFoundHandler())
	addr := s.URL
	s.Close()
	return addr
}
