package thread_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// FuzzCheckpointRecord: whatever bytes a checkpoint record holds (a run's pointer, its
// segment), reading the branch never panics, never fails, and serves exactly the branch folded
// from the events; the message ids are exact too. A version 1 record has no checksum: one that
// parses is served as it is (as before version 2), so only the first two hold for it. Seeds:
// testdata/fuzz/FuzzCheckpointRecord.
func FuzzCheckpointRecord(f *testing.F) {
	f.Add([]byte("AGCP\x02\x0b14-00000000\x01x\x06\x02r1"), []byte("AGCP\x02\x00\x00\x00\x00\x01\x01\x04null\x00\x00"))
	f.Fuzz(func(t *testing.T, pointer, segment []byte) {
		ctx := context.Background()
		mem := recorder.NewMemoryStore(recorder.MemoryConfig{})
		defer mem.Close()
		s, err := thread.New(thread.Config{Store: mem})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			recordChatRun(t, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
		}
		truth, _ := thread.New(thread.Config{Store: noCheckpoints{mem}})
		want, err := truth.Branch(ctx, "t", "r3")
		if err != nil {
			t.Fatal(err)
		}
		wantIDs, _ := truth.MessageIDs(ctx, "t", "r3")
		if err := mem.PutCheckpoint(ctx, "t", "r1", segment); err != nil {
			t.Fatal(err)
		}
		if err := mem.PutCheckpoint(ctx, "t", "r3", pointer); err != nil {
			t.Fatal(err)
		}
		var v struct{ V int }
		legacy := json.Unmarshal(pointer, &v) == nil && v.V == 1
		known, err := s.KnownMessageIDs(ctx, "t", "r3", "", []string{"u-m1", "m1", "u-m2", "m2", "u-m3", "m3"})
		if err != nil || !legacy && !maps.Equal(known, wantIDs) {
			t.Fatalf("KnownMessageIDs = %v, %v, want %v", slices.Sorted(maps.Keys(known)), err, slices.Sorted(maps.Keys(wantIDs)))
		}
		got, err := s.Branch(ctx, "t", "r3")
		if err != nil || !legacy && !slices.EqualFunc(got, want, func(a, b compact.Event) bool { return a.Type == b.Type && bytes.Equal(a.Raw, b.Raw) }) {
			t.Fatalf("Branch(r3) = %d events, %v, want the %d folded from the events", len(got), err, len(want))
		}
	})
}
