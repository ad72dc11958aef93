package compact_test

import (
	"errors"
	"fmt"

	"github.com/agui-proxy/agui-proxy/compact"
)

// parse turns the data lines of a recorded stream into events.
func parse(lines ...string) []compact.Event {
	var evs []compact.Event
	for _, l := range lines {
		e, err := compact.ParseEvent([]byte(l))
		if err != nil {
			panic(err)
		}
		evs = append(evs, e)
	}
	return evs
}

// Compact folds a run's deltas into one MESSAGES_SNAPSHOT and one STATE_SNAPSHOT, keeping the
// run's boundaries; Replay, a mirror of the official client, shows both streams end with the
// same messages and state.
func Example() {
	recorded := parse(
		`{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hel"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"lo"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`,
		`{"type":"STATE_SNAPSHOT","snapshot":{"n":1}}`,
		`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":2}]}`,
		`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`,
	)
	out, err := compact.Compact(recorded, compact.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range out {
		fmt.Println(string(e.Raw))
	}
	m1, s1, _ := compact.Replay(recorded)
	m2, s2, _ := compact.Replay(out)
	fmt.Println(string(m2), string(s2))
	fmt.Println(string(m1) == string(m2) && string(s1) == string(s2))
	// Output:
	// {"type":"RUN_STARTED","threadId":"t1","runId":"r1"}
	// {"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m1","role":"assistant","content":"Hello"}]}
	// {"type":"STATE_SNAPSHOT","snapshot":{"n":2}}
	// {"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}
	// [{"id":"m1","role":"assistant","content":"Hello"}] {"n":2}
	// true
}

// A message still streaming is re-opened after the snapshot, so the live tail that follows the
// compacted prelude continues it.
func ExampleCompact_inProgress() {
	out, _ := compact.Compact(parse(
		`{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hel"}`,
	), compact.Options{})
	for _, e := range out {
		fmt.Println(string(e.Raw))
	}
	tail := parse(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"lo"}`)
	messages, _, err := compact.Replay(append(out, tail...))
	fmt.Println(string(messages), err)
	// Output:
	// {"type":"RUN_STARTED","threadId":"t1","runId":"r1"}
	// {"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m1","role":"assistant","content":"Hel"}]}
	// {"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}
	// [{"id":"m1","role":"assistant","content":"Hello"}] <nil>
}

// A stream the official client would reject is refused with a *StreamError (callers replay
// such a thread raw, or through Readable, which leaves the rejected events out and says so).
func ExampleReadable() {
	bad := parse(
		`{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"nope","delta":"orphan"}`,
		`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`,
	)
	_, err := compact.Compact(bad, compact.Options{})
	var se *compact.StreamError
	fmt.Println(errors.As(err, &se), errors.Is(err, compact.ErrRejected))
	out, omitted, err := compact.Readable(bad, compact.Options{})
	fmt.Println(omitted, err)
	for _, e := range out {
		fmt.Println(string(e.Raw))
	}
	// Output:
	// true true
	// 1 <nil>
	// {"type":"RUN_STARTED","threadId":"t1","runId":"r1"}
	// {"type":"CUSTOM","name":"agui-proxy.events_omitted","value":{"omitted":1,"reason":"event 1 (TEXT_MESSAGE_CONTENT): text message \"nope\" is not open"}}
	// {"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}
}
