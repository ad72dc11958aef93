package attach_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// BenchmarkBulkExport streams GET /agui/export of 100, 1,000 and 10,000 one-run chat threads
// (30 events each) over a real socket, from the memory store and from a private Redis, and
// reports threads/s and the peak heap growth during the stream over the heap before it
// (sampled every MiB read): the export holds one index page and one thread at a time, so that
// peak must not grow with the number of threads.
func BenchmarkBulkExport(b *testing.B) {
	for _, kind := range []string{"memory", "redis"} {
		for _, n := range []int{100, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/threads=%d", kind, n), func(b *testing.B) { benchBulkExport(b, kind, n) })
		}
	}
}

func benchBulkExport(b *testing.B, kind string, threads int) {
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer agent.Close()
	u, _ := url.Parse(agent.URL)
	var store recorder.Store = recorder.NewMemoryStore(recorder.MemoryConfig{})
	if kind == "redis" {
		s, err := recorder.NewRedisStore(context.Background(), recorder.RedisConfig{URL: redistest.Start(b).URL()})
		if err != nil {
			b.Fatal(err)
		}
		store = s
	}
	defer store.Close()
	h, err := proxy.New(proxy.Config{Upstream: u, Store: store, Route: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	px := httptest.NewServer(h)
	defer func() { px.Close(); h.Shutdown(context.Background()) }()

	// One thread recorded through the proxy, copied into the others through the import path
	// (what POST .../import writes): the same frames, far faster to set up than real runs.
	ctx := context.Background()
	res := runtest.PostRun(b, ctx, px.URL+"/", runtest.RunBody("seed", "r1", "chat"), nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	runtest.WaitRunEnded(b, store, recorder.ThreadKey("", "bench", "seed"), "r1")
	doc, err := attach.ExportThread(ctx, store, recorder.ThreadKey("", "bench", "seed"))
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i < threads; i++ {
		if _, err := attach.ImportThread(ctx, store, attach.ImportTarget{ThreadID: fmt.Sprintf("bt%05d", i), Route: "bench"}, doc); err != nil {
			b.Fatal(err)
		}
	}

	buf := make([]byte, 64<<10)
	// export reads the whole export and returns its lines; sample runs every MiB read.
	export := func(sample func()) int64 {
		res, err := http.Get(px.URL + "/agui/export")
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		var n, lines, next int64
		for {
			m, err := res.Body.Read(buf)
			n += int64(m)
			for _, c := range buf[:m] {
				if c == '\n' {
					lines++
				}
			}
			if n >= next {
				sample()
				next += 1 << 20
			}
			if err != nil {
				return lines
			}
		}
	}
	for b.Loop() {
		if lines := export(func() {}); lines != int64(threads)+1 {
			b.Fatalf("export has %d lines, want %d and the end line", lines, threads)
		}
	}
	b.ReportMetric(float64(threads*b.N)/b.Elapsed().Seconds(), "threads/s")

	// Outside the timed loop: the live heap (after a GC) at every MiB of one more export, over
	// the live heap before it: what the export holds, whatever the GC's pacing (the heap in
	// use also counts garbage, which grows with the store's own live heap), with the reader
	// paused.
	b.StopTimer()
	var ms runtime.MemStats
	live := func() uint64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := live()
	var peak uint64
	export(func() {
		// Stop reading first: once the socket buffers are full the server waits on its write,
		// and allocates nothing while the GC marks (what it allocates then counts as live).
		time.Sleep(50 * time.Millisecond)
		if l := live(); l > base {
			peak = max(peak, l-base)
		}
	})
	b.ReportMetric(float64(peak)/(1<<20), "peak-live-heap-growth-MiB")
}
