package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/compact/compacttest"
)

// compactCase is one file for compact-check.mjs.
type compactCase struct {
	Name       string            `json:"name"`
	Raw        []json.RawMessage `json:"raw"`
	Compacted  []json.RawMessage `json:"compacted"`
	GoMessages json.RawMessage   `json:"goMessages"`
	GoState    json.RawMessage   `json:"goState"`
}

func compactRequireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found on PATH: install Node.js 20+ to run the cross-language tests")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "@ag-ui", "client")); err != nil {
		t.Fatalf("e2e/node_modules is missing: run `npm ci` in e2e/ (%v)", err)
	}
	return node
}

func compactWriteCase(t *testing.T, dir, name string, events []compact.Event) {
	t.Helper()
	out, err := compact.Compact(events, compact.Options{})
	if err != nil {
		t.Fatalf("%s: Compact = %v", name, err)
	}
	c := compactCase{Name: name}
	var kept []compact.Event
	for _, e := range events {
		if !compact.DefaultEphemeral(e.Type) {
			c.Raw = append(c.Raw, json.RawMessage(e.Raw))
			kept = append(kept, e)
		}
	}
	for _, e := range out {
		c.Compacted = append(c.Compacted, json.RawMessage(e.Raw))
	}
	m, s, err := compact.Replay(kept)
	if err != nil {
		t.Fatalf("%s: Replay = %v", name, err)
	}
	c.GoMessages, c.GoState = m, s
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, "/", "_")+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCompactCrossLanguage is the proof of issue 4 item 7: for every golden case and a few
// hundred generated streams, the official client ends with the same messages and state for
// the raw and the compacted stream, the Go Replay agrees with it, and every compacted event
// passes the @ag-ui/core schemas.
func TestCompactCrossLanguage(t *testing.T) {
	node := compactRequireNode(t)
	dir := t.TempDir()
	n := 300
	for seed := range uint64(n) {
		compactWriteCase(t, dir, fmt.Sprintf("gen-%03d", seed), compacttest.Generate(seed, 20+int(seed%150), seed%3 == 0))
	}
	golden, _ := filepath.Glob(filepath.Join("..", "compact", "testdata", "golden", "*.txt"))
	for _, g := range golden {
		events, err := compactReadGolden(g)
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		if _, err := compact.Compact(events, compact.Options{}); err != nil {
			continue // golden cases of rejected input have nothing to replay
		}
		compactWriteCase(t, dir, "golden-"+strings.TrimSuffix(filepath.Base(g), ".txt"), events)
	}
	for _, sc := range compactDemoThreads(t) {
		if _, err := compact.Compact(sc.events, compact.Options{}); err != nil {
			// e.g. "noend": a run abandoned without a terminal event followed by a new run
			// is one stream the client rejects; the recorder closes such runs with RUN_ERROR.
			t.Logf("demo %s: not compactable as one stream: %v", sc.name, err)
			continue
		}
		compactWriteCase(t, dir, "demo-"+sc.name, sc.events)
	}
	cmd := exec.CommandContext(t.Context(), node, "compact-check.mjs", dir)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", compactLastLines(string(out), 1))
	if err != nil {
		t.Fatalf("node compact-check.mjs: %v\n%s", err, compactFirstLines(string(out), 60))
	}
}

func compactLastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func compactFirstLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[:n]
	}
	return strings.Join(l, "\n")
}

// compactReadGolden reads the input half of a compact/testdata/golden case: one JSON event per
// line up to the separator line.
func compactReadGolden(path string) ([]compact.Event, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []compact.Event
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "-- ") {
			break
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, err := compact.ParseEvent([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", line, err)
		}
		out = append(out, e)
	}
	return out, nil
}
