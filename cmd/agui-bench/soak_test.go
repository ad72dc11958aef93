package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/proxy"
)

// startProxy serves the proxy (memory store) in front of the demo agent in this process.
func startProxy(t *testing.T) string {
	t.Helper()
	up, _ := url.Parse(startDemo(t))
	h, err := proxy.New(proxy.Config{Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.Shutdown(context.Background())
	})
	return srv.URL
}

// TestFanoutMode runs runs with attachers through the proxy: every attacher reads its run to
// RUN_FINISHED, and the memory and CPU figures are filled in.
func TestFanoutMode(t *testing.T) {
	opts := baseOptions(startProxy(t))
	opts.C, opts.Attach, opts.Events, opts.Interval, opts.PID = 2, 3, 40, 5*time.Millisecond, os.Getpid()
	opts.Ramp, opts.AttachPrefix = 20*time.Millisecond, "/agui/"
	res, err := bench(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f := res.Fanout
	if res.RunsCompleted != 2 || f == nil || f.Attachers != 6 || f.Completed != 6 || len(f.Errors) != 0 {
		t.Fatalf("bench(fan-out) = %+v, fanout %+v, want 2 runs and 6 attachers completed", res, f)
	}
	// Each attacher reads its run from the start: as many events as the POSTing client.
	if f.Events != 3*res.Events || f.Latency.Count == 0 || f.RSSAfterBytes <= 0 || f.CPUMicrosPerDelivered <= 0 {
		t.Errorf("fan-out = %+v, want %d events, latencies, rss and cpu", f, 3*res.Events)
	}
	if res.Target == nil || res.Target.PeakFDs <= 0 || res.Target.StartRSSBytes <= 0 {
		t.Errorf("target = %+v, want fds and start rss sampled", res.Target)
	}
}

// TestLatencyByPhase: with a ramp, every stamped event's latency lands in one phase, and the
// phases follow the ramp's end and the first run's end; without one, there is no split.
func TestLatencyByPhase(t *testing.T) {
	opts := baseOptions(startDemo(t))
	opts.C, opts.Events, opts.Interval, opts.Ramp = 4, 60, 5*time.Millisecond, 200*time.Millisecond
	res, err := bench(t.Context(), opts)
	if err != nil || res.RunsCompleted != 4 {
		t.Fatalf("bench = %+v, %v; want 4 runs completed", res, err)
	}
	ph := res.LatencyByPhase
	if ph == nil {
		t.Fatal("no latency_by_phase with a ramp")
	}
	if n := ph.Opening.Count + ph.Steady.Count + ph.Closing.Count; n != res.Latency.Count || ph.Opening.Count == 0 || ph.Closing.Count == 0 {
		t.Errorf("phases hold %d + %d + %d latencies, want %d in all, some opening and closing",
			ph.Opening.Count, ph.Steady.Count, ph.Closing.Count, res.Latency.Count)
	}
	if ph.SteadyFromMs != 200 || ph.ClosingFromMs <= 0 {
		t.Errorf("phases start at %d and %d ms, want 200 and after the start", ph.SteadyFromMs, ph.ClosingFromMs)
	}
	opts.Ramp = 0
	if res, err := bench(t.Context(), opts); err != nil || res.LatencyByPhase != nil {
		t.Errorf("bench without a ramp: latency_by_phase %+v (%v), want none", res.LatencyByPhase, err)
	}
}

// TestSplitPhases: events sent before the ramp's end are opening, from the first run's end
// closing, between them steady; a run ending before the ramp does leaves no steady phase.
func TestSplitPhases(t *testing.T) {
	lat := []int64{1, 2, 3, 4, 5}
	sent := []int64{100, 150, 200, 250, 300}
	ph := splitPhases(lat, sent, 0, 200, 250)
	if ph.Opening.Count != 2 || ph.Steady.Count != 1 || ph.Closing.Count != 2 {
		t.Errorf("split = %d/%d/%d, want 2/1/2", ph.Opening.Count, ph.Steady.Count, ph.Closing.Count)
	}
	ph = splitPhases(lat, sent, 0, 260, 150)
	if ph.Opening.Count != 1 || ph.Steady.Count != 0 || ph.Closing.Count != 4 {
		t.Errorf("split with an early end = %d/%d/%d, want 1/0/4", ph.Opening.Count, ph.Steady.Count, ph.Closing.Count)
	}
}

// TestRefusedAndCut tells a refused run (no stream) from a cut one (stream without end).
func TestRefusedAndCut(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	opts := baseOptions(failing.URL)
	opts.C, opts.Ramp = 3, 30*time.Millisecond
	res, err := bench(t.Context(), opts)
	if err != nil || res.Refused != 3 || res.Cut != 0 {
		t.Errorf("bench(503) = refused %d cut %d (%v), want 3 refused", res.Refused, res.Cut, err)
	}
	opts = baseOptions(startDemo(t))
	opts.C, opts.Scenario = 2, "noend"
	res, err = bench(t.Context(), opts)
	if err != nil || res.Refused != 0 || res.Cut != 2 {
		t.Errorf("bench(noend) = refused %d cut %d (%v), want 2 cut", res.Refused, res.Cut, err)
	}
}

func TestParseInfoCommands(t *testing.T) {
	body := "# Stats\r\ntotal_connections_received:3\r\ntotal_commands_processed:1234\r\ntotal_net_input_bytes:55\r\ntotal_net_output_bytes:66\r\n# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250001\r\n"
	got, err := parseInfoCommands(bufio.NewReader(strings.NewReader("$" + itoa(len(body)) + "\r\n" + body + "\r\n")))
	if err != nil || got != 1234 {
		t.Errorf("parseInfoCommands = %d, %v, want 1234", got, err)
	}
	st, err := parseInfoStats(bufio.NewReader(strings.NewReader("$" + itoa(len(body)) + "\r\n" + body + "\r\n")))
	if err != nil || st != (redisInfo{1234, 55, 66, 1750001}) {
		t.Errorf("parseInfoStats = %+v, %v, want {1234 55 66 1750001}", st, err)
	}
	for _, bad := range []string{"total_commands_processed:1\r\ntotal_net_input_bytes:x\r\n", "total_commands_processed:1\r\nused_cpu_sys:-1\r\n", "total_commands_processed:1\r\nused_cpu_user:NaN\r\n"} {
		if _, err := parseInfoStats(bufio.NewReader(strings.NewReader("$" + itoa(len(bad)) + "\r\n" + bad + "\r\n"))); err == nil {
			t.Errorf("parseInfoStats(%q) = nil error, want one", bad)
		}
	}
	for _, bad := range []string{"-ERR nope\r\n", "$5\r\nab", "$-9\r\n", "$3\r\nabc\r\n"} {
		if _, err := parseInfoCommands(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("parseInfoCommands(%q) = nil error, want one", bad)
		}
	}
}

// TestRedisCommandsAgainstAServer reads INFO from a fake server speaking RESP on a socket.
func TestRedisCommandsAgainstAServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		c.Read(buf)
		body := "total_commands_processed:42\r\n"
		c.Write([]byte("$" + itoa(len(body)) + "\r\n" + body + "\r\n"))
	}()
	if n, err := redisCommands(ln.Addr().String()); err != nil || n != 42 {
		t.Errorf("redisCommands = %d, %v, want 42", n, err)
	}
	if n, err := redisCommands(""); err != nil || n != 0 {
		t.Errorf("redisCommands(\"\") = %d, %v, want 0, nil", n, err)
	}
}

// TestPlainProxyServes proxies a run through the baseline reverse proxy.
func TestPlainProxyServes(t *testing.T) {
	up, _ := url.Parse(startDemo(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- servePlainProxy(ctx, addr, up) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("servePlainProxy = %v", err)
		}
	}()
	opts := baseOptions("http://" + addr + "/")
	var res *result
	for range 50 { // the listener may take a moment
		if res, err = bench(t.Context(), opts); err == nil && res.RunsCompleted == 1 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("bench via plain proxy = %+v, %v, want one completed run", res, err)
}

func itoa(n int) string { return strconv.Itoa(n) }
