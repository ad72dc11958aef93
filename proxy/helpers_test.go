package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// startProxy runs a Handler for cfg in front of upstream, on a real socket.
func startProxy(t testing.TB, upstream string, cfg Config) (*Handler, *httptest.Server) {
	t.Helper()
	return serveProxy(t, upstream, cfg, false)
}

// startProxyKeepAlive is startProxy with the server wired as cmd/agui-proxy wires it: a
// keepalive.Listener beside its listener, so a stream the proxy took over hands its
// connection back for the client's next request.
func startProxyKeepAlive(t testing.TB, upstream string, cfg Config) (*Handler, *httptest.Server) {
	t.Helper()
	return serveProxy(t, upstream, cfg, true)
}

func serveProxy(t testing.TB, upstream string, cfg Config, keepAlive bool) (*Handler, *httptest.Server) {
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
	var srv *httptest.Server
	if keepAlive {
		srv = runtest.ServeLikeCmd(t, h) // (closed after the Handler's Shutdown below)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(func() {
		if !keepAlive {
			srv.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	})
	return h, srv
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

// storedEvents returns the run's recorded events.
func storedEvents(t testing.TB, store recorder.Store, threadID, runID string) []recorder.Event {
	t.Helper()
	evs, err := store.Events(context.Background(), threadID, runID, 0, 0)
	if err != nil {
		t.Fatalf("Events(%s, %s): %v", threadID, runID, err)
	}
	return evs
}

// turnAgent is an agent that answers each run with the events turn returns for it (reply is
// the id of its answer, "a-" and the run id); after, when set, runs once they are flushed (an
// agent keeping its stream open).
func turnAgent(t testing.TB, turn func(in *agui.RunInput, reply string) []string, after func(in *agui.RunInput, r *http.Request)) *httptest.Server {
	t.Helper()
	return newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := agui.DecodeRunInput(mustRead(t, r.Body))
		if err != nil {
			t.Error(err)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range turn(in, "a-"+in.RunID) {
			io.WriteString(w, "data: "+ev+"\n\n")
		}
		w.(http.Flusher).Flush()
		if after != nil {
			after(in, r)
		}
	}))
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
