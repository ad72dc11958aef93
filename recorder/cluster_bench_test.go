package recorder_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// BenchmarkRedisAppendWait measures one Append of one event (the Sync durability path) on a
// master with one replica, without WAIT and with WaitReplicas 1: the difference is the cost
// of "stored on a replica". Sentinel setup, so the master really has a replica.
func BenchmarkRedisAppendWait(b *testing.B) {
	sn := redistest.SharedSentinel(b)
	for _, n := range []int{0, 1} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			s := newRedisStore(b, recorder.RedisConfig{SentinelAddrs: sn.SentinelAddrs(), SentinelMaster: redistest.SentinelMaster, Prefix: uniquePrefix(), WaitReplicas: n})
			r := testRun("wait", "r")
			if _, err := s.CreateRun(context.Background(), r, recorder.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if err := s.Append(context.Background(), []recorder.Batch{{Run: r, Events: []recorder.Event{testEvent(r, int64(i+1))}}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRedisTailFanout measures the live tail's throughput: followers streams, each
// followed by one subscription on a second store, appended to in batches of 16 by a first
// store; ns/op is per event delivered to a follower. Single server vs 3-master cluster.
func BenchmarkRedisTailFanout(b *testing.B) {
	for _, topo := range []string{"single", "cluster"} {
		for _, streams := range []int{10, 200} {
			b.Run(fmt.Sprintf("%s/streams=%d", topo, streams), func(b *testing.B) {
				var cfg recorder.RedisConfig
				if topo == "single" {
					cfg.URL = redistest.Start(b).URL()
				} else {
					cfg.ClusterAddrs = redistest.SharedCluster(b).Addrs()
				}
				cfg.Prefix = uniquePrefix()
				cfg.FollowQueue = 1 << 16
				w, f := newRedisStore(b, cfg), newRedisStore(b, cfg)
				benchTailFanout(b, w, f, streams)
			})
		}
	}
}

func benchTailFanout(b *testing.B, w *recorder.RedisStore, f *recorder.RedisStore, streams int) {
	ctx := context.Background()
	runs := make([]recorder.Run, streams)
	per := max(b.N/streams, 1)
	var delivered atomic.Int64
	var wg sync.WaitGroup
	for i := range runs {
		runs[i] = testRun(fmt.Sprintf("fan-%d", i), "r")
		if _, err := w.CreateRun(ctx, runs[i], recorder.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		sub, err := f.Follow(ctx, runs[i].ThreadID, "r", 0)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for n := 0; n < per; n++ {
				if _, err := sub.Next(ctx); err != nil {
					b.Error(err)
					return
				}
				delivered.Add(1)
			}
		}()
	}
	b.ResetTimer()
	const batch = 16
	for seq := int64(1); seq <= int64(per); seq += batch {
		var bs []recorder.Batch
		for _, r := range runs {
			var evs []recorder.Event
			for s := seq; s < seq+batch && s <= int64(per); s++ {
				evs = append(evs, testEvent(r, s))
			}
			bs = append(bs, recorder.Batch{Run: r, Events: evs})
		}
		if err := w.Append(ctx, bs); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(delivered.Load())/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRedisMemoryPerThread reports Redis memory (INFO used_memory delta) per stored
// thread of one run with 100 events of ~150-byte frames, and per event: the input of the
// capacity plan in deploy/README.md. b.N threads are written.
func BenchmarkRedisMemoryPerThread(b *testing.B) {
	srv := redistest.Start(b)
	s := newRedisStore(b, recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix()})
	c := srv.Client(b)
	ctx := context.Background()
	used := func() int64 {
		v, err := c.InfoMap(ctx, "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		var n int64
		fmt.Sscan(v["Memory"]["used_memory"], &n)
		return n
	}
	const events = 100
	before := used()
	b.ResetTimer()
	for i := range b.N {
		r := testRun(fmt.Sprintf("mem-%d", i), "r")
		if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		evs := make([]recorder.Event, events)
		for j := range evs {
			evs[j] = testEvent(r, int64(j+1))
		}
		if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: evs}}); err != nil {
			b.Fatal(err)
		}
		if err := s.FinishRun(ctx, r.ThreadID, r.RunID, recorder.StatusFinished, "", events); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	frame := len(testEvent(testRun("mem-0", "r"), 1).Frame)
	per := float64(used()-before) / float64(b.N)
	b.ReportMetric(per, "bytes/thread")
	b.ReportMetric(per/events, "bytes/event")
	b.ReportMetric(float64(frame), "frame-bytes")
}
