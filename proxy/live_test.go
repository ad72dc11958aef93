package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/live"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// stepAgent is an AG-UI agent on a real socket whose run emits an event each time the test
// asks: RUN_STARTED and TEXT_MESSAGE_START at once, then one TEXT_MESSAGE_CONTENT per value
// sent on emit, then TEXT_MESSAGE_END and RUN_FINISHED when emit is closed.
type stepAgent struct {
	*httptest.Server
	emit chan string
}

func startStepAgent(t *testing.T) *stepAgent {
	t.Helper()
	a := &stepAgent{emit: make(chan string)}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ ThreadID, RunID string }
		json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		send := func(v map[string]any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			rc.Flush()
		}
		send(map[string]any{"type": agui.RunStarted, "threadId": in.ThreadID, "runId": in.RunID})
		send(map[string]any{"type": agui.TextMessageStart, "messageId": "m", "role": "assistant"})
		for {
			select {
			case d, ok := <-a.emit:
				if !ok {
					send(map[string]any{"type": agui.TextMessageEnd, "messageId": "m"})
					send(map[string]any{"type": agui.RunFinished, "threadId": in.ThreadID, "runId": in.RunID})
					return
				}
				send(map[string]any{"type": agui.TextMessageContent, "messageId": "m", "delta": d})
			case <-r.Context().Done():
				return
			}
		}
	}))
	t.Cleanup(a.Close)
	return a
}

// seqReader reads the event seqs of an SSE stream.
type seqReader struct {
	t   testing.TB
	rd  *sse.Reader
	res *http.Response
}

func newSeqReader(t testing.TB, res *http.Response) *seqReader {
	return &seqReader{t: t, rd: sse.NewReader(res.Body, sse.Limits{}), res: res}
}

// next returns the next event's seq and type (comments and events without an id skipped).
func (r *seqReader) next() (int64, string, error) {
	for {
		f, err := r.rd.Next()
		if err != nil {
			return 0, "", err
		}
		if !f.HasData || f.ID == "" {
			continue
		}
		c, err := recorder.ParseCursor(f.ID)
		if err != nil {
			return 0, "", err
		}
		typ, _ := agui.EventType(f.Data)
		return c.Seq, typ, nil
	}
}

// until reads up to and including seq want; it fails on a gap or a repeat.
func (r *seqReader) until(want, last int64) int64 {
	r.t.Helper()
	for last < want {
		seq, _, err := r.next()
		if err != nil {
			r.t.Fatalf("reading to seq %d after %d: %v", want, last, err)
		}
		if seq != last+1 {
			r.t.Fatalf("seq %d after %d: a gap or a repeat", seq, last)
		}
		last = seq
	}
	return last
}

// toEnd reads to the run's terminal event and returns every seq it read.
func (r *seqReader) toEnd() ([]int64, error) {
	var out []int64
	for {
		seq, typ, err := r.next()
		if err != nil {
			return out, err
		}
		out = append(out, seq)
		if agui.IsTerminal(typ) {
			return out, nil
		}
	}
}

// drain reads a stream to its end in the background (the POSTing client keeps up).
func drain(res *http.Response) {
	go func() {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}()
}

// attachRun opens the run attach stream of thread/run on px, after cursor seq `after` (0:
// from the start).
func attachRun(t testing.TB, ctx context.Context, px, thread string, run recorder.Run, after int64) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, px+"/agui/threads/"+thread+"/runs/"+run.RunID+"/events", nil)
	if after > 0 {
		req.Header.Set("Last-Event-ID", recorder.Cursor{RunID: run.RunID, Epoch: run.Epoch, Seq: after}.String())
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("attach: %d %s", res.StatusCode, b)
	}
	return res
}

// waitRun waits until the store knows the run (it is created before the agent is called).
func waitRun(t testing.TB, store recorder.Store, thread, run string) recorder.Run {
	t.Helper()
	var r recorder.Run
	redistest.WaitFor(t, 30*time.Second, "the run in the store", func() bool {
		var err error
		r, err = store.Run(context.Background(), thread, run)
		return err == nil
	})
	return r
}

// TestLiveAttacherDoesNotWaitForStore: an attacher on the replica that pumps the run reads the
// pump's hub, so it receives an event while Redis is frozen (SIGSTOP) and cannot have stored
// it. Afterwards it has every event once, in order.
func TestLiveAttacherDoesNotWaitForStore(t *testing.T) {
	srv := redistest.Start(t)
	store := newRedisStore(t, srv)
	agent := startStepAgent(t)
	h, px := startProxy(t, agent.URL, Config{Store: store})
	res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("t-live", "r-live", "chat"), nil)
	drain(res)
	run := waitRun(t, store, "t-live", "r-live")
	att := attachRun(t, t.Context(), px.URL, "t-live", run, 0)
	defer att.Body.Close()
	rd := newSeqReader(t, att)
	last := rd.until(2, 0) // RUN_STARTED, TEXT_MESSAGE_START
	agent.emit <- "a"
	last = rd.until(3, last)

	// Only the hub can deliver seq 4: Redis is frozen.
	last = untilWhileFrozen(t, srv, rd, 4, last, func() { agent.emit <- "b" },
		"the attacher did not get the event while Redis was frozen: it waits for the store")

	agent.emit <- "c"
	close(agent.emit)
	rest, err := rd.toEnd()
	if err != nil {
		t.Fatalf("after seq %d: %v", last, err)
	}
	if want := "[5 6 7]"; fmt.Sprint(rest) != want {
		t.Errorf("attacher read %v after seq 4, want %s", rest, want)
	}
	if r := runtest.WaitRunEnded(t, store, "t-live", "r-live"); r.LastSeq != 7 || len(storedEvents(t, store, "t-live", "r-live")) != 7 {
		t.Errorf("stored run %+v, want 7 events", r)
	}
	// The run's hub is reclaimed when its pump ends.
	redistest.WaitFor(t, 30*time.Second, "the run's hub to be released", func() bool {
		return h.threads.Live().Local("t-live", "r-live") == nil
	})
}

// TestClientNotHeldByFullRecorder: in async durability the pump writes an event to its clients
// before it hands it to the recorder, so a full recorder buffer (Redis frozen by SIGSTOP, a
// buffer of one event) slows the run without holding back the event the pump has read: the
// client has it while the pump waits for room. Nothing is dropped: once Redis is back the run
// goes on and every event is stored.
func TestClientNotHeldByFullRecorder(t *testing.T) {
	srv := redistest.Start(t)
	store := newRedisStore(t, srv)
	agent := startStepAgent(t)
	_, px := startProxy(t, agent.URL, Config{Store: store, RecorderBuffer: 1, RecorderFullWait: 10 * time.Minute, RecorderLinger: -1})
	res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("t-full", "r-full", "chat"), nil)
	defer res.Body.Close()
	rd := newSeqReader(t, res)
	last := rd.until(2, 0) // RUN_STARTED, TEXT_MESSAGE_START
	agent.emit <- "a"
	last = rd.until(3, last)
	redistest.WaitFor(t, 30*time.Second, "events 1-3 to be stored", func() bool {
		return len(storedEvents(t, store, "t-full", "r-full")) == 3
	})

	last = untilWhileFrozen(t, srv, rd, 5, last, func() {
		agent.emit <- "b" // seq 4: the buffer's one event, its write stuck on the frozen Redis
		agent.emit <- "c" // seq 5: the buffer is full; the pump waits for room once it wrote it
	}, "the client did not get the event the pump read while the recorder's buffer was full")

	close(agent.emit)
	rest, err := rd.toEnd()
	if err != nil {
		t.Fatalf("after seq %d: %v", last, err)
	}
	if want := "[6 7]"; fmt.Sprint(rest) != want {
		t.Errorf("client read %v after seq 5, want %s", rest, want)
	}
	r := runtest.WaitRunEnded(t, store, "t-full", "r-full")
	if evs := storedEvents(t, store, "t-full", "r-full"); r.LastSeq != 7 || len(evs) != 7 || len(r.Gaps) != 0 {
		t.Errorf("stored run %+v with %d events, want 7 events and no gap", r, len(evs))
	}
}

// untilWhileFrozen freezes Redis (SIGSTOP), runs send, and reads rd to seq want (from last);
// Redis is thawed before it returns, whatever happens. It fails the test with failure when
// want does not arrive within a liveness bound far above any delivery time.
func untilWhileFrozen(t *testing.T, srv *redistest.Server, rd *seqReader, want, last int64, send func(), failure string) int64 {
	t.Helper()
	srv.Stop()
	defer srv.Continue()
	send()
	got := make(chan int64, 1)
	go func() { got <- rd.until(want, last) }()
	select {
	case last = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal(failure)
	}
	return last
}

// redisCommands returns the commands the Redis server processed so far (INFO stats).
func redisCommands(t testing.TB, srv *redistest.Server) int64 {
	t.Helper()
	info, err := srv.Client(t).Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "total_commands_processed:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO stats without total_commands_processed")
	return 0
}

// TestLiveCrossReplicaSharedFollower: attachers on replica B of a run pumped by replica A (one
// Redis) are fed by one store follower on B, so the Redis commands per event do not depend on
// their number: 100 attachers cost what 1 does. Every attacher gets every event once.
func TestLiveCrossReplicaSharedFollower(t *testing.T) {
	srv := redistest.Start(t)
	replica := func() *recorder.RedisStore {
		s, err := recorder.NewRedisStore(context.Background(), recorder.RedisConfig{URL: srv.URL(), Prefix: "fan"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	storeA, storeB := replica(), replica()
	// Leases are renewed rarely here, so that the count below is the events' own.
	cfg := Config{LeaseInterval: time.Hour, HeartbeatInterval: time.Hour}
	const events = 40
	perEvent := map[int]float64{}
	for _, attachers := range []int{1, 100} {
		agent := startStepAgent(t)
		cfgA, cfgB := cfg, cfg
		cfgA.Store, cfgB.Store = storeA, storeB
		_, pxA := startProxy(t, agent.URL, cfgA)
		hB, pxB := startProxy(t, agent.URL, cfgB)
		thread, runID := fmt.Sprintf("t-fan-%d", attachers), "r"
		res := runtest.PostRun(t, t.Context(), pxA.URL, runtest.RunBody(thread, runID, "chat"), nil)
		drain(res)
		run := waitRun(t, storeB, thread, runID)
		readers := make([]*seqReader, attachers)
		for i := range readers {
			att := attachRun(t, t.Context(), pxB.URL, thread, run, 0)
			defer att.Body.Close()
			readers[i] = newSeqReader(t, att)
			readers[i].until(2, 0)
		}
		if f := hB.threads.Live().Followers(); f != 1 {
			t.Errorf("%d attachers on replica B: %d store followers there, want 1", attachers, f)
		}
		before := redisCommands(t, srv)
		var wg sync.WaitGroup
		for _, rd := range readers {
			wg.Go(func() { rd.until(2+events, 2) })
		}
		for i := range events {
			agent.emit <- strconv.Itoa(i)
		}
		wg.Wait()
		used := redisCommands(t, srv) - before - 1 // the INFO itself
		perEvent[attachers] = float64(used) / events
		t.Logf("%d attachers on replica B: %d Redis commands for %d events (%.2f per event)", attachers, used, events, perEvent[attachers])
		close(agent.emit)
		for _, rd := range readers {
			if rest, err := rd.toEnd(); err != nil || len(rest) != 2 {
				t.Fatalf("the end of the run: %v, %v", rest, err)
			}
		}
		runtest.WaitRunEnded(t, storeA, thread, runID)
		redistest.WaitFor(t, 30*time.Second, "replica B's follower to stop", func() bool { return hB.threads.Live().Followers() == 0 })
	}
	// Batching varies with timing; a cost per attacher would be 100 times larger.
	if perEvent[100] > 2*perEvent[1]+2 {
		t.Errorf("Redis commands per event: %.2f with 100 attachers, %.2f with 1: they grow with the attachers", perEvent[100], perEvent[1])
	}
}

// TestLiveSeamRandomCuts: attachers resume a running run from random event ids (Last-Event-ID
// on the run attach) while the store lags the pump by up to a batch, with events larger than
// the hub's backlog holds many of, so both sides of the seam (the hub's backlog, and the store
// for what it no longer holds) are used. Each gets every event after its cut exactly once.
func TestLiveSeamRandomCuts(t *testing.T) {
	for _, name := range []string{"memory", "redis"} {
		t.Run(name, func(t *testing.T) {
			var store recorder.Store = recorder.NewMemoryStore(recorder.MemoryConfig{})
			if name == "redis" {
				store = newRedisStore(t, redistest.Start(t))
			}
			agent := startStepAgent(t)
			_, px := startProxy(t, agent.URL, Config{Store: store})
			res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("t-seam", "r-seam", "chat"), nil)
			drain(res)
			run := waitRun(t, store, "t-seam", "r-seam")
			rng := rand.New(rand.NewPCG(3, 4))
			pad := strings.Repeat("x", 1500) // ~10 events fill the hub's backlog
			const total, resumers = 80, 40
			var wg sync.WaitGroup
			errs := make(chan error, resumers)
			published := int64(2)
			for i := range resumers {
				for range rng.IntN(4) {
					agent.emit <- pad
					published++
				}
				cut := rng.Int64N(published + 1)
				att := attachRun(t, t.Context(), px.URL, "t-seam", run, cut)
				wg.Go(func() {
					defer att.Body.Close()
					got, err := newSeqReader(t, att).toEnd()
					if err == nil {
						for j, seq := range got {
							if seq != cut+int64(j)+1 {
								err = fmt.Errorf("resumer %d after %d: seq %d at position %d", i, cut, seq, j)
								break
							}
						}
					}
					if err == nil && (len(got) == 0 || got[len(got)-1] != total+4) {
						err = fmt.Errorf("resumer %d after %d: ended at %v, want seq %d", i, cut, got, total+4)
					}
					errs <- err
				})
			}
			for published < total+2 {
				agent.emit <- pad
				published++
			}
			close(agent.emit) // TEXT_MESSAGE_END, RUN_FINISHED: seqs total+3, total+4
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestLiveBacklogKeepsOnlyUnstored: the run's hub lets go of the events the recorder has
// stored (an attacher reads those from the store), so an idle stream holds an event or two in
// memory instead of its latest 16 KiB. TestLiveAttacherDoesNotWaitForStore covers the other
// side: events the store does not have yet stay in the backlog.
func TestLiveBacklogKeepsOnlyUnstored(t *testing.T) {
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	agent := startStepAgent(t)
	h, px := startProxy(t, agent.URL, Config{Store: store})
	res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("t-backlog", "r-backlog", "chat"), nil)
	go drain(res)
	pad := strings.Repeat("x", 1000)
	for range 10 {
		agent.emit <- pad
	}
	// RUN_STARTED, TEXT_MESSAGE_START and 10 contents: seq 12 is the last.
	redistest.WaitFor(t, 30*time.Second, "12 events stored", func() bool {
		return len(storedEvents(t, store, "t-backlog", "r-backlog")) == 12
	})
	agent.emit <- pad // published once the 12 are stored: the hub forgets them
	redistest.WaitFor(t, 30*time.Second, "13 events stored", func() bool {
		return len(storedEvents(t, store, "t-backlog", "r-backlog")) == 13
	})
	h.runs.mu.Lock()
	rn := h.runs.runs[runKey("t-backlog", "r-backlog")]
	h.runs.mu.Unlock()
	if rn == nil {
		t.Fatal("run not live")
	}
	sub, gapEnd := rn.hub.Subscribe(0, live.Options{})
	sub.Close()
	if gapEnd < 12 {
		t.Errorf("a subscriber from the start gets events 1..%d from the store and the rest from the hub's backlog: the backlog still holds stored events", gapEnd)
	}
	close(agent.emit)
	runtest.WaitRunEnded(t, store, "t-backlog", "r-backlog")
}

// TestLiveFollowThreadShared: 20 ?follow=1 thread attachers of one thread share one reader of
// the thread's latest run, and each streams the thread's next run live to its end.
func TestLiveFollowThreadShared(t *testing.T) {
	agent := runtest.StartAgent(t)
	h, px := startProxy(t, agent.URL, Config{AttachFollowPoll: 20 * time.Millisecond})
	res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("t-follow", "r1", "chat"), nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	runtest.WaitRunEnded(t, h.Store(), "t-follow", "r1")
	const followers = 20
	var wg sync.WaitGroup
	errs := make(chan error, followers)
	for range followers {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, px.URL+"/agui/threads/t-follow/events?follow=1", nil)
		att, err := http.DefaultClient.Do(req)
		if err != nil || att.StatusCode != http.StatusOK {
			t.Fatalf("follow attach: %v %v", att, err)
		}
		rd := sse.NewReader(att.Body, sse.Limits{})
		for { // the prelude, to its marker
			f, err := rd.Next()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(f.Data), "agui-proxy.replay_complete") {
				break
			}
		}
		wg.Go(func() {
			defer att.Body.Close()
			var types []string
			for {
				f, err := rd.Next()
				if err != nil {
					errs <- fmt.Errorf("after %v: %w", types, err)
					return
				}
				if !f.HasData || !strings.HasPrefix(f.ID, "r2:") {
					continue // a heartbeat, or the prelude's trailing RUN_FINISHED of r1
				}
				typ, _ := agui.EventType(f.Data)
				types = append(types, typ)
				if agui.IsTerminal(typ) {
					if types[0] != agui.RunStarted || !strings.Contains(f.ID, "r2:") || typ != agui.RunFinished {
						errs <- fmt.Errorf("followed %v ending at id %q, want run r2 from RUN_STARTED to RUN_FINISHED", types, f.ID)
					}
					return
				}
			}
		})
	}
	redistest.WaitFor(t, 30*time.Second, "the followers' watch", func() bool { return h.threads.Live().Watches() == 1 })
	res = runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("t-follow", "r2", "chat"), nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestShutdownEndsSharedFollowers: replica B's attachers of a run pumped by replica A (one
// store) are fed by B's shared follower, and a ?follow=1 thread attach by B's thread watch;
// B's Shutdown stops both and waits for their goroutines, so the attachers' streams end (cut
// before the terminal event: the clients resume elsewhere) while the run goes on at A, and a
// later attach to B gets what the store holds and ends instead of starting a new follower.
func TestShutdownEndsSharedFollowers(t *testing.T) {
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	agent := startStepAgent(t)
	cfg := Config{Store: store, HeartbeatInterval: time.Hour, AttachFollowPoll: 20 * time.Millisecond}
	_, pxA := startProxy(t, agent.URL, cfg)
	hB, pxB := startProxy(t, agent.URL, cfg)
	res := runtest.PostRun(t, t.Context(), pxA.URL, runtest.RunBody("t-shut", "r", "chat"), nil)
	defer drain(res)
	run := waitRun(t, store, "t-shut", "r")
	att := attachRun(t, t.Context(), pxB.URL, "t-shut", run, 0)
	defer att.Body.Close()
	rd := newSeqReader(t, att)
	rd.until(2, 0)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, pxB.URL+"/agui/threads/t-shut/events?follow=1", nil)
	follow, err := http.DefaultClient.Do(req)
	if err != nil || follow.StatusCode != http.StatusOK {
		t.Fatalf("follow attach: %v %v", follow, err)
	}
	defer follow.Body.Close()
	if f := hB.threads.Live().Followers(); f != 1 {
		t.Fatalf("%d shared followers on replica B, want 1", f)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := hB.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if f, w := hB.threads.Live().Followers(), hB.threads.Live().Watches(); f != 0 || w != 0 {
		t.Fatalf("after Shutdown: %d shared followers and %d thread watches on replica B, want none", f, w)
	}
	if rest, err := rd.toEnd(); !errors.Is(err, io.EOF) || len(rest) != 0 {
		t.Errorf("run attach after B's Shutdown: %v, %v; want its stream cut, with no more events", rest, err)
	}
	if _, err := io.Copy(io.Discard, follow.Body); err != nil {
		t.Errorf("follow attach after B's Shutdown: %v; want its stream ended", err)
	}
	late, err := http.Get(pxB.URL + "/agui/threads/t-shut/runs/r/events")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, late.Body); err != nil {
		t.Errorf("attach to B after its Shutdown: %v", err)
	}
	late.Body.Close()
	if f := hB.threads.Live().Followers(); f != 0 {
		t.Errorf("an attach after Shutdown started a shared follower")
	}
	close(agent.emit) // the run ends at A, unaffected
	runtest.WaitRunEnded(t, store, "t-shut", "r")
}
