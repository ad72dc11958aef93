package hydrate_test

import (
	"encoding/json"
	"fmt"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/hydrate"
)

// A client that reloaded its page sends only its new message; Apply gives the agent the
// branch's messages first, and the branch's state since the request has none.
func Example() {
	mode, _ := hydrate.ParseMode("") // AGUI_HYDRATE unset: missing
	in, err := agui.DecodeRunInput([]byte(`{"threadId":"t1","runId":"r2","state":{},"messages":[{"id":"u2","role":"user","content":"And tomorrow?"}],"tools":[],"context":[],"forwardedProps":{}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	branch := hydrate.Branch{
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"u1","role":"user","content":"Weather in Paris?"}`),
			json.RawMessage(`{"id":"a1","role":"assistant","content":"Sunny."}`),
		},
		State: json.RawMessage(`{"city":"Paris"}`),
	}
	res, err := hydrate.Apply(mode, in, branch)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(mode, res.Changed(), res.Restored, res.State)
	fmt.Println(string(res.Body))

	// A client that sent the whole conversation is forwarded byte for byte.
	full, _ := agui.DecodeRunInput([]byte(`{"threadId":"t1","runId":"r2","messages":[{"id":"u1","role":"user","content":"Weather in Paris?"},{"id":"a1","role":"assistant","content":"Sunny."},{"id":"u2","role":"user","content":"And tomorrow?"}],"state":{"city":"Paris"}}`))
	res, _ = hydrate.Apply(mode, full, branch)
	fmt.Println(res.Changed(), string(res.Body) == string(full.Body))
	// Output:
	// missing true 2 true
	// {"threadId":"t1","runId":"r2","state":{"city":"Paris"},"messages":[{"id":"u1","role":"user","content":"Weather in Paris?"},{"id":"a1","role":"assistant","content":"Sunny."},{"id":"u2","role":"user","content":"And tomorrow?"}],"tools":[],"context":[],"forwardedProps":{}}
	// false true
}
