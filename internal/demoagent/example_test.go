package demoagent_test

import (
	"encoding/json"
	"fmt"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
)

// ExampleEvents lists the events of the tools scenario, as a test of another package would
// use them.
func ExampleEvents() {
	events, err := demoagent.Events("tools", demoagent.Input{ThreadID: "t1", RunID: "r1"})
	if err != nil {
		panic(err)
	}
	for _, ev := range events[:3] {
		fmt.Println(string(ev))
	}
	var last struct{ Type string }
	_ = json.Unmarshal(events[len(events)-1], &last)
	fmt.Println(len(events), "events, last", last.Type)
	// Output:
	// {"type":"RUN_STARTED","threadId":"t1","runId":"r1"}
	// {"type":"TEXT_MESSAGE_START","messageId":"msg-r1-1","role":"assistant"}
	// {"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-r1-1","delta":"Let me "}
	// 20 events, last RUN_FINISHED
}
