package compact

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func parseAll(t testing.TB, lines ...string) []Event {
	t.Helper()
	var out []Event
	for _, l := range lines {
		e, err := ParseEvent([]byte(l))
		if err != nil {
			t.Fatalf("ParseEvent(%s) = %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

func withoutEphemeral(events []Event) []Event {
	var out []Event
	for _, e := range events {
		if !DefaultEphemeral(e.Type) {
			out = append(out, e)
		}
	}
	return out
}

func decode(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

// checkProperties asserts the three properties of Compact on one stream: it succeeds, the
// reducer ends equal for raw and compacted input, and compacting again changes nothing.
func checkProperties(t testing.TB, events []Event) []Event {
	t.Helper()
	out, err := Compact(events, Options{})
	if err != nil {
		t.Fatalf("Compact = %v", err)
	}
	wm, ws, werr := Replay(withoutEphemeral(events))
	gm, gs, gerr := Replay(out)
	if werr != nil || gerr != nil {
		t.Fatalf("Replay errors: raw %v, compacted %v", werr, gerr)
	}
	if !reflect.DeepEqual(decode(t, gm), decode(t, wm)) {
		t.Fatalf("Replay(Compact(s)) messages = %s, want %s", gm, wm)
	}
	if !reflect.DeepEqual(decode(t, gs), decode(t, ws)) {
		t.Fatalf("Replay(Compact(s)) state = %s, want %s", gs, ws)
	}
	again, err := Compact(out, Options{})
	if err != nil {
		t.Fatalf("Compact(Compact(s)) = %v", err)
	}
	if len(again) != len(out) {
		t.Fatalf("Compact is not idempotent: %d events then %d\n%s\n%s", len(out), len(again), dump(out), dump(again))
	}
	for i := range out {
		if !bytes.Equal(again[i].Raw, out[i].Raw) {
			t.Fatalf("Compact is not idempotent at %d: %s then %s", i, out[i].Raw, again[i].Raw)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, out[i].Raw); err != nil || !bytes.Equal(c.Bytes(), out[i].Raw) {
			t.Fatalf("output %d is not compact valid JSON: %s", i, out[i].Raw)
		}
	}
	return out
}

func dump(es []Event) string {
	var b bytes.Buffer
	for _, e := range es {
		b.Write(e.Raw)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
		typ      string
	}{
		{"ok", `{"type":"RUN_STARTED","threadId":"t","runId":"r"}`, nil, "RUN_STARTED"},
		{"spaces kept", ` { "type" : "CUSTOM" , "x" : 1 } `, nil, "CUSTOM"},
		{"unknown type", `{"type":"FUTURE","z":[1]}`, nil, "FUTURE"},
		{"invalid", `{oops}`, ErrInvalidJSON, ""},
		{"array", `[1]`, ErrInvalidJSON, ""},
		{"two values", `{"type":"A"}{"type":"B"}`, ErrInvalidJSON, ""},
		{"no type", `{"x":1}`, ErrMissingType, ""},
		{"type not string", `{"type":1}`, ErrMissingType, ""},
		{"duplicate type last wins", `{"type":"A","type":"CUSTOM"}`, nil, "CUSTOM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseEvent([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseEvent(%s) error = %v, want %v", tt.in, err, tt.want)
			}
			var pe *ParseError
			if tt.want != nil && !errors.As(err, &pe) {
				t.Fatalf("ParseEvent(%s) error %T is not a *ParseError", tt.in, err)
			}
			if e.Type != tt.typ {
				t.Fatalf("ParseEvent(%s).Type = %q, want %q", tt.in, e.Type, tt.typ)
			}
		})
	}
}

// TestCompactBadInput pins the documented behaviour for streams the client rejects.
func TestCompactBadInput(t *testing.T) {
	tests := []struct {
		name   string
		events []string
	}{
		{"first event not RUN_STARTED", []string{`{"type":"TEXT_MESSAGE_START","messageId":"m"}`}},
		{"END without START", []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`}},
		{"duplicate open START", []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`}},
		{"event after RUN_FINISHED", []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`, `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`, `{"type":"CUSTOM","name":"x","value":1}`}},
		{"unknown patch op", []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`, `{"type":"STATE_DELTA","delta":[{"op":"frob","path":"/a"}]}`}},
		{"bad pointer escape", []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`, `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a~2","value":1}]}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compact(parseAll(t, tt.events...), Options{})
			var se *StreamError
			if !errors.As(err, &se) || !errors.Is(err, ErrRejected) {
				t.Fatalf("Compact(%s) error = %v, want a *StreamError", tt.name, err)
			}
		})
	}
}

func TestCompactLimits(t *testing.T) {
	big := `{"type":"STATE_SNAPSHOT","snapshot":{"a":"` + string(bytes.Repeat([]byte("x"), 100)) + `"}}`
	ev := parseAll(t, `{"type":"RUN_STARTED","threadId":"t","runId":"r"}`, big)
	_, err := Compact(ev, Options{MaxStateBytes: 50})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "MaxStateBytes" {
		t.Fatalf("Compact(big snapshot) error = %v, want MaxStateBytes *LimitError", err)
	}
	if _, err := Compact(ev, Options{MaxStateBytes: -1}); err != nil {
		t.Fatalf("Compact(big snapshot, no limit) = %v", err)
	}
}

func TestMessageIDsAndNewMessages(t *testing.T) {
	in := json.RawMessage(`[{"id":"a","role":"user","content":"x"}, {"id":"b","role":"user","content":"y"},{"role":"user"}]`)
	if got, want := MessageIDs(in), []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("MessageIDs(%s) = %v, want %v", in, got, want)
	}
	got := NewMessages(in, map[string]bool{"a": true})
	if want := `[{"id":"b","role":"user","content":"y"},{"role":"user"}]`; string(got) != want {
		t.Fatalf("NewMessages(%s) = %s, want %s", in, got, want)
	}
}

func TestOpenStreams(t *testing.T) {
	ev := parseAll(t,
		`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m1"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hel"}`,
		`{"type":"TOOL_CALL_CHUNK","toolCallId":"c1","toolCallName":"f","delta":"{"}`,
	)
	got, err := OpenStreams(ev, Options{})
	want := []Open{{Kind: "text", ID: "m1"}, {Kind: "tool", ID: "c1", Chunked: true}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("OpenStreams = %v, %v, want %v", got, err, want)
	}
}

// TestFoldStopsWhereUnmodeled checks that a move or copy whose from pointer steps into an
// array with a key that is not an index (the client's probe ignores that error and reads
// "length") is not folded: the delta follows the snapshot raw.
func TestFoldStopsWhereUnmodeled(t *testing.T) {
	var events []Event
	for _, l := range []string{
		`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
		`{"type":"STATE_SNAPSHOT","snapshot":{"a":[1,2]}}`,
		`{"type":"STATE_DELTA","delta":[{"op":"copy","from":"/a/length","path":"/n"}]}`,
		`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/b","value":1}]}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`,
	} {
		e, err := ParseEvent([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	out, err := Compact(events, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"RUN_STARTED", "STATE_SNAPSHOT", "STATE_DELTA", "STATE_DELTA", "RUN_FINISHED"}
	if len(out) != len(want) {
		t.Fatalf("Compact = %s, want types %v", dump(out), want)
	}
	for i, e := range out {
		if e.Type != want[i] {
			t.Fatalf("Compact = %s, want types %v", dump(out), want)
		}
	}
	if string(out[1].Raw) != `{"type":"STATE_SNAPSHOT","snapshot":{"a":[1,2]}}` {
		t.Errorf("snapshot = %s, want the state before the delta", out[1].Raw)
	}
}
