package hydrate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
)

func msgs(t testing.TB, js string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		t.Fatalf("bad test messages %s: %v", js, err)
	}
	return out
}

func decode(t testing.TB, body string) *agui.RunInput {
	t.Helper()
	in, err := agui.DecodeRunInput([]byte(body))
	if err != nil {
		t.Fatalf("DecodeRunInput(%s) = %v", body, err)
	}
	return in
}

const branchMsgs = `[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"}]`

func TestApply(t *testing.T) {
	tests := []struct {
		name       string
		mode       Mode
		body       string
		branch     string
		state      string
		want       string // the body the agent gets
		restored   int
		stateTaken bool
	}{
		{
			name: "off leaves the request alone", mode: ModeOff,
			body:   `{"threadId":"t","runId":"r2","messages":[{"id":"u2","role":"user","content":"again"}]}`,
			branch: branchMsgs, state: `{"n":1}`,
			want: `{"threadId":"t","runId":"r2","messages":[{"id":"u2","role":"user","content":"again"}]}`,
		},
		{
			name: "missing: only the newest message → whole branch, then it", mode: ModeMissing,
			body:     `{"threadId":"t","runId":"r2","tools":[ ],"messages":[{"id":"u2","role":"user","content":"again"}],"context":[]}`,
			branch:   branchMsgs,
			want:     `{"threadId":"t","runId":"r2","tools":[ ],"messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"},{"id":"u2","role":"user","content":"again"}],"context":[]}`,
			restored: 2,
		},
		{
			name: "missing: a client that sent everything is untouched", mode: ModeMissing,
			body:   `{"threadId":"t","runId":"r2", "messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"},{"id":"u2","role":"user","content":"x"}]}`,
			branch: branchMsgs,
			want:   `{"threadId":"t","runId":"r2", "messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"},{"id":"u2","role":"user","content":"x"}]}`,
		},
		{
			name: "missing: the client's copy of a held message wins", mode: ModeMissing,
			body:     `{"threadId":"t","runId":"r2","messages":[{"id":"a1","role":"assistant","content":"EDITED"},{"id":"u2","role":"user","content":"x"}]}`,
			branch:   branchMsgs,
			want:     `{"threadId":"t","runId":"r2","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"EDITED"},{"id":"u2","role":"user","content":"x"}]}`,
			restored: 1,
		},
		{
			name: "missing: no messages member at all", mode: ModeMissing,
			body:     `{"threadId":"t","runId":"r2"}`,
			branch:   branchMsgs,
			want:     `{"threadId":"t","runId":"r2","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"}]}`,
			restored: 2,
		},
		{
			name: "missing: empty state takes the branch's", mode: ModeMissing,
			body:   `{"threadId":"t","runId":"r2","state":{},"messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"}]}`,
			branch: branchMsgs, state: `{"n":1}`,
			want:       `{"threadId":"t","runId":"r2","state":{"n":1},"messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"}]}`,
			stateTaken: true,
		},
		{
			name: "missing: the client's own state wins", mode: ModeMissing,
			body:   `{"threadId":"t","runId":"r2","state":{"n":2},"messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"}]}`,
			branch: branchMsgs, state: `{"n":1}`,
			want: `{"threadId":"t","runId":"r2","state":{"n":2},"messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"}]}`,
		},
		{
			name: "missing: messages without id are new", mode: ModeMissing,
			body:     `{"threadId":"t","runId":"r2","messages":[{"role":"user","content":"no id"}]}`,
			branch:   branchMsgs,
			want:     `{"threadId":"t","runId":"r2","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"},{"role":"user","content":"no id"}]}`,
			restored: 2,
		},
		{
			name: "always: the store's copy and state win", mode: ModeAlways,
			body:   `{"threadId":"t","runId":"r2","state":{"n":2},"messages":[{"id":"a1","role":"assistant","content":"EDITED"},{"id":"u1","role":"user","content":"hi"},{"id":"u2","role":"user","content":"x"}]}`,
			branch: branchMsgs, state: `{"n":1}`,
			want:       `{"threadId":"t","runId":"r2","state":{"n":1},"messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"},{"id":"u2","role":"user","content":"x"}]}`,
			stateTaken: true,
		},
		{
			name: "always: nothing to change", mode: ModeAlways,
			body:   `{"threadId":"t","runId":"r2","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"}]}`,
			branch: branchMsgs,
			want:   `{"threadId":"t","runId":"r2","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"a1","role":"assistant","content":"hello"}]}`,
		},
		{
			name: "activity messages are never restored (clients do not send them)", mode: ModeMissing,
			body:   `{"threadId":"t","runId":"r2","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"u2","role":"user","content":"x"}]}`,
			branch: `[{"id":"u1","role":"user","content":"hi"},{"id":"act1","role":"activity","activityType":"PLAN","content":{}}]`,
			want:   `{"threadId":"t","runId":"r2","messages":[{"id":"u1","role":"user","content":"hi"},{"id":"u2","role":"user","content":"x"}]}`,
		},
		{
			name: "an activity message whose role is spelled with escapes is one too", mode: ModeMissing,
			body:     `{"threadId":"t","runId":"r2","messages":[{"id":"u2","role":"user","content":"x"}]}`,
			branch:   `[{"id":"u1","role":"user","content":"activity"},{"id":"act1","role":"\u0061ctivit\u0079","content":{}}]`,
			want:     `{"threadId":"t","runId":"r2","messages":[{"id":"u1","role":"user","content":"activity"},{"id":"u2","role":"user","content":"x"}]}`,
			restored: 1,
		},
		{
			name: "a role is read from its exact key, as the client reads it (\"Role\" is another member)", mode: ModeMissing,
			body:     `{"threadId":"t","runId":"r2","messages":[{"id":"u2","role":"user","content":"x"}]}`,
			branch:   `[{"id":"act1","role":"activity","content":{}},{"id":"u1","Role":"activity","role":"user","content":"hi"}]`,
			want:     `{"threadId":"t","runId":"r2","messages":[{"id":"u1","Role":"activity","role":"user","content":"hi"},{"id":"u2","role":"user","content":"x"}]}`,
			restored: 1,
		},
		{
			name: "empty branch: nothing to restore", mode: ModeMissing,
			body:   `{"threadId":"t","runId":"r1","messages":[{"id":"u1","role":"user","content":"hi"}]}`,
			branch: `[]`,
			want:   `{"threadId":"t","runId":"r1","messages":[{"id":"u1","role":"user","content":"hi"}]}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := Branch{Messages: msgs(t, tc.branch)}
			if tc.state != "" {
				b.State = json.RawMessage(tc.state)
			}
			res, err := Apply(tc.mode, decode(t, tc.body), b)
			if err != nil {
				t.Fatalf("Apply = %v", err)
			}
			if string(res.Body) != tc.want {
				t.Errorf("body =\n%s\nwant\n%s", res.Body, tc.want)
			}
			if res.Restored != tc.restored || res.State != tc.stateTaken || res.Changed() != (tc.want != tc.body) {
				t.Errorf("result = %d restored, state %v; want %d, %v", res.Restored, res.State, tc.restored, tc.stateTaken)
			}
		})
	}
}

func TestApplyRefusesBadBranch(t *testing.T) {
	_, err := Apply(ModeMissing, decode(t, `{"threadId":"t","runId":"r"}`), Branch{Messages: []json.RawMessage{json.RawMessage(`"x"`)}})
	if err == nil {
		t.Error("Apply with a branch message that is not an object = nil, want an error")
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeMissing, "off": ModeOff, "missing": ModeMissing, "always": ModeAlways} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Off", "yes", "1", " missing"} {
		if _, err := ParseMode(in); err == nil || !strings.Contains(err.Error(), "off, missing or always") {
			t.Errorf("ParseMode(%q) = %v, want an error naming the modes", in, err)
		}
	}
}

// FuzzApply: for every valid request and branch, the rebuilt body is a valid RunAgentInput
// with the same ids and every other member byte for byte, holds every message id of the
// branch and of the request (missing mode), and off mode changes nothing.
func FuzzApply(f *testing.F) {
	f.Add([]byte(`{"threadId":"t","runId":"r2","messages":[{"id":"u2","role":"user","content":"x"}],"tools":[]}`), []byte(branchMsgs), []byte(`{"a":1}`))
	f.Add([]byte(`{"threadId":"t","runId":"r2","state":null}`), []byte(`[]`), []byte(`null`))
	f.Add([]byte(`{"runId":"r","threadId":"t","messages":[{"id":"a1"},{"id":"a1"}],"x":"\u00e9"}`), []byte(`[{"id":"a1"},{}]`), []byte(`[1]`))
	f.Add([]byte(`{"threadId":"t","runId":"r2","messages":[]}`), []byte(`[{"id":"x","role":"\u0061ctivity"},{"id":"y","role":"user","content":"activity"}]`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, body, branch, state []byte) {
		in, err := agui.DecodeRunInput(body)
		if err != nil {
			return
		}
		var bm []json.RawMessage
		if json.Unmarshal(branch, &bm) != nil {
			return
		}
		// bm are the elements of a valid array: valid JSON, which half the inputs declare.
		b := Branch{Messages: bm, Valid: len(branch)%2 == 0}
		if json.Valid(state) {
			b.State = state
		}
		if res, err := Apply(ModeOff, in, b); err != nil || !bytes.Equal(res.Body, body) {
			t.Fatalf("off: %v, body changed", err)
		}
		for _, mode := range []Mode{ModeMissing, ModeAlways} {
			res, err := Apply(mode, in, b)
			if err != nil {
				return // a branch message that is not an object
			}
			out, err := agui.DecodeRunInput(res.Body)
			if err != nil {
				t.Fatalf("%s: rebuilt body %s does not decode: %v", mode, res.Body, err)
			}
			if out.ThreadID != in.ThreadID || out.RunID != in.RunID || out.ParentRunID != in.ParentRunID {
				t.Fatalf("%s: ids changed: %s", mode, res.Body)
			}
			for _, k := range in.Keys {
				if k != "messages" && k != "state" && !bytes.Equal(in.Fields[k], out.Fields[k]) {
					t.Fatalf("%s: member %q changed: %s -> %s", mode, k, in.Fields[k], out.Fields[k])
				}
			}
			have := map[string]bool{}
			for _, m := range out.Messages {
				have[agui.MessageID(m)] = true
			}
			for _, m := range append(append([]json.RawMessage{}, bm...), in.Messages...) {
				if !have[agui.MessageID(m)] && roleOf(m) != activityRole {
					t.Fatalf("%s: message %s lost: %s", mode, m, res.Body)
				}
			}
		}
	})
}

// roleOf is a message's "role" as encoding/json reads it (the exact key; "" when it is not a
// string): the reference for the scan Apply reads it with.
func roleOf(m json.RawMessage) string {
	var members map[string]json.RawMessage
	var role string
	if json.Unmarshal(m, &members) != nil || json.Unmarshal(members["role"], &role) != nil {
		return ""
	}
	return role
}
