package recorder_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/redis/go-redis/v9"
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

// BenchmarkRedisTailIdle reports what an idle live tail costs the servers: 200 streams
// followed on a second store while nothing is written, and the commands the masters processed
// (INFO stats total_commands_processed, summed) over two seconds, per second. Single server vs
// 3-master cluster. One iteration is one two-second window.
func BenchmarkRedisTailIdle(b *testing.B) {
	for _, topo := range []string{"single", "cluster"} {
		b.Run(topo, func(b *testing.B) {
			var cfg recorder.RedisConfig
			var addrs []string
			if topo == "single" {
				srv := redistest.Start(b)
				cfg.URL, addrs = srv.URL(), []string{srv.Addr()}
			} else {
				c := redistest.SharedCluster(b)
				cfg.ClusterAddrs = c.Addrs()
				ms, err := c.Masters(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				for _, m := range ms {
					addrs = append(addrs, m.Addr())
				}
			}
			cfg.Prefix = uniquePrefix()
			w, f := newRedisStore(b, cfg), newRedisStore(b, cfg)
			ctx := context.Background()
			const streams = 200
			for i := range streams {
				r := testRun(fmt.Sprintf("idle-%d", i), "r")
				if _, err := w.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				sub, err := f.Follow(ctx, r.ThreadID, "r", 0)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { sub.Close() })
			}
			total := func() int64 {
				var n int64
				for _, a := range addrs {
					cl := redis.NewClient(&redis.Options{Addr: a})
					v, err := cl.InfoMap(ctx, "stats").Result()
					cl.Close()
					if err != nil {
						b.Fatal(err)
					}
					var x int64
					fmt.Sscan(v["Stats"]["total_commands_processed"], &x)
					n += x
				}
				return n
			}
			time.Sleep(2 * time.Second) // joins and first status reads settle
			b.ResetTimer()
			var cmds int64
			for range b.N {
				before := total()
				time.Sleep(2 * time.Second)
				cmds += total() - before - int64(len(addrs)) // minus the INFO itself
			}
			b.ReportMetric(float64(cmds)/(2*float64(b.N)), "cmds/s")
			b.ReportMetric(float64(cmds)/(2*float64(b.N))/streams, "cmds/s/stream")
		})
	}
}
