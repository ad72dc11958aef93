package recorder_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// benchStores returns a factory per store kind; the Redis server is private to the benchmark.
func benchStores(b *testing.B) map[string]func(b *testing.B) recorder.Store {
	return map[string]func(b *testing.B) recorder.Store{
		"memory": func(b *testing.B) recorder.Store { return recorder.NewMemoryStore(recorder.MemoryConfig{}) },
		"disk": func(b *testing.B) recorder.Store {
			return openDisk(b, recorder.DiskConfig{NoSync: os.Getenv("DISK_NOSYNC") != ""}) // fsync per write, as in production
		},
		"redis": func(b *testing.B) recorder.Store {
			srv := redistest.Start(b)
			return newRedisStore(b, recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix()})
		},
	}
}

// frame200 is a 200-byte frame for event seq.
func frame200(r recorder.Run, seq int64) []byte {
	f := recorder.AppendCursor([]byte("id: "), r.RunID, r.Epoch, seq)
	f = append(f, "\ndata: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\""...)
	f = append(f, bytes.Repeat([]byte("x"), 200-len(f)-5)...)
	return append(f, "\"}\n\n"...)[:200]
}

// BenchmarkAppend: Store.Append of one run's batch of 1, 16 or 256 events of 200 bytes.
func BenchmarkAppend(b *testing.B) {
	for _, kind := range []string{"memory", "disk", "redis"} {
		for _, size := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("%s/batch=%d", kind, size), func(b *testing.B) {
				s := benchStores(b)[kind](b)
				r := testRun("t", "r")
				ctx := context.Background()
				if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				evs := make([]recorder.Event, size)
				seq := int64(0)
				b.SetBytes(int64(200 * size))
				b.ReportAllocs()
				for b.Loop() {
					for i := range evs {
						seq++
						evs[i] = recorder.Event{Seq: seq, Type: "TEXT_MESSAGE_CONTENT", Frame: frame200(r, seq)}
					}
					if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: evs}}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

// BenchmarkEvents: reading 100 events from the middle of a 10 000-event run.
func BenchmarkEvents(b *testing.B) {
	for _, kind := range []string{"memory", "disk", "redis"} {
		b.Run(kind, func(b *testing.B) {
			s := benchStores(b)[kind](b)
			r := testRun("t", "r")
			ctx := context.Background()
			if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			for from := int64(1); from <= 10000; from += 500 {
				evs := make([]recorder.Event, 500)
				for i := range evs {
					seq := from + int64(i)
					evs[i] = recorder.Event{Seq: seq, Type: "X", Frame: frame200(r, seq)}
				}
				if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: evs}}); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(100 * 200)
			b.ReportAllocs()
			i := int64(0)
			for b.Loop() {
				after := (i * 997) % 9900
				i++
				evs, err := s.Events(ctx, "t", "r", after, 100)
				if err != nil || len(evs) != 100 {
					b.Fatalf("Events = %d, %v", len(evs), err)
				}
			}
		})
	}
}

// BenchmarkAppendManyRuns: one Store.Append carrying 3 events of 200 bytes for each of 200 or
// 2,000 streaming runs, the batch a chat deployment's writer lane gathers (2,000 streams at
// 20 ms between tokens put ~55 ms of events in a batch of 6,000): what one batch costs as
// the number of runs grows (ms/batch), which bounds the rate recording keeps up with.
func BenchmarkAppendManyRuns(b *testing.B) {
	for _, kind := range []string{"memory", "disk", "redis"} {
		for _, runs := range []int{200, 2000} {
			b.Run(fmt.Sprintf("%s/runs=%d", kind, runs), func(b *testing.B) {
				s := benchStores(b)[kind](b)
				ctx := context.Background()
				batches := make([]recorder.Batch, runs)
				for i := range batches {
					r := testRun(fmt.Sprintf("t%d", i), "r")
					if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
						b.Fatal(err)
					}
					batches[i] = recorder.Batch{Run: r, Events: make([]recorder.Event, 3)}
				}
				seq := int64(0)
				b.ReportAllocs()
				for b.Loop() {
					for i := range batches {
						for j := range batches[i].Events {
							q := seq + int64(j) + 1
							batches[i].Events[j] = recorder.Event{Seq: q, Type: "TEXT_MESSAGE_CONTENT", Frame: frame200(batches[i].Run, q)}
						}
					}
					seq += 3
					if err := s.Append(ctx, batches); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/batch")
				b.ReportMetric(float64(seq)*float64(runs)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}
