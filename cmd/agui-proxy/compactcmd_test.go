package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunCompact(t *testing.T) {
	stream := `{"type":"RUN_STARTED","threadId":"t","runId":"r"}
{"type":"THINKING_START"}
{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}
{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"Hel"}
{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"lo"}
{"type":"TEXT_MESSAGE_END","messageId":"m"}
{"type":"RUN_FINISHED","threadId":"t","runId":"r"}
`
	tests := []struct {
		name     string
		args     []string
		in       string
		code     int
		contains []string
		absent   []string
	}{
		{"ndjson", nil, stream, 0, []string{`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","role":"assistant","content":"Hello"}]}` + "\n"}, []string{"THINKING"}},
		{"array in, json out", []string{"-format", "json"}, "[" + strings.Join(strings.Split(strings.TrimSpace(stream), "\n"), ",") + "]", 0, []string{`[{"type":"RUN_STARTED"`, `"content":"Hello"`}, nil},
		{"concat", []string{"-concat"}, stream, 0, []string{`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"Hello"}`}, nil},
		{"keep thinking", []string{"-keep-thinking"}, stream, 0, []string{`{"type":"THINKING_START"}`}, nil},
		{"bad json", nil, "{oops}\n", 1, nil, nil},
		{"rejected stream", nil, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`, 1, nil, nil},
		{"bad format", []string{"-format", "xml"}, stream, 2, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runCompact(tt.args, strings.NewReader(tt.in), &out, &errb)
			if code != tt.code {
				t.Fatalf("runCompact(%v) = %d, want %d (stderr %s)", tt.args, code, tt.code, errb.String())
			}
			for _, c := range tt.contains {
				if !strings.Contains(out.String(), c) {
					t.Fatalf("runCompact(%v) output = %s, want it to contain %s", tt.args, out.String(), c)
				}
			}
			for _, c := range tt.absent {
				if strings.Contains(out.String(), c) {
					t.Fatalf("runCompact(%v) output = %s, want no %s", tt.args, out.String(), c)
				}
			}
		})
	}
}
