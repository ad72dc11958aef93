package compact

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzCompact feeds NDJSON event streams: Compact never panics; when it succeeds it is
// idempotent and Replay(Compact(s)) equals Replay(s); when it fails the error is typed. A Fold
// fed the stream in two parts, answering after the first, ends with Compact's answer.
func FuzzCompact(f *testing.F) {
	f.Add([]byte(`{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"messages":[{"id":"u","role":"user","content":"hi"}]}}
{"type":"TEXT_MESSAGE_START","messageId":"m"}
{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\ud83d"}
{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\ude80"}
{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1}]}`))
	f.Add([]byte(`{"type":"RUN_STARTED","threadId":"t","runId":"r"}
{"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"f","delta":"{"}
{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"x","role":"user","content":"y"}]}
{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"p","content":{"s":[]}}
{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"p","patch":[{"op":"add","path":"/s/-","value":2}]}
{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var events []Event
		for _, line := range bytes.Split(data, []byte("\n")) {
			if e, err := ParseEvent(line); err == nil {
				events = append(events, e)
			}
		}
		checkFastPaths(t, events)
		out, err := Compact(events, Options{})
		checkFoldInParts(t, events, out, err)
		if err != nil {
			var se *StreamError
			var le *LimitError
			if !errors.As(err, &se) && !errors.As(err, &le) {
				t.Fatalf("Compact error %T %v is not typed", err, err)
			}
			return
		}
		wm, ws, werr := Replay(withoutEphemeral(events))
		gm, gs, gerr := Replay(out)
		if werr != nil || gerr != nil {
			t.Fatalf("Replay errors raw=%v compacted=%v", werr, gerr)
		}
		var a, b any
		_ = json.Unmarshal(wm, &a)
		_ = json.Unmarshal(gm, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("messages differ:\nraw       %s\ncompacted %s", wm, gm)
		}
		_ = json.Unmarshal(ws, &a)
		_ = json.Unmarshal(gs, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("state differs:\nraw       %s\ncompacted %s", ws, gs)
		}
		again, err := Compact(out, Options{})
		if err != nil || len(again) != len(out) {
			t.Fatalf("Compact(Compact(s)) = %d events, %v; want %d", len(again), err, len(out))
		}
		for i := range out {
			if !bytes.Equal(again[i].Raw, out[i].Raw) {
				t.Fatalf("not idempotent at %d: %s then %s", i, out[i].Raw, again[i].Raw)
			}
		}
	})
}

// checkFoldInParts feeds events to a Fold in two parts (cut where the stream's length puts
// it), asks for its Events twice after the first (the second answer copies kept renderings)
// and checks that after the second part it answers exactly what Compact answered: out, or
// the same error.
func checkFoldInParts(t *testing.T, events, out []Event, err error) {
	t.Helper()
	f := NewFold(Options{})
	cut := len(events) / 2
	if ferr := f.Feed(events[:cut]); ferr == nil {
		f.Events()
		f.Events()
	}
	f.Feed(events[cut:])
	got, ferr := f.Events()
	if (err == nil) != (ferr == nil) || (err != nil && err.Error() != ferr.Error()) {
		t.Fatalf("Fold in parts: error %v, Compact: %v", ferr, err)
	}
	if err != nil {
		return
	}
	if len(got) != len(out) {
		t.Fatalf("Fold in parts: %d events, Compact %d", len(got), len(out))
	}
	for i := range out {
		if got[i].Type != out[i].Type || !bytes.Equal(got[i].Raw, out[i].Raw) {
			t.Fatalf("Fold in parts, event %d: %s, Compact %s", i, got[i].Raw, out[i].Raw)
		}
	}
}
