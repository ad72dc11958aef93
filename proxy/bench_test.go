package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				res := runtest.PostRun(b, context.Background(), target, fmt.Sprintf(`{"threadId":"t%d","runId":"r%d","messages":[]}`, i, i), nil)
				n, _ := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if n < events*150 {
					b.Fatalf("short stream: %d bytes", n)
				}
			}
			b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
