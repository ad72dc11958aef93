package main

import (
	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/sse"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// errRemote is returned for a non-loopback target without -allow-remote.
var errRemote = errors.New("target is not a loopback address (use -allow-remote)")

// options are the bench parameters, from the command line.
type options struct {
	URL         string
	C           int
	Events      int
	Interval    time.Duration
	PID         int
	Scenario    string
	Size        int
	Duration    time.Duration
	JSON        bool
	AllowRemote bool
	MaxEvent    int
}

// checkTarget parses the URL and refuses anything but http(s) to a loopback host, unless
// allowRemote: the tool can open thousands of streams and must not be aimed at a stranger.
func checkTarget(raw string, allowRemote bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("url %q: want http:// or https:// with a host", raw)
	}
	if allowRemote {
		return u, nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("url %q: %w", raw, errRemote)
	}
	return u, nil
}

// summary is a distribution in milliseconds.
type summary struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// summarize sorts ns in place and returns its nearest-rank percentiles in milliseconds.
func summarize(ns []int64) summary {
	if len(ns) == 0 {
		return summary{}
	}
	slices.Sort(ns)
	at := func(p float64) float64 {
		i := int(p*float64(len(ns))+0.999999) - 1 // nearest rank: ceil(p*n)-1
		return float64(ns[min(max(i, 0), len(ns)-1)]) / 1e6
	}
	return summary{Count: len(ns), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: float64(ns[len(ns)-1]) / 1e6}
}

// target holds what -pid measured.
type target struct {
	PID             int     `json:"pid"`
	CPUSeconds      float64 `json:"cpu_seconds"`
	CPUMicrosPerEvt float64 `json:"cpu_us_per_event"`
	PeakRSSBytes    int64   `json:"peak_rss_bytes"`
}

// result is the bench report.
type result struct {
	URL             string         `json:"url"`
	Scenario        string         `json:"scenario"`
	Concurrency     int            `json:"concurrency"`
	EventsPerRun    int            `json:"events_per_run"`
	IntervalMs      int            `json:"interval_ms"`
	Runs            int            `json:"runs"`
	RunsCompleted   int            `json:"runs_completed"`
	Events          int64          `json:"events"`
	WallSeconds     float64        `json:"wall_seconds"`
	EventsPerSecond float64        `json:"events_per_second"`
	Latency         summary        `json:"latency"`
	FirstEvent      summary        `json:"time_to_first_event"`
	Errors          map[string]int `json:"errors"`
	DurationHit     bool           `json:"duration_limit_hit"`
	Target          *target        `json:"target,omitempty"`
	ClientCPU       float64        `json:"client_cpu_seconds"`
}

// runStats is what one run saw.
type runStats struct {
	events    int64
	latencies []int64 // receive time minus sentNs, ns
	ttfe      int64   // ns, -1 when no event arrived
	finished  bool
	err       string // "" when the run ended with RUN_FINISHED
}

// bench runs the load and measures it. It returns when every run has ended, at the latest
// at opts.Duration.
func bench(ctx context.Context, opts options) (*result, error) {
	u, err := checkTarget(opts.URL, opts.AllowRemote)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Duration)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{
		Proxy:               nil, // loopback traffic never goes through HTTP_PROXY
		MaxIdleConnsPerHost: opts.C,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}
	defer client.CloseIdleConnections()

	var cpu0, self0 float64
	if opts.PID > 0 {
		if cpu0, err = procCPU(opts.PID); err != nil {
			return nil, fmt.Errorf("reading target cpu: %w", err)
		}
	}
	self0, _ = procCPU(os.Getpid())

	stats := make([]runStats, opts.C)
	var wg sync.WaitGroup
	start := time.Now()
	tag := start.UnixNano()
	for i := range opts.C {
		wg.Go(func() { stats[i] = runOne(ctx, client, u.String(), opts, tag, i) })
	}
	wg.Wait()
	wall := time.Since(start)

	res := &result{
		URL: u.String(), Scenario: opts.Scenario, Concurrency: opts.C, EventsPerRun: opts.Events,
		IntervalMs: int(opts.Interval / time.Millisecond), Runs: opts.C, WallSeconds: wall.Seconds(),
		Errors: map[string]int{}, DurationHit: ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded),
	}
	var lat, ttfe []int64
	for _, s := range stats {
		res.Events += s.events
		lat = append(lat, s.latencies...)
		if s.ttfe >= 0 {
			ttfe = append(ttfe, s.ttfe)
		}
		if s.err != "" {
			res.Errors[s.err]++
		} else {
			res.RunsCompleted++
		}
	}
	res.EventsPerSecond = float64(res.Events) / wall.Seconds()
	res.Latency, res.FirstEvent = summarize(lat), summarize(ttfe)
	if self1, err := procCPU(os.Getpid()); err == nil {
		res.ClientCPU = self1 - self0
	}
	if opts.PID > 0 {
		cpu1, err := procCPU(opts.PID)
		if err != nil {
			return nil, fmt.Errorf("reading target cpu: %w", err)
		}
		t := &target{PID: opts.PID, CPUSeconds: cpu1 - cpu0}
		if res.Events > 0 {
			t.CPUMicrosPerEvt = t.CPUSeconds / float64(res.Events) * 1e6
		}
		if t.PeakRSSBytes, err = procPeakRSS(opts.PID); err != nil {
			return nil, fmt.Errorf("reading target rss: %w", err)
		}
		res.Target = t
	}
	return res, nil
}

// runOne performs one run and reads its stream to the end.
func runOne(ctx context.Context, client *http.Client, target string, opts options, tag int64, i int) runStats {
	st := runStats{ttfe: -1, latencies: make([]int64, 0, min(opts.Events, 1<<20))}
	props := map[string]any{"scenario": opts.Scenario, "events": opts.Events, "intervalMs": opts.Interval.Milliseconds()}
	if opts.Size > 0 {
		props["size"] = opts.Size
	}
	body, _ := json.Marshal(map[string]any{
		"threadId": fmt.Sprintf("bench-thread-%d", i), "runId": fmt.Sprintf("bench-%d-%d", tag, i),
		"state": map[string]any{}, "messages": []any{}, "tools": []any{}, "context": []any{},
		"forwardedProps": props,
	})
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		st.err = "request: " + err.Error()
		return st
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := client.Do(req)
	if err != nil {
		st.err = classify(ctx, err)
		return st
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		st.err = fmt.Sprintf("http status %d", res.StatusCode)
		return st
	}
	r := sse.NewReader(res.Body, sse.Limits{MaxLineBytes: opts.MaxEvent, MaxFrameBytes: opts.MaxEvent})
	for {
		f, err := r.Next()
		now := time.Now()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF) && st.finished:
			case errors.Is(err, io.EOF):
				st.err = "stream ended without RUN_FINISHED"
			default:
				st.err = classify(ctx, err)
			}
			return st
		}
		if !f.HasData {
			continue // comments, heartbeats: not events
		}
		ev := f.Data
		if st.events == 0 {
			st.ttfe = int64(now.Sub(start))
		}
		st.events++
		if ns, ok := sentNs(ev); ok {
			st.latencies = append(st.latencies, now.UnixNano()-ns)
		}
		switch typ, _ := agui.EventType(ev); typ {
		case agui.RunFinished:
			st.finished = true
		case agui.RunError:
			st.err = "RUN_ERROR event"
			return st
		}
	}
}

// classify turns a transport error into a short, countable kind.
func classify(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "cut by -duration"
	}
	if errors.Is(err, sse.ErrFrameTooLarge) || errors.Is(err, sse.ErrLineTooLong) {
		return "event too large"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:] // drop per-connection addresses so errors group
	}
	return "transport: " + msg
}
