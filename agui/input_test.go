package agui

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeRunInput(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantErr  bool
		thread   string
		run      string
		parent   string
		messages int
	}{
		{name: "minimal", body: `{"threadId":"t1","runId":"r1"}`, thread: "t1", run: "r1"},
		{name: "full", body: `{"threadId":"t1","runId":"r2","parentRunId":"r1","messages":[{"id":"m1","role":"user","content":"hi"}],"state":{},"tools":[],"context":[],"forwardedProps":{}}`,
			thread: "t1", run: "r2", parent: "r1", messages: 1},
		{name: "null parent and messages", body: `{"threadId":"t","runId":"r","parentRunId":null,"messages":null}`, thread: "t", run: "r"},
		{name: "unknown members allowed", body: `{"threadId":"t","runId":"r","resume":[{"x":1}],"THREAD":"x"}`, thread: "t", run: "r"},
		{name: "uppercase variant", body: `{"threadId":"victim","THREADID":"mine","runId":"r"}`, wantErr: true},
		{name: "snake variant", body: `{"threadId":"a","thread_id":"b","runId":"r"}`, wantErr: true},
		{name: "snake alone", body: `{"thread_id":"a","runId":"r"}`, wantErr: true},
		{name: "duplicate runId", body: `{"threadId":"t","runId":"a","runId":"b"}`, wantErr: true},
		{name: "duplicate messages", body: `{"threadId":"t","runId":"a","messages":[],"messages":[]}`, wantErr: true},
		{name: "missing runId", body: `{"threadId":"t"}`, wantErr: true},
		{name: "invalid UTF-8 in a string", body: "{\"threadId\":\"t\",\"runId\":\"r\",\"x\":\"\xff\"}", wantErr: true},
		{name: "runId not a string", body: `{"threadId":"t","runId":7}`, wantErr: true},
		{name: "empty threadId", body: `{"threadId":"","runId":"r"}`, wantErr: true},
		{name: "newline in id", body: `{"threadId":"a\nb","runId":"r"}`, wantErr: true},
		{name: "brace in id", body: `{"threadId":"{a}","runId":"r"}`, wantErr: true},
		{name: "star in id", body: `{"threadId":"a*","runId":"r"}`, wantErr: true},
		{name: "space in id", body: `{"threadId":"a b","runId":"r"}`, wantErr: true},
		{name: "NUL in id", body: `{"threadId":"a\u0000","runId":"r"}`, wantErr: true},
		{name: "long id", body: `{"threadId":"` + strings.Repeat("a", 10240) + `","runId":"r"}`, wantErr: true},
		{name: "bad parent", body: `{"threadId":"t","runId":"r","parentRunId":"x y"}`, wantErr: true},
		{name: "messages not array", body: `{"threadId":"t","runId":"r","messages":{}}`, wantErr: true},
		{name: "message not object", body: `{"threadId":"t","runId":"r","messages":["hi"]}`, wantErr: true},
		{name: "not an object", body: `[1,2]`, wantErr: true},
		{name: "not JSON", body: `hello`, wantErr: true},
		{name: "truncated", body: `{"threadId":"t","runId":"r"`, wantErr: true},
		{name: "trailing data", body: `{"threadId":"t","runId":"r"} {}`, wantErr: true},
		{name: "empty", body: ``, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := DecodeRunInput([]byte(tt.body))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("DecodeRunInput(%.60q) = %+v, want error", tt.body, in)
				}
				if !errors.Is(err, ErrInvalidRunInput) {
					t.Errorf("DecodeRunInput(%.60q) error %v does not wrap ErrInvalidRunInput", tt.body, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeRunInput(%.60q) error: %v", tt.body, err)
			}
			if in.ThreadID != tt.thread || in.RunID != tt.run || in.ParentRunID != tt.parent || len(in.Messages) != tt.messages {
				t.Errorf("DecodeRunInput(%.60q) = {%q %q %q %d msgs}, want {%q %q %q %d}", tt.body,
					in.ThreadID, in.RunID, in.ParentRunID, len(in.Messages), tt.thread, tt.run, tt.parent, tt.messages)
			}
			if string(in.Body) != tt.body {
				t.Errorf("Body = %q, want the input bytes", in.Body)
			}
		})
	}
}

func TestValidateID(t *testing.T) {
	good := []string{"a", "550e8400-e29b-41d4-a716-446655440000", "thread_abc", "run:1", "x.y~z@w+v=u", strings.Repeat("a", MaxIDLength)}
	for _, id := range good {
		if err := ValidateID("id", id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	bad := []string{"", "a b", "a\nb", "a\rb", "a\x00", "{a}", "a}", "a*", "a?", "[a]", "a/b", `a"b`, "é", strings.Repeat("a", MaxIDLength+1)}
	for _, id := range bad {
		if err := ValidateID("id", id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateID(%.40q) = %v, want ErrInvalidID", id, err)
		}
	}
}

func TestMessageID(t *testing.T) {
	tests := map[string]string{
		`{"id":"m1","role":"user"}`: "m1",
		`{"ID":"m1"}`:               "",
		`{"id":5}`:                  "",
		`[]`:                        "",
	}
	for in, want := range tests {
		if got := MessageID([]byte(in)); got != want {
			t.Errorf("MessageID(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestLooksLikeRunInput(t *testing.T) {
	tests := map[string]bool{
		`{"threadId":"t","runId":"r"}`:  true,
		`{"THREADID":"t","run_id":"r"}`: true,
		`{"threadId":"t"}`:              false,
		`{"query":"x"}`:                 false,
		`not json`:                      false,
	}
	for in, want := range tests {
		if got := LooksLikeRunInput([]byte(in)); got != want {
			t.Errorf("LooksLikeRunInput(%s) = %v, want %v", in, got, want)
		}
	}
}
