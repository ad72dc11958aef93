package agui_test

import (
	"encoding/json"
	"errors"
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

// KindOf maps an event type to its entry in the one table of AG-UI 1.0 event types; a type
// the table does not know is KindUnknown and travels through the proxy untouched.
func ExampleKindOf() {
	for _, name := range []string{"TEXT_MESSAGE_CONTENT", "STATE_DELTA", "MY_OWN_EVENT"} {
		k := agui.KindOf(name)
		fmt.Println(name, k == agui.KindUnknown, k.String() == name)
	}
	// Output:
	// TEXT_MESSAGE_CONTENT false true
	// STATE_DELTA false true
	// MY_OWN_EVENT true false
}

// ValidateID refuses a thread or run id the proxy could not use as a store key or in a
// cursor, with an error wrapping ErrInvalidID.
func ExampleValidateID() {
	fmt.Println(agui.ValidateID("threadId", "t-1"))
	err := agui.ValidateID("threadId", "a\nb")
	fmt.Println(errors.Is(err, agui.ErrInvalidID))
	// Output:
	// <nil>
	// true
}

// Title names a thread after its first user message.
func ExampleTitle() {
	fmt.Println(agui.Title([]json.RawMessage{
		json.RawMessage(`{"id":"s1","role":"system","content":"Be brief."}`),
		json.RawMessage(`{"id":"u1","role":"user","content":"What is the weather in Paris?"}`),
	}))
	// Output:
	// What is the weather in Paris?
}
