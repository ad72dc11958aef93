package agui

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecodeRunInput: a run request carrying a 2,000-message conversation (what
// @ag-ui/client sends on the 1,001st run of a chat thread), decoded and its ids read.
func BenchmarkDecodeRunInput(b *testing.B) {
	var msgs []string
	for i := range 1000 {
		msgs = append(msgs, fmt.Sprintf(`{"id":"u%d","role":"user","content":"chat"}`, i),
			fmt.Sprintf(`{"id":"msg-%d-0123456789abcdef","role":"assistant","content":%q}`, i, strings.Repeat("Hello there, this is the demo agent talking. ", 3)))
	}
	body := []byte(`{"threadId":"t","runId":"r1001","state":{},"tools":[],"context":[],"forwardedProps":{},"messages":[` + strings.Join(msgs, ",") + `]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		in, err := DecodeRunInput(body)
		if err != nil || len(in.Messages) != 2000 {
			b.Fatal(err)
		}
		if len(in.MessageIDs) != 2000 || in.MessageIDs[1999] != "msg-999-0123456789abcdef" {
			b.Fatal(in.MessageIDs[1999])
		}
	}
}
