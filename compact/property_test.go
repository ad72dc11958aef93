package compact_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/compact/compacttest"
)

// streams sets the number of generated streams of TestPropertyGenerated (CI runs 3000; the
// fidelity run is go test ./compact -run TestPropertyGenerated -streams 20000).
var streams = flag.Int("streams", 3000, "generated streams for TestPropertyGenerated")

func norm(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

// replayFunc is one of the Go mirrors of the client's builds.
type replayFunc func([]compact.Event) (json.RawMessage, json.RawMessage, error)

var builds = []struct {
	name   string
	replay replayFunc
}{{"browser", compact.Replay}, {"node", compact.ReplayCommonJS}}

// TestPropertyGenerated checks, on thousands of generated streams (complete and cut mid-run),
// under the Go mirrors of both module builds of the client, that
//   - whole: Compact succeeds and replays to the same messages and state as the stream;
//   - cut at two points i < j: the prelude of s[:i], compacted again together with s[i:j],
//     followed by the live tail s[j:], replays to the same messages and state as s (the tail
//     is accepted where the verifier had things open at each cut), the way attach serves a
//     thread from a checkpoint;
//   - Compact is idempotent and never grows the stream.
func TestPropertyGenerated(t *testing.T) {
	n := *streams
	if testing.Short() {
		n = 300
	}
	for seed := range uint64(n) {
		events := compacttest.Generate(seed, 20+int(seed%200), seed%3 == 0)
		checkGenerated(t, seed, events)
	}
}

func withoutEphemeral(events []compact.Event) []compact.Event {
	var raw []compact.Event
	for _, e := range events {
		if !compact.DefaultEphemeral(e.Type) {
			raw = append(raw, e)
		}
	}
	return raw
}

func checkGenerated(t *testing.T, seed uint64, events []compact.Event) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	i := rng.IntN(len(events) + 1)
	j := i + rng.IntN(len(events)-i+1)
	checkGeneratedAt(t, seed, events, i, j)
}

// checkGeneratedAt is checkGenerated with the cut at i and j (0 <= i <= j <= len(events)).
func checkGeneratedAt(t *testing.T, seed uint64, events []compact.Event, i, j int) {
	t.Helper()
	out, err := compact.Compact(events, compact.Options{})
	if err != nil {
		t.Fatalf("seed %d: Compact = %v", seed, err)
	}
	raw := withoutEphemeral(events)
	first, err := compact.Compact(events[:i], compact.Options{})
	if err != nil {
		t.Fatalf("seed %d: Compact(s[:%d]) = %v", seed, i, err)
	}
	second, err := compact.Compact(append(append([]compact.Event(nil), first...), events[i:j]...), compact.Options{})
	if err != nil {
		t.Fatalf("seed %d: Compact(Compact(s[:%d]) + s[%d:%d]) = %v", seed, i, i, j, err)
	}
	cut := append(append([]compact.Event(nil), second...), withoutEphemeral(events[j:])...)
	for _, b := range builds {
		wm, ws, werr := b.replay(raw)
		if werr != nil {
			t.Fatalf("seed %d (%s): Replay(s) = %v", seed, b.name, werr)
		}
		for _, c := range []struct {
			name   string
			events []compact.Event
		}{{"whole", out}, {fmt.Sprintf("cut at %d and %d", i, j), cut}} {
			gm, gs, gerr := b.replay(c.events)
			if gerr != nil {
				t.Fatalf("seed %d (%s, %s): replay = %v\n%s", seed, b.name, c.name, gerr, dumpEvents(c.events))
			}
			if !reflect.DeepEqual(norm(t, gm), norm(t, wm)) {
				t.Fatalf("seed %d (%s, %s): messages = %s, want %s", seed, b.name, c.name, gm, wm)
			}
			if !reflect.DeepEqual(norm(t, gs), norm(t, ws)) {
				t.Fatalf("seed %d (%s, %s): state = %s, want %s", seed, b.name, c.name, gs, ws)
			}
		}
	}
	again, err := compact.Compact(out, compact.Options{})
	if err != nil || len(again) != len(out) {
		t.Fatalf("seed %d: Compact(Compact(s)) = %d events, %v; want %d", seed, len(again), err, len(out))
	}
	for i := range out {
		if !bytes.Equal(again[i].Raw, out[i].Raw) {
			t.Fatalf("seed %d: not idempotent at %d: %s then %s", seed, i, out[i].Raw, again[i].Raw)
		}
	}
	if len(out) > len(events) {
		t.Fatalf("seed %d: Compact grew the stream: %d -> %d events", seed, len(events), len(out))
	}
}

func dumpEvents(es []compact.Event) string {
	var b bytes.Buffer
	for _, e := range es {
		b.Write(e.Raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestGeneratorCoversClasses checks that the generator produces, at a real rate, each class
// of stream where a careless compaction ends differently from the client: deltas that the two
// module builds apply differently (a move or copy writing into a primitive) on state and on
// activity content, folds that stop (held STATE_DELTA / ACTIVITY_DELTA after the snapshot),
// and tool calls a MESSAGES_SNAPSHOT removed while the verifier had them open (re-opened on a
// phantom parent).
func TestGeneratorCoversClasses(t *testing.T) {
	const n = 600
	var stateBuilds, activityBuilds, heldState, heldActivity, phantomCall int
	for seed := range uint64(n) {
		events := compacttest.Generate(seed, 20+int(seed%200), seed%3 == 0)
		raw := withoutEphemeral(events)
		bm, bs, _ := compact.Replay(raw)
		nm, ns, _ := compact.ReplayCommonJS(raw)
		if !bytes.Equal(bs, ns) {
			stateBuilds++
		}
		if !bytes.Equal(bm, nm) {
			activityBuilds++
		}
		out, err := compact.Compact(events, compact.Options{})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var sd, ad, ph bool
		for _, e := range out {
			sd = sd || e.Type == "STATE_DELTA"
			ad = ad || e.Type == "ACTIVITY_DELTA"
			ph = ph || bytes.Contains(e.Raw, []byte(`"parentMessageId":"agui-proxy.reopen.`))
		}
		for i := range events {
			if ph || events[i].Type != "MESSAGES_SNAPSHOT" {
				continue
			}
			cut, _ := compact.Compact(events[:i+1], compact.Options{})
			for _, e := range cut {
				ph = ph || bytes.Contains(e.Raw, []byte(`"parentMessageId":"agui-proxy.reopen.`))
			}
		}
		for c, ok := range map[*int]bool{&heldState: sd, &heldActivity: ad, &phantomCall: ph} {
			if ok {
				*c++
			}
		}
	}
	t.Logf("of %d streams: state differs between builds %d, activity %d; fold held state %d, activity %d; tool call re-opened on a phantom parent %d",
		n, stateBuilds, activityBuilds, heldState, heldActivity, phantomCall)
	for name, c := range map[string]int{"state builds": stateBuilds, "activity builds": activityBuilds,
		"held state": heldState, "held activity": heldActivity, "phantom tool call": phantomCall} {
		if c < n/100 {
			t.Errorf("%s: %d of %d streams, want at least 1%%", name, c, n)
		}
	}
}
