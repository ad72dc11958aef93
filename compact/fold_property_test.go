package compact_test

import (
	"bytes"
	"errors"
	"flag"
	"math/rand/v2"
	"testing"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/compact/compacttest"
)

// foldStreams sets the number of generated streams of TestFoldProperty (CI runs 600, with
// -race; the fidelity run is go test ./compact -run TestFoldProperty -fold-streams 20000).
var foldStreams = flag.Int("fold-streams", 600, "generated streams for TestFoldProperty")

// TestFoldProperty: a Fold fed a stream in random parts, asked for its Events after random
// parts, answers each time exactly what Compact answers for the events fed so far, byte for
// byte; with rejected events inserted (badEvents), it fails at the same event with the same
// error as Compact, and stays spent. Runs are cut anywhere, not only at run boundaries, and
// the parts hold the generated streams' every shape (chunks, held state and activity deltas,
// snapshots mid-stream, open items at a cut), so that a thread which keeps a Fold per run
// end serves what compacting its whole history would.
func TestFoldProperty(t *testing.T) {
	n := *foldStreams
	if testing.Short() {
		n = 300
	}
	for seed := range uint64(n) {
		events := compacttest.Generate(seed, 10+int(seed%250), seed%3 == 0)
		rng := rand.New(rand.NewPCG(seed, 0xf01d))
		if seed%4 == 3 {
			ev, err := compact.ParseEvent([]byte(badEvents[rng.IntN(len(badEvents))]))
			if err != nil {
				t.Fatal(err)
			}
			at := rng.IntN(len(events) + 1)
			events = append(events[:at:at], append([]compact.Event{ev}, events[at:]...)...)
		}
		checkFold(t, seed, rng, events)
	}
}

func checkFold(t *testing.T, seed uint64, rng *rand.Rand, events []compact.Event) {
	t.Helper()
	f := compact.NewFold(compact.Options{})
	fed := 0
	for fed < len(events) {
		part := 1 + rng.IntN(1+len(events)/4)
		part = min(part, len(events)-fed)
		ferr := f.Feed(events[fed : fed+part])
		fed += part
		want, werr := compact.Compact(events[:fed], compact.Options{})
		got, gerr := f.Events()
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("seed %d, %d events fed: Events() error %v, Compact error %v", seed, fed, gerr, werr)
		}
		if werr != nil {
			if ferr == nil || ferr.Error() != werr.Error() {
				t.Fatalf("seed %d, %d events fed: Feed = %v, want %v", seed, fed, ferr, werr)
			}
			var se *compact.StreamError
			if !errors.As(werr, &se) {
				t.Fatalf("seed %d: the stream failed with %v, not a rejected event", seed, werr)
			}
			if again := f.Feed(events[fed:]); again == nil || again.Error() != werr.Error() {
				t.Fatalf("seed %d: a spent Fold fed again = %v, want %v", seed, again, werr)
			}
			return
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d, %d events fed: %d events, Compact %d", seed, fed, len(got), len(want))
		}
		for i := range want {
			if got[i].Type != want[i].Type || !bytes.Equal(got[i].Raw, want[i].Raw) {
				t.Fatalf("seed %d, %d events fed, event %d:\n fold    %s\n compact %s", seed, fed, i, got[i].Raw, want[i].Raw)
			}
		}
	}
}

// TestFoldChangesKeptMessages: each way an event changes a message that an earlier output of
// the Fold already rendered (which the Fold then copies instead of rendering again). After
// the first part the Fold answers Events twice (the second keeps each message's rendering);
// then, after each event of the second part, it must answer what Compact answers for the
// events fed so far (a run cut there, as a prelude serves it, included).
func TestFoldChangesKeptMessages(t *testing.T) {
	run := func(id string, body ...string) []string {
		out := []string{`{"type":"RUN_STARTED","threadId":"t","runId":"` + id + `"}`}
		out = append(out, body...)
		return append(out, `{"type":"RUN_FINISHED","threadId":"t","runId":"`+id+`"}`)
	}
	first := run("r1",
		`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hello"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"search","parentMessageId":"m"}`,
		`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\"q\":1"}`,
		`{"type":"TOOL_CALL_END","toolCallId":"c"}`,
		`{"type":"REASONING_MESSAGE_START","messageId":"th","role":"reasoning"}`,
		`{"type":"REASONING_MESSAGE_CONTENT","messageId":"th","delta":"hmm"}`,
		`{"type":"REASONING_MESSAGE_END","messageId":"th"}`,
		`{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"plan","content":{"steps":[1]}}`,
	)
	cases := map[string][]string{
		"text start again, with metadata": run("r2",
			`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant","metadata":{"k":1}}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m"}`),
		"text content again": run("r2",
			`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":" again"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":" and again"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m"}`),
		"text end with metadata": run("r2",
			`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m","metadata":{"done":true}}`),
		"tool call renamed": run("r2",
			`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"lookup","parentMessageId":"m"}`,
			`{"type":"TOOL_CALL_END","toolCallId":"c"}`),
		"tool call with metadata": run("r2",
			`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"search","parentMessageId":"m","metadata":{"k":2}}`,
			`{"type":"TOOL_CALL_END","toolCallId":"c"}`),
		"tool call args again": run("r2",
			`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"search","parentMessageId":"m"}`,
			`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":",\"r\":2}"}`,
			`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":" "}`,
			`{"type":"TOOL_CALL_END","toolCallId":"c"}`),
		"second call on the message": run("r2",
			`{"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"search","parentMessageId":"m"}`,
			`{"type":"TOOL_CALL_END","toolCallId":"c2"}`),
		"tool result": run("r2",
			`{"type":"TOOL_CALL_RESULT","messageId":"res","toolCallId":"c","content":"found"}`),
		"encrypted value on the call": run("r2",
			`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"tool-call","entityId":"c","encryptedValue":"xyz"}`),
		"encrypted value on the message": run("r2",
			`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"th","encryptedValue":"xyz"}`),
		"activity replaced": run("r2",
			`{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"plan","content":{"steps":[2]}}`),
		"activity kept, with metadata": run("r2",
			`{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"plan","content":{"steps":[9]},"replace":false,"metadata":{"k":3}}`),
		"activity delta": run("r2",
			`{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"plan","patch":[{"op":"add","path":"/steps/-","value":3}]}`),
		"activity delta that holds the fold": run("r2",
			`{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"plan","patch":[{"op":"copy","from":"/steps","path":"/copy"}]}`),
		"messages snapshot": run("r2",
			`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","role":"assistant","content":"replaced"}]}`),
	}
	for name, second := range cases {
		t.Run(name, func(t *testing.T) {
			a, b := parseAll(t, first), parseAll(t, second)
			f := compact.NewFold(compact.Options{})
			if err := f.Feed(a); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := f.Events(); err != nil {
					t.Fatal(err)
				}
			}
			for k := range b {
				if err := f.Feed(b[k : k+1]); err != nil {
					t.Fatal(err)
				}
				got, err := f.Events()
				if err != nil {
					t.Fatal(err)
				}
				want, err := compact.Compact(append(a[:len(a):len(a)], b[:k+1]...), compact.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if !compacttest.Equal(got, want) {
					t.Fatalf("after %s\nfold:\n%s\ncompact:\n%s", b[k].Raw, joinRaw(got), joinRaw(want))
				}
			}
		})
	}
}

func parseAll(t *testing.T, datas []string) []compact.Event {
	t.Helper()
	var out []compact.Event
	for _, d := range datas {
		ev, err := compact.ParseEvent([]byte(d))
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		out = append(out, ev)
	}
	return out
}

func joinRaw(events []compact.Event) []byte {
	var b bytes.Buffer
	for _, e := range events {
		b.Write(e.Raw)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
