package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
	"github.com/agui-proxy/agui-proxy/thread"
)

// threadBench is one proxy process (serve) in front of the demo agent, on one store.
type threadBench struct {
	b      *testing.B
	base   string
	cancel context.CancelFunc
	done   chan error
	// lastTotal is the time from the last run's POST to its stream's end.
	lastTotal time.Duration
	// firstByte, when set, is called as a run's first byte arrives.
	firstByte func()
}

func startThreadBench(b *testing.B, env map[string]string) *threadBench {
	b.Helper()
	env["AGUI_LISTEN"] = "127.0.0.1:0"
	env["AGUI_METRICS"] = "false"
	cfg, err := loadConfig(env)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb := &threadBench{b: b, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() { tb.done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	select {
	case addr := <-ready:
		tb.base = "http://" + addr
	case err := <-tb.done:
		b.Fatalf("serve: %v", err)
	}
	return tb
}

func (tb *threadBench) stop() {
	tb.cancel()
	if err := <-tb.done; err != nil {
		tb.b.Fatalf("serve: %v", err)
	}
}

// run posts one chat run whose request carries messages and returns the time to the
// response's first byte and the stream.
func (tb *threadBench) run(thread, runID string, messages []json.RawMessage) (time.Duration, []byte) {
	body, _ := json.Marshal(map[string]any{"threadId": thread, "runId": runID, "messages": messages})
	req, _ := http.NewRequest(http.MethodPost, tb.base+"/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.b.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	if _, err := br.Peek(1); err != nil {
		tb.b.Fatalf("run %s: %v", runID, err)
	}
	ttfb := time.Since(start)
	if tb.firstByte != nil {
		tb.firstByte()
	}
	rest, err := io.ReadAll(br)
	tb.lastTotal = time.Since(start)
	if err != nil || res.StatusCode != http.StatusOK || !strings.Contains(string(rest), "RUN_FINISHED") {
		tb.b.Fatalf("run %s = %d, %v: %.300s", runID, res.StatusCode, err, rest)
	}
	return ttfb, rest
}

// conversation is what a client like @ag-ui/client holds: the messages of the thread, which
// it sends whole with each run.
type conversation struct {
	messages []json.RawMessage
	held     map[string]bool
}

// next returns the messages of run n's request: the conversation and a new user message.
func (c *conversation) next(n int) []json.RawMessage {
	user := json.RawMessage(fmt.Sprintf(`{"id":"u%d","role":"user","content":"chat"}`, n))
	return append(slices.Clip(c.messages), user)
}

// add replays a run's stream and appends the messages it added.
func (c *conversation) add(b *testing.B, stream []byte) {
	rd := sse.NewReader(bytes.NewReader(stream), sse.Limits{})
	var events []compact.Event
	for {
		f, err := rd.Next()
		if err != nil {
			break
		}
		if ev, err := compact.ParseEvent(bytes.Clone(f.Data)); err == nil { // the frame's bytes are the reader's until its next Next
			events = append(events, ev)
		}
	}
	messages, _, err := compact.Replay(events)
	if err != nil {
		b.Fatal(err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(messages, &list); err != nil {
		b.Fatal(err)
	}
	for _, m := range list {
		if id := agui.MessageID(m); !c.held[id] {
			c.held[id] = true
			c.messages = append(c.messages, m)
		}
	}
}

// prelude returns the time to the first byte of the thread's attach stream, to its replay
// marker, and its length up to the marker.
func (tb *threadBench) prelude(thread string) (time.Duration, time.Duration, int) {
	start := time.Now()
	res, err := http.Get(tb.base + "/agui/threads/" + thread + "/events")
	if err != nil {
		tb.b.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	if _, err := br.Peek(1); err != nil {
		tb.b.Fatal(err)
	}
	first := time.Since(start)
	n := 0
	for {
		line, err := br.ReadString('\n')
		n += len(line)
		if err != nil || strings.Contains(line, "replay_complete") {
			return first, time.Since(start), n
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkLongThread builds one chat thread of -runs runs (the demo agent's chat scenario,
// through the proxy, each request carrying the whole conversation as @ag-ui/client sends it)
// on Redis and on the disk store, then reports: wire bytes of the thread's streams; store
// bytes (Redis: MEMORY USAGE of the thread's keys by kind; disk: chunk and checkpoint bytes);
// the run start time to first byte at the end of the thread and, with the same request, on a
// new thread; the prelude's first byte and its replay marker; for the disk store the restart
// to a prelude's first byte.
// It is slow (minutes for 1,000 runs): run it with -bench LongThread -benchtime 1x.
func BenchmarkLongThread(b *testing.B) {
	for _, runs := range []int{100, 1000} {
		for _, kind := range []string{"redis", "disk"} {
			b.Run(fmt.Sprintf("%s/runs=%d", kind, runs), func(b *testing.B) {
				for b.Loop() {
					benchLongThread(b, kind, runs)
				}
			})
		}
	}
}

func benchLongThread(b *testing.B, kind string, runs int) {
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer agent.Close()
	// A client starts its next run as soon as it read RUN_FINISHED; the asynchronous recorder may
	// not have stored the end yet, which would answer ThreadBusy.
	env := map[string]string{"AGUI_UPSTREAM": agent.URL, "AGUI_ALLOW_CONCURRENT_RUNS": "true"}
	var srv *redistest.Server
	dir := b.TempDir()
	if kind == "redis" {
		srv = redistest.Start(b)
		env["AGUI_REDIS_URL"] = srv.URL()
	} else {
		env["AGUI_STORE_PATH"] = dir
	}
	tb := startThreadBench(b, env)
	wire := 0
	conv := &conversation{held: map[string]bool{}}
	var late []time.Duration
	for i := 1; i <= runs; i++ {
		ttfb, stream := tb.run("t", fmt.Sprintf("r%d", i), conv.next(i))
		wire += len(stream)
		conv.add(b, stream)
		time.Sleep(benchPause)
		if i > runs-20 {
			late = append(late, ttfb)
		}
	}
	var fresh []time.Duration
	for i := range 20 {
		ttfb, _ := tb.run(fmt.Sprintf("fresh%d", i), "r1", conv.next(runs+1))
		fresh = append(fresh, ttfb)
	}
	// The fresh threads out of the store, so that its sizes are the long thread's.
	for i := range 20 {
		req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("%s/agui/threads/fresh%d", tb.base, i), nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode/100 != 2 {
			b.Fatalf("deleting thread fresh%d: %v %v", i, res, err)
		}
		res.Body.Close()
	}
	var preludes, replayed []time.Duration
	preludeBytes := 0
	for range 10 {
		d, all, n := tb.prelude("t")
		preludes = append(preludes, d)
		replayed = append(replayed, all)
		preludeBytes = n
	}
	b.ReportMetric(float64(wire), "wire-bytes")
	b.ReportMetric(float64(preludeBytes), "prelude-bytes")
	b.ReportMetric(float64(median(late).Microseconds())/1000, "ms-run-ttfb-last20")
	b.ReportMetric(float64(median(fresh).Microseconds())/1000, "ms-run-ttfb-new-thread")
	b.ReportMetric(float64(median(preludes).Microseconds())/1000, "ms-prelude-first-byte")
	b.ReportMetric(float64(median(replayed).Microseconds())/1000, "ms-prelude-replayed")
	if kind == "redis" {
		c := srv.Client(b)
		usage := func(suffix string) {
			keys, err := c.Keys(context.Background(), "agui:{t}:*").Result()
			if err != nil {
				b.Fatal(err)
			}
			byKind, count := map[string]int64{}, map[string]int{}
			for _, k := range keys {
				n, _ := c.MemoryUsage(context.Background(), k, 0).Result()
				kk := strings.SplitN(strings.TrimPrefix(k, "agui:{t}:"), ":", 2)[0]
				byKind[kk] += n
				count[kk]++
			}
			total := int64(0)
			for kk, n := range byKind {
				b.ReportMetric(float64(n), kk+"-bytes"+suffix)
				b.ReportMetric(float64(count[kk]), kk+"-keys"+suffix)
				total += n
			}
			b.ReportMetric(float64(total)/float64(wire), "store/wire"+suffix)
		}
		usage("")
		// Compaction at rest (AGUI_COMPACT_AFTER), one sweep over the thread, then the
		// store's bytes again and the prelude.
		rs, err := recorder.NewRedisStore(context.Background(), recorder.RedisConfig{URL: srv.URL()})
		if err != nil {
			b.Fatal(err)
		}
		svc, _ := thread.New(thread.Config{Store: rs})
		results := map[thread.RestResult]int{}
		sw, err := thread.NewRestSweeper(svc, time.Nanosecond, time.Hour, func(r thread.RestResult) { results[r]++ })
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := sw.Sweep(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(runs), "ms-compact-at-rest/run")
		b.ReportMetric(float64(results[thread.RestCompacted]), "runs-compacted-at-rest")
		b.ReportMetric(float64(results[thread.RestKept]), "runs-kept-raw")
		// The stored events' own bytes (their frames), to compare with what holds them.
		frames := 0
		runList, err := rs.Runs(context.Background(), "t")
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range runList {
			evs, err := rs.Events(context.Background(), "t", r.RunID, 0, 0)
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range evs {
				frames += len(e.Frame)
			}
		}
		b.ReportMetric(float64(frames), "frame-bytes-at-rest")
		rs.Close()
		usage("-at-rest")
		preludes, replayed = preludes[:0], replayed[:0]
		for range 10 {
			d, all, _ := tb.prelude("t")
			preludes = append(preludes, d)
			replayed = append(replayed, all)
		}
		b.ReportMetric(float64(median(preludes).Microseconds())/1000, "ms-prelude-first-byte-at-rest")
		b.ReportMetric(float64(median(replayed).Microseconds())/1000, "ms-prelude-replayed-at-rest")
		tb.stop()
		return
	}
	tb.stop()
	s, err := recorder.OpenDiskStore(context.Background(), recorder.DiskConfig{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	st := s.Stats()
	b.ReportMetric(float64(st.EventBytes), "events-bytes")
	b.ReportMetric(float64(st.CheckpointBytes), "checkpoint-bytes")
	b.ReportMetric(float64(st.FileBytes), "file-bytes")
	b.ReportMetric(float64(st.EventBytes+st.CheckpointBytes)/float64(wire), "store/wire")
	// Compaction at rest (AGUI_COMPACT_AFTER), one sweep, then the stored bytes again.
	svc, _ := thread.New(thread.Config{Store: s})
	sw, err := thread.NewRestSweeper(svc, time.Nanosecond, time.Hour, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := sw.Sweep(context.Background()); err != nil {
		b.Fatal(err)
	}
	st = s.Stats()
	s.Close()
	b.ReportMetric(float64(st.FileBytes), "file-bytes-at-rest")
	b.ReportMetric(float64(st.CheckpointBytes), "checkpoint-bytes-at-rest")
	b.ReportMetric(float64(st.EventBytes), "events-bytes-at-rest")
	b.ReportMetric(float64(st.EventBytes+st.CheckpointBytes)/float64(wire), "store/wire-at-rest")
	// Restart: open the store again (a new serve) and time the first byte of the prelude.
	start := time.Now()
	tb = startThreadBench(b, env)
	listening := time.Since(start)
	first, _, _ := tb.prelude("t")
	b.ReportMetric(float64((listening+first).Microseconds())/1000, "ms-restart-to-prelude-first-byte")
	tb.stop()
}

// benchPause (env AGUI_BENCH_PAUSE, e.g. 30ms; default none) is a pause between the long
// thread's runs, like a user's between turns: without it each run starts while its parent's
// checkpoint is still being built (off the pump's path), and learns the held messages by
// reading and replaying the branch instead.
var benchPause = func() time.Duration { d, _ := time.ParseDuration(os.Getenv("AGUI_BENCH_PAUSE")); return d }()

// BenchmarkRunStart measures what a run start costs on a long thread against a new one, on
// Redis, with the demo agent's chat and each request carrying the whole conversation (as
// @ag-ui/client sends it). It builds a thread of 10 or 1,000 runs, then reports, in the same
// benchmark run and with the same request bodies:
//   - back-to-back (the next run posted as soon as the previous one's stream ended, before
//     its checkpoint is built off the pump's path): the median time to first byte of the
//     long thread's run and of a new thread's run with the same body, and the Redis bytes
//     each read until its first byte;
//   - spaced (30 ms after the previous run's end, like a user between turns): the same;
//   - the prelude's first byte;
//   - each run's time from POST to its stream's end (the terminal event waits for the run's
//     checkpoint), and the Redis bytes read after the first byte (its end and checkpoint).
//
// Redis bytes read are INFO stats total_net_output_bytes deltas from the POST to the first
// byte, less an INFO's own reply: they include the run's creation and every read of the run
// start, and the few replies of the run's first event appends. Spaced, nothing else runs
// meanwhile; back-to-back, they also count what the previous run's checkpoint build reads at
// the same time (the new thread's run is posted right after the long thread's). disk/runs=1000
// is the same on the disk store, without the Redis bytes. It takes
// about a minute for 1,000 runs: -bench RunStart -benchtime 1x.
func BenchmarkRunStart(b *testing.B) {
	for _, runs := range []int{10, 1000} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			for b.Loop() {
				benchRunStart(b, "redis", runs)
			}
		})
	}
	// The disk store: the same timings (no Redis bytes).
	b.Run("disk/runs=1000", func(b *testing.B) {
		for b.Loop() {
			benchRunStart(b, "disk", 1000)
		}
	})
}

func benchRunStart(b *testing.B, kind string, runs int) {
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer agent.Close()
	env := map[string]string{"AGUI_UPSTREAM": agent.URL, "AGUI_ALLOW_CONCURRENT_RUNS": "true"}
	var srv *redistest.Server
	if kind == "redis" {
		srv = redistest.Start(b)
		env["AGUI_REDIS_URL"] = srv.URL()
	} else {
		env["AGUI_STORE_PATH"] = b.TempDir()
	}
	tb := startThreadBench(b, env)
	defer tb.stop()
	outBytes := func() int64 {
		if srv == nil {
			return 0
		}
		info, err := srv.Client(b).Info(context.Background(), "stats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_net_output_bytes:"); ok {
				var n int64
				fmt.Sscan(v, &n)
				return n
			}
		}
		b.Fatal("INFO stats has no total_net_output_bytes")
		return 0
	}
	infoCost := -outBytes() + outBytes()
	conv := &conversation{held: map[string]bool{}}
	n := 0
	long := func(pause time.Duration) (time.Duration, []byte) {
		n++
		time.Sleep(pause)
		return tb.run("t", fmt.Sprintf("r%d", n), conv.next(n))
	}
	for n < runs {
		_, stream := long(0)
		conv.add(b, stream)
	}
	// measure runs one run start with nothing else going on (after the previous run's
	// checkpoint had time to be built unless backToBack) and returns its first byte and the
	// Redis bytes read until then.
	var restLong [2][]time.Duration // Redis bytes read after the first byte (the run's end and checkpoint)
	measure := func(start func() (time.Duration, []byte), settle time.Duration) (time.Duration, int64, []byte) {
		time.Sleep(settle)
		var read int64
		tb.firstByte = func() { read = outBytes() }
		defer func() { tb.firstByte = nil }()
		before := outBytes()
		ttfb, stream := start()
		if rest := outBytes() - read - infoCost; settle > 0 {
			restLong[1] = append(restLong[1], time.Duration(rest))
		}
		return ttfb, read - before - infoCost, stream
	}
	var ttfbLong, ttfbNew, bytesLong, bytesNew, totalLong, totalNew [2][]time.Duration // [0] back-to-back, [1] spaced
	fresh := 0
	for mode, settle := range []time.Duration{0, 30 * time.Millisecond} {
		for range 20 {
			if mode == 0 {
				_, stream := long(0) // the run whose checkpoint the measured one finds missing
				conv.add(b, stream)
			}
			ttfb, read, stream := measure(func() (time.Duration, []byte) { return long(0) }, settle)
			body := conv.messages
			conv.add(b, stream)
			ttfbLong[mode] = append(ttfbLong[mode], ttfb)
			totalLong[mode] = append(totalLong[mode], tb.lastTotal)
			bytesLong[mode] = append(bytesLong[mode], time.Duration(read))
			fresh++
			ttfb, read, _ = measure(func() (time.Duration, []byte) {
				return tb.run(fmt.Sprintf("fresh%d", fresh), "r1", append(slices.Clip(body), json.RawMessage(fmt.Sprintf(`{"id":"u%d","role":"user","content":"chat"}`, n))))
			}, settle)
			ttfbNew[mode] = append(ttfbNew[mode], ttfb)
			totalNew[mode] = append(totalNew[mode], tb.lastTotal)
			bytesNew[mode] = append(bytesNew[mode], time.Duration(read))
		}
	}
	for mode, name := range []string{"b2b", "spaced"} {
		b.ReportMetric(float64(median(ttfbLong[mode]).Microseconds())/1000, "ms-ttfb-"+name)
		b.ReportMetric(float64(median(ttfbNew[mode]).Microseconds())/1000, "ms-ttfb-"+name+"-new-thread")
		b.ReportMetric(float64(median(totalLong[mode]).Microseconds())/1000, "ms-run-total-"+name)
		b.ReportMetric(float64(median(totalNew[mode]).Microseconds())/1000, "ms-run-total-"+name+"-new-thread")
		if srv != nil {
			b.ReportMetric(float64(median(bytesLong[mode])), "redis-B-read-"+name)
			b.ReportMetric(float64(median(bytesNew[mode])), "redis-B-read-"+name+"-new-thread")
		}
	}
	// Spaced, the long and new threads' runs alternate: the odd ones are the long thread's.
	var rest []time.Duration
	for i := 0; i < len(restLong[1]); i += 2 {
		rest = append(rest, restLong[1][i])
	}
	if srv != nil {
		b.ReportMetric(float64(median(rest)), "redis-B-read-after-first-byte-spaced")
	}
	var preludes []time.Duration
	for range 10 {
		d, _, _ := tb.prelude("t")
		preludes = append(preludes, d)
	}
	b.ReportMetric(float64(median(preludes).Microseconds())/1000, "ms-prelude-first-byte")
}
