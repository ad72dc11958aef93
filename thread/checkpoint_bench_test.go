package thread_test

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
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
			known, err := s.KnownMessageIDs(b.Context(), "t", "r300", "", sent)
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

// benchThreads numbers the threads benchmarks make on a store that outlives one run of them.
var benchThreads atomic.Int64

// BenchmarkCheckpointEnded: the checkpoint a run's end stores on Redis, for a root run of 64
// events (a 60-chunk answer, the soak profile's run): built from the events the proxy kept
// ("kept"), from the events read back from the store ("read-back"), and by Checkpoint, which
// also reads the run's own (missing) checkpoint and its metadata ("checkpoint": what the
// proxy did before CheckpointEnded). Each iteration is a new thread; storing its events is
// not timed.
func BenchmarkCheckpointEnded(b *testing.B) {
	srv := redistest.Start(b)
	rs, err := recorder.NewRedisStore(b.Context(), recorder.RedisConfig{URL: srv.URL(), Prefix: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rs.Close() })
	s := newService(b, thread.Config{Store: rs})
	datas := []string{`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`}
	for i := range 60 {
		datas = append(datas, fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"word %d of the answer "}`, i))
	}
	datas = append(datas, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`)
	for _, name := range []string{"kept", "read-back", "checkpoint"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				threadID := fmt.Sprintf("%s-%d", name, benchThreads.Add(1))
				run := append([]string{fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":"r"}`, threadID)}, datas...)
				run = append(run, fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":"r"}`, threadID))
				r, records := storeRun(b, s, threadID, "r", "", run...)
				var kept *thread.KeptEvents
				if name == "kept" {
					kept = keptOf(b, records)
				}
				b.StartTimer()
				if name == "checkpoint" {
					err = s.Checkpoint(b.Context(), threadID, "r")
				} else {
					err = s.CheckpointEnded(b.Context(), r, kept)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRunEndThread is the checkpoint of a run that ends on a thread of 1, 100 and 1,000
// runs, as the proxy makes it (CheckpointEnded with the run's kept events): each iteration
// ends one more chat run (a question and an answer of about 1 KB), whose parent is the run
// before it; with runs=1 on a new thread each time, else on the same thread (which grows by
// one run per iteration: run it with -benchtime 20x). A run's end should cost what the run
// holds, not what the thread holds.
func BenchmarkRunEndThread(b *testing.B) {
	answer := strings.Repeat("a sentence of the answer, ", 40)
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			s := newService(b, thread.Config{})
			run := func(threadID string, i int) (recorder.Run, *thread.KeptEvents) {
				runID, msgID := fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i)
				datas := chatRun(threadID, runID, msgID)
				datas = slices.Insert(datas, 5, fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":%q}`, msgID, answer))
				r, records := storeRun(b, s, threadID, runID, "", datas...)
				return r, keptOf(b, records)
			}
			grow := func(threadID string, runs int) {
				for i := 1; i <= runs; i++ {
					r, kept := run(threadID, i)
					if err := s.CheckpointEnded(b.Context(), r, kept); err != nil {
						b.Fatal(err)
					}
				}
			}
			threadID := "t"
			if n > 1 {
				grow(threadID, n)
			}
			b.ReportAllocs()
			i := n
			for b.Loop() {
				b.StopTimer()
				if n == 1 {
					threadID, i = fmt.Sprintf("t%d", benchThreads.Add(1)), 1
					grow(threadID, 1)
				}
				i++
				r, kept := run(threadID, i)
				b.StartTimer()
				if err := s.CheckpointEnded(b.Context(), r, kept); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
