package compact_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/compact/compacttest"
)

func norm(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

// TestPropertyGenerated checks, on thousands of generated streams (complete and cut
// mid-run), that Compact succeeds, replays to the same messages and state, and is idempotent.
func TestPropertyGenerated(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	for seed := range uint64(n) {
		events := compacttest.Generate(seed, 20+int(seed%200), seed%3 == 0)
		out, err := compact.Compact(events, compact.Options{})
		if err != nil {
			t.Fatalf("seed %d: Compact = %v", seed, err)
		}
		var raw []compact.Event
		for _, e := range events {
			if !compact.DefaultEphemeral(e.Type) {
				raw = append(raw, e)
			}
		}
		wm, ws, werr := compact.Replay(raw)
		gm, gs, gerr := compact.Replay(out)
		if werr != nil || gerr != nil {
			t.Fatalf("seed %d: Replay errors raw=%v compacted=%v", seed, werr, gerr)
		}
		if !reflect.DeepEqual(norm(t, gm), norm(t, wm)) {
			t.Fatalf("seed %d: Replay(Compact(s)) messages = %s, want %s", seed, gm, wm)
		}
		if !reflect.DeepEqual(norm(t, gs), norm(t, ws)) {
			t.Fatalf("seed %d: Replay(Compact(s)) state = %s, want %s", seed, gs, ws)
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
}
