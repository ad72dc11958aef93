package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/compact/compacttest"
)

// The generated streams of TestCompactCrossLanguage: seeds crossFrom to crossFrom+crossStreams-1
// (go test ./e2e -run CompactCrossLanguage -cross.from 300 -cross.streams 5000 explores more).
var (
	crossStreams = flag.Int("cross.streams", 300, "generated streams for TestCompactCrossLanguage")
	crossFrom    = flag.Uint64("cross.from", 0, "first generator seed of TestCompactCrossLanguage")
)

// compactCase is one file for compact-check.mjs.
type compactCase struct {
	Name       string            `json:"name"`
	Raw        []json.RawMessage `json:"raw"`
	Compacted  []json.RawMessage `json:"compacted"`
	GoMessages json.RawMessage   `json:"goMessages"`
	GoState    json.RawMessage   `json:"goState"`
	// The Go replay of the CommonJS build (what Node loads), for the Node runner.
	GoNodeMessages json.RawMessage `json:"goNodeMessages"`
	GoNodeState    json.RawMessage `json:"goNodeState"`
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
	compactWriteReplay(t, dir, name, events, out)
}

// compactWriteCutCase writes the case of events served from a cut: the prelude of events[:i],
// compacted again together with events[i:j] (as attach does from a checkpoint), then the live
// tail events[j:].
func compactWriteCutCase(t *testing.T, dir, name string, events []compact.Event, i, j int) {
	t.Helper()
	first, err := compact.Compact(events[:i], compact.Options{})
	if err != nil {
		t.Fatalf("%s: Compact(s[:%d]) = %v", name, i, err)
	}
	second, err := compact.Compact(append(append([]compact.Event(nil), first...), events[i:j]...), compact.Options{})
	if err != nil {
		t.Fatalf("%s: Compact(prelude + s[%d:%d]) = %v", name, i, j, err)
	}
	for _, e := range events[j:] {
		if !compact.DefaultEphemeral(e.Type) {
			second = append(second, e)
		}
	}
	compactWriteReplay(t, dir, name, events, second)
}

func compactWriteReplay(t *testing.T, dir, name string, events, out []compact.Event) {
	t.Helper()
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
	if c.GoNodeMessages, c.GoNodeState, err = compact.ReplayCommonJS(kept); err != nil {
		t.Fatalf("%s: ReplayCommonJS = %v", name, err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, "/", "_")+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCompactCrossLanguage proves, for every golden case and a few hundred generated streams,
// under both module builds of the official client (Node's CommonJS build and the ES module
// build a browser bundle holds, in headless Chromium), that the client ends with the same
// messages and state for the raw and the compacted stream, that the Go replay of that build
// (Replay, ReplayCommonJS) agrees with it, and that every compacted event passes the
// @ag-ui/core schemas.
func TestCompactCrossLanguage(t *testing.T) {
	node := compactRequireNode(t)
	dir := t.TempDir()
	for seed := *crossFrom; seed < *crossFrom+uint64(*crossStreams); seed++ {
		events := compacttest.Generate(seed, 20+int(seed%150), seed%3 == 0)
		compactWriteCase(t, dir, fmt.Sprintf("gen-%03d", seed), events)
		if seed%2 == 0 {
			i := int(seed*7919) % (len(events) + 1)
			j := i + int(seed*104729)%(len(events)-i+1)
			compactWriteCutCase(t, dir, fmt.Sprintf("gen-%03d-cut-%d-%d", seed, i, j), events, i, j)
		}
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
		name := "golden-" + strings.TrimSuffix(filepath.Base(g), ".txt")
		compactWriteCase(t, dir, name, events)
		for i, e := range events {
			if e.Type == "MESSAGES_SNAPSHOT" { // a cut right after it, the rest as the live tail
				compactWriteCutCase(t, dir, fmt.Sprintf("%s-cut-%d", name, i+1), events, i+1, i+1)
			}
		}
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
	compactRequireBrowser(t)
	// The two builds run side by side (two processes, one per core). Each checker fails a case
	// that hangs by name (--case-timeout); one still running when a tenth of the time left to
	// the test's deadline remains is stopped, and the test says which one hung.
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Until(d)/10))
		defer cancel()
	}
	scripts := []string{"compact-check.mjs", filepath.Join("browser", "compact-check.mjs")}
	outs := make([][]byte, len(scripts))
	errs := make([]error, len(scripts))
	var wg sync.WaitGroup
	for i, script := range scripts {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, node, script, dir)
			cmd.WaitDelay = 10 * time.Second
			outs[i], errs[i] = cmd.CombinedOutput()
			if errs[i] != nil && ctx.Err() != nil {
				errs[i] = fmt.Errorf("stopped before the test's deadline: it hung (%w)", errs[i])
			}
		})
	}
	wg.Wait()
	for i, script := range scripts {
		t.Logf("%s: %s", script, compactLastLines(string(outs[i]), 1))
		if errs[i] != nil {
			t.Errorf("node %s: %v\n%s", script, errs[i], compactFirstLines(string(outs[i]), 60))
		}
	}
}

// compactRequireBrowser fails with the command to run when the browser check cannot start.
func compactRequireBrowser(t *testing.T) {
	t.Helper()
	for _, p := range []string{"playwright-core", "esbuild"} {
		if _, err := os.Stat(filepath.Join("browser", "node_modules", p, "package.json")); err != nil {
			t.Fatalf("e2e/browser/node_modules lacks %s (%v): run `cd e2e/browser && npm ci`", p, err)
		}
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s is missing (%v): run `apt-get install -y chromium` (Debian's package; no browser download)", chromiumPath, err)
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
