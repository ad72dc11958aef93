package compact

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// checkFastPaths asserts that the delta fast paths (hot cache, fastDelta) change nothing:
// replaying events with and without them gives the same messages, state and error.
func checkFastPaths(t testing.TB, events []Event) {
	t.Helper()
	fm, fs, ferr := replay(events, false)
	gm, gs, gerr := replay(events, true)
	if !bytes.Equal(fm, gm) || !bytes.Equal(fs, gs) || fmt.Sprint(ferr) != fmt.Sprint(gerr) {
		t.Fatalf("replay with fast paths = %s %s %v, general path = %s %s %v", fm, fs, ferr, gm, gs, gerr)
	}
}

// TestFastPathsMatchGeneralPath runs streams of deltas in every shape the fast paths must
// either handle exactly or hand back: extra members, metadata, subagent ids, whitespace,
// escaped keys and ids, duplicate members, wrong types, ids switching, chunk lanes, limits.
func TestFastPathsMatchGeneralPath(t *testing.T) {
	deltas := []string{
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}`,
		`{"delta":"b","messageId":"m","type":"TEXT_MESSAGE_CONTENT"}`,
		`{ "type" : "TEXT_MESSAGE_CONTENT" , "messageId" : "m" , "delta" : "c" }`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d","metadata":{"k":1}}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"e","subagentRunId":"s"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"\u006d","delta":"f"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","message\u0049d":"m","delta":"g"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"h","delta":"i"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"x","messageId":"m","delta":"j"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":1}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"n","delta":"k"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\ud83d"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\ude00 \"q\""}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","toolCallId":"c","delta":"l"}`,
		`{"typ\u0065":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"m"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"n","extra":[1,{"a":"}"}]}`,
		`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\"a\""}`,
		`{"type":"TOOL_CALL_ARGS","toolCallId":"c","messageId":"m","delta":":1"}`,
		`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"}"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"o"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"k","delta":"p"}`,
		`{"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"q"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat("z", 300) + `"}`,
	}
	head := []string{
		`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"n"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`,
		`{"type":"REASONING_MESSAGE_START","messageId":"r"}`,
	}
	// Every ordered pair and triple of delta shapes, after a stream that has them all open.
	for i := range deltas {
		for j := range deltas {
			for k := range []int{0, 1} {
				lines := append(append([]string{}, head...), deltas[i], deltas[j], deltas[i])
				if k == 1 {
					lines = append(lines, deltas[j], deltas[j])
				}
				var events []Event
				for _, l := range lines {
					if e, err := ParseEvent([]byte(l)); err == nil {
						events = append(events, e)
					}
				}
				checkFastPaths(t, events)
			}
		}
	}
}

// TestFastDeltaLimit checks that a delta crossing MaxStateBytes is refused on the fast path
// exactly as on the general one.
func TestFastDeltaLimit(t *testing.T) {
	lines := []string{
		`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"12345"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"67890"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`,
	}
	events := parseAll(t, lines...)
	for _, max := range []int{9, 10, 11} {
		_, err := Compact(events, Options{MaxStateBytes: max})
		var le *LimitError
		if got, want := err != nil, max < 11; got != want || (err != nil && !errors.As(err, &le)) {
			t.Errorf("Compact(MaxStateBytes=%d) = %v, want a LimitError: %v", max, err, want)
		}
	}
}

// TestInPlacePatch checks that single-operation patches, applied to the document itself,
// leave it unchanged when they fail and give the same result as on a copy when they succeed.
func TestInPlacePatch(t *testing.T) {
	docs := []string{`{}`, `{"a":[1,2],"b":{"c":null}}`, `[1,{"x":[]}]`, `{"a":{"b":{"c":[0]}}}`, `null`, `7`}
	ops := []string{
		`{"op":"add","path":"/a/-","value":3}`, `{"op":"add","path":"/a/9","value":3}`,
		`{"op":"add","path":"/a/01","value":3}`, `{"op":"add","path":"/z/y","value":1}`,
		`{"op":"add","path":"","value":{"r":1}}`, `{"op":"add","path":"/1/x/0","value":[5]}`,
		`{"op":"replace","path":"/a/0","value":"r"}`, `{"op":"replace","path":"/nope","value":1}`,
		`{"op":"replace","path":"/b/c","value":{"d":[1]}}`, `{"op":"remove","path":"/a/1"}`,
		`{"op":"remove","path":"/a/7"}`, `{"op":"remove","path":"/b"}`, `{"op":"remove","path":"/x/y"}`,
		`{"op":"test","path":"/a","value":[1,2]}`, `{"op":"test","path":"/a","value":[2,1]}`,
		`{"op":"add","path":"/__proto__/x","value":1}`, `{"op":"add","path":"/a/b/c/0","value":1}`,
		`{"op":"add","value":1}`, `{"op":"add","path":"/b"}`, `{"op":"bogus","path":"/b"}`,
	}
	for _, d := range docs {
		for _, o := range ops {
			doc, _ := decodeJS([]byte(d))
			patch, _ := decodeJS([]byte("[" + o + "]"))
			before, _ := marshalJS(doc)
			want, werr := applyPatch(deepClone(doc), patch, 0) // on a copy, as before
			got, gerr := applyPatch(doc, patch, 0)
			gb, _ := marshalJS(got)
			wb, _ := marshalJS(want)
			if (gerr == nil) != (werr == nil) || !bytes.Equal(gb, wb) {
				t.Errorf("applyPatch(%s, [%s]) = %s, %v; on a copy %s, %v", d, o, gb, gerr, wb, werr)
			}
			if after, _ := marshalJS(doc); gerr != nil && !bytes.Equal(after, before) {
				t.Errorf("applyPatch(%s, [%s]) failed (%v) but changed the document to %s", d, o, gerr, after)
			}
		}
	}
}

// TestDeltaAllocs checks that content deltas cost no allocations of their own: compacting a
// message streamed in 2000 deltas allocates only a few more times than one streamed in 200,
// parse included (the content buffer doubles a logarithmic number of times).
func TestDeltaAllocs(t *testing.T) {
	stream := func(n int) [][]byte {
		lines := [][]byte{
			[]byte(`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`),
			[]byte(`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`),
		}
		for i := range n {
			lines = append(lines, fmt.Appendf(nil, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"token %d "}`, i))
		}
		return append(lines, []byte(`{"type":"TEXT_MESSAGE_END","messageId":"m"}`), []byte(`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`))
	}
	allocs := func(lines [][]byte) float64 {
		events := make([]Event, len(lines))
		return testing.AllocsPerRun(20, func() {
			for i, l := range lines {
				events[i], _ = ParseEvent(l)
			}
			if _, err := Compact(events, Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(stream(200)), allocs(stream(2000))
	if large-small > 10 {
		t.Errorf("allocations for 2000 deltas = %v, for 200 = %v: want at most 10 more (%.4f per delta)", large, small, (large-small)/1800)
	}
}
