package recorder_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// BenchmarkWriter: 50 concurrent runs (one goroutine each, like the proxy's pumps) append
// 200-byte events through one Writer; b.N events in total. Reports events/s and store round
// trips per event. Async: Append; sync: AppendSync (each pump waits for its event to be
// stored, so batches fill only across runs).
func BenchmarkWriter(b *testing.B) {
	const runs = 50
	for _, kind := range []string{"memory", "disk", "redis"} {
		for _, d := range []recorder.Durability{recorder.DurabilityAsync, recorder.DurabilitySync} {
			b.Run(fmt.Sprintf("%s/%s", kind, d), func(b *testing.B) {
				s := benchStores(b)[kind](b)
				w := recorder.NewWriter(recorder.WriterConfig{Store: s, Durability: d})
				rs := make([]recorder.Run, runs)
				frames := make([][]byte, runs)
				for i := range rs {
					rs[i] = testRun(fmt.Sprintf("t%d", i%10), fmt.Sprintf("r%d", i))
					if _, err := s.CreateRun(context.Background(), rs[i], recorder.CreateOptions{}); err != nil {
						b.Fatal(err)
					}
					frames[i] = frame200(rs[i], 1)
				}
				per := b.N/runs + 1
				b.SetBytes(200)
				b.ReportAllocs()
				b.ResetTimer()
				var wg sync.WaitGroup
				for i, r := range rs {
					rec, err := w.Open(r)
					if err != nil {
						b.Fatal(err)
					}
					wg.Go(func() {
						for seq := int64(1); seq <= int64(per); seq++ {
							ev := recorder.Event{Seq: seq, Type: "TEXT_MESSAGE_CONTENT", Frame: frames[i]}
							var err error
							if d == recorder.DurabilitySync {
								err = rec.AppendSync(context.Background(), ev)
							} else {
								for err = rec.Append(ev); err == recorder.ErrBufferFull; err = rec.Append(ev) {
									w.Flush(context.Background()) // the benchmark measures throughput, not drops
								}
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				if err := w.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				st := w.Stats()
				w.Shutdown(context.Background())
				total := float64(per * runs)
				b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(float64(st.RoundTrips)/total, "roundtrips/event")
				b.ReportMetric(total/float64(max(st.Batches, 1)), "events/batch")
			})
		}
	}
}
