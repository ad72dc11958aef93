package agui

import (
	"encoding/json"
	"errors"
	"testing"
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
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := DecodeRunInput(body)
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
	})
}
