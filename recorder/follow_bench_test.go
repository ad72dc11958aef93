package recorder_test

import (
	"context"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// BenchmarkRedisFollowLatency: one event appended on store A until a follower on store B
// (another process's view) returns it from Next: the live tail's end-to-end latency, ns/op.
func BenchmarkRedisFollowLatency(b *testing.B) {
	srv := redistest.Start(b)
	prefix := uniquePrefix()
	a := newRedisStore(b, recorder.RedisConfig{URL: srv.URL(), Prefix: prefix})
	other := newRedisStore(b, recorder.RedisConfig{URL: srv.URL(), Prefix: prefix})
	benchFollowLatency(b, a, other)
}

// BenchmarkMemoryFollowLatency is the same through the memory store (in-process only).
func BenchmarkMemoryFollowLatency(b *testing.B) {
	s := recorder.NewMemoryStore(recorder.MemoryConfig{MaxEventsPerRun: 1000})
	defer s.Close()
	benchFollowLatency(b, s, s)
}

func benchFollowLatency(b *testing.B, writer recorder.Store, reader recorder.Follower) {
	ctx := context.Background()
	r := followRun("t1", "r1")
	if _, err := writer.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	sub, err := reader.Follow(ctx, "t1", "r1", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	frame := followEvents(r, 1, 1)[0].Frame
	b.ResetTimer()
	for i := range b.N {
		seq := int64(i + 1)
		if err := writer.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{{Seq: seq, Type: "CUSTOM", Frame: frame}}}}); err != nil {
			b.Fatal(err)
		}
		ev, err := sub.Next(ctx)
		if err != nil || ev.Seq != seq {
			b.Fatalf("Next = %d, %v, want %d", ev.Seq, err, seq)
		}
	}
}
