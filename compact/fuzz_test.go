package compact

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzCompact feeds NDJSON event streams: Compact never panics; when it succeeds it is
// idempotent and Replay(Compact(s)) equals Replay(s); when it fails the error is typed.
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
