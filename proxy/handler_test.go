package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// TestRunEveryScenario runs every demo scenario directly and through the proxy and checks that
// the client gets the agent's frames byte for byte (plus our id line), that RUN_STARTED is
// enriched, that runs without a terminal event get one, and that the store holds exactly what
// the client saw.
func TestRunEveryScenario(t *testing.T) {
	testEveryScenario(t, Config{})
}

func testEveryScenario(t *testing.T, cfg Config) {
	agent := runtest.StartAgent(t)
	h, px := startProxy(t, agent.URL, cfg)
	for _, sc := range demoagent.Scenarios() {
		t.Run(sc, func(t *testing.T) {
			extra := `,"intervalMs":0,"events":50,"size":40000`
			direct := runtest.PostRun(t, t.Context(), agent.URL, runtest.RunBody("direct-"+sc, "run-"+sc, sc, extra), nil)
			want, err := readFrames(t, direct.Body)
			direct.Body.Close()
			if err != nil {
				t.Fatalf("reading the direct stream: %v", err)
			}
			res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("thread-"+sc, "run-"+sc, sc, extra), nil)
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK || !isEventStream(res.Header) {
				t.Fatalf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
			}
			if got := res.Header.Get("X-Accel-Buffering"); got != "no" {
				t.Errorf("X-Accel-Buffering = %q, want no", got)
			}
			got, err := readFrames(t, res.Body)
			if err != nil {
				t.Fatalf("reading the proxied stream: %v", err)
			}
			wantData, gotData := dataFrames(want), dataFrames(got)

			// Every event carries a cursor with seq 1..N and the same epoch.
			var epoch string
			for i, f := range gotData {
				c, err := recorder.ParseCursor(f.id)
				if err != nil || c.RunID != "run-"+sc || c.Seq != int64(i+1) {
					t.Fatalf("event %d id %q: cursor %+v, %v", i, f.id, c, err)
				}
				if epoch == "" {
					epoch = c.Epoch
				} else if c.Epoch != epoch {
					t.Fatalf("event %d epoch %q, earlier %q", i, c.Epoch, epoch)
				}
			}

			// RUN_STARTED first, enriched with input (the upstream's bytes kept as a prefix).
			if len(gotData) == 0 || gotData[0].eventType() != agui.RunStarted {
				t.Fatalf("first proxied event is not RUN_STARTED")
			}
			var started struct {
				Input *struct {
					ThreadID string            `json:"threadId"`
					Messages []json.RawMessage `json:"messages"`
				} `json:"input"`
			}
			if err := json.Unmarshal(gotData[0].data, &started); err != nil || started.Input == nil ||
				started.Input.ThreadID != "thread-"+sc || len(started.Input.Messages) != 1 {
				t.Errorf("RUN_STARTED = %s, want input with the thread id and the one new message", gotData[0].data)
			}
			upstreamStart := bytes.TrimSuffix(wantData[0].data, []byte("}"))
			upstreamStart = bytes.ReplaceAll(upstreamStart, []byte("direct-"+sc), []byte("thread-"+sc))
			if !bytes.HasPrefix(gotData[0].data, upstreamStart) {
				t.Errorf("RUN_STARTED %s does not keep the agent's bytes %s", gotData[0].data, upstreamStart)
			}

			// The other events are the agent's frames verbatim, with our id appended.
			n := len(wantData)
			switch sc {
			case "noend":
				if len(gotData) != n+1 || gotData[n].eventType() != agui.RunError || !strings.Contains(string(gotData[n].data), CodeUpstreamEnded) {
					t.Fatalf("noend: got %d events (last %s), want %d + RUN_ERROR %s", len(gotData), gotData[len(gotData)-1].data, n, CodeUpstreamEnded)
				}
			default:
				if len(gotData) != n {
					t.Fatalf("got %d events, want %d", len(gotData), n)
				}
			}
			for i := 1; i < n && sc != "bench"; i++ { // bench events carry their send time
				w := sse.Frame{Raw: bytes.ReplaceAll(wantData[i].raw, []byte("direct-"+sc), []byte("thread-"+sc)), Terminated: wantData[i].terminated}
				if exp := w.AppendWithID(nil, gotData[i].id); !bytes.Equal(gotData[i].raw, exp) {
					t.Fatalf("event %d:\n got %.300q\nwant %.300q", i, gotData[i].raw, exp)
				}
			}

			// The store holds exactly the frames the client received.
			run := runtest.WaitRunEnded(t, h.Store(), "thread-"+sc, "run-"+sc)
			stored := storedEvents(t, h.Store(), "thread-"+sc, "run-"+sc)
			if len(stored) != len(gotData) {
				t.Fatalf("stored %d events, client saw %d", len(stored), len(gotData))
			}
			for i, ev := range stored {
				if ev.Seq != int64(i+1) || !bytes.Equal(ev.Frame, gotData[i].raw) {
					t.Fatalf("stored event %d = seq %d %.300q, want %.300q", i, ev.Seq, ev.Frame, gotData[i].raw)
				}
			}
			wantStatus := recorder.StatusFinished
			if sc == "error" || sc == "noend" {
				wantStatus = recorder.StatusError
			}
			if run.Status != wantStatus || run.Epoch != epoch || run.LastSeq != int64(len(gotData)) {
				t.Errorf("run = %+v, want status %s, epoch %s, last seq %d", run, wantStatus, epoch, len(gotData))
			}
		})
	}
}

// TestClientDisconnectDoesNotStopRun pins the product's first promise: a client that drops
// after 3 events does not stop the agent, and the whole run is recorded (docs/design.md F1).
func TestClientDisconnectDoesNotStopRun(t *testing.T) {
	agent := runtest.StartAgent(t)
	h, px := startProxy(t, agent.URL, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	res := runtest.PostRun(t, ctx, px.URL, runtest.RunBody("t-drop", "r-drop", "bench", `,"events":60,"intervalMs":5`), nil)
	rd := sse.NewReader(res.Body, sse.Limits{})
	for seen := 0; seen < 3; {
		f, err := rd.Next()
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		if f.HasData {
			seen++
		}
	}
	cancel()
	res.Body.Close()

	rep := agent.WaitReport(t, "r-drop")
	if !rep.Completed || rep.Err != nil {
		t.Fatalf("agent report %+v: the run was stopped by the client's disconnect", rep)
	}
	run := runtest.WaitRunEnded(t, h.Store(), "t-drop", "r-drop")
	stored := storedEvents(t, h.Store(), "t-drop", "r-drop")
	if run.Status != recorder.StatusFinished || len(stored) != rep.EventsSent {
		t.Fatalf("run %+v with %d stored events, want finished with the agent's %d", run, len(stored), rep.EventsSent)
	}
	if last := stored[len(stored)-1]; last.Type != agui.RunFinished {
		t.Errorf("last stored event is %s, want RUN_FINISHED", last.Type)
	}
}

// TestNonRunRequestsPassThrough checks that what is not a run is proxied untouched.
func TestNonRunRequestsPassThrough(t *testing.T) {
	var gotBody, gotMethod, gotPath, gotEncoding string
	upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody, gotMethod, gotPath, gotEncoding = string(b), r.Method, r.URL.RequestURI(), r.Header.Get("Accept-Encoding")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, `{"ok":true}`)
	}))
	h, px := startProxy(t, upstream.URL, Config{})
	tests := []struct {
		name, method, path, ctype, body string
	}{
		{"get", http.MethodGet, "/info?x=1", "", ""},
		{"json post without run ids", http.MethodPost, "/tools", "application/json", `{"query":"x"}`},
		{"form post", http.MethodPost, "/form", "application/x-www-form-urlencoded", "a=1"},
		{"delete", http.MethodDelete, "/things/1", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, px.URL+tt.path, strings.NewReader(tt.body))
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			req.Header.Set("Accept-Encoding", "identity")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusTeapot || string(b) != `{"ok":true}` || res.Header.Get("X-Upstream") != "yes" {
				t.Errorf("response %d %q %v, want the upstream's", res.StatusCode, b, res.Header)
			}
			if gotMethod != tt.method || gotPath != tt.path || gotBody != tt.body || gotEncoding != "identity" {
				t.Errorf("upstream got %s %s %q (Accept-Encoding %q), want %s %s %q", gotMethod, gotPath, gotBody, gotEncoding, tt.method, tt.path, tt.body)
			}
		})
	}
	if h.ActiveRuns() != 0 {
		t.Errorf("ActiveRuns = %d after plain requests", h.ActiveRuns())
	}
}

// TestRecorderLinger: Config's zero linger is the recorder's default, a negative one none,
// any other itself; for the linger and the busy linger alike.
func TestRecorderLinger(t *testing.T) {
	for _, c := range []struct{ in, def, want time.Duration }{
		{0, recorder.DefaultLinger, recorder.DefaultLinger},
		{0, recorder.DefaultBusyLinger, recorder.DefaultBusyLinger},
		{-1, recorder.DefaultBusyLinger, 0},
		{7 * time.Millisecond, recorder.DefaultBusyLinger, 7 * time.Millisecond},
	} {
		if got := recorderLinger(c.in, c.def); got != c.want {
			t.Errorf("recorderLinger(%v, %v) = %v, want %v", c.in, c.def, got, c.want)
		}
	}
}

// TestIsEventStreamType: the fast path and mime.ParseMediaType agree on what is
// text/event-stream, whatever the case, parameters and spacing; longer types are refused, and
// a malformed parameter does not hide the type (as before the fast path).
func TestIsEventStreamType(t *testing.T) {
	for v, want := range map[string]bool{
		"text/event-stream": true, "TEXT/Event-Stream": true, "text/event-stream; charset=utf-8": true,
		"text/event-stream ;charset=utf-8": true, "text/event-stream\t; q=1": true,
		"text/event-streams": false, "text/event-stream-x": false, "text/event": false, "": false,
		"application/json": false, "*/*": false,
		"text/event-stream; =broken": true, // as mime.ParseMediaType: the type, with ErrInvalidMediaParameter
	} {
		if got := isEventStreamType(v); got != want {
			t.Errorf("isEventStreamType(%q) = %v, want %v", v, got, want)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	req.Header.Add("Accept", "application/json, text/event-stream;q=0.9")
	if !acceptsEventStream(req) {
		t.Error("acceptsEventStream: text/event-stream second in a list not found")
	}
}

func TestRecorderLanesPerStore(t *testing.T) {
	mem := recorder.NewMemoryStore(recorder.MemoryConfig{})
	defer mem.Close()
	disk, err := recorder.OpenDiskStore(t.Context(), recorder.DiskConfig{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	for _, c := range []struct {
		n     int
		store recorder.Store
		want  int
	}{{0, mem, recorder.DefaultLanes}, {0, disk, 1}, {3, disk, 3}, {2, mem, 2}} {
		if got := recorderLanes(c.n, c.store); got != c.want {
			t.Errorf("recorderLanes(%d, %T) = %d, want %d", c.n, c.store, got, c.want)
		}
	}
}
