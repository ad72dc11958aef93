package recorder_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/redis/go-redis/v9"
)

// BenchmarkWriterRedisCost measures what recording costs Redis when many runs each stream
// slowly (the soak profile: thousands of streams at one event per second, so a batch holds
// one event of each of a few runs): the Writer writes rounds of `runs` events, one of each of
// `runs` runs (36-character ids, 200-byte frames), each round one batch. It reports, per event,
// the commands Redis executed (INFO commandstats, the commands scripts run included), the
// network bytes Redis received and sent, the Writer's round trips, the client's CPU time
// (client-µs/event: this process, the benchmark's loop included) and allocations (b.N is the
// number of events). runs=1 is the quiet soak's batch, runs=16 a busier one; runs=50/per=10 is the no-delay throughput profile (full batches). "lease-none" renews no
// lease; "lease" is one lease renewal per run every 2 events, the proxy's renewals at the
// default 2 s interval and one event per second ("lease-batch" all runs' in one call);
// "lease-append" renews them with the appends instead (WriterConfig.Lease), as the proxy does
// on Redis. With AGUI_BENCH_REDIS_URL set it writes to that server instead of a private one
// (scripts/redis-cost.sh counts the instructions Redis executes per event under valgrind).
func BenchmarkWriterRedisCost(b *testing.B) {
	for _, runs := range []int{1, 16, 256} {
		for _, lease := range []leaseMode{noLease, leasePerRun, leaseBatch, leaseAppend} {
			name := fmt.Sprintf("runs=%d", runs)
			switch lease {
			case noLease:
				name += "/lease-none"
			case leasePerRun:
				name += "/lease"
			case leaseBatch:
				name += "/lease-batch"
			case leaseAppend:
				name += "/lease-append"
			}
			b.Run(name, func(b *testing.B) { benchWriterRedisCost(b, runs, 1, lease) })
		}
	}
	// The 50 × 10,000 no-delay profile: full batches of 512 events, about 10 of each run.
	b.Run("runs=50/per=10", func(b *testing.B) { benchWriterRedisCost(b, 50, 10, noLease) })
}

// leaseMode is how benchWriterRedisCost renews the runs' leases, once per 2 events of each
// run (the proxy's 2 s lease interval at 1 event per second).
type leaseMode int

const (
	noLease     leaseMode = iota
	leasePerRun           // RenewLease per run
	leaseBatch            // one RenewLeases for all runs (what the proxy did on Redis)
	leaseAppend           // renewed by the appends (WriterConfig.Lease: what the proxy does on Redis)
)

// benchRedisURL names a Redis server for BenchmarkWriterRedisCost instead of a private one:
// scripts/redis-cost.sh runs one under valgrind to count the instructions it executes per
// event (exact, where its CPU time on a shared machine is not).
const benchRedisURL = "AGUI_BENCH_REDIS_URL"

func benchWriterRedisCost(b *testing.B, runs, per int, lease leaseMode) {
	url := os.Getenv(benchRedisURL)
	if url == "" {
		url = redistest.Start(b).URL()
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		b.Fatalf("%s: %v", benchRedisURL, err)
	}
	c := redis.NewClient(opt)
	b.Cleanup(func() { c.Close() })
	// A prefix of its own: a server given by URL outlives one run of the benchmark.
	s := newRedisStore(b, recorder.RedisConfig{URL: url, Prefix: fmt.Sprintf("agui-bench-%d", time.Now().UnixNano())})
	cfg := recorder.WriterConfig{Store: s}
	if lease == leaseAppend {
		cfg.Lease = &recorder.WriterLease{Node: "node-1", TTL: time.Minute}
	}
	w := recorder.NewWriter(cfg)
	defer w.Shutdown(context.Background())
	ctx := context.Background()
	rs := make([]recorder.Run, runs)
	for i := range rs {
		rs[i] = recorder.Run{
			ThreadID: fmt.Sprintf("%08x-7d1e-4b5a-9c3f-%012x", i, i), RunID: fmt.Sprintf("%08x-2f6a-4e1b-8d0c-%012x", i, i),
			Epoch: recorder.NewEpoch(), Owner: "alice", Route: "/agent", Node: "node-1",
			LeaseUntil: time.Now().Add(time.Minute),
		}
		if _, err := s.CreateRun(ctx, rs[i], recorder.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	refs := make([]recorder.RunRef, runs)
	for i, r := range rs {
		refs[i] = recorder.RunRef{ThreadID: r.ThreadID, RunID: r.RunID}
	}
	frames := make([][]byte, runs)
	recs := make([]*recorder.Recording, runs)
	for i := range frames {
		frames[i] = frame200(rs[i], 1)
		rec, err := w.Open(rs[i])
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = rec
	}
	before := redisCounters(b, c)
	cpu0 := processCPU(b)
	st0 := w.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	events, seq := 0, int64(0)
	for events < b.N {
		for range per {
			seq++
			for i, rec := range recs {
				if err := rec.Append(recorder.Event{Seq: seq, Type: "TEXT_MESSAGE_CONTENT", Frame: frames[i]}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if (lease == leasePerRun || lease == leaseBatch) && seq%2 == 0 {
			if lease == leaseBatch {
				if _, err := s.RenewLeases(ctx, "node-1", time.Now().Add(time.Minute), refs); err != nil {
					b.Fatal(err)
				}
			} else {
				for _, r := range rs {
					if _, err := s.RenewLease(ctx, r.ThreadID, r.RunID, "node-1", time.Now().Add(time.Minute)); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		events += runs * per
	}
	b.StopTimer()
	cpu := processCPU(b) - cpu0
	after := redisCounters(b, c)
	st := w.Stats()
	n := float64(events)
	b.ReportMetric(float64(after.calls-before.calls)/n, "cmds/event")
	b.ReportMetric(float64(after.netIn+after.netOut-before.netIn-before.netOut)/n, "netB/event")
	b.ReportMetric(float64(after.cpuUs-before.cpuUs)/n, "redis-µs/event")
	b.ReportMetric(float64(cpu.Microseconds())/n, "client-µs/event")
	b.ReportMetric(float64(st.RoundTrips-st0.RoundTrips)/n, "roundtrips/event")
	b.ReportMetric(float64(after.evals-before.evals)/n, "scripts/event")
}

// processCPU returns the CPU time (user and system) this process has used: the client's
// side of recording (the Writer, the store's client, go-redis), beside Redis's own.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type redisCount struct{ calls, evals, netIn, netOut, cpuUs int64 }

// redisCounters sums INFO commandstats' calls (minus the INFO calls themselves) and reads the
// server's network byte counters and CPU time.
func redisCounters(b *testing.B, c *redis.Client) redisCount {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats", "stats", "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var rc redisCount
	var cpu float64
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if cmd, rest, ok := strings.Cut(line, ":calls="); ok && strings.HasPrefix(cmd, "cmdstat_") {
			v, _, _ := strings.Cut(rest, ",")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch cmd {
			case "cmdstat_info":
			case "cmdstat_evalsha", "cmdstat_eval":
				rc.evals += n
				rc.calls += n
			default:
				rc.calls += n
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "total_net_input_bytes":
			rc.netIn, _ = strconv.ParseInt(v, 10, 64)
		case "total_net_output_bytes":
			rc.netOut, _ = strconv.ParseInt(v, 10, 64)
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		}
	}
	rc.cpuUs = int64(cpu * 1e6)
	return rc
}
