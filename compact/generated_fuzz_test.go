package compact_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/compact/compacttest"
)

// FuzzCompactGenerated runs the checks of TestPropertyGenerated (Compact whole and from a
// cut at two points, under the Go mirrors of both module builds of the client; Compact
// idempotent, never growing the stream) on generated multi-run streams whose seed, length,
// cut and cut points the fuzzer picks. extra holds NDJSON events put right after the first
// RUN_STARTED (seeds carry issue 38's shapes there); a stream they make the client reject
// must be rejected by Compact with a typed error. Nothing panics.
func FuzzCompactGenerated(f *testing.F) {
	f.Add(uint64(0), uint16(120), false, uint16(0), uint16(0), []byte(nil))
	f.Add(uint64(2178), uint16(178), true, uint16(40), uint16(90), []byte(nil))
	f.Add(uint64(38), uint16(60), false, uint16(5), uint16(9), []byte(`{"type":"STATE_SNAPSHOT","snapshot":{"c":{"count":{"k":[null,395,{"c":-356}]}}}}
{"type":"STATE_DELTA","delta":[{"op":"test","path":"/c/count","value":{"k":[null,395,{"c":-356}]}}]}`))
	f.Fuzz(func(t *testing.T, seed uint64, n uint16, cut bool, at, to uint16, extra []byte) {
		events := compacttest.Generate(seed, 20+int(n%400), cut)
		var ins []compact.Event
		for _, line := range bytes.Split(extra, []byte("\n")) {
			if e, err := compact.ParseEvent(line); err == nil {
				ins = append(ins, e)
			}
		}
		if len(ins) > 0 {
			events = slices.Insert(events, 1, ins...)
			if _, err := compact.Compact(events, compact.Options{}); err != nil {
				var se *compact.StreamError
				var le *compact.LimitError
				if !errors.As(err, &se) && !errors.As(err, &le) {
					t.Fatalf("Compact error %T %v is not typed", err, err)
				}
				return
			}
		}
		i := int(at) % (len(events) + 1)
		j := i + int(to)%(len(events)-i+1)
		checkGeneratedAt(t, seed, events, i, j)
	})
}
