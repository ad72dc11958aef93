package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// testStores runs f on the memory store, the disk store and a private redis-server.
func testStores(t *testing.T, f func(t *testing.T, store recorder.Store)) {
	t.Run("memory", func(t *testing.T) {
		s := recorder.NewMemoryStore(recorder.MemoryConfig{})
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
	t.Run("disk", func(t *testing.T) {
		s, err := recorder.OpenDiskStore(t.Context(), recorder.DiskConfig{Dir: t.TempDir(), NoSync: true})
		if err != nil {
			t.Fatalf("OpenDiskStore: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
	t.Run("redis", func(t *testing.T) { f(t, newRedisStore(t, redistest.Start(t))) })
}

// lastTypes returns the types of the last n events of fs, space-separated.
func lastTypes(fs []frame, n int) string {
	var types []string
	for _, f := range fs[max(0, len(fs)-n):] {
		types = append(types, f.eventType())
	}
	return strings.Join(types, " ")
}

// typesOf returns the types of every event of fs, space-separated.
func typesOf(fs []frame) string { return lastTypes(fs, len(fs)) }

// isCancelled reports whether fs ends with RUN_FINISHED outcome cancelled.
func isCancelled(fs []frame) bool {
	if len(fs) == 0 {
		return false
	}
	var ev struct {
		Type    string
		Outcome struct{ Type string }
	}
	return json.Unmarshal(fs[len(fs)-1].data, &ev) == nil && ev.Type == agui.RunFinished && ev.Outcome.Type == "cancelled"
}

// openingAgent answers every run with events that leave a step, a reasoning span and
// message, a text message and a tool call open (and open and close one of each before, which
// a stop must not close again), then streams nothing until its request is cancelled.
func openingAgent(t *testing.T) string {
	events := func(in *agui.RunInput, reply string) []string {
		return []string{
			`{"type":"RUN_STARTED","threadId":"` + in.ThreadID + `","runId":"` + in.RunID + `"}`,
			`{"type":"STEP_STARTED","stepName":"done"}`,
			`{"type":"STEP_FINISHED","stepName":"done"}`,
			`{"type":"STEP_STARTED","stepName":"plan"}`,
			`{"type":"REASONING_START","messageId":"rs"}`,
			`{"type":"REASONING_MESSAGE_START","messageId":"rm","role":"reasoning"}`,
			`{"type":"REASONING_MESSAGE_CONTENT","messageId":"rm","delta":"think"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"m0","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m0"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"` + reply + `","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"` + reply + `","delta":"Hel"}`,
			`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"search","parentMessageId":"` + reply + `"}`,
			`{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"q\":"}`,
		}
	}
	return turnAgent(t, events, func(_ *agui.RunInput, r *http.Request) { <-r.Context().Done() }).URL
}

// stopAfter posts the run body to px, reads its stream until n events arrived, stops the run
// and returns every event of the stream.
func stopAfter(t *testing.T, px, threadID, runID string, n int) []frame {
	t.Helper()
	body := `{"threadId":"` + threadID + `","runId":"` + runID + `","messages":[{"id":"u-` + runID + `","role":"user","content":"hi"}]}`
	res := runtest.PostRun(t, t.Context(), px, body, nil)
	defer res.Body.Close()
	var head bytes.Buffer
	for seen := 0; seen < n; {
		line, err := readLine(res.Body)
		if err != nil {
			t.Fatalf("the run's stream ended after %d events: %v", seen, err)
		}
		head.WriteString(line)
		if strings.HasPrefix(line, "data:") {
			seen++
		}
	}
	postStop(t, px, threadID, runID)
	rest, err := readFrames(t, io.MultiReader(&head, res.Body))
	if err != nil {
		t.Fatalf("reading the stopped run's stream: %v", err)
	}
	return dataFrames(rest)
}

// readLine reads one line (with its "\n") from r a byte at a time, so that nothing after it
// is consumed.
func readLine(r io.Reader) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for {
		if _, err := r.Read(one); err != nil {
			return string(b), err
		}
		b = append(b, one[0])
		if one[0] == '\n' {
			return string(b), nil
		}
	}
}

// closingTypes are the events a stop of openingAgent's run ends with: what it left open, the
// most recently opened first, then RUN_FINISHED.
const closingTypes = "TOOL_CALL_END TEXT_MESSAGE_END REASONING_MESSAGE_END REASONING_END STEP_FINISHED RUN_FINISHED"

// TestStopEndsCancelled: a run stopped on request ends as AG-UI 1.0 ends a cancelled run, the
// same live, in the store, in the run attach's replay, in the runs tree, history and export,
// and an import of that export keeps it; on every store.
func TestStopEndsCancelled(t *testing.T) {
	testStores(t, func(t *testing.T, store recorder.Store) {
		_, px := startProxy(t, openingAgent(t), Config{Store: store})
		live := stopAfter(t, px.URL, "t1", "r1", 13)
		if got := lastTypes(live, 6); got != closingTypes || !isCancelled(live) {
			t.Fatalf("the stopped run's stream ended with %s, want %s (outcome cancelled)", lastTypes(live, 8), closingTypes)
		}
		if want := `{"type":"TOOL_CALL_END","toolCallId":"c1"}`; string(live[len(live)-6].data) != want {
			t.Errorf("closing tool call = %s, want %s", live[len(live)-6].data, want)
		}
		if want := `{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","outcome":{"type":"cancelled"}}`; string(live[len(live)-1].data) != want {
			t.Errorf("RUN_FINISHED = %s, want %s", live[len(live)-1].data, want)
		}
		run := runtest.WaitRunEnded(t, store, "t1", "r1")
		if run.Status != recorder.StatusCancelled || run.Detail != "" || run.LastSeq != int64(len(live)) {
			t.Errorf("stored run = %s %q through %d, want cancelled through %d", run.Status, run.Detail, run.LastSeq, len(live))
		}
		stored := storedEvents(t, store, "t1", "r1")
		for i, ev := range stored {
			if !bytes.Contains(ev.Frame, live[i].data) {
				t.Errorf("stored event %d = %q, live %s", i+1, ev.Frame, live[i].data)
			}
		}
		res := attachRun(t, t.Context(), px.URL, "t1", run, 0)
		replay, _ := readFrames(t, res.Body)
		res.Body.Close()
		if got, want := typesOf(dataFrames(replay)), typesOf(live); got != want {
			t.Errorf("run attach replay = %s\nwant %s", got, want)
		}
		var runs struct {
			Runs []struct{ RunID, Status, Detail string }
		}
		getJSON(t, px.URL+"/agui/threads/t1/runs", &runs)
		if len(runs.Runs) != 1 || runs.Runs[0].Status != "cancelled" || runs.Runs[0].Detail != "" {
			t.Errorf("runs = %+v, want r1 cancelled", runs.Runs)
		}
		var hist struct {
			Status   string
			Messages []struct {
				ID, Role  string
				Content   string
				ToolCalls []struct {
					ID       string
					Function struct{ Arguments string }
				}
			}
		}
		getJSON(t, px.URL+"/agui/threads/t1", &hist)
		reply := hist.Messages[len(hist.Messages)-1]
		if hist.Status != "cancelled" || reply.ID != "a-r1" || reply.Content != "Hel" || len(reply.ToolCalls) != 1 || reply.ToolCalls[0].Function.Arguments != `{"q":` {
			t.Errorf("history = %+v, want status cancelled and the partial answer with its partial tool call", hist)
		}
		var doc struct {
			Runs []struct {
				Status    string
				EventList []json.RawMessage
			}
		}
		exported := getBody(t, px.URL+"/agui/threads/t1/export")
		if err := json.Unmarshal(exported, &doc); err != nil || len(doc.Runs) != 1 || doc.Runs[0].Status != "cancelled" ||
			!bytes.Contains(doc.Runs[0].EventList[len(doc.Runs[0].EventList)-1], []byte(`"outcome":{"type":"cancelled"}`)) {
			t.Fatalf("export = %s (%v), want r1 cancelled ending with RUN_FINISHED cancelled", exported, err)
		}
		imp, err := http.Post(px.URL+"/agui/threads/t1-copy/import", "application/json", bytes.NewReader(exported))
		if err != nil {
			t.Fatal(err)
		}
		imp.Body.Close()
		if imp.StatusCode != http.StatusCreated && imp.StatusCode != http.StatusOK {
			t.Fatalf("import of the export = %d", imp.StatusCode)
		}
		getJSON(t, px.URL+"/agui/threads/t1-copy/runs", &runs)
		if len(runs.Runs) != 1 || runs.Runs[0].Status != "cancelled" {
			t.Errorf("imported runs = %+v, want r1 cancelled", runs.Runs)
		}
	})
}

// TestStopEndingRunError: with StopEnding StopRunError a stop ends the run as before AG-UI
// 1.0, RUN_ERROR CANCELLED right after the agent's last event, recorded as error CANCELLED.
func TestStopEndingRunError(t *testing.T) {
	testStores(t, func(t *testing.T, store recorder.Store) {
		_, px := startProxy(t, openingAgent(t), Config{Store: store, StopEnding: StopRunError})
		live := stopAfter(t, px.URL, "t1", "r1", 13)
		if got := lastTypes(live, 2); got != "TOOL_CALL_ARGS RUN_ERROR" || !bytes.Contains(live[len(live)-1].data, []byte(`"code":"CANCELLED"`)) {
			t.Fatalf("the stopped run's stream ended with %s (%s), want TOOL_CALL_ARGS then RUN_ERROR CANCELLED", lastTypes(live, 2), live[len(live)-1].data)
		}
		if run := runtest.WaitRunEnded(t, store, "t1", "r1"); run.Status != recorder.StatusError || run.Detail != CodeCancelled {
			t.Errorf("stored run = %s %q, want error CANCELLED", run.Status, run.Detail)
		}
	})
}

// getBody GETs url and returns its body, failing the test unless it is a 200.
func getBody(t *testing.T, url string) []byte {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s", url, res.StatusCode, b)
	}
	return b
}

// getJSON GETs url and decodes its JSON body into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal(getBody(t, url), v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
