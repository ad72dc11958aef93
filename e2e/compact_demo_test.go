package e2e

import (
	"encoding/json"
	"testing"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"
)

type compactDemoThread struct {
	name   string
	events []compact.Event
	bytes  int
}

// compactDemoThreads records each demo scenario as a two-run thread: the second run receives the
// first run's user message again, as a client resending its history would.
func compactDemoThreads(t testing.TB) []compactDemoThread {
	t.Helper()
	var out []compactDemoThread
	for _, name := range demoagent.Scenarios() {
		var th compactDemoThread
		th.name = name
		for i, runID := range []string{"r1", "r2"} {
			msgs := []json.RawMessage{json.RawMessage(`{"id":"u1","role":"user","content":"hi"}`)}
			if i == 1 {
				msgs = append(msgs, json.RawMessage(`{"id":"u2","role":"user","content":"again"}`))
			}
			frames, err := demoagent.Events(name, demoagent.Input{ThreadID: "t1", RunID: runID, Messages: msgs, ForwardedProps: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatalf("demoagent.Events(%q) = %v", name, err)
			}
			for _, f := range frames {
				e, err := compact.ParseEvent(f)
				if err != nil {
					t.Fatalf("scenario %s: %v", name, err)
				}
				th.events = append(th.events, e)
				th.bytes += len(f)
			}
		}
		out = append(out, th)
	}
	return out
}

// TestCompactDemoRatios reports the raw -> compacted size of every demo scenario.
func TestCompactDemoRatios(t *testing.T) {
	for _, th := range compactDemoThreads(t) {
		out, err := compact.Compact(th.events, compact.Options{})
		if err != nil {
			t.Logf("%-28s not compactable: %v", th.name, err)
			continue
		}
		n := 0
		for _, e := range out {
			n += len(e.Raw)
		}
		t.Logf("%-28s %5d events %7d B -> %3d events %6d B (%.1f%%)", th.name, len(th.events), th.bytes, len(out), n, 100*float64(n)/float64(th.bytes))
	}
}
