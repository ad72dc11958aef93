package compact_test

import (
	"flag"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/compact/compacttest"
)

// readableStreams sets the number of generated streams of TestReadableProperty.
var readableStreams = flag.Int("readable-streams", 1500, "generated streams for TestReadableProperty")

// badEvents are events the official client rejects wherever they are inserted into a valid
// stream (or, for the last ones, after its terminal event).
var badEvents = []string{
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"never-started","delta":"x"}`,
	`{"type":"TEXT_MESSAGE_END","messageId":"never-started"}`,
	`{"type":"TOOL_CALL_ARGS","toolCallId":"never-started","delta":"{}"}`,
	`{"type":"STATE_DELTA","delta":{"op":"add","path":"/x","value":1}}`,
	`{"type":"STATE_DELTA","delta":[{"op":"frob","path":"/x"}]}`,
}

// TestReadableProperty: generated valid streams (whole and cut mid-run) with rejected events
// inserted at random places always come out of Readable readable: no error, they replay, they
// start with RUN_STARTED, and the marker is there exactly when events were left out.
func TestReadableProperty(t *testing.T) {
	n := *readableStreams
	if testing.Short() {
		n = 200
	}
	for seed := range uint64(n) {
		events := compacttest.Generate(seed, 10+int(seed%120), seed%3 == 0)
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		bad := rng.IntN(4)
		for range bad {
			ev, err := compact.ParseEvent([]byte(badEvents[rng.IntN(len(badEvents))]))
			if err != nil {
				t.Fatal(err)
			}
			at := 1 + rng.IntN(len(events)) // never before the first RUN_STARTED
			events = append(events[:at], append([]compact.Event{ev}, events[at:]...)...)
		}
		out, omitted, err := compact.Readable(events, compact.Options{})
		if err != nil {
			t.Fatalf("seed %d: Readable = %v", seed, err)
		}
		if _, _, err := compact.Replay(out); err != nil {
			t.Fatalf("seed %d: the result does not replay: %v", seed, err)
		}
		if len(out) == 0 || out[0].Type != "RUN_STARTED" {
			t.Fatalf("seed %d: the result does not start with RUN_STARTED", seed)
		}
		markers := 0
		for _, e := range out {
			if strings.Contains(string(e.Raw), compact.OmittedEventName) {
				markers++
			}
		}
		if want := min(omitted, 1); markers != want {
			t.Fatalf("seed %d: %d markers for %d omitted events (%d inserted)", seed, markers, omitted, bad)
		}
	}
}
