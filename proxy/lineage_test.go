package proxy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// TestLineageInMetadata: with LineageMetadata the proxy writes the run a run continues into
// RUN_STARTED.metadata["agui-proxy"].parentRunId (beside the agent's own metadata, its bytes
// kept) and never into parentRunId, which stays the agent's; the runs tree keeps the lineage.
// Live and in the store, on every store.
func TestLineageInMetadata(t *testing.T) {
	starts := map[string]string{ // the agent's RUN_STARTED per run id ("": none, the proxy synthesizes it)
		"r1": `{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`,
		"r2": `{"type":"RUN_STARTED","threadId":"t1","runId":"r2"}`,
		"r3": `{"type":"RUN_STARTED","threadId":"t1","runId":"r3","metadata":{"k":1}}`,
		"r4": `{"type":"RUN_STARTED","threadId":"t1","runId":"r4","parentRunId":"spawner"}`,
		"r5": "",
		"r6": `{"type":"RUN_STARTED","threadId":"t1","runId":"r6","metadata":{"agui-proxy":{"mine":true}}}`,
	}
	want := map[string]string{ // RUN_STARTED as the client gets it, without input
		"r1": `{"type":"RUN_STARTED","threadId":"t1","runId":"r1"`,
		"r2": `{"type":"RUN_STARTED","threadId":"t1","runId":"r2","metadata":{"agui-proxy":{"parentRunId":"r1"}}`,
		"r3": `{"type":"RUN_STARTED","threadId":"t1","runId":"r3","metadata":{"agui-proxy":{"parentRunId":"r2"},"k":1}`,
		"r4": `{"type":"RUN_STARTED","threadId":"t1","runId":"r4","parentRunId":"spawner","metadata":{"agui-proxy":{"parentRunId":"r3"}}`,
		"r5": `{"type":"RUN_STARTED","threadId":"t1","runId":"r5","metadata":{"agui-proxy":{"parentRunId":"r4"}}`,
		"r6": `{"type":"RUN_STARTED","threadId":"t1","runId":"r6","metadata":{"agui-proxy":{"mine":true}}`,
	}
	agent := turnAgent(t, func(in *agui.RunInput, reply string) []string {
		out := []string{`{"type":"TEXT_MESSAGE_START","messageId":"` + reply + `","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"` + reply + `"}`,
			`{"type":"RUN_FINISHED","threadId":"t1","runId":"` + in.RunID + `"}`}
		if s := starts[in.RunID]; s != "" {
			out = append([]string{s}, out...)
		}
		return out
	}, nil)
	testStores(t, func(t *testing.T, store recorder.Store) {
		_, px := startProxy(t, agent.URL, Config{Store: store, Lineage: LineageMetadata})
		for _, run := range []string{"r1", "r2", "r3", "r4", "r5", "r6"} {
			res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t1","runId":"`+run+`","messages":[]}`, nil)
			fs, _ := readFrames(t, res.Body)
			res.Body.Close()
			first := string(dataFrames(fs)[0].data)
			got, _, _ := strings.Cut(first, `,"input":`)
			if got != want[run] {
				t.Errorf("%s: RUN_STARTED = %s\nwant %s,\"input\":...", run, first, want[run])
			}
			var ev struct {
				Metadata map[string]json.RawMessage
			}
			if err := json.Unmarshal([]byte(first), &ev); err != nil {
				t.Errorf("%s: RUN_STARTED is not JSON: %v", run, err)
			}
			if _, reserved := ev.Metadata["ag-ui"]; reserved {
				t.Errorf("%s: the proxy wrote the reserved ag-ui metadata key", run)
			}
			if stored := storedEvents(t, store, "t1", run); !strings.Contains(string(stored[0].Frame), want[run]) {
				t.Errorf("%s: stored RUN_STARTED = %q", run, stored[0].Frame)
			}
		}
		var runs struct {
			Runs []struct{ RunID, ParentRunID string }
		}
		getJSON(t, px.URL+"/agui/threads/t1/runs", &runs)
		for i, r := range runs.Runs {
			if want := map[bool]string{true: "", false: runs.Runs[max(i-1, 0)].RunID}[i == 0]; r.ParentRunID != want {
				t.Errorf("runs tree: %s has parent %q, want %q", r.RunID, r.ParentRunID, want)
			}
		}
	})
}
