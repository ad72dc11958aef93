package attach_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// BenchmarkBulkExport streams GET /agui/export of 1,000 one-run chat threads over a real
// socket and reports threads/s and the heap in use in the middle of the stream, to show that
// memory does not grow with the number of threads (compare with -bench at other sizes).
func BenchmarkBulkExport(b *testing.B) {
	const threads = 1000
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer agent.Close()
	u, _ := url.Parse(agent.URL)
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	defer store.Close()
	h, err := proxy.New(proxy.Config{Upstream: u, Store: store})
	if err != nil {
		b.Fatal(err)
	}
	px := httptest.NewServer(h)
	defer func() { px.Close(); h.Shutdown(context.Background()) }()
	for i := range threads {
		res, err := http.Post(px.URL+"/", "application/json", strings.NewReader(runtest.RunBody(fmt.Sprintf("bt%04d", i), "r1", "chat")))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	var mid uint64
	buf := make([]byte, 64<<10)
	for b.Loop() {
		res, err := http.Get(px.URL + "/agui/export")
		if err != nil {
			b.Fatal(err)
		}
		var n int64
		for {
			m, err := res.Body.Read(buf)
			n += int64(m)
			if n > 1<<20 && mid == 0 {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				mid = ms.HeapInuse
			}
			if err != nil {
				break
			}
		}
		res.Body.Close()
	}
	b.ReportMetric(float64(threads*b.N)/b.Elapsed().Seconds(), "threads/s")
	b.ReportMetric(float64(mid)/(1<<20), "heapMiB-mid-stream")
}
