package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// TestProxyEmittedEventsPass1_0: every event the proxy writes itself (the enriched and the
// synthesized RUN_STARTED, its RUN_ERROR, a stop's closing events and RUN_FINISHED outcome
// cancelled, the preludes' snapshots, its CUSTOM markers), on the run POST, the thread and run
// attach, a failed and an exact resume, passes @ag-ui/core 1.0.0's EventSchemas unchanged
// and reads through the official client without an error or a warning (emitted-check.mjs), on
// the memory, disk and Redis stores.
func TestProxyEmittedEventsPass1_0(t *testing.T) {
	requireOfficialClient(t)
	stores := map[string]func(t *testing.T) recorder.Store{
		"memory": func(t *testing.T) recorder.Store { return nil },
		"disk": func(t *testing.T) recorder.Store {
			s, err := recorder.OpenDiskStore(t.Context(), recorder.DiskConfig{Dir: t.TempDir(), NoSync: true})
			if err != nil {
				t.Fatalf("OpenDiskStore: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"redis": func(t *testing.T) recorder.Store {
			srv := redistest.Start(t)
			s, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{URL: srv.URL(), Prefix: "e2e", FollowBlock: 100 * time.Millisecond})
			if err != nil {
				t.Fatalf("NewRedisStore: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for _, name := range []string{"memory", "disk", "redis"} {
		t.Run(name, func(t *testing.T) {
			front := startProxy(t, startDemo(t), stores[name](t))
			cmd := exec.CommandContext(t.Context(), "node", "emitted-check.mjs", "--proxy", front, "--prefix", "em-"+name)
			cmd.Env = append(os.Environ(), "NODE_ENV=production", "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), " passed, 0 failed") {
				t.Fatalf("emitted-check.mjs = %v:\n%s", err, out)
			}
			t.Logf("emitted-check.mjs:\n%s", out)
		})
	}
}

// TestEmittedCheckDetectsOldStopEnding: the check fails a proxy whose stop still ends a run
// with RUN_ERROR CANCELLED (proxy.StopRunError), so a passing check means something.
func TestEmittedCheckDetectsOldStopEnding(t *testing.T) {
	requireOfficialClient(t)
	front := startProxyWith(t, startDemo(t), proxy.Config{StopEnding: proxy.StopRunError})
	cmd := exec.CommandContext(t.Context(), "node", "emitted-check.mjs", "--proxy", front, "--prefix", "em-old")
	cmd.Env = append(os.Environ(), "NODE_ENV=production", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "FAIL stop: ") || !strings.Contains(string(out), "want cancelled") {
		t.Fatalf("emitted-check.mjs against the old stop ending = %v, want FAIL stop:\n%s", err, out)
	}
}
