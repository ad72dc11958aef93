package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact/compacttest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/panics"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// pumpSeeds are agent answers for FuzzPump: valid streams with every JSON shape a state can
// hold (the issue-38 shape: a test operation on a value holding an array with null), and
// broken ones (bad JSON, unterminated frames, events after the terminal one, CR framing).
var pumpSeeds = []string{
	"data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n" +
		"data: {\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{\"c\":{\"count\":{\"k\":[null,395,{\"c\":-356}]}}}}\n\n" +
		"data: {\"type\":\"STATE_DELTA\",\"delta\":[{\"op\":\"test\",\"path\":\"/c/count\",\"value\":{\"k\":[null,395,{\"c\":-356}]}}]}\n\n" +
		"data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
	"data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n" +
		"data: {\"type\":\"STATE_SNAPSHOT\",\"snapshot\":[null]}\n\n" +
		"data: {\"type\":\"STATE_DELTA\",\"delta\":[{\"op\":\"test\",\"path\":\"\",\"value\":[null]}]}\n\n" +
		"data: {\"type\":\"STATE_DELTA\",\"delta\":[{\"op\":\"copy\",\"from\":\"/0\",\"path\":\"/-\"},{\"op\":\"move\",\"from\":\"/0\",\"path\":\"/1\"}]}\n\n" +
		"data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
	"data: {\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{\"n\":1e21,\"m\":-0,\"big\":9007199254740993,\"d\":[[[[[[{}]]]]]],\"s\":\"\\u2028\\ud83d\\ude00\"}}\n\n" +
		"data: {\"type\":\"STATE_DELTA\",\"delta\":[{\"op\":\"replace\",\"path\":\"/n\",\"value\":1E+21},{\"op\":\"remove\",\"path\":\"/m\"},{\"op\":\"add\",\"path\":\"/d/0/0\",\"value\":null}]}\n\n",
	"data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\r\n\r\n" +
		"data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\r\r" +
		": a comment\n\n" +
		"data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hi\"}\n\n" +
		"data: {\"type\":\"RUN_ERROR\",\"message\":\"boom\"}\n\n" +
		"data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n",
	"data: not json\n\ndata: {\"type\":\n\ndata: {\"type\":\"RUN_FINISHED\"",
	"data: {\"type\":\"MESSAGES_SNAPSHOT\",\"messages\":[{\"id\":\"a\",\"role\":\"assistant\",\"content\":null,\"toolCalls\":[null]}]}\n\n",
	"",
}

// FuzzPump drives the whole pump over real sockets: the fuzzed bytes are an agent's answer to
// a run, a client reads what the proxy streams, and the store holds what it recorded.
// Whatever the bytes, no panic is recovered anywhere (the containment of package panics would
// hide one), the client's stream starts with RUN_STARTED and ends with its one terminal event,
// every event it reads is stored byte for byte under the same id, and the thread's history
// and attach answer 200.
func FuzzPump(f *testing.F) {
	for _, s := range pumpSeeds {
		f.Add([]byte(s))
	}
	// Generated streams (the compaction property's generator: every JSON shape a state can
	// hold, every patch op), each as one agent answer: the first run is pumped, what follows
	// its terminal event is refused.
	for seed := range uint64(24) {
		var b []byte
		for _, e := range compacttest.Generate(seed, 20+int(seed%60), seed%3 == 0) {
			b = append(append(append(b, "data: "...), e.Raw...), "\n\n"...)
		}
		f.Add(b)
	}
	var answers sync.Map // run id -> []byte
	agent := newTestServer(f, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		in, err := agui.DecodeRunInput(raw)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, _ := answers.Load(in.RunID)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(b.([]byte))
	}))
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	_, srv := startProxy(f, agent.URL, Config{Store: store, HeartbeatInterval: -1, MaxEventBytes: 1 << 20})
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, stream []byte) {
		thread, run := fmt.Sprintf("t%d", n.Add(1)), "r"
		answers.Store(run+thread, stream)
		defer answers.Delete(run + thread)
		before := totalPanics()

		body := fmt.Sprintf(`{"threadId":%q,"runId":%q,"messages":[],"state":{},"tools":[],"context":[],"forwardedProps":{}}`, thread, run+thread)
		res := runtest.PostRun(t, t.Context(), srv.URL, body, nil)
		raw := mustRead(t, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("run: %d %q", res.StatusCode, raw)
		}
		evs := fuzzFrames(t, raw)
		if len(evs) < 2 || evs[0].eventType() != agui.RunStarted {
			t.Fatalf("the client's stream does not start with RUN_STARTED and end: %q", raw)
		}
		// The run ends at a terminal event; after a RUN_FINISHED the response may go on
		// (AfterTerminalKeep), after a RUN_ERROR nothing follows.
		terminals := 0
		for i, e := range evs {
			if agui.IsTerminal(e.eventType()) {
				terminals++
			}
			if e.eventType() == agui.RunError && i != len(evs)-1 {
				t.Fatalf("event %d of %d is RUN_ERROR: nothing may follow it; stream %q", i, len(evs), raw)
			}
		}
		if terminals == 0 {
			t.Fatalf("the client's stream has no terminal event: %q", raw)
		}
		runtest.WaitRunEnded(t, store, thread, run+thread)
		stored := storedEvents(t, store, thread, run+thread)
		if len(stored) != len(evs) {
			t.Fatalf("stored %d events, the client read %d", len(stored), len(evs))
		}
		for i, s := range stored {
			got := fuzzFrames(t, s.Frame)
			if len(got) != 1 || got[0].id != evs[i].id || !bytes.Equal(got[0].data, evs[i].data) {
				t.Fatalf("stored event %d %q, the client read id %q data %q", i, s.Frame, evs[i].id, evs[i].data)
			}
		}
		for _, path := range []string{"/agui/threads/" + thread, "/agui/threads/" + thread + "/events"} {
			res, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			b := mustRead(t, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d %q", path, res.StatusCode, b)
			}
		}
		if after := totalPanics(); after != before {
			t.Fatalf("%d panics recovered while the proxy served this stream", after-before)
		}
	})
}

// fuzzFrames returns the data frames of an event stream the proxy wrote (a parse error fails).
func fuzzFrames(t *testing.T, b []byte) []frame {
	t.Helper()
	fs, err := readFrames(t, bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parsing %q: %v", b, err)
	}
	return dataFrames(fs)
}

// totalPanics sums the panics recovered in every family.
func totalPanics() uint64 {
	var n uint64
	for _, w := range panics.All {
		n += panics.Count(w)
	}
	return n
}
