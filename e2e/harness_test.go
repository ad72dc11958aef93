package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// harnessScenarios is every demo scenario but bench (time-stamped, for agui-bench).
func harnessScenarios() []string {
	var out []string
	for _, s := range demoagent.Scenarios() {
		if s != "bench" {
			out = append(out, s)
		}
	}
	return out
}

// requireNode fails (never skips) when node or the pinned npm packages are missing: a
// silently skipped e2e suite is a suite nobody runs.
func requireOfficialClient(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH (%v): install Node.js 20+, then run `npm ci` in e2e/", err)
	}
	if _, err := os.Stat(filepath.Join("node_modules", "@ag-ui", "client", "package.json")); err != nil {
		t.Fatalf("e2e/node_modules lacks @ag-ui/client (%v): run `cd e2e && npm ci`", err)
	}
}

// runHarness runs run-scenarios.mjs and returns its combined output and error (an
// *exec.ExitError when some scenario failed).
func runHarness(t testing.TB, direct, proxied string, scenarios []string, extra ...string) (string, error) {
	t.Helper()
	requireOfficialClient(t)
	args := append([]string{"run-scenarios.mjs", "--direct", direct, "--proxy", proxied,
		"--scenarios", strings.Join(scenarios, ","), "--timeout", "60000"}, extra...)
	cmd := exec.CommandContext(t.Context(), "node", args...)
	cmd.Env = append(os.Environ(), "NODE_ENV=production", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func startDemo(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(demoagent.New(demoagent.Config{}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// TestHarnessSameAgentPasses: two instances of the deterministic agent are indistinguishable
// to the official client, for every scenario, failure scenarios included.
func TestHarnessSameAgentPasses(t *testing.T) {
	scen := harnessScenarios()
	out, err := runHarness(t, startDemo(t), startDemo(t), scen)
	if err != nil || !strings.Contains(out, "\n"+itoa(len(scen))+" passed, 0 failed") {
		t.Fatalf("run-scenarios(agent, agent) = %v, output:\n%s", err, out)
	}
}

// tamper serves the agent's answer after passing the whole body through f.
func tamper(t testing.TB, upstream string, f func([]byte) []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", res.Header.Get("Content-Type"))
		w.WriteHeader(res.StatusCode)
		w.Write(f(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// validInput is a RunAgentInput the official schema accepts, for RUN_STARTED.input.
const validInput = `{"threadId":"t","runId":"r","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{}}`

// TestHarnessDetectsDifferences proves the harness can fail: each tampering "proxy" changes
// what the client sees in one way, except the ones a proxy is allowed to do.
func TestHarnessDetectsDifferences(t *testing.T) {
	demo := startDemo(t)
	tests := []struct {
		name      string
		scenarios []string
		f         func([]byte) []byte
		extra     []string
		wantPass  bool
	}{
		{"changed delta", []string{"tools"}, func(b []byte) []byte {
			return bytes.Replace(b, []byte("Paris"), []byte("Lyon"), 1)
		}, nil, false},
		{"dropped RUN_FINISHED", []string{"chat"}, func(b []byte) []byte {
			i := bytes.LastIndex(b, []byte("data: "))
			return b[:i]
		}, nil, false},
		{"extra member", []string{"state"}, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`{"type":"STATE_DELTA",`), []byte(`{"type":"STATE_DELTA","metadata":{"x":1},`), 1)
		}, nil, false},
		{"RUN_ERROR appended", []string{"noend"}, func(b []byte) []byte {
			return append(b, "\n\ndata: {\"type\":\"RUN_ERROR\",\"message\":\"ended\"}\n\n"...)
		}, nil, false},
		{"LF instead of CRLF", []string{"crlf"}, func(b []byte) []byte {
			return bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
		}, nil, false},
		{"id lines added", []string{"chat", "unicode"}, func(b []byte) []byte {
			return bytes.ReplaceAll(b, []byte("data: "), []byte("id: 1-0\ndata: "))
		}, nil, true},
		{"RUN_STARTED enriched", []string{"chat"}, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"runId":"`), []byte(`"input":`+validInput+`,"runId":"`), 1)
		}, nil, true},
		{"RUN_STARTED enriched, strict", []string{"chat"}, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"runId":"`), []byte(`"input":`+validInput+`,"runId":"`), 1)
		}, []string{"--strict"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runHarness(t, demo, tamper(t, demo, tt.f), tt.scenarios, tt.extra...)
			if pass := err == nil; pass != tt.wantPass {
				t.Errorf("run-scenarios(%s) pass = %v, want %v; output:\n%s", tt.name, pass, tt.wantPass, out)
			}
			if !tt.wantPass && !strings.Contains(out, "FAIL "+tt.scenarios[0]) {
				t.Errorf("run-scenarios(%s) output lacks a FAIL line for %s:\n%s", tt.name, tt.scenarios[0], out)
			}
		})
	}
}

// TestHarnessUsage: bad arguments exit 2 with a message, before any run.
func TestHarnessUsage(t *testing.T) {
	requireOfficialClient(t)
	cmd := exec.CommandContext(context.Background(), "node", "run-scenarios.mjs", "--direct", "http://127.0.0.1:1/")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--proxy") {
		t.Errorf("run-scenarios without --proxy = %v, %q, want exit 2 naming --proxy", err, out)
	}
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}

// startProxy serves a proxy in front of upstream on store (nil: its own in-memory store) and
// returns its URL.
func startProxy(t testing.TB, upstream string, store recorder.Store) string {
	t.Helper()
	return startProxyWith(t, upstream, proxy.Config{Store: store})
}

// startProxyWith is startProxy with the rest of the proxy's configuration in cfg (its
// Upstream is upstream's).
func startProxyWith(t testing.TB, upstream string, cfg proxy.Config) string {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstream = u
	h, err := proxy.New(cfg)
	if err != nil {
		t.Fatalf("proxy.New(%s) error = %v", u, err)
	}
	front := runtest.ServeLikeCmd(t, h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown() = %v", err)
		}
	})
	return front.URL + "/"
}
