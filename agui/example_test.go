package agui_test

import (
	"fmt"

	"github.com/agui-proxy/agui-proxy/agui"
)

// DecodeRunInput validates a run request body strictly; EventType reads an event's type
// without decoding the rest.
func Example() {
	in, err := agui.DecodeRunInput([]byte(`{"threadId":"t1","runId":"r1","state":{},"messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[],"forwardedProps":{}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(in.ThreadID, in.RunID, len(in.Messages), agui.MessageID(in.Messages[0]))

	_, err = agui.DecodeRunInput([]byte(`{"threadId":"a","thread_id":"b","runId":"r"}`))
	fmt.Println(err != nil)

	typ, ok := agui.EventType([]byte(`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`))
	fmt.Println(typ, ok, agui.IsTerminal(typ))
	// Output:
	// t1 r1 1 m1
	// true
	// RUN_FINISHED true true
}
