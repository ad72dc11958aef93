package attach_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// BenchmarkCrossReplicaLatency measures the time from the agent writing an event to a client
// attached to ANOTHER proxy replica receiving it, through a shared redis-server: replica A
// pumps and records the run (async durability), replica B follows it live with one XREAD
// tail. Each iteration is one event; p50/p99 are reported in microseconds.
func BenchmarkCrossReplicaLatency(b *testing.B) {
	srv := redistest.Start(b)
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer agent.Close()
	u, _ := url.Parse(agent.URL)
	replica := func() *httptest.Server {
		store, err := recorder.NewRedisStore(context.Background(), recorder.RedisConfig{URL: srv.URL(), Prefix: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		h, err := proxy.New(proxy.Config{Upstream: u, Store: store})
		if err != nil {
			b.Fatal(err)
		}
		s := httptest.NewServer(h)
		b.Cleanup(func() {
			s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			h.Shutdown(ctx)
			store.Close()
		})
		return s
	}
	a, bRep := replica(), replica()
	n := b.N + 1
	body := fmt.Sprintf(`{"threadId":"lat","runId":"lat-%d","messages":[],"forwardedProps":{"scenario":"bench","events":%d,"intervalMs":2}}`, n, n)
	req, _ := http.NewRequest(http.MethodPost, a.URL+"/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	// Attach on B as soon as the run exists there.
	var att *http.Response
	for {
		att, err = http.Get(bRep.URL + "/agui/threads/lat/events")
		if err == nil && att.StatusCode == 200 {
			break
		}
		if att != nil {
			att.Body.Close()
		}
		time.Sleep(time.Millisecond)
	}
	defer att.Body.Close()
	go func() { // drain A's client
		rd := sse.NewReader(res.Body, sse.Limits{})
		for {
			if _, err := rd.Next(); err != nil {
				return
			}
		}
	}()
	rd := sse.NewReader(att.Body, sse.Limits{})
	var lat []float64
	live := false
	b.ResetTimer()
	for {
		f, err := rd.Next()
		if err != nil {
			break
		}
		now := time.Now().UnixNano()
		if !f.HasData {
			continue
		}
		if strings.Contains(string(f.Data), "agui-proxy.replay_complete") {
			live = true
			continue
		}
		var ev struct {
			RawEvent struct {
				SentNs int64 `json:"sentNs"`
			} `json:"rawEvent"`
		}
		if live && json.Unmarshal(f.Data, &ev) == nil && ev.RawEvent.SentNs > 0 {
			lat = append(lat, float64(now-ev.RawEvent.SentNs)/1e3)
		}
	}
	b.StopTimer()
	if len(lat) == 0 {
		if b.N >= 50 {
			b.Fatal("no live event reached replica B")
		}
		return // a run this short may end before the attach: nothing live to time
	}
	slices.Sort(lat)
	b.ReportMetric(lat[len(lat)/2], "p50-µs")
	b.ReportMetric(lat[len(lat)*99/100], "p99-µs")
	b.ReportMetric(float64(len(lat)), "live-events")
}
