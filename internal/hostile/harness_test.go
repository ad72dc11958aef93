package hostile

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
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// identityHeader is the identity header of the multi-tenant environments.
const identityHeader = "X-Agui-User"

// script answers one run request in place of the demo agent. ids are the request's.
type script func(w http.ResponseWriter, r *http.Request, thread, run string)

// upstream is the agent behind the proxy: the demo agent, unless a script is registered for
// the request's runId. It remembers which run ids and which paths reached it, and the
// identity header each request carried.
type upstream struct {
	*httptest.Server
	demo    http.Handler
	scripts sync.Map // run id -> script
	seen    sync.Map // run id -> struct{}
	paths   sync.Map // path -> identity header value
}

func startUpstream(t *testing.T) *upstream {
	u := &upstream{demo: demoagent.New(demoagent.Config{})}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.paths.Store(r.URL.Path, r.Header.Get(identityHeader))
	var ids struct {
		ThreadID string `json:"threadId"`
		RunID    string `json:"runId"`
	}
	json.Unmarshal(body, &ids)
	if ids.RunID != "" {
		u.seen.Store(ids.RunID, struct{}{})
		if s, ok := u.scripts.Load(ids.RunID); ok {
			s.(script)(w, r, ids.ThreadID, ids.RunID)
			return
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	u.demo.ServeHTTP(w, r)
}

// contacted reports whether a request for run reached the upstream.
func (u *upstream) contacted(run string) bool { _, ok := u.seen.Load(run); return ok }

// frames is a script that answers an event stream made of chunks, flushed one by one; "%T"
// and "%R" in a chunk are replaced by the request's thread and run ids.
func frames(chunks ...string) script {
	return func(w http.ResponseWriter, r *http.Request, thread, run string) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for _, c := range chunks {
			c = strings.ReplaceAll(strings.ReplaceAll(c, "%T", thread), "%R", run)
			if _, err := io.WriteString(w, c); err != nil {
				return
			}
			rc.Flush()
		}
	}
}

// Event frames with the request's ids, LF-framed.
const (
	fStarted  = `data: {"type":"RUN_STARTED","threadId":"%T","runId":"%R"}` + "\n\n"
	fFinished = `data: {"type":"RUN_FINISHED","threadId":"%T","runId":"%R"}` + "\n\n"
	fMsgStart = `data: {"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}` + "\n\n"
	fMsgText  = `data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hi"}` + "\n\n"
	fMsgEnd   = `data: {"type":"TEXT_MESSAGE_END","messageId":"m1"}` + "\n\n"
)

// data returns an LF-framed frame carrying one event.
func data(event string) string { return "data: " + event + "\n\n" }

// env is one proxy in front of an upstream, on one store.
type env struct {
	kind  string // "memory", "disk" or "redis"
	url   string
	up    *upstream
	store recorder.Store
	multi bool // IdentityHeader is set
	n     atomic.Int64
	reg   *prometheus.Registry // the proxy's metrics, when the case's configuration asked for them
}

// prefixes gives every Redis store of the test binary its own key prefix.
var prefixes atomic.Int64

// newEnv starts a proxy on a store of kind (srv is the redis-server for "redis") in front of a
// fresh upstream; mut adjusts the configuration.
func newEnv(t *testing.T, kind string, srv *redistest.Server, mut func(*proxy.Config)) *env {
	t.Helper()
	e := &env{kind: kind, up: startUpstream(t)}
	u, _ := url.Parse(e.up.URL)
	cfg := proxy.Config{Upstream: u, HeartbeatInterval: -1}
	switch kind {
	case "memory":
		e.store = recorder.NewMemoryStore(recorder.MemoryConfig{})
	case "disk":
		s, err := recorder.OpenDiskStore(context.Background(), recorder.DiskConfig{Dir: t.TempDir(), NoSync: true})
		if err != nil {
			t.Fatalf("OpenDiskStore: %v", err)
		}
		e.store = s
	case "redis":
		s, err := recorder.NewRedisStore(context.Background(), recorder.RedisConfig{
			URL: srv.URL(), Prefix: fmt.Sprintf("h%d", prefixes.Add(1))})
		if err != nil {
			t.Fatalf("NewRedisStore: %v", err)
		}
		e.store = s
	default:
		t.Fatalf("unknown store %q", kind)
	}
	t.Cleanup(func() { e.store.Close() })
	cfg.Store = e.store
	if mut != nil {
		mut(&cfg)
	}
	if cfg.Store != e.store { // mut brought a store of its own: use (and close) that one
		e.store.Close()
		e.store = cfg.Store
	}
	e.multi = cfg.IdentityHeader != ""
	e.reg, _ = cfg.Registerer.(*prometheus.Registry)
	h, err := proxy.New(cfg)
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	// Served as cmd/agui-proxy serves it: streams the proxy takes over hand their connection
	// back (package keepalive), so the hostile requests that follow a run travel on it.
	e.url = runtest.ServeLikeCmd(t, h).URL
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	})
	return e
}

// id returns a fresh id with prefix p, unique in e.
func (e *env) id(p string) string { return fmt.Sprintf("%s-%d", p, e.n.Add(1)) }

// reply is a whole HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request and reads the whole answer (at most 30 s). hdr is name, value, ...
func (e *env) do(t *testing.T, method, path string, body io.Reader, hdr ...string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v (status %d, read %q)", method, path, err, res.StatusCode, b)
	}
	return reply{res.StatusCode, res.Header, b}
}

func (e *env) get(t *testing.T, path string, hdr ...string) reply {
	t.Helper()
	return e.do(t, http.MethodGet, path, nil, hdr...)
}

// postRun POSTs body as a run (JSON, Accept: text/event-stream).
func (e *env) postRun(t *testing.T, body string, hdr ...string) reply {
	t.Helper()
	h := append([]string{"Content-Type", "application/json", "Accept", "text/event-stream"}, hdr...)
	return e.do(t, http.MethodPost, "/", strings.NewReader(body), h...)
}

// runBody is a RunAgentInput on thread/run for the demo agent's scenario.
func runBody(thread, run, scenario string) string {
	return fmt.Sprintf(`{"threadId":%q,"runId":%q,"state":{},"messages":[{"id":"u-%s","role":"user","content":"hello"}],"tools":[],"context":[],"forwardedProps":{"scenario":%q}}`,
		thread, run, run, scenario)
}

// run starts run on thread with script s (nil: the demo agent's chat scenario) and returns
// the answer, which must be a 200 event stream.
func (e *env) run(t *testing.T, thread, run string, s script, hdr ...string) reply {
	t.Helper()
	if s != nil {
		e.up.scripts.Store(run, s)
	}
	r := e.postRun(t, runBody(thread, run, "chat"), hdr...)
	if r.status != http.StatusOK {
		t.Fatalf("run %s/%s: status %d, body %q", thread, run, r.status, r.body)
	}
	return r
}

// as returns the identity header pair for user (nothing when e is single-tenant).
func (e *env) as(user string) []string {
	if !e.multi {
		return nil
	}
	return []string{identityHeader, user}
}

// problemOf decodes r as a problem document with status and code ("" skips the code check).
func problemOf(t *testing.T, r reply, status int, code string) proxy.Problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %q", r.status, status, trunc(r.body))
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %q", ct, trunc(r.body))
	}
	var p proxy.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body %q: %v", trunc(r.body), err)
	}
	if p.Status != status || (code != "" && p.Code != code) {
		t.Fatalf("problem %+v, want status %d code %q", p, status, code)
	}
	return p
}

func trunc(b []byte) []byte {
	if len(b) > 300 {
		return append(b[:300:300], "..."...)
	}
	return b
}

// ev is one frame of a stream.
type ev struct {
	typ string
	id  string
	raw []byte
}

// events parses an SSE body into its data frames.
func events(t *testing.T, body []byte) []ev {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(body), sse.Limits{MaxLineBytes: 64 << 20, MaxFrameBytes: 64 << 20})
	var out []ev
	for {
		f, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("parsing the stream: %v; body %q", err, trunc(body))
		}
		if !f.HasData {
			continue
		}
		typ, _ := agui.EventType(f.Data)
		out = append(out, ev{typ: typ, id: f.ID, raw: bytes.Clone(f.Data)})
	}
}

func types(evs []ev) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.typ
	}
	return out
}

// lastType is the type of the stream's last event.
func lastType(evs []ev) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].typ
}

// waitEnded polls the runs tree until no run of thread is running.
func (e *env) waitEnded(t *testing.T, thread string, hdr ...string) runsView {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.get(t, "/agui/threads/"+thread+"/runs", hdr...)
		var v runsView
		if r.status == http.StatusOK && json.Unmarshal(r.body, &v) == nil {
			running := false
			for _, run := range v.Runs {
				running = running || run.Status == "running"
			}
			if !running {
				return v
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %s: runs still running or unreadable: %d %q", thread, r.status, trunc(r.body))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type runsView struct {
	Runs []struct {
		RunID       string `json:"runId"`
		ParentRunID string `json:"parentRunId"`
		Status      string `json:"status"`
		Events      int64  `json:"events"`
	} `json:"runs"`
}

// readable checks that thread's history answers 200 with valid UTF-8 JSON, that its export
// re-imports, and that its thread attach is a stream that starts with RUN_STARTED.
func (e *env) readable(t *testing.T, thread string, hdr ...string) {
	t.Helper()
	e.waitEnded(t, thread, hdr...)
	r := e.get(t, "/agui/threads/"+thread, hdr...)
	if r.status != http.StatusOK || !json.Valid(r.body) || !utf8.Valid(r.body) {
		t.Fatalf("history of %s: %d %q", thread, r.status, trunc(r.body))
	}
	a := e.get(t, "/agui/threads/"+thread+"/events", hdr...)
	if a.status != http.StatusOK {
		t.Fatalf("thread attach of %s: %d %q", thread, a.status, trunc(a.body))
	}
	evs := events(t, a.body)
	if len(evs) == 0 || evs[0].typ != "RUN_STARTED" {
		t.Fatalf("thread attach of %s does not start with RUN_STARTED: %v", thread, types(evs))
	}
}

// history decodes GET threads/{thread}.
func (e *env) history(t *testing.T, thread string, hdr ...string) (msgs []map[string]any, state any) {
	t.Helper()
	e.waitEnded(t, thread, hdr...)
	r := e.get(t, "/agui/threads/"+thread, hdr...)
	if r.status != http.StatusOK {
		t.Fatalf("history of %s: %d %q", thread, r.status, trunc(r.body))
	}
	var v struct {
		Messages []map[string]any `json:"messages"`
		State    any              `json:"state"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("history of %s: %v in %q", thread, err, trunc(r.body))
	}
	return v.Messages, v.State
}

// counter is the value of the proxy's counter name (0 when absent); the case must have asked
// for metrics (withMetrics).
func (e *env) counter(t *testing.T, name string) float64 {
	t.Helper()
	if e.reg == nil {
		t.Fatal("the case's proxy has no metrics: configure it withMetrics")
	}
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// withMetrics gives the case's proxy a metrics registry of its own (env.counter reads it).
func withMetrics(c *proxy.Config) { c.Registerer = prometheus.NewRegistry() }

// officialTypes parses an event stream the way @ag-ui/client 1.0.0's parseSSEStream does
// (frames split on "\n\n" only, lines on "\n", the data lines of a frame joined, leftovers
// parsed at the end) and returns the events' types; a data frame that is not JSON fails the
// test, as it errors that client's stream.
func officialTypes(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	for _, chunk := range strings.Split(string(body), "\n\n") {
		var data []string
		for _, line := range strings.Split(chunk, "\n") {
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
			}
		}
		if len(data) == 0 {
			continue
		}
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &ev); err != nil {
			t.Fatalf("the official client would fail on the frame %q: %v", trunc([]byte(chunk)), err)
		}
		out = append(out, ev.Type)
	}
	return out
}
