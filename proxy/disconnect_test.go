package proxy

import (
	"context"
	"fmt"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// TestImmediateDisconnectKeepsRun pins a race found by the cross-language resume tests: a
// client that leaves right after the first event made ReverseProxy.ServeHTTP return, which
// marks its wrapper of the request body closed; the Transport's final EOF-check Read of the
// body then failed and closed the upstream connection, so ~1 run in 5 ended with
// UPSTREAM_DISCONNECTED. The outbound request now gets a body of its own.
func TestImmediateDisconnectKeepsRun(t *testing.T) {
	agent := runtest.StartAgent(t)
	h, px := startProxy(t, agent.URL, Config{})
	for i := range 60 {
		run := fmt.Sprintf("dr-%d", i)
		ctx, cancel := context.WithCancel(context.Background())
		res := runtest.PostRun(t, ctx, px.URL, runtest.RunBody("dr", run, "unicode", `,"intervalMs":15`), nil)
		rd := sse.NewReader(res.Body, sse.Limits{})
		for {
			f, err := rd.Next()
			if err != nil || f.HasData {
				break
			}
		}
		cancel()
		res.Body.Close()
		if r := runtest.WaitRunEnded(t, h.Store(), "dr", run); r.Status != recorder.StatusFinished {
			t.Fatalf("run %d ended %s %s after its client left: the client's departure reached the agent", i, r.Status, r.Detail)
		}
	}
}
