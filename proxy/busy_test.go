package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// TestNextRunRightAfterTerminalEvent: a client that has read a run's terminal event starts
// the thread's next run at once, on the other replica, and is never refused ThreadBusy (the
// official client's tool loop does exactly this). Memory store, and a real redis-server in
// both durability modes.
func TestNextRunRightAfterTerminalEvent(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		testNextRunRightAfterTerminal(t, Config{Store: recorder.NewMemoryStore(recorder.MemoryConfig{})})
	})
	srv := redistest.Start(t)
	t.Run("redis-async", func(t *testing.T) { testNextRunRightAfterTerminal(t, Config{Store: newRedisStore(t, srv)}) })
	t.Run("redis-sync", func(t *testing.T) {
		testNextRunRightAfterTerminal(t, Config{Store: newRedisStore(t, srv), Durability: recorder.DurabilitySync})
	})
}

func testNextRunRightAfterTerminal(t *testing.T, cfg Config) {
	agent := runtest.StartAgent(t)
	_, a := startProxy(t, agent.URL, cfg)
	_, b := startProxy(t, agent.URL, cfg)
	replicas := []string{a.URL, b.URL}
	const rounds = 20
	for i := range rounds {
		run := fmt.Sprintf("r%d", i)
		res := runtest.PostRun(t, t.Context(), replicas[i%2], runtest.RunBody("loop", run, "tools"), nil)
		if res.StatusCode != http.StatusOK {
			p := runtest.DecodeProblem(t, res)
			t.Fatalf("round %d: POST %s right after the previous run's terminal event = %d %s, want 200", i, run, res.StatusCode, p.Code)
		}
		if typ := readToTerminal(t, res.Body); typ != agui.RunFinished {
			t.Fatalf("round %d: run %s ended with %s, want RUN_FINISHED", i, run, typ)
		}
		res.Body.Close() // and start the next run at once, without reading to EOF
	}
}

// readToTerminal reads frames until the first RUN_FINISHED or RUN_ERROR and returns its type.
func readToTerminal(t *testing.T, r io.Reader) string {
	t.Helper()
	rd := sse.NewReader(r, sse.Limits{MaxLineBytes: 1 << 20, MaxFrameBytes: 1 << 20})
	for {
		f, err := rd.Next()
		if err != nil {
			t.Fatalf("stream ended before a terminal event: %v", err)
		}
		if typ, _ := agui.EventType(f.Data); f.HasData && agui.IsTerminal(typ) {
			return typ
		}
	}
}

// TestConcurrentStartsOneWins: of many POSTs starting different runs on one thread at once,
// exactly one is accepted and every other is refused ThreadBusy (the rule is checked
// atomically in the store, so two replicas cannot both pass it).
func TestConcurrentStartsOneWins(t *testing.T) {
	srv := redistest.Start(t)
	for name, store := range map[string]recorder.Store{
		"memory": recorder.NewMemoryStore(recorder.MemoryConfig{}),
		"redis":  newRedisStore(t, srv),
	} {
		t.Run(name, func(t *testing.T) {
			agent := runtest.StartAgent(t)
			_, a := startProxy(t, agent.URL, Config{Store: store})
			_, b := startProxy(t, agent.URL, Config{Store: store})
			const n = 8
			codes := make([]int, n)
			problems := make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					url := []string{a.URL, b.URL}[i%2]
					res := runtest.PostRun(t, context.Background(), url, runtest.RunBody("contested", fmt.Sprintf("c%d", i), "chat", `,"intervalMs":20`), nil)
					defer res.Body.Close()
					codes[i] = res.StatusCode
					if res.StatusCode == http.StatusOK {
						io.Copy(io.Discard, res.Body)
					} else {
						problems[i] = runtest.DecodeProblem(t, res).Code
					}
				})
			}
			wg.Wait()
			won := 0
			for i, c := range codes {
				switch {
				case c == http.StatusOK:
					won++
				case c != http.StatusConflict || problems[i] != CodeThreadBusy:
					t.Errorf("start %d = %d %s, want 200 or 409 %s", i, c, problems[i], CodeThreadBusy)
				}
			}
			if won != 1 {
				t.Errorf("%d of %d concurrent starts on one thread were accepted, want exactly 1", won, n)
			}
		})
	}
}
