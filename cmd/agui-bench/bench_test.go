package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"
)

func startDemo(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(demoagent.New(demoagent.Config{}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func baseOptions(url string) options {
	return options{URL: url, C: 1, Events: 10, Scenario: "bench", Duration: time.Minute, MaxEvent: 1 << 20}
}

// TestBenchAgainstDemoAgent runs the tool against the demo agent in this process, so -pid can
// point at the test binary itself.
func TestBenchAgainstDemoAgent(t *testing.T) {
	opts := baseOptions(startDemo(t))
	opts.C, opts.Events, opts.PID, opts.AgentPID = 4, 50, os.Getpid(), os.Getpid()
	res, err := bench(t.Context(), opts)
	if err != nil {
		t.Fatalf("bench() error = %v", err)
	}
	// 50 stamped content events plus RUN_STARTED, TEXT_MESSAGE_START/END and RUN_FINISHED.
	if res.Events != 4*54 || res.Latency.Count != 200 || res.FirstEvent.Count != 4 || res.RunsCompleted != 4 || len(res.Errors) != 0 {
		t.Errorf("bench() = %+v, want 216 events, 200 latencies, 4 first events, 4 runs, no errors", res)
	}
	if res.Latency.Max < res.Latency.P50 || res.Latency.P50 < 0 || res.EventsPerSecond <= 0 {
		t.Errorf("bench() latency = %+v, rate %v, want 0 <= p50 <= max and a positive rate", res.Latency, res.EventsPerSecond)
	}
	if res.Target == nil || res.Target.PeakRSSBytes <= 0 || res.Target.CPUSeconds < 0 || res.Target.PID != os.Getpid() {
		t.Errorf("bench() target = %+v, want this process's rss and cpu", res.Target)
	}
	// The agent is the target here: its CPU is counted once, as the agent's.
	if b := res.Budget; b == nil || b.TargetMicros != 0 || b.AgentMicros < 0 || b.Cores < 1 || b.TotalMicros != b.AgentMicros+b.ClientMicros {
		t.Errorf("bench() budget = %+v, want the agent's and the client's CPU only", res.Budget)
	}
}

// TestNewBudget: the machine's CPU per event, process by process, the share of the cores
// busy over the run and the throughput those costs allow.
func TestNewBudget(t *testing.T) {
	res := &result{Events: 1000, WallSeconds: 0.01, ClientCPU: 0.002,
		Target: &target{CPUMicrosPerEvt: 3}, Redis: &redisUse{CPUMicrosPerEvent: 4}}
	b := newBudget(res, 0.005, false)
	if b.AgentMicros != 5 || b.ClientMicros != 2 || b.TargetMicros != 3 || b.RedisMicros != 4 || b.TotalMicros != 14 {
		t.Fatalf("budget = %+v, want 5 + 2 + 3 + 4 = 14 µs per event", b)
	}
	// 14 ms of CPU over 10 ms of wall time.
	if want := 1.4 / float64(b.Cores); math.Abs(b.Busy-want) > 1e-9 {
		t.Errorf("busy = %v, want %v", b.Busy, want)
	}
	if want := float64(b.Cores) * 1e6 / 14; math.Abs(b.Ceiling-want) > 1e-6 {
		t.Errorf("ceiling = %v, want %v", b.Ceiling, want)
	}
	if d := newBudget(res, 0.005, true); d.TargetMicros != 0 || d.TotalMicros != 11 {
		t.Errorf("target is the agent: budget = %+v, want its CPU counted once", d)
	}
}

// TestBenchChatMode: with -runs each stream performs its runs one after another; the report
// counts every run, the first events of the runs that followed another, and the connections
// the client opened: a few against a target that keeps them (a stream's next run takes its
// last one's; two streams may race for an idle one and dial once more), one per run against
// one that closes each.
func TestBenchChatMode(t *testing.T) {
	demo := demoagent.New(demoagent.Config{})
	for _, closing := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if closing {
				w.Header().Set("Connection", "close")
			}
			demo.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		opts := baseOptions(srv.URL)
		opts.C, opts.Runs, opts.Events = 2, 5, 5
		res, err := bench(t.Context(), opts)
		if err != nil {
			t.Fatalf("bench() error = %v", err)
		}
		minDials, maxDials := int64(1), int64(5) // at most one per two runs
		if closing {
			minDials, maxDials = 10, 10
		}
		if res.Runs != 10 || res.RunsCompleted != 10 || res.FirstEvent.Count != 10 || res.NextFirstEvent == nil || res.NextFirstEvent.Count != 8 ||
			res.Dials < minDials || res.Dials > maxDials || res.DialsPerRun != float64(res.Dials)/10 {
			t.Errorf("closing %v: bench() = %+v (next %+v), want 10 runs completed, 8 next first events, %d..%d connections", closing, res, res.NextFirstEvent, minDials, maxDials)
		}
	}
}

// TestBenchChatHistory: with -history a stream's runs share its thread, and each POST carries
// what a chat client holds: the earlier user messages and the agent's replies, then a new user
// message.
func TestBenchChatHistory(t *testing.T) {
	demo := demoagent.New(demoagent.Config{})
	var mu sync.Mutex
	var posts []*agui.RunInput
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		in, err := agui.DecodeRunInput(body)
		if err != nil {
			t.Errorf("posted body %q: %v", body, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		posts = append(posts, in)
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		demo.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	opts := baseOptions(srv.URL)
	opts.Runs, opts.Events, opts.History = 3, 2, true
	res, err := bench(t.Context(), opts)
	if err != nil {
		t.Fatalf("bench() error = %v", err)
	}
	if res.RunsCompleted != 3 || !res.History || res.LastFirstEvent == nil || res.LastFirstEvent.Count != 1 {
		t.Fatalf("bench() = %+v (last %+v), want 3 runs completed, history, 1 last first event", res, res.LastFirstEvent)
	}
	if len(posts) != 3 {
		t.Fatalf("%d posts, want 3", len(posts))
	}
	var want []string
	for k, in := range posts {
		if in.ThreadID != posts[0].ThreadID {
			t.Errorf("run %d on thread %q, want %q", k, in.ThreadID, posts[0].ThreadID)
		}
		if k > 0 {
			want = append(want, "assistant:msg-"+posts[k-1].RunID+"-1")
		}
		want = append(want, "user:user-"+in.RunID)
		var got []string
		for _, m := range in.Messages {
			var msg struct{ ID, Role string }
			json.Unmarshal(m, &msg)
			got = append(got, msg.Role+":"+msg.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("run %d messages = %v, want %v", k, got, want)
		}
	}
}

func TestBenchCountsErrors(t *testing.T) {
	demo := startDemo(t)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	tests := []struct {
		name     string
		url      string
		scenario string
		duration time.Duration
		events   int
		want     string
	}{
		{"no RUN_FINISHED", demo, "noend", time.Minute, 0, "stream ended without RUN_FINISHED"},
		{"RUN_ERROR", demo, "error", time.Minute, 0, "RUN_ERROR event"},
		{"HTTP status", failing.URL, "bench", time.Minute, 0, "http status 503"},
		{"duration bound", demo, "slow", 100 * time.Millisecond, 100000, "cut by -duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := baseOptions(tt.url)
			opts.C, opts.Scenario, opts.Duration, opts.Events, opts.Interval = 2, tt.scenario, tt.duration, tt.events, 0
			if tt.scenario == "slow" {
				opts.Interval = 50 * time.Millisecond
			}
			res, err := bench(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors[tt.want] != 2 || res.RunsCompleted != 0 {
				t.Errorf("bench(%s) errors = %v, completed %d, want 2 × %q", tt.scenario, res.Errors, res.RunsCompleted, tt.want)
			}
			if tt.want == "cut by -duration" && !res.DurationHit {
				t.Errorf("bench(%s) DurationHit = false, want true", tt.scenario)
			}
		})
	}
}

func TestCheckTarget(t *testing.T) {
	tests := []struct {
		url    string
		remote bool
		ok     bool
	}{
		{"http://127.0.0.1:8000/", false, true},
		{"http://localhost:8000/agent", false, true},
		{"http://[::1]:8000/", false, true},
		{"http://127.8.9.10/", false, true},
		{"http://10.0.0.1:8000/", false, false},
		{"http://example.com/", false, false},
		{"http://example.com/", true, true},
		{"http://localhost.example.com/", false, false},
		{"ftp://127.0.0.1/", false, false},
		{"127.0.0.1:8000", false, false},
		{"http://", true, false},
	}
	for _, tt := range tests {
		_, err := checkTarget(tt.url, tt.remote)
		if (err == nil) != tt.ok {
			t.Errorf("checkTarget(%q, %v) error = %v, want ok %v", tt.url, tt.remote, err, tt.ok)
		}
	}
	if _, err := checkTarget("http://10.0.0.1/", false); !errors.Is(err, errRemote) {
		t.Errorf("checkTarget(remote) error = %v, want errRemote", err)
	}
}

func TestSummarize(t *testing.T) {
	ns := make([]int64, 100)
	for i := range ns {
		ns[i] = int64(100-i) * 1e6 // 100ms .. 1ms, unsorted
	}
	got := summarize(ns)
	want := summary{Count: 100, P50: 50, P90: 90, P99: 99, Max: 100}
	if got != want {
		t.Errorf("summarize(1..100ms) = %+v, want %+v", got, want)
	}
	if got := summarize(nil); got != (summary{}) {
		t.Errorf("summarize(nil) = %+v, want zero", got)
	}
	if got := summarize([]int64{7e6}); got.P50 != 7 || got.P99 != 7 || got.Max != 7 {
		t.Errorf("summarize(7ms) = %+v, want 7 everywhere", got)
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{"minimal", []string{"-url", "http://127.0.0.1:1/"}, true},
		{"full", []string{"-url", "http://127.0.0.1:1/", "-c", "50", "-events", "10000", "-interval", "0", "-pid", "1", "-json", "-duration", "1m"}, true},
		{"no url", nil, false},
		{"remote", []string{"-url", "http://192.0.2.1/"}, false},
		{"c zero", []string{"-url", "http://127.0.0.1:1/", "-c", "0"}, false},
		{"negative duration", []string{"-url", "http://127.0.0.1:1/", "-duration", "-1s"}, false},
		{"too many events", []string{"-url", "http://127.0.0.1:1/", "-events", "20000000"}, false},
		{"follow", []string{"-url", "http://127.0.0.1:1/", "-c", "200", "-follow", "10", "-pprof-url", "http://127.0.0.1:2"}, true},
		{"follow and attach", []string{"-url", "http://127.0.0.1:1/", "-follow", "1", "-attach", "1"}, false},
		{"too many followers", []string{"-url", "http://127.0.0.1:1/", "-c", "200", "-follow", "101"}, false},
		{"remote pprof", []string{"-url", "http://127.0.0.1:1/", "-pprof-url", "http://192.0.2.1/"}, false},
		{"extra args", []string{"-url", "http://127.0.0.1:1/", "x"}, false},
		{"chat", []string{"-url", "http://127.0.0.1:1/", "-c", "100", "-runs", "10"}, true},
		{"runs zero", []string{"-url", "http://127.0.0.1:1/", "-runs", "0"}, false},
		{"too many runs", []string{"-url", "http://127.0.0.1:1/", "-runs", "10001"}, false},
		{"runs and attach", []string{"-url", "http://127.0.0.1:1/", "-runs", "2", "-attach", "1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, &bytes.Buffer{})
			if (err == nil) != tt.ok {
				t.Errorf("parseFlags(%q) error = %v, want ok %v", tt.args, err, tt.ok)
			}
		})
	}
}

func TestRealMainOutputs(t *testing.T) {
	url := startDemo(t)
	var out, errOut bytes.Buffer
	if code := realMain(t.Context(), []string{"-url", url, "-c", "2", "-events", "5", "-interval", "0"}, &out, &errOut); code != 0 {
		t.Fatalf("realMain text = %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{"events      18 total", "latency     p50", "first event p50", "errors      0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report = %q, want it to contain %q", out.String(), want)
		}
	}
	out.Reset()
	if code := realMain(t.Context(), []string{"-url", url, "-events", "3", "-json"}, &out, &errOut); code != 0 {
		t.Fatalf("realMain json = %d, stderr %q", code, errOut.String())
	}
	var res result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Events != 7 || res.Latency.Count != 3 {
		t.Errorf("json report = %s (%v), want 7 events and 3 latencies", out.Bytes(), err)
	}
	if code := realMain(t.Context(), []string{"-url", url, "-scenario", "noend"}, &out, &errOut); code != 1 {
		t.Errorf("realMain(noend) = %d, want 1 (runs failed)", code)
	}
	if code := realMain(t.Context(), []string{"-c", "0"}, &out, &errOut); code != 2 {
		t.Errorf("realMain(-c 0) = %d, want 2", code)
	}
}
