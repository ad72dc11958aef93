package agui

import (
	"encoding/json"
	"testing"
)

func TestEventType(t *testing.T) {
	tests := []struct {
		in     string
		want   string
		wantOK bool
	}{
		{`{"type":"RUN_STARTED","threadId":"t"}`, RunStarted, true},
		{` { "threadId" : "t" , "type" : "CUSTOM" } `, Custom, true},
		{`{"a":{"type":"X"},"b":["type",{"type":"Y"}],"type":"TEXT_MESSAGE_CONTENT"}`, TextMessageContent, true},
		{`{"type":"A","type":"B"}`, "B", true},
		{`{"TYPE":"A"}`, "", false},
		{`{"typ\u0065":"A"}`, "A", true},
		{`{"type":"RUN\u005fERROR"}`, RunError, true},
		{`{"type":"FUTURE_EVENT","x":1}`, "FUTURE_EVENT", true},
		{`{"type":1}`, "", false},
		{`{"type":"A","type":null}`, "", false},
		{`{}`, "", false},
		{`[{"type":"A"}]`, "", false},
		{`{oops}`, "", false},
		{`{"type":"A"}{"type":"B"}`, "", false},
		{`{"s":"a\"b}","n":-1.5e3,"t":true,"type":"Z"}`, "Z", true},
	}
	for _, tt := range tests {
		got, ok := EventType([]byte(tt.in))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("EventType(%s) = %q, %v, want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

// FuzzEventType checks EventType against encoding/json reading the exact "type" key.
func FuzzEventType(f *testing.F) {
	for _, s := range []string{`{"type":"RUN_STARTED"}`, `{"a":[1,{"type":"x"}],"type":"B"}`, `{"type":"A","TYPE":"B"}`, `{"typ\u0065":"A"}`, `[]`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := EventType(data)
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			if ok {
				t.Fatalf("EventType(%q) = %q, true for a non-object", data, got)
			}
			return
		}
		var want string
		wantOK := json.Unmarshal(m["type"], &want) == nil && m["type"] != nil && string(m["type"]) != "null"
		if ok != wantOK || (ok && got != want) {
			t.Fatalf("EventType(%q) = %q, %v, want %q, %v", data, got, ok, want, wantOK)
		}
	})
}

func BenchmarkEventType(b *testing.B) {
	data := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_0123456789","delta":"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam"}`)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		EventType(data)
	}
}

func TestKindOf(t *testing.T) {
	for k := KindUnknown + 1; k < NumKinds; k++ {
		if got := KindOf(k.String()); got != k {
			t.Errorf("KindOf(%q) = %v, want %v", k.String(), got, k)
		}
		if got := KindOfBytes([]byte(k.String())); got != k {
			t.Errorf("KindOfBytes(%q) = %v, want %v", k.String(), got, k)
		}
	}
	for _, s := range []string{"", "R", "RA", "RAX", ThinkingStart, "text_message_start", "TEXT_MESSAGE_STAR", "TEXT_MESSAGE_STARTX"} {
		if got := KindOf(s); got != KindUnknown {
			t.Errorf("KindOf(%q) = %v, want KindUnknown", s, got)
		}
	}
	if KindUnknown.String() != "" || Kind(200).String() != "" {
		t.Error("String of an unknown Kind is not empty")
	}
}
