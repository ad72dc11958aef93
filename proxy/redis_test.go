package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// newRedisStore opens a RedisStore on srv with a prefix of its own.
func newRedisStore(t testing.TB, srv *redistest.Server) *recorder.RedisStore {
	t.Helper()
	prefixes.Lock()
	prefixes.n++
	prefix := fmt.Sprintf("t%d", prefixes.n)
	prefixes.Unlock()
	s, err := recorder.NewRedisStore(context.Background(), recorder.RedisConfig{URL: srv.URL(), Prefix: prefix})
	if err != nil {
		t.Fatalf("NewRedisStore: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// prefixes gives every store of a test run its own key prefix.
var prefixes struct {
	sync.Mutex
	n int
}

// TestRedisEveryScenario is TestRunEveryScenario on a real redis-server, in both durability
// modes: every demo scenario round-trips byte for byte.
func TestRedisEveryScenario(t *testing.T) {
	srv := redistest.Start(t)
	t.Run("async", func(t *testing.T) { testEveryScenario(t, Config{Store: newRedisStore(t, srv)}) })
	t.Run("sync", func(t *testing.T) {
		testEveryScenario(t, Config{Store: newRedisStore(t, srv), Durability: recorder.DurabilitySync})
	})
}

// TestRedisConcurrentRuns runs 200 runs at once on 50 threads and checks that each is stored
// exactly once: seqs 1..N, nothing repeated, every run finished.
func TestRedisConcurrentRuns(t *testing.T) {
	srv := redistest.Start(t)
	store := newRedisStore(t, srv)
	agent := runtest.StartAgent(t)
	_, px := startProxy(t, agent.URL, Config{Store: store, AllowConcurrentRuns: true})
	const threads, perThread = 50, 4
	var wg sync.WaitGroup
	errs := make(chan error, threads*perThread)
	seen := make([]int, threads*perThread)
	for i := range threads * perThread {
		wg.Go(func() {
			thread, run := fmt.Sprintf("th-%d", i%threads), fmt.Sprintf("run-%d", i)
			var res *http.Response
			for attempt := 0; ; attempt++ {
				res = runtest.PostRun(t, context.Background(), px.URL, runtest.RunBody(thread, run, "bench", `,"events":30,"intervalMs":2`), nil)
				// 503 StoreUnavailable (with Retry-After) is the documented answer when Redis is
				// too slow to register a run, as on a 2-core machine running every test at once;
				// a client retries it. The run id is not consumed.
				if res.StatusCode != http.StatusServiceUnavailable || attempt == 20 {
					break
				}
				res.Body.Close()
				time.Sleep(50 * time.Millisecond)
			}
			defer res.Body.Close()
			if res.StatusCode != 200 {
				b, _ := io.ReadAll(res.Body)
				errs <- fmt.Errorf("run %s: status %d %s", run, res.StatusCode, b)
				return
			}
			frames, err := readFrames(t, res.Body)
			if err != nil {
				errs <- fmt.Errorf("run %s: %v", run, err)
			}
			seen[i] = len(dataFrames(frames))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range threads * perThread {
		thread, run := fmt.Sprintf("th-%d", i%threads), fmt.Sprintf("run-%d", i)
		r := runtest.WaitRunEnded(t, store, thread, run)
		evs := storedEvents(t, store, thread, run)
		if r.Status != recorder.StatusFinished || len(evs) != seen[i] || int64(len(evs)) != r.LastSeq || len(r.Gaps) != 0 {
			t.Fatalf("run %s: %+v with %d stored events, client saw %d", run, r, len(evs), seen[i])
		}
		for j, ev := range evs {
			if ev.Seq != int64(j+1) {
				t.Fatalf("run %s: stored seq %d at position %d", run, ev.Seq, j)
			}
		}
	}
}

// TestRedisPausedMidRun freezes Redis (SIGSTOP) for 5 s in the middle of a run: the client keeps
// receiving events live, and afterwards the store holds every event once, in order
// (docs/design.md F10, F11: go-redis timeout retries must not duplicate).
func TestRedisPausedMidRun(t *testing.T) {
	srv := redistest.Start(t)
	store := newRedisStore(t, srv)
	agent := runtest.StartAgent(t)
	h, px := startProxy(t, agent.URL, Config{Store: store})
	res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("t-pause", "r-pause", "bench", `,"events":700,"intervalMs":10`), nil)
	defer res.Body.Close()
	rd := sse.NewReader(res.Body, sse.Limits{})
	var got [][]byte
	var duringPause int
	paused, resumed := make(chan struct{}), make(chan struct{})
	go func() {
		time.Sleep(time.Second)
		srv.Stop()
		close(paused)
		time.Sleep(5 * time.Second)
		srv.Continue()
		close(resumed)
	}()
	for {
		f, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("client stream: %v", err)
		}
		if !f.HasData {
			continue
		}
		got = append(got, append([]byte(nil), f.Raw...))
		select {
		case <-resumed:
		case <-paused:
			duringPause++
		default:
		}
	}
	<-resumed
	if duringPause < 100 {
		t.Errorf("only %d events reached the client while Redis was frozen: the live path waited on the store", duringPause)
	}
	rep := agent.WaitReport(t, "r-pause")
	if !rep.Completed || len(got) != rep.EventsSent {
		t.Fatalf("client got %d events, agent sent %d (completed %v)", len(got), rep.EventsSent, rep.Completed)
	}
	redistest.WaitFor(t, 30*time.Second, "run recorded", func() bool {
		r, err := store.Run(context.Background(), "t-pause", "r-pause")
		return err == nil && r.Status == recorder.StatusFinished && r.LastSeq == int64(len(got))
	})
	evs := storedEvents(t, store, "t-pause", "r-pause")
	if len(evs) != len(got) {
		t.Fatalf("stored %d events, client saw %d", len(evs), len(got))
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) || string(ev.Frame) != string(got[i]) {
			t.Fatalf("stored event %d (seq %d) differs from what the client saw", i, ev.Seq)
		}
	}
	if st := h.writer.Stats(); st.HighWater < 100 || st.Dropped != 0 {
		t.Errorf("writer stats %+v: want events buffered during the freeze and nothing dropped", st)
	}
}

// TestRedisRestartedEmpty kills Redis and restarts it without data: the proxy reconnects and
// keeps serving new runs.
func TestRedisRestartedEmpty(t *testing.T) {
	srv := redistest.Start(t)
	store := newRedisStore(t, srv)
	agent := runtest.StartAgent(t)
	_, px := startProxy(t, agent.URL, Config{Store: store})
	run := func(thread, runID string) int {
		res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody(thread, runID, "chat"), nil)
		defer res.Body.Close()
		io.Copy(io.Discard, res.Body)
		return res.StatusCode
	}
	if code := run("t1", "r1"); code != 200 {
		t.Fatalf("first run: %d", code)
	}
	runtest.WaitRunEnded(t, store, "t1", "r1")
	srv.Kill()
	srv.Restart()
	n := 0
	redistest.WaitFor(t, 20*time.Second, "a run after the restart", func() bool {
		n++
		return run("t2", fmt.Sprintf("r-%d", n)) == 200
	})
	r := runtest.WaitRunEnded(t, store, "t2", fmt.Sprintf("r-%d", n))
	if r.Status != recorder.StatusFinished || len(storedEvents(t, store, "t2", r.RunID)) == 0 {
		t.Errorf("run after restart = %+v", r)
	}
	if _, err := store.Thread(context.Background(), "t1"); err == nil {
		t.Errorf("thread t1 survived a restart without persistence")
	}
}

// TestHostileIDsNeverReachRedis posts hostile thread and run ids and checks they are refused
// with 400 before any key is written (docs/design.md B6).
func TestHostileIDsNeverReachRedis(t *testing.T) {
	srv := redistest.Start(t)
	store := newRedisStore(t, srv)
	calls, upstream := countingUpstream(t)
	_, px := startProxy(t, upstream, Config{Store: store})
	rc := srv.Client(t)
	before := rc.DBSize(context.Background()).Val()
	for _, id := range []string{"a\nb", "{t}", "a}b", "a*", "a b", "x\x00", strings.Repeat("k", 10240), "a?", "[a]"} {
		for _, body := range []string{
			fmt.Sprintf(`{"threadId":%q,"runId":"r","messages":[]}`, id),
			fmt.Sprintf(`{"threadId":"t","runId":%q,"messages":[]}`, id),
		} {
			res := runtest.PostRun(t, t.Context(), px.URL, body, nil)
			if p := runtest.DecodeProblem(t, res); res.StatusCode != http.StatusBadRequest {
				t.Errorf("id %.20q: %d %s, want 400", id, res.StatusCode, p.Code)
			}
		}
	}
	if after := rc.DBSize(context.Background()).Val(); after != before {
		t.Errorf("DBSIZE went from %d to %d: a hostile id reached Redis", before, after)
	}
	if calls.Load() != 0 {
		t.Errorf("the agent was called %d times", calls.Load())
	}
}

// postStop posts a stop for threadID/runID to the proxy at base and expects it accepted (202).
func postStop(t *testing.T, base, threadID, runID string) {
	t.Helper()
	res, err := http.Post(base+"/agui/threads/"+threadID+"/runs/"+runID+"/stop", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("stop of %s/%s on %s = %d, want 202", threadID, runID, base, res.StatusCode)
	}
}

// TestRedisStopFromOtherReplica: a stop posted to replica B for a run that replica A pumps is
// carried by A's lease renewals (one batched renewal for all of A's runs on Redis), and A's
// client sees the run end as cancelled (its open message closed, RUN_FINISHED outcome
// cancelled) while its other run goes on.
func TestRedisStopFromOtherReplica(t *testing.T) {
	store := newRedisStore(t, redistest.Start(t))
	agent := startStepAgent(t)
	cfg := Config{Store: store, LeaseInterval: 50 * time.Millisecond, AllowConcurrentRuns: true}
	cfgA, cfgB := cfg, cfg
	cfgA.Node, cfgB.Node = "node-a", "node-b"
	_, pxA := startProxy(t, agent.URL, cfgA)
	_, pxB := startProxy(t, agent.URL, cfgB)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a stop never carried: fail, not hang
	defer cancel()
	stopped := runtest.PostRun(t, ctx, pxA.URL, runtest.RunBody("t-stop", "r-stop", "chat"), nil)
	defer stopped.Body.Close()
	other := runtest.PostRun(t, t.Context(), pxA.URL, runtest.RunBody("t-go-on", "r-go-on", "chat"), nil)
	defer other.Body.Close()
	waitRun(t, store, "t-stop", "r-stop")
	postStop(t, pxB.URL, "t-stop", "r-stop")
	fs, _ := readFrames(t, stopped.Body)
	if got := lastTypes(dataFrames(fs), 2); got != "TEXT_MESSAGE_END RUN_FINISHED" || !isCancelled(dataFrames(fs)) {
		t.Fatalf("the stopped run's stream ended with %s, want TEXT_MESSAGE_END then RUN_FINISHED outcome cancelled", got)
	}
	if r := runtest.WaitRunEnded(t, store, "t-stop", "r-stop"); r.Status != recorder.StatusCancelled || r.Detail != "" {
		t.Errorf("stopped run = %s %q, want cancelled", r.Status, r.Detail)
	}
	if r, err := store.Run(t.Context(), "t-go-on", "r-go-on"); err != nil || r.Status != recorder.StatusRunning || r.Node != "node-a" {
		t.Errorf("the other run = %+v, %v, want still running on node-a", r, err)
	}
	close(agent.emit)
	drain(other)
}

// leaseCounter is a RedisStore that counts, per run id, the lease renewals of the proxy's
// lease loop (RenewLeases), to tell them from the renewals carried by appends.
type leaseCounter struct {
	*recorder.RedisStore
	mu      sync.Mutex
	renewed map[string]int
}

func (c *leaseCounter) RenewLeases(ctx context.Context, node string, until time.Time, runs []recorder.RunRef) ([]recorder.LeaseOutcome, error) {
	c.mu.Lock()
	for _, r := range runs {
		c.renewed[r.RunID]++
	}
	c.mu.Unlock()
	return c.RedisStore.RenewLeases(ctx, node, until, runs)
}

func (c *leaseCounter) count(runID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.renewed[runID]
}

// TestRedisStreamingRunLeasedByAppends: on Redis, a run that streams holds its lease through
// its appends, so the lease loop leaves it alone while it renews a quiet run at every turn;
// the streaming run's lease stays current in the store, and a stop posted to another replica
// reaches it with its next append.
func TestRedisStreamingRunLeasedByAppends(t *testing.T) {
	srv := redistest.Start(t)
	store := &leaseCounter{RedisStore: newRedisStore(t, srv), renewed: map[string]int{}}
	streaming, quiet := startStepAgent(t), startStepAgent(t)
	const interval = 100 * time.Millisecond
	cfg := Config{Store: store, LeaseInterval: interval}
	cfgA, cfgB := cfg, cfg
	cfgA.Node, cfgB.Node = "node-a", "node-b"
	_, pxA := startProxy(t, streaming.URL, cfgA)
	_, pxB := startProxy(t, quiet.URL, cfgB)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resA := runtest.PostRun(t, ctx, pxA.URL, runtest.RunBody("t-a", "r-a", "chat"), nil)
	defer resA.Body.Close()
	resB := runtest.PostRun(t, ctx, pxB.URL, runtest.RunBody("t-b", "r-b", "chat"), nil)
	defer resB.Body.Close()
	waitRun(t, store, "t-a", "r-a")
	waitRun(t, store, "t-b", "r-b")
	// r-a streams an event every 10 ms while the loop turns eight times or more.
	for store.count("r-b") < 8 {
		select {
		case streaming.emit <- "w ":
		case <-ctx.Done():
			t.Fatal("the quiet run's lease was not renewed eight times in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := store.count("r-a"); n > 2 {
		t.Errorf("the lease loop renewed the streaming run %d times while it renewed the quiet one %d: its appends did not hold its lease", n, store.count("r-b"))
	}
	if r, err := store.Run(ctx, "t-a", "r-a"); err != nil || r.Node != "node-a" || r.LeaseUntil.Before(time.Now().Add(interval)) {
		t.Errorf("streaming run = node %q lease until %v (%v), want node-a and a lease at least one interval ahead", r.Node, r.LeaseUntil, err)
	}
	postStop(t, pxB.URL, "t-a", "r-a")
	renewedBefore := store.count("r-a")
	go func() { // keep r-a streaming until its stream ends
		for {
			select {
			case streaming.emit <- "w ":
				time.Sleep(10 * time.Millisecond)
			case <-ctx.Done():
				return
			}
		}
	}()
	fs, _ := readFrames(t, resA.Body)
	cancel()
	if !isCancelled(dataFrames(fs)) {
		t.Fatalf("the stopped run's stream ended with %s, want RUN_FINISHED outcome cancelled", lastTypes(dataFrames(fs), 2))
	}
	if n := store.count("r-a"); n > renewedBefore+1 {
		t.Errorf("the stop took %d lease-loop renewals of the streaming run to arrive, want it carried by an append", n-renewedBefore)
	}
	close(quiet.emit)
	drain(resB)
}
