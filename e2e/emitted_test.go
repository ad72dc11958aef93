package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// TestProxyEmittedEventsPass1_0: every event the proxy writes itself (the enriched and the
// synthesized RUN_STARTED, its RUN_ERROR, a stop's closing events and RUN_FINISHED outcome
// cancelled, the preludes' snapshots, its CUSTOM markers), on the run POST, the thread and run
// attach, a failed and an exact resume, passes @ag-ui/core 1.0.0's EventSchemas unchanged
// and reads through the official client without an error or a warning (emitted-check.mjs), on
// the memory, disk and Redis stores, and with the lineage in RUN_STARTED's metadata.
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
	for _, name := range []string{"memory", "disk", "redis", "memory-lineage-metadata"} {
		t.Run(name, func(t *testing.T) {
			cfg := proxy.Config{}
			if base, ok := strings.CutSuffix(name, "-lineage-metadata"); ok {
				// RUN_STARTED's metadata["agui-proxy"] (the thread's second run on) passes too.
				name, cfg.Lineage = base, proxy.LineageMetadata
			}
			cfg.Store = stores[name](t)
			front := startProxyWith(t, startOpeningAgent(t), cfg)
			cmd := exec.CommandContext(t.Context(), "node", "emitted-check.mjs", "--proxy", front, "--prefix", "em-"+name,
				"--open-scenario", "open", "--open-events", strconv.Itoa(len(openingEvents)+1))
			cmd.Env = append(os.Environ(), "NODE_ENV=production", "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), " passed, 0 failed") {
				t.Fatalf("emitted-check.mjs = %v:\n%s", err, out)
			}
			t.Logf("emitted-check.mjs:\n%s", out)
		})
	}
}

// openingEvents are what the "open" scenario of startOpeningAgent sends after RUN_STARTED
// before it waits: a subagent with a step, a step, a reasoning span and message, a text message
// and a tool call, all left open. (Not the retired THINKING_* events: they are not 1.0 events,
// the client warns about each; proxy/open_test.go checks how a stop closes them.)
var openingEvents = []string{
	`{"type":"SUBAGENT_STARTED","subagentRunId":"sub1","name":"helper"}`,
	`{"type":"STEP_STARTED","stepName":"look","subagentRunId":"sub1"}`,
	`{"type":"STEP_STARTED","stepName":"plan"}`,
	`{"type":"REASONING_START","messageId":"rs1"}`,
	`{"type":"REASONING_MESSAGE_START","messageId":"rm1","role":"reasoning"}`,
	`{"type":"REASONING_MESSAGE_CONTENT","messageId":"rm1","delta":"hmm"}`,
	`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hel"}`,
	`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"search","parentMessageId":"m1"}`,
	`{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"q\":"}`,
}

// startOpeningAgent serves the demo agent, except for runs whose forwardedProps.scenario is
// "open": those get RUN_STARTED and openingEvents, then nothing until the request ends.
func startOpeningAgent(t testing.TB) string {
	t.Helper()
	demo := demoagent.New(demoagent.Config{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		in, err := agui.DecodeRunInput(body)
		if err != nil || !bytes.Contains(in.Fields["forwardedProps"], []byte(`"scenario":"open"`)) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			demo.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"type\":\"RUN_STARTED\",\"threadId\":%q,\"runId\":%q}\n\n", in.ThreadID, in.RunID)
		for _, ev := range openingEvents {
			fmt.Fprintf(w, "data: %s\n\n", ev)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
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
