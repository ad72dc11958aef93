package thread_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agui-proxy/agui-proxy/thread"
)

// BenchmarkMessageIDs: a run start's message-id read on a 300-run thread, from a checkpoint
// that lists the ids and from one that does not (written before the list existed: parsed and
// replayed).
func BenchmarkMessageIDs(b *testing.B) {
	s := newService(b, thread.Config{})
	for i := 1; i <= 300; i++ {
		recordChatRun(b, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
	}
	data, err := s.Store().Checkpoint(b.Context(), "t", "r300")
	if err != nil {
		b.Fatal(err)
	}
	var old map[string]json.RawMessage
	json.Unmarshal(data, &old)
	delete(old, "messageIds")
	legacy, _ := json.Marshal(old)
	for _, tc := range []struct {
		name string
		cp   []byte
	}{{"with-ids", data}, {"without-ids", legacy}} {
		b.Run(tc.name, func(b *testing.B) {
			if err := s.Store().PutCheckpoint(b.Context(), "t", "r300", tc.cp); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(tc.cp)))
			for b.Loop() {
				known, err := s.MessageIDs(b.Context(), "t", "r300")
				if err != nil || len(known) != 300 {
					b.Fatalf("MessageIDs = %d, %v", len(known), err)
				}
			}
		})
	}
}
