package proxy

import (
	"context"
	"fmt"
	"net/http/httptrace"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
)

// TestRunEveryScenarioKeepAlive is TestRunEveryScenario with the streams written by net/http.
func TestRunEveryScenarioKeepAlive(t *testing.T) {
	testEveryScenario(t, Config{StreamKeepAlive: true})
}

// TestStreamConnection: by default a run's HTTP/1.1 stream is written on the connection the
// proxy took over: chunked, Connection: close, and the client's next run opens a new
// connection. With StreamKeepAlive the stream goes through net/http and the connection
// carries the next run.
func TestStreamConnection(t *testing.T) {
	agent := runtest.StartAgent(t)
	for _, keepAlive := range []bool{false, true} {
		t.Run(fmt.Sprintf("StreamKeepAlive=%v", keepAlive), func(t *testing.T) {
			_, px := startProxy(t, agent.URL, Config{StreamKeepAlive: keepAlive})
			parent := ""
			for i := range 2 {
				reused := false
				ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { reused = c.Reused }})
				body := fmt.Sprintf(`{"threadId":"conn-%v","runId":"r%d","parentRunId":%q,"messages":[],"forwardedProps":{"scenario":"chat"}}`, keepAlive, i, parent)
				if parent == "" {
					body = fmt.Sprintf(`{"threadId":"conn-%v","runId":"r%d","messages":[],"forwardedProps":{"scenario":"chat"}}`, keepAlive, i)
				}
				res := runtest.PostRun(t, ctx, px.URL, body, nil)
				frames, err := readFrames(t, res.Body)
				res.Body.Close()
				if err != nil {
					t.Fatalf("run %d: reading the stream: %v", i, err)
				}
				got := dataFrames(frames)
				if len(got) < 2 || got[len(got)-1].eventType() != agui.RunFinished {
					t.Fatalf("run %d: %d events, the last not RUN_FINISHED", i, len(got))
				}
				if len(res.TransferEncoding) != 1 || res.TransferEncoding[0] != "chunked" {
					t.Errorf("run %d: Transfer-Encoding %v, want chunked", i, res.TransferEncoding)
				}
				if res.Close == keepAlive {
					t.Errorf("run %d: Connection: close is %v, want %v", i, res.Close, !keepAlive)
				}
				if i == 1 && reused != keepAlive {
					t.Errorf("second run reused the connection: %v, want %v", reused, keepAlive)
				}
				parent = fmt.Sprintf("r%d", i)
			}
		})
	}
}

// TestShutdownWaitsForDirectStreams: Shutdown returns once the streams it took over were
// written to their end (their runs ended first).
func TestShutdownWaitsForDirectStreams(t *testing.T) {
	agent := runtest.StartAgent(t)
	h, px := startProxy(t, agent.URL, Config{})
	res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("shut", "shut-1", "bench", `,"events":50,"intervalMs":2`), nil)
	defer res.Body.Close()
	done := make(chan error, 1)
	go func() { done <- h.Shutdown(context.Background()) }()
	frames, err := readFrames(t, res.Body)
	if err != nil {
		t.Fatalf("reading the stream during shutdown: %v", err)
	}
	got := dataFrames(frames)
	if last := got[len(got)-1]; last.eventType() != agui.RunFinished {
		t.Errorf("the stream ended with %s, want RUN_FINISHED (the run drains)", last.eventType())
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
