package compact

import (
	"strings"
	"testing"
)

// TestReadable: streams the official client rejects become readable, with the rejected
// events left out and a marker saying how many; accepted streams are compacted as Compact does.
func TestReadable(t *testing.T) {
	const (
		start  = `{"type":"RUN_STARTED","threadId":"t","runId":"r"}`
		finish = `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`
		mStart = `{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`
		mText  = `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}`
		mEnd   = `{"type":"TEXT_MESSAGE_END","messageId":"m"}`
	)
	tests := []struct {
		name    string
		events  []string
		omitted int
	}{
		{"clean", []string{start, mStart, mText, mEnd, finish}, 0},
		{"orphan content", []string{start, mText, finish}, 1},
		{"orphan end", []string{start, mEnd, finish}, 1},
		{"orphan tool args", []string{start, `{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"}`, finish}, 1},
		{"content after finished", []string{start, finish, mStart, mText, mEnd}, 3},
		{"delta not an array", []string{start, `{"type":"STATE_DELTA","delta":{"op":"add","path":"/x","value":1}}`, finish}, 1},
		{"unknown patch op", []string{start, `{"type":"STATE_DELTA","delta":[{"op":"frob","path":"/x"}]}`, finish}, 1},
		{"still running", []string{start, mStart, mText, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"nope","delta":"x"}`}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := make([]Event, len(tt.events))
			for i, s := range tt.events {
				ev, err := ParseEvent([]byte(s))
				if err != nil {
					t.Fatal(err)
				}
				in[i] = ev
			}
			orig := append([]Event(nil), in...)
			out, omitted, err := Readable(in, Options{})
			if err != nil {
				t.Fatalf("Readable: %v", err)
			}
			for i := range in {
				if string(in[i].Raw) != string(orig[i].Raw) {
					t.Fatal("Readable modified its input")
				}
			}
			if omitted != tt.omitted {
				t.Errorf("omitted %d, want %d", omitted, tt.omitted)
			}
			if _, _, err := Replay(out); err != nil {
				t.Errorf("the result does not replay: %v", err)
			}
			if len(out) == 0 || out[0].Type != "RUN_STARTED" {
				t.Fatalf("the result does not start with RUN_STARTED: %v", out)
			}
			var marker bool
			for _, e := range out {
				marker = marker || strings.Contains(string(e.Raw), OmittedEventName)
			}
			if marker != (tt.omitted > 0) {
				t.Errorf("marker present %v, omitted %d", marker, omitted)
			}
			if tt.omitted == 0 {
				want, _ := Compact(in, Options{})
				if len(want) != len(out) {
					t.Errorf("a clean stream: Readable %d events, Compact %d", len(out), len(want))
				}
			}
		})
	}
}

// TestReadableManyBadEvents: a stream made mostly of rejected events is still read in a
// bounded number of passes.
func TestReadableManyBadEvents(t *testing.T) {
	in := []Event{readableEvent(t, `{"type":"RUN_STARTED","threadId":"t","runId":"r"}`)}
	for range 5000 {
		in = append(in, readableEvent(t, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"nope","delta":"x"}`))
	}
	out, omitted, err := Readable(in, Options{})
	if err != nil || omitted != 5000 {
		t.Fatalf("Readable = %d events, omitted %d, %v", len(out), omitted, err)
	}
	if _, _, err := Replay(out); err != nil {
		t.Fatal(err)
	}
}

func readableEvent(t *testing.T, s string) Event {
	t.Helper()
	ev, err := ParseEvent([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}
