package agui

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTitle(t *testing.T) {
	long := strings.Repeat("word ", 60)
	tests := []struct {
		messages, want string
	}{
		{`[{"id":"u1","role":"user","content":"  What is\nthe   weather? "}]`, "What is the weather?"},
		{`[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]`, "hi"},
		{`[{"role":"user","content":[{"type":"image","url":"x"},{"type":"text","text":"look"},{"type":"text","text":"here"}]}]`, "look here"},
		{`[{"role":"user","content":""},{"role":"user","content":"second"}]`, "second"},
		{`[{"role":"assistant","content":"no user"}]`, ""},
		{`[]`, ""},
		{`[{"role":"user","content":42}]`, ""},
		{`[{"role":"user","content":"` + long + `"}]`, strings.Repeat("word ", 19) + "word…"},
	}
	for _, tc := range tests {
		var msgs []json.RawMessage
		if err := json.Unmarshal([]byte(tc.messages), &msgs); err != nil {
			t.Fatal(err)
		}
		got := Title(msgs)
		if got != tc.want {
			t.Errorf("Title(%s) = %q, want %q", tc.messages, got, tc.want)
		}
		if utf8.RuneCountInString(got) > MaxTitleRunes {
			t.Errorf("Title(%s) has %d runes, more than %d", tc.messages, utf8.RuneCountInString(got), MaxTitleRunes)
		}
	}
}
