package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/runtest"
)

// TestNoCutStreamsUnderLoad pins the golang/go#40747 trap: the stock ReverseProxy cut 8 of
// 2,500 SSE streams under load here (a closed-connection race around the inbound request body).
// The proxy forwards a buffered copy of the body; zero cut streams is the bar.
func TestNoCutStreamsUnderLoad(t *testing.T) {
	agent := runtest.StartAgent(t)
	_, px := startProxy(t, agent.URL, Config{AllowConcurrentRuns: true})
	const runs, concurrency = 2500, 50
	var next, cut atomic.Int64
	var wg sync.WaitGroup
	var firstErr sync.Once
	for range concurrency {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > runs {
					return
				}
				res := runtest.PostRun(t, context.Background(), px.URL, runtest.RunBody(fmt.Sprintf("load-%d", i%100), fmt.Sprintf("run-%d", i), "chat"), nil)
				body, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil || res.StatusCode != 200 || !bytes.Contains(body, []byte(`"RUN_FINISHED"`)) {
					cut.Add(1)
					firstErr.Do(func() {
						t.Errorf("run %d: status %d, err %v, %d bytes without RUN_FINISHED", i, res.StatusCode, err, len(body))
					})
				}
			}
		})
	}
	wg.Wait()
	if n := cut.Load(); n != 0 {
		t.Errorf("%d of %d streams were cut", n, runs)
	}
}
