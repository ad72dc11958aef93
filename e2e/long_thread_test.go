package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agui-proxy/agui-proxy/proxy"
)

// TestLongThreadOfficialClient: the official client continues one thread for 40 runs of the
// demo agent's scenarios through the proxy, and every 10 runs a fresh client attaches to the
// thread and must end with the continuing client's messages and state
// (long-thread-check.mjs). Past the first runs the thread's branch is large enough that the
// proxy keeps its fold, so most runs' checkpoints are built by folding only the run: the
// metrics must show it, or this test would not be checking that path.
func TestLongThreadOfficialClient(t *testing.T) {
	requireOfficialClient(t)
	reg := prometheus.NewRegistry()
	proxied := startProxyWith(t, startDemo(t), proxy.Config{Registerer: reg})
	cmd := exec.CommandContext(t.Context(), "node", "long-thread-check.mjs", "--proxy", proxied, "--runs", "40", "--every", "10")
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "4 passed, 0 failed") {
		t.Fatalf("long-thread-check: %v\n%s", err, out)
	}
	folded, compacted := branchCounts(t, reg)
	if folded < 20 || folded+compacted != 40 {
		t.Fatalf("checkpoint branches: %v folded, %v compacted; want 40 in all, most folded", folded, compacted)
	}
}

// branchCounts reads agui_proxy_checkpoint_branches_total by how from reg.
func branchCounts(t *testing.T, reg *prometheus.Registry) (folded, compacted float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "agui_proxy_checkpoint_branches_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "how" && l.GetValue() == "folded" {
					folded = m.GetCounter().GetValue()
				} else if l.GetName() == "how" && l.GetValue() == "compacted" {
					compacted = m.GetCounter().GetValue()
				}
			}
		}
	}
	return folded, compacted
}
