package thread_test

import (
	"fmt"
	"testing"

	"github.com/agui-proxy/agui-proxy/thread"
)

// BenchmarkMessageIDs: a run start's message-id read on a 300-run thread: KnownMessageIDs for
// a request that repeats the branch's messages (one small checkpoint read, a hash), and
// MessageIDs (the branch read from its segment and replayed).
func BenchmarkMessageIDs(b *testing.B) {
	s := newService(b, thread.Config{})
	var sent []string
	for i := 1; i <= 300; i++ {
		recordChatRun(b, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
		sent = append(sent, fmt.Sprintf("u-m%d", i), fmt.Sprintf("m%d", i))
	}
	sent = append(sent, "new")
	b.Run("known", func(b *testing.B) {
		for b.Loop() {
			known, err := s.KnownMessageIDs(b.Context(), "t", "r300", sent)
			if err != nil || len(known) != 600 {
				b.Fatalf("KnownMessageIDs = %d, %v", len(known), err)
			}
		}
	})
	b.Run("replayed", func(b *testing.B) {
		for b.Loop() {
			known, err := s.MessageIDs(b.Context(), "t", "r300")
			if err != nil || len(known) != 600 {
				b.Fatalf("MessageIDs = %d, %v", len(known), err)
			}
		}
	})
}

// BenchmarkBranch: the branch of the last run of a 1,000-run chat thread read from its
// checkpoint (a pointer, its segment, the deltas spliced, the checksum checked), with the
// segments as written and packed (as compaction at rest leaves them).
func BenchmarkBranch(b *testing.B) {
	s := newService(b, thread.Config{})
	for i := 1; i <= 1000; i++ {
		recordChatRun(b, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
	}
	for _, packed := range []bool{false, true} {
		b.Run(fmt.Sprintf("packed=%v", packed), func(b *testing.B) {
			if packed {
				// Every segment packed, as compaction at rest leaves them.
				for i := 1; i <= 1000; i++ {
					data, err := s.Store().Checkpoint(b.Context(), "t", fmt.Sprintf("r%d", i))
					if err != nil {
						b.Fatal(err)
					}
					if p := thread.PackRecord(data, false); len(p) < len(data) {
						if err := s.Store().PutCheckpoint(b.Context(), "t", fmt.Sprintf("r%d", i), p); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			b.ReportMetric(float64(checkpointBytes(b, s.Store(), "t")), "checkpoint-bytes")
			for b.Loop() {
				if _, err := s.Branch(b.Context(), "t", "r1000"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
