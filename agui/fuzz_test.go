package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeRunInput checks that the strict decoder never panics, only fails with
// ErrInvalidRunInput, and never accepts a body in which encoding/json's case-insensitive
// matching would read a different threadId or runId than the exact key (the parser
// differential between Go and the Python SDK).
func FuzzDecodeRunInput(f *testing.F) {
	for _, s := range []string{
		`{"threadId":"t1","runId":"r1"}`,
		`{"threadId":"t","runId":"r","parentRunId":"p","messages":[{"id":"m","role":"user","content":"x"}]}`,
		`{"threadId":"a","THREADID":"b","runId":"r"}`,
		`{"threadId":"a","thread_id":"b","runId":"r"}`,
		`{"threadId":"t","runId":"a","runId":"b"}`,
		`{"threadId":"t","runId":"r","state":{"a":[1,2]},"tools":[],"context":[],"forwardedProps":null}`,
		`[]`, `{`, `{"threadId":"\u0000","runId":"r"}`,
		`{"threadId":"t","runId":"r","messages":[ {"id":"a","x":[1,{"id":"b"}]} , {"id":"\u0062"},{} ]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"a"},"x"]}`, `{"threadId":"t","runId":"r","messages":{"id":"a"}}`,
		`{"threadId":"t","runId":"r","messages":[]}`, `{"threadId":"t","runId":"r","messages":null}`,
		` { "thread\u0049d" : "t" , "runId":"r", "x\"y":1, "a":{"}":"{"} } `, `{"threadId":"t","runId":"r"} x`,
		`{"threadId":"t","runId":"r","threadId":"u"}`, `{"threadId":"t","runId":"r","xx":1,"xx":2}`, `"x"`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := DecodeRunInput(body)
		// The scan agrees with encoding/json's decoder (decodeMembers), error for error.
		ref, rerr := decodeMembers(body)
		if rerr == nil {
			rerr = ref.readMembers()
		}
		if utf8.Valid(body) && fmt.Sprint(err) != fmt.Sprint(rerr) {
			t.Fatalf("DecodeRunInput(%q) error %v, the decoder says %v", body, err, rerr)
		}
		if err == nil && rerr == nil && (!reflect.DeepEqual(in.Keys, ref.Keys) || !reflect.DeepEqual(in.Fields, ref.Fields) ||
			!reflect.DeepEqual(in.Messages, ref.Messages) || !reflect.DeepEqual(in.MessageIDs, ref.MessageIDs) ||
			in.ThreadID != ref.ThreadID || in.RunID != ref.RunID || in.ParentRunID != ref.ParentRunID) {
			t.Fatalf("DecodeRunInput(%q) = %+v, the decoder reads %+v", body, in, ref)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidRunInput) {
				t.Fatalf("DecodeRunInput error %v does not wrap ErrInvalidRunInput", err)
			}
			return
		}
		var loose struct {
			ThreadID string `json:"threadId"`
			RunID    string `json:"runId"`
		}
		if err := json.Unmarshal(body, &loose); err != nil {
			t.Fatalf("DecodeRunInput accepted %q that encoding/json rejects: %v", body, err)
		}
		if loose.ThreadID != in.ThreadID || loose.RunID != in.RunID {
			t.Fatalf("parser differential on %q: strict (%q, %q), encoding/json (%q, %q)", body, in.ThreadID, in.RunID, loose.ThreadID, loose.RunID)
		}
		if ValidateID("threadId", in.ThreadID) != nil || ValidateID("runId", in.RunID) != nil {
			t.Fatalf("accepted invalid ids (%q, %q)", in.ThreadID, in.RunID)
		}
		// The messages and their ids are encoding/json's.
		var exact map[string]json.RawMessage
		var msgs []json.RawMessage
		if err := json.Unmarshal(body, &exact); err != nil {
			t.Fatal(err)
		}
		if raw := exact["messages"]; raw != nil && string(raw) != "null" {
			if err := json.Unmarshal(raw, &msgs); err != nil {
				t.Fatalf("DecodeRunInput accepted messages %q that are not an array: %v", raw, err)
			}
		}
		if len(msgs) != len(in.Messages) || len(in.MessageIDs) != len(in.Messages) {
			t.Fatalf("%d messages (%d ids), encoding/json reads %d", len(in.Messages), len(in.MessageIDs), len(msgs))
		}
		for i, m := range msgs {
			if !bytes.Equal(m, in.Messages[i]) || in.MessageIDs[i] != messageIDSlow(m) {
				t.Fatalf("message %d = %q (id %q), encoding/json reads %q (id %q)", i, in.Messages[i], in.MessageIDs[i], m, messageIDSlow(m))
			}
		}
	})
}

// FuzzMessageID checks the scanning MessageID, MessageIDRole and (on valid JSON)
// ValidMessageIDRole against encoding/json's answer.
func FuzzMessageID(f *testing.F) {
	for _, s := range []string{
		`{"id":"m1","role":"user","content":"x"}`,
		`{"role":"user","id":"a","id":"b"}`,
		`{"id":"a","id":null}`, `{"id":null,"id":"a"}`, `{"id":1}`, `{"id":{"id":"x"}}`,
		`{"content":{"id":"inner"},"x":[{"id":"y"}],"n":-1.5e3,"t":true}`,
		`{"\u0069d":"escaped key"}`, `{"id":"esc\"aped\u00e9"}`, `{"id":"caf\u00e9"}`, "{\"id\":\"caf\xc3\xa9\"}",
		`{"id":"a","role":"activity","content":{"role":"user"}}`, `{"role":"\u0061ctivity","id":"x"}`,
		`{"Role":"activity","id":"x"}`, `{"role":"user","role":"activity"}`, `{"role":7,"id":"x"}`, "{\"role\":\"r\xff\"}",
		` { "id" : "spaced" , "b" : [ 1 , 2 ] } `, `{}`, `[]`, `"id"`, `{"ID":"x"}`, `{"id":"x"`, `{"a":"}","id":"q"}`,
		"{\"id\":\"bad\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		want := ""
		if json.Valid(msg) {
			want = messageIDSlow(msg)
		}
		if got := MessageID(msg); got != want {
			t.Fatalf("MessageID(%q) = %q, encoding/json says %q", msg, got, want)
		}
		wantRole := ""
		if json.Valid(msg) {
			_, wantRole = messageMembersSlow(msg)
		}
		if id, role := MessageIDRole(msg); id != want || role != wantRole {
			t.Fatalf("MessageIDRole(%q) = %q, %q; encoding/json says %q, %q", msg, id, role, want, wantRole)
		}
		if json.Valid(msg) {
			if id, role := ValidMessageIDRole(msg); id != want || role != wantRole {
				t.Fatalf("ValidMessageIDRole(%q) = %q, %q; encoding/json says %q, %q", msg, id, role, want, wantRole)
			}
		}
	})
}
