package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact/compacttest"
	"github.com/agui-proxy/agui-proxy/panics"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
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
		res := postJSON(t, srv.URL, body)
		if res.status != http.StatusOK {
			t.Fatalf("run: %d %q", res.status, res.body)
		}
		evs := clientEvents(t, res.body)
		if len(evs) < 2 || evs[0].typ != agui.RunStarted {
			t.Fatalf("the client's stream does not start with RUN_STARTED and end: %q", res.body)
		}
		for i, e := range evs {
			terminal := agui.IsTerminal(e.typ)
			if last := i == len(evs)-1; terminal != last {
				t.Fatalf("event %d of %d is %s: the one terminal event must be the last; stream %q", i, len(evs), e.typ, res.body)
			}
		}
		waitRunEnded(t, store, thread, run+thread)
		stored := storedEvents(t, store, thread, run+thread)
		if len(stored) != len(evs) {
			t.Fatalf("stored %d events, the client read %d", len(stored), len(evs))
		}
		for i, s := range stored {
			got := clientEvents(t, s.Frame)
			if len(got) != 1 || got[0].id != evs[i].id || !bytes.Equal(got[0].data, evs[i].data) {
				t.Fatalf("stored event %d %q, the client read id %q data %q", i, s.Frame, evs[i].id, evs[i].data)
			}
		}
		for _, path := range []string{"/agui/threads/" + thread, "/agui/threads/" + thread + "/events"} {
			if r := get(t, srv.URL+path); r.status != http.StatusOK {
				t.Fatalf("GET %s: %d %q", path, r.status, r.body)
			}
		}
		if after := totalPanics(); after != before {
			t.Fatalf("%d panics recovered while the proxy served this stream", after-before)
		}
	})
}

// totalPanics sums the panics recovered in every family.
func totalPanics() uint64 {
	var n uint64
	for _, w := range panics.All {
		n += panics.Count(w)
	}
	return n
}

type httpReply struct {
	status int
	body   []byte
}

func postJSON(t *testing.T, url, body string) httpReply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	return doReq(t, req)
}

func get(t *testing.T, url string) httpReply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	return doReq(t, req)
}

func doReq(t *testing.T, req *http.Request) httpReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading: %v", req.Method, req.URL, err)
	}
	return httpReply{res.StatusCode, b}
}

type clientEvent struct {
	typ, id string
	data    []byte
}

// clientEvents parses the data frames of an event stream.
func clientEvents(t *testing.T, b []byte) []clientEvent {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(b), sse.Limits{MaxLineBytes: 64 << 20, MaxFrameBytes: 64 << 20})
	var out []clientEvent
	for {
		f, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("parsing %q: %v", b, err)
		}
		if f.HasData {
			typ, _ := agui.EventType(f.Data)
			out = append(out, clientEvent{typ: typ, id: f.ID, data: bytes.Clone(f.Data)})
		}
	}
}

// waitRunEnded polls the store until the run is no longer running (at most 20 s).
func waitRunEnded(t *testing.T, store recorder.Store, thread, run string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := store.Run(context.Background(), thread, run)
		if err == nil && r.Status != recorder.StatusRunning {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s/%s still running or unreadable: %+v, %v", thread, run, r, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
