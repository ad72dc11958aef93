package attach_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
	"github.com/agui-proxy/agui-proxy/thread"
)

// env is a demo agent with a proxy in front of it, over real sockets.
type env struct {
	agent *httptest.Server
	px    *httptest.Server
	h     *proxy.Handler
}

func newEnv(t *testing.T, cfg proxy.Config) *env {
	t.Helper()
	e := &env{}
	e.agent = runtest.StartAgent(t).Server
	u, _ := url.Parse(e.agent.URL)
	cfg.Upstream = u
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 50 * time.Millisecond
	}
	h, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	e.px = httptest.NewServer(h)
	t.Cleanup(func() {
		e.px.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	})
	return e
}

func (e *env) post(t *testing.T, ctx context.Context, body string, hdr http.Header) *http.Response {
	t.Helper()
	return runtest.PostRun(t, ctx, e.px.URL+"/", body, hdr)
}

func (e *env) get(t *testing.T, path string, hdr http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.px.URL+path, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

type event struct {
	id   string
	data []byte
	typ  string
}

// readEvents reads every data frame of r to EOF.
func readEvents(t *testing.T, r io.Reader) []event {
	t.Helper()
	rd := sse.NewReader(r, sse.Limits{MaxFrameBytes: 64 << 20, MaxLineBytes: 64 << 20})
	var out []event
	for {
		f, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading stream: %v", err)
		}
		if !f.HasData {
			continue
		}
		typ, _ := agui.EventType(f.Data)
		out = append(out, event{id: f.ID, data: bytes.Clone(f.Data), typ: typ})
	}
}

// replay applies events with the Go mirror of the official client.
func replay(t *testing.T, evs []event) (string, string) {
	t.Helper()
	var ces []compact.Event
	for _, e := range evs {
		ce, err := compact.ParseEvent(e.data)
		if err != nil {
			t.Fatalf("event %s: %v", e.data, err)
		}
		if compact.DefaultEphemeral(ce.Type) {
			continue
		}
		ces = append(ces, ce)
	}
	m, s, err := compact.Replay(ces)
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return string(m), string(s)
}

// rawRun returns the run's recorded events as the client saw them.
func rawRun(t *testing.T, store recorder.Store, threadID, run string) []event {
	t.Helper()
	recs, err := store.Events(context.Background(), threadID, run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	for _, r := range recs {
		data, err := thread.FrameData(r.Frame)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, event{data: data, typ: r.Type})
	}
	return out
}

func jsonEqual(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

func jsonUnmarshal(b []byte, v any) { json.Unmarshal(b, v) }
