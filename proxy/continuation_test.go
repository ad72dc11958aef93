package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// scriptAgent answers every run with the events of parts, in order; it flushes each part and
// waits for the test (on go) before sending the next, then ends its response. Events name
// the thread and run as {thread} and {run}.
func scriptAgent(t *testing.T, goOn <-chan struct{}, parts ...[]string) string {
	return newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := agui.DecodeRunInput(mustRead(t, r.Body))
		if err != nil {
			t.Error(err)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i, part := range parts {
			if i > 0 {
				select {
				case <-goOn:
				case <-r.Context().Done():
					return
				}
			}
			for _, ev := range part {
				ev = strings.NewReplacer("{thread}", in.ThreadID, "{run}", in.RunID).Replace(ev)
				io.WriteString(w, "data: "+ev+"\n\n")
			}
			w.(http.Flusher).Flush()
		}
	})).URL
}

// tanStackTurn is how TanStack AI's RunAgentInput server (@tanstack/ai 0.58.0) answers a turn
// with a server tool: the first model call and its RUN_FINISHED, then, with no RUN_STARTED in
// between, the tool's result, the second model call and a second RUN_FINISHED.
var tanStackTurn = [][]string{{
	`{"type":"RUN_STARTED","threadId":"{thread}","runId":"{run}"}`,
	`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Let me look."}`,
	`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`,
	`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"weather","parentMessageId":"m1"}`,
	`{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{\"city\":\"Oslo\"}"}`,
	`{"type":"TOOL_CALL_END","toolCallId":"c1"}`,
	`{"type":"RUN_FINISHED","threadId":"{thread}","runId":"{run}","finishReason":"tool_calls"}`,
}, {
	`{"type":"TOOL_CALL_RESULT","messageId":"tr1","toolCallId":"c1","content":"sunny","role":"tool"}`,
	`{"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"}`,
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"It is sunny."}`,
	`{"type":"TEXT_MESSAGE_END","messageId":"m2"}`,
	`{"type":"RUN_FINISHED","threadId":"{thread}","runId":"{run}","finishReason":"stop"}`,
}}

// readUntil reads rd's events until one of type typ, and returns them.
func readUntil(t *testing.T, rd *sse.Reader, typ string) []frame {
	t.Helper()
	var out []frame
	for {
		f, err := rd.Next()
		if err != nil {
			t.Fatalf("the stream ended before %s: %v (read %s)", typ, err, typesOf(out))
		}
		if !f.HasData {
			continue
		}
		out = append(out, frame{data: bytes.Clone(f.Data), id: f.ID, hasData: true})
		if out[len(out)-1].eventType() == typ {
			return out
		}
	}
}

// irregular returns the count of agui_proxy_upstream_irregular_events_total{kind} in reg.
func irregular(t *testing.T, reg *prometheus.Registry, kind string) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "agui_proxy_upstream_irregular_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return 0
}

// TestContinuationKeptWhole: a response that goes on after its RUN_FINISHED (TanStack AI's
// server-tool turn) is one run: the client gets every event as sent, in one stream that ends
// with the response; the store, the run attach's replay, the runs tree and the history hold
// all of it; the next run's RUN_STARTED.input knows the continuation's messages (the run's
// checkpoint covers it). Counted as kept_after_finished; on every store.
func TestContinuationKeptWhole(t *testing.T) {
	testStores(t, func(t *testing.T, store recorder.Store) {
		goOn := make(chan struct{})
		reg := prometheus.NewRegistry()
		h, px := startProxy(t, scriptAgent(t, goOn, tanStackTurn...), Config{Store: store, Registerer: reg})
		res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t1","runId":"r1","messages":[{"id":"u1","role":"user","content":"weather?"}]}`, nil)
		defer res.Body.Close()
		rd := sse.NewReader(res.Body, sse.Limits{})
		live := readUntil(t, rd, agui.RunFinished)
		if r := runtest.WaitRunEnded(t, store, "t1", "r1"); r.Status != recorder.StatusFinished || r.LastSeq != 8 {
			t.Fatalf("at the first RUN_FINISHED the run is %s through %d, want finished through 8 (recorded before the client saw it)", r.Status, r.LastSeq)
		}
		close(goOn) // the tool ran: the agent goes on
		rest, err := readFrames(t, res.Body)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, dataFrames(rest)...)
		var want []string
		for _, part := range tanStackTurn {
			for _, ev := range part {
				want = append(want, strings.NewReplacer("{thread}", "t1", "{run}", "r1").Replace(ev))
			}
		}
		if len(live) != len(want) {
			t.Fatalf("live stream = %s, want the %d events the agent sent", typesOf(live), len(want))
		}
		for i := range want {
			if i == 0 { // RUN_STARTED: the agent's bytes, then the proxy's input
				want[0] = strings.TrimSuffix(want[0], "}")
			}
			if !bytes.HasPrefix(live[i].data, []byte(want[i])) || (i > 0 && string(live[i].data) != want[i]) {
				t.Errorf("live event %d = %s, want %s as sent", i+1, live[i].data, want[i])
			}
		}
		h.Shutdown(t.Context()) // (the recorder flushed; the run's pump ended)
		run := runtest.WaitRunEnded(t, store, "t1", "r1")
		if run.Status != recorder.StatusFinished || run.LastSeq != int64(len(want)) {
			t.Errorf("stored run = %s through %d, want finished through %d", run.Status, run.LastSeq, len(want))
		}
		for i, ev := range storedEvents(t, store, "t1", "r1") {
			if !bytes.Contains(ev.Frame, []byte(want[i])) {
				t.Errorf("stored event %d = %q, want %s", i+1, ev.Frame, want[i])
			}
		}
		if got := irregular(t, reg, IrregularKeptAfterFinished); got != 5 {
			t.Errorf("kept_after_finished = %d, want 5", got)
		}
	})
}

// TestContinuationReplayAndNextRun: after a kept continuation, the run attach replays the
// response as sent, the history holds the tool result and the final answer, and the next
// run (the client sends the whole conversation) gets RUN_STARTED.input with only its new
// message: the checkpoint written at the first RUN_FINISHED was replaced at the response's
// end.
func TestContinuationReplayAndNextRun(t *testing.T) {
	testStores(t, func(t *testing.T, store recorder.Store) {
		goOn := make(chan struct{})
		close(goOn)
		_, px := startProxy(t, scriptAgent(t, goOn, tanStackTurn...), Config{Store: store})
		res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t1","runId":"r1","messages":[{"id":"u1","role":"user","content":"weather?"}]}`, nil)
		fs, _ := readFrames(t, res.Body)
		res.Body.Close()
		live := dataFrames(fs)
		// The client's stream ends once the run's end through its last event is recorded.
		run := runtest.WaitRunEnded(t, store, "t1", "r1")
		if run.LastSeq != int64(len(live)) {
			t.Fatalf("run = through %d, want %d", run.LastSeq, len(live))
		}
		att := attachRun(t, t.Context(), px.URL, "t1", run, 0)
		replay, _ := readFrames(t, att.Body)
		att.Body.Close()
		if got, want := typesOf(dataFrames(replay)), typesOf(live); got != want {
			t.Errorf("run attach = %s\nwant %s", got, want)
		}
		var hist struct {
			Status   string
			Messages []struct{ ID, Role, Content string }
		}
		getJSON(t, px.URL+"/agui/threads/t1", &hist)
		var ids []string
		for _, m := range hist.Messages {
			ids = append(ids, m.ID)
		}
		if got := strings.Join(ids, " "); hist.Status != "finished" || got != "u1 m1 tr1 m2" || hist.Messages[3].Content != "It is sunny." {
			t.Errorf("history = %s %s, want finished u1 m1 tr1 m2 ending with the final answer", hist.Status, got)
		}
		body := `{"threadId":"t1","runId":"r2","messages":[{"id":"u1","role":"user","content":"weather?"},` +
			`{"id":"m1","role":"assistant","content":"Let me look.","toolCalls":[{"id":"c1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]},` +
			`{"id":"tr1","role":"tool","toolCallId":"c1","content":"sunny"},{"id":"m2","role":"assistant","content":"It is sunny."},` +
			`{"id":"u2","role":"user","content":"thanks"}]}`
		res = runtest.PostRun(t, t.Context(), px.URL, body, nil)
		fs, _ = readFrames(t, res.Body)
		res.Body.Close()
		var started struct {
			ParentRunID string `json:"parentRunId"`
			Input       struct {
				Messages []struct{ ID string } `json:"messages"`
			} `json:"input"`
		}
		if err := json.Unmarshal(dataFrames(fs)[0].data, &started); err != nil || started.ParentRunID != "r1" ||
			len(started.Input.Messages) != 1 || started.Input.Messages[0].ID != "u2" {
			t.Errorf("r2 RUN_STARTED = %s (%v), want parent r1 and input.messages holding only u2", dataFrames(fs)[0].data, err)
		}
	})
}

// TestAfterTerminalRefuse: with AfterTerminalRefuse the run ends at its first RUN_FINISHED;
// what follows is neither forwarded nor recorded, and counted.
func TestAfterTerminalRefuse(t *testing.T) {
	testStores(t, func(t *testing.T, store recorder.Store) {
		goOn := make(chan struct{})
		close(goOn)
		reg := prometheus.NewRegistry()
		h, px := startProxy(t, scriptAgent(t, goOn, tanStackTurn...), Config{Store: store, AfterTerminal: AfterTerminalRefuse, Registerer: reg})
		res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t1","runId":"r1","messages":[{"id":"u1","role":"user","content":"weather?"}]}`, nil)
		fs, _ := readFrames(t, res.Body)
		res.Body.Close()
		if live := dataFrames(fs); len(live) != 8 || live[7].eventType() != agui.RunFinished {
			t.Fatalf("live stream = %s, want the first 8 events, ending with RUN_FINISHED", typesOf(live))
		}
		h.Shutdown(t.Context())
		if run := runtest.WaitRunEnded(t, store, "t1", "r1"); run.Status != recorder.StatusFinished || run.LastSeq != 8 {
			t.Errorf("stored run = %s through %d, want finished through 8", run.Status, run.LastSeq)
		}
		if got := len(storedEvents(t, store, "t1", "r1")); got != 8 {
			t.Errorf("stored %d events, want 8", got)
		}
		if got := irregular(t, reg, IrregularRefusedAfterFinished); got != 5 {
			t.Errorf("refused_after_finished = %d, want 5", got)
		}
	})
}

// TestIrregularLifecycle: the documented outcome of each lifecycle an agent bends, with both
// AfterTerminal settings: events after RUN_ERROR are refused; a second RUN_STARTED of the
// same run mid-run is forwarded and recorded as sent; a RUN_STARTED of another run after
// RUN_FINISHED is kept with what follows (keep) or refused (refuse). Each is counted.
func TestIrregularLifecycle(t *testing.T) {
	started := `{"type":"RUN_STARTED","threadId":"{thread}","runId":"{run}"}`
	finished := `{"type":"RUN_FINISHED","threadId":"{thread}","runId":"{run}"}`
	cases := []struct {
		name          string
		events        []string
		after         AfterTerminal
		wantTypes     string
		status        recorder.RunStatus
		kind          string
		n             int
		wantOtherKind string
	}{
		{"after RUN_ERROR, keep", []string{started, `{"type":"RUN_ERROR","message":"boom"}`, `{"type":"CUSTOM","name":"late","value":1}`, finished},
			AfterTerminalKeep, "RUN_STARTED RUN_ERROR", recorder.StatusError, IrregularRefusedAfterError, 2, ""},
		{"after RUN_ERROR, refuse", []string{started, `{"type":"RUN_ERROR","message":"boom"}`, `{"type":"CUSTOM","name":"late","value":1}`},
			AfterTerminalRefuse, "RUN_STARTED RUN_ERROR", recorder.StatusError, IrregularRefusedAfterError, 1, ""},
		{"RUN_STARTED again", []string{started, `{"type":"STEP_STARTED","stepName":"s"}`, started, `{"type":"STEP_FINISHED","stepName":"s"}`, finished},
			AfterTerminalKeep, "RUN_STARTED STEP_STARTED RUN_STARTED STEP_FINISHED RUN_FINISHED", recorder.StatusFinished, IrregularRunStartedAgain, 1, ""},
		{"another run after RUN_FINISHED, keep", []string{started, finished, `{"type":"RUN_STARTED","threadId":"{thread}","runId":"other"}`, `{"type":"RUN_FINISHED","threadId":"{thread}","runId":"other"}`},
			AfterTerminalKeep, "RUN_STARTED RUN_FINISHED RUN_STARTED RUN_FINISHED", recorder.StatusFinished, IrregularRunStartedOther, 1, IrregularKeptAfterFinished},
		{"another run after RUN_FINISHED, refuse", []string{started, finished, `{"type":"RUN_STARTED","threadId":"{thread}","runId":"other"}`, `{"type":"RUN_FINISHED","threadId":"{thread}","runId":"other"}`},
			AfterTerminalRefuse, "RUN_STARTED RUN_FINISHED", recorder.StatusFinished, IrregularRefusedAfterFinished, 2, ""},
	}
	testStores(t, func(t *testing.T, store recorder.Store) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				reg := prometheus.NewRegistry()
				h, px := startProxy(t, scriptAgent(t, nil, tc.events), Config{Store: store, AfterTerminal: tc.after, Registerer: reg})
				thread := fmt.Sprintf("t%d", i)
				res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"`+thread+`","runId":"r1","messages":[]}`, nil)
				fs, _ := readFrames(t, res.Body)
				res.Body.Close()
				if got := typesOf(dataFrames(fs)); got != tc.wantTypes {
					t.Errorf("live stream = %s, want %s", got, tc.wantTypes)
				}
				h.Shutdown(t.Context())
				run := runtest.WaitRunEnded(t, store, thread, "r1")
				var stored []string
				for _, ev := range storedEvents(t, store, thread, "r1") {
					stored = append(stored, ev.Type)
				}
				if run.Status != tc.status || strings.Join(stored, " ") != tc.wantTypes {
					t.Errorf("stored run = %s with %v, want %s with %s", run.Status, stored, tc.status, tc.wantTypes)
				}
				if got := irregular(t, reg, tc.kind); got != tc.n {
					t.Errorf("%s = %d, want %d", tc.kind, got, tc.n)
				}
				if tc.wantOtherKind != "" && irregular(t, reg, tc.wantOtherKind) == 0 {
					t.Errorf("%s = 0, want it counted", tc.wantOtherKind)
				}
			})
		}
	})
}

// tanStackCut is tanStackTurn with its second part split inside the final answer.
var tanStackCut = [][]string{tanStackTurn[0], {
	`{"type":"TOOL_CALL_RESULT","messageId":"tr1","toolCallId":"c1","content":"sunny","role":"tool"}`,
	`{"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"}`,
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"It is "}`,
}, {
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m2","delta":"sunny."}`,
	`{"type":"TEXT_MESSAGE_END","messageId":"m2"}`,
	`{"type":"RUN_FINISHED","threadId":"{thread}","runId":"{run}","finishReason":"stop"}`,
}}

// TestContinuationCutAndResume: a client cut in the tool's part of a continuation (after
// the first RUN_FINISHED, inside the final answer) re-POSTs with its last event id and gets
// a stream that restates the thread up to there, re-opens the answer and follows the
// response live to its last RUN_FINISHED; a thread attach started then follows it live too.
// On every store.
func TestContinuationCutAndResume(t *testing.T) {
	testStores(t, func(t *testing.T, store recorder.Store) {
		gate := make(chan struct{})
		_, px := startProxy(t, scriptAgent(t, gate, tanStackCut...), Config{Store: store})
		body := `{"threadId":"t1","runId":"r1","messages":[{"id":"u1","role":"user","content":"weather?"}]}`
		res := runtest.PostRun(t, t.Context(), px.URL, body, nil)
		rd := sse.NewReader(res.Body, sse.Limits{})
		readUntil(t, rd, agui.RunFinished)
		gate <- struct{}{} // the tool ran
		seen := readUntil(t, rd, agui.TextMessageContent)
		res.Body.Close() // the connection drops inside the final answer
		last := seen[len(seen)-1].id
		att, err := http.Get(px.URL + "/agui/threads/t1/events")
		if err != nil {
			t.Fatal(err)
		}
		defer att.Body.Close()
		attached := sse.NewReader(att.Body, sse.Limits{})
		readUntil(t, attached, agui.Custom) // the prelude's replay_complete: live from here
		resumed := runtest.PostRun(t, t.Context(), px.URL, body, http.Header{"Last-Event-ID": {last}})
		defer resumed.Body.Close()
		rrd := sse.NewReader(resumed.Body, sse.Limits{})
		head := readUntil(t, rrd, agui.TextMessageStart) // re-opened: the answer still streams
		if head[0].eventType() != agui.RunStarted {
			t.Fatalf("resume stream starts %s", typesOf(head))
		}
		gate <- struct{}{} // the model goes on
		tail, err := readFrames(t, resumed.Body)
		if err != nil {
			t.Fatal(err)
		}
		// The resumed stream, applied as the official client applies it, holds the whole
		// answer once.
		stream := append(head, dataFrames(tail)...)
		var text strings.Builder
		for _, f := range stream {
			var ev struct{ Type, MessageID, Delta string }
			json.Unmarshal(f.data, &ev)
			if ev.MessageID == "m2" && ev.Type == agui.TextMessageContent {
				text.WriteString(ev.Delta)
			}
		}
		if got := lastTypes(stream, 3); got != "TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED" || !strings.HasSuffix(text.String(), "sunny.") {
			t.Errorf("resume stream = %s, m2's deltas %q; want the rest of the answer live, ending with RUN_FINISHED", typesOf(stream), text.String())
		}
		if strings.Count(text.String(), "It is ") > 1 {
			t.Errorf("m2's deltas %q: a delta twice", text.String())
		}
		rest, _ := readFrames(t, att.Body)
		if got := lastTypes(dataFrames(rest), 3); got != "TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED" {
			t.Errorf("thread attach's live tail = %s, want the rest of the answer", typesOf(dataFrames(rest)))
		}
		if run := runtest.WaitRunEnded(t, store, "t1", "r1"); run.Status != recorder.StatusFinished || run.LastSeq != 14 {
			t.Errorf("run = %s through %d, want finished through 14", run.Status, run.LastSeq)
		}
	})
}

// TestStopInContinuation: a stop posted while a response goes on after its RUN_FINISHED
// ends the run as cancelled: the open answer closed, RUN_FINISHED outcome cancelled, status
// cancelled. On every store.
func TestStopInContinuation(t *testing.T) {
	testStores(t, func(t *testing.T, store recorder.Store) {
		gate := make(chan struct{})
		parts := [][]string{tanStackCut[0], tanStackCut[1], {`{"type":"CUSTOM","name":"never","value":1}`}}
		agent := scriptAgent(t, gate, parts...)
		_, px := startProxy(t, agent, Config{Store: store})
		res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t1","runId":"r1","messages":[]}`, nil)
		defer res.Body.Close()
		rd := sse.NewReader(res.Body, sse.Limits{})
		readUntil(t, rd, agui.RunFinished)
		gate <- struct{}{}
		readUntil(t, rd, agui.TextMessageContent)
		postStop(t, px.URL, "t1", "r1")
		rest, _ := readFrames(t, res.Body)
		if live := dataFrames(rest); lastTypes(live, 2) != "TEXT_MESSAGE_END RUN_FINISHED" || !isCancelled(live) {
			t.Fatalf("after the stop: %s, want TEXT_MESSAGE_END then RUN_FINISHED outcome cancelled", typesOf(live))
		}
		if run := runtest.WaitRunEnded(t, store, "t1", "r1"); run.Status != recorder.StatusCancelled || run.LastSeq != 13 {
			t.Errorf("run = %s through %d, want cancelled through 13", run.Status, run.LastSeq)
		}
	})
}
