package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// benchUpstream streams n TEXT_MESSAGE_CONTENT events of ~200 bytes as fast as it can.
func benchUpstream(n int) http.Handler {
	ev := `data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":"` + strings.Repeat("x", 130) + `"}` + "\n\n"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}`+"\n\n"+`data: {"type":"TEXT_MESSAGE_START","messageId":"msg-1","role":"assistant"}`+"\n\n")
		rc := http.NewResponseController(w)
		for range n {
			io.WriteString(w, ev)
			rc.Flush()
		}
		io.WriteString(w, `data: {"type":"TEXT_MESSAGE_END","messageId":"msg-1"}`+"\n\n"+`data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}`+"\n\n")
	})
}

// BenchmarkRunThroughput measures the cost per event of one run of 10,000 events: directly
// from the upstream, and through the proxy without recording, with the memory store, and with
// the memory store in sync durability. ns/op is per run; see the events/s metric.
func BenchmarkRunThroughput(b *testing.B) {
	const events = 10000
	upstream := httptest.NewServer(benchUpstream(events))
	defer upstream.Close()
	for _, mode := range []string{"direct", "norecord", "memory", "memory-sync"} {
		b.Run(mode, func(b *testing.B) {
			target := upstream.URL
			if mode != "direct" {
				cfg := Config{DisableRecording: mode == "norecord", AllowConcurrentRuns: true}
				if mode == "memory-sync" {
					cfg.Durability = recorder.DurabilitySync
				}
				_, px := startProxy(b, upstream.URL, cfg)
				target = px.URL
			}
			postRuns(b, target, events*150, false)
			b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkRunChurn measures what a short run costs from its request to its last byte (ns/op
// and allocs/op per run of five events, one run at a time, on one client): directly from the
// upstream, through a plain httputil.ReverseProxy, and through the proxy wired as
// cmd/agui-proxy wires it (a keepalive.Listener beside the server's) without recording, with
// the memory store and with a private Redis; "norecord-close" is the proxy without the
// keepalive.Listener (each run's connection closed at its end, the next run dialing anew),
// "norecord-keepalive" with Config.StreamKeepAlive (streams written through net/http);
// "redis-thread" posts every run to one thread, each continuing the one before (a chat's
// turns: the run's end builds its checkpoint on its parent's branch; run it with -benchtime
// 300x, the thread grows by a run per iteration). Where the soak's streams each send one
// event a second, a run's start and end weigh on every one of its events; this isolates them.
func BenchmarkRunChurn(b *testing.B) {
	upstream := httptest.NewServer(benchUpstream(2))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	for _, mode := range []string{"direct", "plain", "norecord", "norecord-close", "norecord-keepalive", "memory", "redis", "redis-thread"} {
		b.Run(mode, func(b *testing.B) {
			target := upstream.URL
			switch mode {
			case "direct":
			case "plain":
				plain := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }, FlushInterval: -1})
				defer plain.Close()
				target = plain.URL
			default:
				cfg := Config{DisableRecording: strings.HasPrefix(mode, "norecord"), StreamKeepAlive: mode == "norecord-keepalive"}
				if strings.HasPrefix(mode, "redis") {
					cfg.Store = newRedisStore(b, redistest.Start(b))
				}
				start := startProxyKeepAlive
				if mode == "norecord-close" {
					start = startProxy
				}
				_, px := start(b, upstream.URL, cfg)
				target = px.URL
			}
			postRuns(b, target, 2*150, mode == "redis-thread")
		})
	}
}

// postRuns posts one run per iteration of b's loop (a thread of its own each, or with
// oneThread all on one thread, each continuing the one before) and reads its stream to the
// end; a stream shorter than least bytes fails the benchmark.
func postRuns(b *testing.B, target string, least int64, oneThread bool) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		threadID := fmt.Sprintf("t%d", i)
		if oneThread {
			threadID = "t"
		}
		res := runtest.PostRun(b, context.Background(), target, fmt.Sprintf(`{"threadId":%q,"runId":"r%d","messages":[]}`, threadID, i), nil)
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if n < least {
			b.Fatalf("short stream: %d bytes", n)
		}
	}
}
