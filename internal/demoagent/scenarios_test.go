package demoagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// checkProtocol applies the basic rules of the official client's verifier to one run:
// RUN_STARTED first with the run's ids; no CONTENT/ARGS/END for a message, tool call,
// reasoning span or step that is not open; no second START for an open one; RUN_FINISHED
// only when nothing is open, and last; RUN_ERROR last. Chunk events open nothing (the client
// expands them). It returns the type of the last event.
func checkProtocol(t testing.TB, name string, in Input, events [][]byte) string {
	t.Helper()
	if len(events) == 0 {
		t.Fatalf("%s: no events", name)
	}
	open := map[string]bool{} // kind + "/" + id
	start := func(i int, kind, id string) {
		if id == "" {
			t.Errorf("%s: event %d: %s without id", name, i, kind)
		}
		if open[kind+"/"+id] {
			t.Errorf("%s: event %d: %s %q started twice", name, i, kind, id)
		}
		open[kind+"/"+id] = true
	}
	use := func(i int, kind, id string, end bool) {
		if !open[kind+"/"+id] {
			t.Errorf("%s: event %d: %s %q is not open", name, i, kind, id)
		}
		if end {
			delete(open, kind+"/"+id)
		}
	}
	var last string
	for i, raw := range events {
		var ev map[string]any
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: event %d = %s: %v", name, i, raw, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil || !bytes.Equal(compact.Bytes(), raw) {
			t.Errorf("%s: event %d is not compact JSON: %s", name, i, raw)
		}
		typ, _ := ev["type"].(string)
		str := func(k string) string { s, _ := ev[k].(string); return s }
		if i == 0 {
			if typ != typeRunStarted || str("threadId") != in.ThreadID || str("runId") != in.RunID {
				t.Errorf("%s: first event = %s, want RUN_STARTED with threadId %q runId %q", name, raw, in.ThreadID, in.RunID)
			}
		} else if last == typeRunFinished || last == typeRunError {
			t.Errorf("%s: event %d (%s) follows %s", name, i, typ, last)
		}
		switch typ {
		case typeTextStart:
			start(i, "text", str("messageId"))
		case typeTextContent:
			use(i, "text", str("messageId"), false)
		case typeTextEnd:
			use(i, "text", str("messageId"), true)
		case typeToolStart:
			start(i, "tool", str("toolCallId"))
		case typeToolArgs:
			use(i, "tool", str("toolCallId"), false)
		case typeToolEnd:
			use(i, "tool", str("toolCallId"), true)
		case typeReasoningStart:
			start(i, "span", str("messageId"))
		case typeReasoningEnd:
			use(i, "span", str("messageId"), true)
		case typeReasoningMessageStart:
			start(i, "reasoning", str("messageId"))
		case typeReasoningMessageContent:
			use(i, "reasoning", str("messageId"), false)
		case typeReasoningMessageEnd:
			use(i, "reasoning", str("messageId"), true)
		case typeStepStarted:
			start(i, "step", str("stepName"))
		case typeStepFinished:
			use(i, "step", str("stepName"), true)
		case typeThinkingStart:
			start(i, "thinking", "-")
		case typeThinkingEnd:
			use(i, "thinking", "-", true)
		case typeThinkingTextStart:
			start(i, "thinkingText", "-")
		case typeThinkingTextContent:
			use(i, "thinkingText", "-", false)
		case typeThinkingTextEnd:
			use(i, "thinkingText", "-", true)
		case typeRunFinished:
			if len(open) > 0 {
				t.Errorf("%s: RUN_FINISHED with %v still open", name, open)
			}
		case "":
			t.Errorf("%s: event %d has no type: %s", name, i, raw)
		}
		last = typ
	}
	return last
}

func testInput() Input {
	return Input{
		ThreadID: "thread-1",
		RunID:    "run-1",
		Messages: []json.RawMessage{json.RawMessage(`{"id":"u1","role":"user","content":"hello"}`)},
	}
}

// TestScenariosProtocol checks that every scenario is a protocol-valid run and ends the way
// its kind says: RUN_FINISHED, or RUN_ERROR (error), or nothing terminal (noend).
func TestScenariosProtocol(t *testing.T) {
	for _, name := range Scenarios() {
		t.Run(name, func(t *testing.T) {
			in := testInput()
			events, err := Events(name, in)
			if err != nil {
				t.Fatalf("Events(%q) error = %v", name, err)
			}
			last := checkProtocol(t, name, in, events)
			want := typeRunFinished
			switch name {
			case "error":
				want = typeRunError
			case "noend":
				want = typeTextContent
			}
			if last != want {
				t.Errorf("Events(%q) last type = %s, want %s", name, last, want)
			}
		})
	}
}

// TestScenariosDeterministic: the same input gives the same bytes; the run id is in the ids.
func TestScenariosDeterministic(t *testing.T) {
	for _, name := range Scenarios() {
		t.Run(name, func(t *testing.T) {
			a, err1 := Events(name, testInput())
			b, err2 := Events(name, testInput())
			if err1 != nil || err2 != nil {
				t.Fatalf("Events(%q) errors = %v, %v", name, err1, err2)
			}
			if !slices.EqualFunc(a, b, bytes.Equal) {
				t.Errorf("Events(%q) differs between two calls", name)
			}
			in := testInput()
			in.RunID = "run-2"
			c, _ := Events(name, in)
			if name != "thinking" && name != "state" && bytes.Equal(bytes.Join(a, nil), bytes.Join(c, nil)) {
				t.Errorf("Events(%q) with another runId = the same bytes, want ids derived from runId", name)
			}
		})
	}
}

func TestScenariosSorted(t *testing.T) {
	got := Scenarios()
	if !slices.IsSorted(got) || len(got) != len(scenarios) {
		t.Errorf("Scenarios() = %v, want all %d names sorted", got, len(scenarios))
	}
	for _, want := range []string{"chat", "tools", "parallel", "state", "thinking", "reasoning", "steps",
		"activity", "snapshot", "fidelity", "chunks", "custom", "unicode", "error", "noend", "slow", "large", "bench",
		"crlf", "unterminated", "echo"} {
		if !slices.Contains(got, want) {
			t.Errorf("Scenarios() lacks %q", want)
		}
	}
}

func TestEchoReportsInput(t *testing.T) {
	in := testInput()
	in.Messages = []json.RawMessage{json.RawMessage(`{"id":"u1","role":"user"}`), json.RawMessage(`{"role":"user"}`)}
	in.State = json.RawMessage(`{ "n" : 1 }`)
	events, err := Events("echo", in)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, raw := range events {
		var ev struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		json.Unmarshal(raw, &ev)
		if ev.Type == typeTextContent {
			text.WriteString(ev.Delta)
		}
	}
	if want := `received 2 messages [u1 -]; state {"n":1}`; text.String() != want {
		t.Errorf("echo said %q, want %q", text.String(), want)
	}
}

// TestStateDeltasApply folds the state scenario with a JSON Patch library: every delta must
// apply (the official client skips a failing delta, which would make the scenario useless).
func TestStateDeltasApply(t *testing.T) {
	events, err := Events("state", testInput())
	if err != nil {
		t.Fatal(err)
	}
	var state []byte
	deltas := 0
	for _, raw := range events {
		var ev struct {
			Type     string          `json:"type"`
			Snapshot json.RawMessage `json:"snapshot"`
			Delta    json.RawMessage `json:"delta"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case typeStateSnapshot:
			state = ev.Snapshot
		case typeStateDelta:
			deltas++
			p, err := jsonpatch.DecodePatch(ev.Delta)
			if err != nil {
				t.Fatalf("DecodePatch(%s) error = %v", ev.Delta, err)
			}
			if state, err = p.Apply(state); err != nil {
				t.Fatalf("delta %d %s: Apply error = %v", deltas, ev.Delta, err)
			}
		}
	}
	if deltas != 50 {
		t.Errorf("state scenario has %d STATE_DELTA events, want 50", deltas)
	}
	var got struct {
		Counter int              `json:"counter"`
		Todos   []map[string]any `json:"todos"`
		Tags    []string         `json:"tags"`
		Note    string           `json:"note"`
		User    struct {
			Prefs map[string]json.RawMessage `json:"prefs"`
		} `json:"user"`
	}
	if err := json.Unmarshal(state, &got); err != nil {
		t.Fatal(err)
	}
	if got.Counter != 10 || len(got.Todos) != 11 || !slices.Equal(got.Tags, []string{"t9"}) ||
		got.Note != "first pass" || len(got.User.Prefs) != 11 || string(got.User.Prefs["k8"]) != `{"n":8,"list":[8]}` {
		t.Errorf("folded state = %s, want counter 10, 11 todos, tags [t9], 11 prefs, k8 trimmed", state)
	}
}

// TestUnicodeSurrogateHalves: the rocket's two UTF-16 halves travel as separate escaped
// deltas and only form the emoji when concatenated at the JSON-string level.
func TestUnicodeSurrogateHalves(t *testing.T) {
	events, err := Events("unicode", testInput())
	if err != nil {
		t.Fatal(err)
	}
	var joined strings.Builder
	joined.WriteByte('"')
	for _, ev := range events {
		if i := bytes.Index(ev, []byte(`"delta":"`)); i >= 0 {
			rest := ev[i+len(`"delta":"`):]
			joined.Write(rest[:bytes.LastIndexByte(rest, '"')])
		}
	}
	joined.WriteByte('"')
	all := bytes.Join(events, nil)
	if !bytes.Contains(all, []byte(`"delta":"\ud83d"`)) || !bytes.Contains(all, []byte(`"delta":"\ude80"`)) {
		t.Errorf("unicode events = %s, want the halves \\ud83d and \\ude80 in separate deltas", all)
	}
	var text string
	if err := json.Unmarshal([]byte(joined.String()), &text); err != nil {
		t.Fatal(err)
	}
	if want := "Launch 🚀 done ✓"; !strings.HasPrefix(text, want) {
		t.Errorf("joined deltas = %q, want prefix %q", text, want)
	}
}

func contentBytes(t *testing.T, events [][]byte) (n, deltas int) {
	t.Helper()
	for _, raw := range events {
		var ev struct{ Type, Delta string }
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == typeTextContent {
			n += len(ev.Delta)
			deltas++
		}
	}
	return n, deltas
}

// TestParams checks that events and size shape the scenarios that read them.
func TestParams(t *testing.T) {
	tests := []struct {
		scenario, props       string
		wantBytes, wantDeltas int
	}{
		{"large", ``, 1 << 20, 64},
		{"large", `{"size":40000}`, 40000, 3},
		{"large", `{"size":0}`, 0, 0},
		{"bench", ``, 100 * 80, 100},
		{"bench", `{"events":7,"size":10}`, 70, 7},
		{"chat", `{"events":3}`, len("Hello! I am"), 3},
		{"slow", `{"events":5}`, len("Hello! I am the demo"), 5},
	}
	for _, tt := range tests {
		t.Run(tt.scenario+tt.props, func(t *testing.T) {
			in := testInput()
			in.ForwardedProps = json.RawMessage(tt.props)
			events, err := Events(tt.scenario, in)
			if err != nil {
				t.Fatal(err)
			}
			checkProtocol(t, tt.scenario, in, events)
			if n, d := contentBytes(t, events); n != tt.wantBytes || d != tt.wantDeltas {
				t.Errorf("Events(%q, %s) content = %d bytes in %d deltas, want %d in %d",
					tt.scenario, tt.props, n, d, tt.wantBytes, tt.wantDeltas)
			}
		})
	}
}

func TestBenchEventShape(t *testing.T) {
	events, err := Events("bench", testInput())
	if err != nil {
		t.Fatal(err)
	}
	ev := events[2]
	var got struct {
		Timestamp *int64 `json:"timestamp"`
		RawEvent  struct {
			SentNs *int64 `json:"sentNs"`
		} `json:"rawEvent"`
	}
	if err := json.Unmarshal(ev, &got); err != nil || got.Timestamp == nil || got.RawEvent.SentNs == nil {
		t.Errorf("bench event = %s, want timestamp and rawEvent.sentNs", ev)
	}
	if len(ev) < 150 || len(ev) > 250 {
		t.Errorf("bench event is %d bytes, want about 200", len(ev))
	}
}

func TestEventsErrors(t *testing.T) {
	tests := []struct {
		name     string
		scenario string
		in       Input
		want     error
	}{
		{"unknown scenario", "nope", testInput(), ErrUnknownScenario},
		{"negative events", "chat", Input{ForwardedProps: json.RawMessage(`{"events":-1}`)}, ErrInvalidInput},
		{"fractional size", "large", Input{ForwardedProps: json.RawMessage(`{"size":1.5}`)}, ErrInvalidInput},
		{"huge interval", "slow", Input{ForwardedProps: json.RawMessage(`{"intervalMs":1e9}`)}, ErrInvalidInput},
		{"string events", "chat", Input{ForwardedProps: json.RawMessage(`{"events":"3"}`)}, ErrInvalidInput},
		{"scenario not a string", "chat", Input{ForwardedProps: json.RawMessage(`{"scenario":1}`)}, ErrInvalidInput},
		{"message not an object", "chat", Input{Messages: []json.RawMessage{json.RawMessage(`[1]`)}}, ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Events(tt.scenario, tt.in)
			if !errors.Is(err, tt.want) {
				t.Errorf("Events(%q, %s) error = %v, want %v", tt.scenario, tt.in.ForwardedProps, err, tt.want)
			}
		})
	}
}

func TestPickScenario(t *testing.T) {
	user := func(content string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"id":"u","role":"user","content":%s}`, content))
	}
	tests := []struct {
		name    string
		props   string
		msgs    []json.RawMessage
		want    string
		wantErr error
	}{
		{"default", ``, nil, "chat", nil},
		{"forwardedProps", `{"scenario":"tools"}`, []json.RawMessage{user(`"state"`)}, "tools", nil},
		{"unknown forwardedProps", `{"scenario":"nope"}`, nil, "", ErrUnknownScenario},
		{"text equal", `{}`, []json.RawMessage{user(`" state\n"`)}, "state", nil},
		{"text contains", ``, []json.RawMessage{user(`"please run scenario:unicode now"`)}, "unicode", nil},
		{"second marker", ``, []json.RawMessage{user(`"scenario:nope then scenario:steps"`)}, "steps", nil},
		{"unknown marker", ``, []json.RawMessage{user(`"scenario:nope"`)}, "chat", nil},
		{"content parts", ``, []json.RawMessage{user(`[{"type":"image","url":"x"},{"type":"text","text":"scenario:large"}]`)}, "large", nil},
		{"last user wins", ``, []json.RawMessage{user(`"tools"`), json.RawMessage(`{"id":"a","role":"assistant","content":"error"}`), user(`"steps"`)}, "steps", nil},
		{"assistant ignored", ``, []json.RawMessage{user(`"tools"`), json.RawMessage(`{"id":"a","role":"assistant","content":"error"}`)}, "tools", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parseParams(json.RawMessage(tt.props))
			if err != nil {
				t.Fatal(err)
			}
			got, err := pickScenario(Input{Messages: tt.msgs}, p)
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("pickScenario(%s, %s) = %q, %v, want %q, %v", tt.msgs, tt.props, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
