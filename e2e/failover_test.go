package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// Failover run: the slow scenario's deltas, paced, held after failoverHold data frames until
// recording resumed and a second attacher joined, so part of the run streams after the
// failover.
const (
	failoverDeltas   = 300
	failoverInterval = 10 // ms between events
	failoverHold     = 250
	failoverKillAt   = 20 // events stored when the master is killed
	failoverThread   = "failover-thread"
	failoverRun      = "failover-run"
)

// timedFrame is an SSE frame with its arrival time.
type timedFrame struct {
	sseFrame
	at time.Time
}

// attachStream reads a thread attach on base until its end; ready is closed once its prelude
// ended (the replay_complete marker) or the stream failed.
type attachStream struct {
	frames []sseFrame
	err    error
	ready  chan struct{}
	done   chan struct{}
}

func startAttach(t *testing.T, base, threadID string) *attachStream {
	a := &attachStream{ready: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		once := sync.OnceFunc(func() { close(a.ready) })
		defer once()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"agui/threads/"+threadID+"/events", nil)
		if err != nil {
			a.err = err
			return
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			a.err = err
			return
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			a.err = fmt.Errorf("attach: status %d", res.StatusCode)
			return
		}
		a.frames, a.err = readSSEFrames(res.Body, func(f sseFrame) {
			if strings.Contains(f.Data, attach.EventReplayComplete) {
				once()
			}
		})
	}()
	return a
}

// failoverResult is what a failover scenario measured.
type failoverResult struct {
	resume   time.Duration // from the kill until the store held an event written after it
	stall    time.Duration // the longest pause between two events the run's client received (before the gate)
	lost     int           // events the client saw that the store lost (recorded as gaps)
	attached [2]int        // prelude events of the attacher before and after the failover
}

// proxyFailover runs one run through proxy a, attaches to its thread through proxy b before
// the failover and again after it, calls kill mid-run, and checks what clients got: the run's
// client reads the whole run to RUN_FINISHED; every event it saw is stored, or lies in a gap
// the store records and b's runs endpoint reports (never silently missing); both attachers end
// with a correct stream (the client's messages and state, and after the prelude exactly the
// client's events after the cursor) when nothing was lost.
func proxyFailover(t *testing.T, newStore func() *recorder.RedisStore, kill func(threadID string)) failoverResult {
	gate := &gatedAgent{agent: demoagent.New(demoagent.Config{}), hold: failoverHold, open: make(chan struct{})}
	agent := httptest.NewServer(gate)
	t.Cleanup(agent.Close)
	check := newStore()
	a := startProxy(t, agent.URL+"/", newStore())
	b := startProxy(t, agent.URL+"/", newStore())
	openGate := sync.OnceFunc(func() { close(gate.open) })
	t.Cleanup(openGate) // before the proxies' shutdown: a held run would delay it

	body := fmt.Sprintf(`{"threadId":%q,"runId":%q,"state":{},"tools":[],"context":[],`+
		`"messages":[{"id":"u1","role":"user","content":"go"}],"forwardedProps":{"scenario":"slow","events":%d,"intervalMs":%d}}`,
		failoverThread, failoverRun, failoverDeltas, failoverInterval)
	res := runtest.PostRun(t, t.Context(), a, body, nil)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST run to proxy A: status %d", res.StatusCode)
	}
	var live []timedFrame
	liveDone := make(chan error, 1)
	go func() {
		_, err := readSSEFrames(res.Body, func(f sseFrame) { live = append(live, timedFrame{f, time.Now()}) })
		liveDone <- err
	}()

	waitRunProgress(t, b, failoverThread, failoverRun, failoverKillAt)
	before := startAttach(t, b, failoverThread)
	<-before.ready
	ctx := t.Context()
	mark, err := check.Run(ctx, failoverThread, failoverRun)
	if err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	kill(failoverThread)
	var out failoverResult
	redistest.WaitFor(t, 60*time.Second, "recording to resume after the kill", func() bool {
		cur, err := check.Run(ctx, failoverThread, failoverRun)
		if err == nil && cur.LastSeq > mark.LastSeq {
			out.resume = time.Since(killedAt)
			return true
		}
		return false
	})
	after := startAttach(t, b, failoverThread)
	<-after.ready
	openGate()
	if err := <-liveDone; err != nil {
		t.Fatalf("reading the run's stream from proxy A: %v", err)
	}
	<-before.done
	<-after.done

	// The run's client got the whole run.
	frames := make([]sseFrame, len(live))
	deltas := 0
	for i, f := range live {
		frames[i] = f.sseFrame
		if i > 0 && i < failoverHold { // from the gate on, the pause is the test's
			out.stall = max(out.stall, f.at.Sub(live[i-1].at))
		}
		if strings.Contains(f.Data, `"TEXT_MESSAGE_CONTENT"`) {
			deltas++
		}
	}
	if len(frames) == 0 || !strings.Contains(frames[len(frames)-1].Data, `"RUN_FINISHED"`) || deltas != failoverDeltas {
		t.Fatalf("the run's client got %d events, %d deltas, ending %v; want %d deltas and RUN_FINISHED", len(frames), deltas, frames[len(frames)-1:], failoverDeltas)
	}
	// Every event the client saw is stored, or in a recorded gap, and B reports those gaps.
	run := waitEnded(t, check, failoverThread, failoverRun)
	stored, err := check.Events(ctx, failoverThread, failoverRun, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	bySeq := map[int64]string{}
	for _, e := range stored {
		if _, dup := bySeq[e.Seq]; dup {
			t.Errorf("seq %d stored twice", e.Seq)
		}
		bySeq[e.Seq] = string(e.Frame)
	}
	inGap := func(seq int64) bool {
		for _, g := range run.Gaps {
			if g.From <= seq && seq <= g.To {
				return true
			}
		}
		return false
	}
	for _, f := range frames {
		c, err := recorder.ParseCursor(f.ID)
		if err != nil {
			t.Fatalf("client event id %q: %v", f.ID, err)
		}
		frame, ok := bySeq[c.Seq]
		switch {
		case ok && inGap(c.Seq):
			t.Errorf("seq %d stored and reported lost", c.Seq)
		case ok && !strings.Contains(frame, f.Data):
			t.Errorf("seq %d stored as %q, the client saw %q", c.Seq, frame, f.Data)
		case !ok && !inGap(c.Seq):
			t.Errorf("seq %d the client saw is neither stored nor in a recorded gap (gaps %v)", c.Seq, run.Gaps)
		case !ok:
			out.lost++
		}
	}
	if view := runsView(t, b, failoverThread); !slices.Equal(view, run.Gaps) {
		t.Errorf("proxy B reports gaps %v, the store holds %v", view, run.Gaps)
	}
	// Both attachers on B: a correct prelude, then exactly the client's events after its
	// cursor (when the failover lost nothing; else the gaps above are what B reports).
	wantMsgs, wantState, err := replayFrames(frames)
	if err != nil {
		t.Fatalf("replaying the client's stream: %v", err)
	}
	index := map[string]int{}
	for i, f := range frames {
		index[f.ID] = i
	}
	for i, at := range []*attachStream{before, after} {
		if at.err != nil {
			t.Errorf("attacher %d on proxy B: %v", i, at.err)
			continue
		}
		prelude, tail, cursor, ok := splitPrelude(at.frames)
		from, known := index[cursor]
		if !ok || !known {
			t.Errorf("attacher %d: replay_complete %v at cursor %q, not an event of the run", i, ok, cursor)
			continue
		}
		out.attached[i] = len(prelude)
		if out.lost > 0 {
			continue
		}
		if want := frames[from+1:]; !slices.Equal(tail, want) {
			t.Errorf("attacher %d: after the prelude got %d events, want the client's %d after %s", i, len(tail), len(want), cursor)
		}
		if msgs, state, err := replayFrames(at.frames); err != nil || msgs != wantMsgs || state != wantState {
			t.Errorf("attacher %d: replay = %s, %s, %v; want the client's %s, %s", i, msgs, state, err, wantMsgs, wantState)
		}
	}
	t.Logf("recording resumed %v after the kill; the client's longest pause between events %v; %d events lost (recorded as gaps %v); attachers' preludes %v events",
		out.resume.Round(time.Millisecond), out.stall.Round(time.Millisecond), out.lost, run.Gaps, out.attached)
	return out
}

// waitEnded waits until the run's end is stored.
func waitEnded(t *testing.T, s recorder.Store, threadID, runID string) recorder.Run {
	t.Helper()
	var run recorder.Run
	redistest.WaitFor(t, 60*time.Second, "the run's end to be stored", func() bool {
		r, err := s.Run(t.Context(), threadID, runID)
		if err == nil && r.Status != recorder.StatusRunning {
			run = r
			return true
		}
		return false
	})
	return run
}

// runsView returns the gaps base's runs endpoint reports for the run.
func runsView(t *testing.T, base, threadID string) []recorder.Gap {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"agui/threads/"+threadID+"/runs", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var tree attach.RunsView
	if err := json.NewDecoder(res.Body).Decode(&tree); err != nil {
		t.Fatal(err)
	}
	for _, r := range tree.Runs {
		if r.RunID == failoverRun {
			return r.Gaps
		}
	}
	t.Fatalf("run %s not in %+v", failoverRun, tree)
	return nil
}

// TestProxyFailoverClusterMaster kills the Redis Cluster master holding a running run's
// thread: its replica is promoted, the run completes to its client through proxy A, and
// attachers on proxy B (one from before the failover, one from after) get correct streams.
func TestProxyFailoverClusterMaster(t *testing.T) {
	c := redistest.StartCluster(t)
	proxyFailover(t, func() *recorder.RedisStore {
		return newFailoverStore(t, recorder.RedisConfig{ClusterAddrs: c.Addrs()})
	}, func(threadID string) {
		m, err := c.MasterOf(t.Context(), "e2e:{"+threadID+"}:thread")
		if err != nil {
			t.Fatal(err)
		}
		m.Kill()
	})
}

// TestProxyFailoverSentinel is TestProxyFailoverClusterMaster on a master + replica watched by
// three sentinels: the master is killed and the sentinels promote the replica.
func TestProxyFailoverSentinel(t *testing.T) {
	sn := redistest.StartSentinel(t)
	proxyFailover(t, func() *recorder.RedisStore {
		return newFailoverStore(t, recorder.RedisConfig{SentinelAddrs: sn.SentinelAddrs(), SentinelMaster: redistest.SentinelMaster})
	}, func(string) {
		m, err := sn.Master(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		m.Kill()
	})
}

// newFailoverStore opens a store on the test's topology with the package's prefix and a short
// FollowBlock (see twoReplicas), closed when the test ends.
func newFailoverStore(t *testing.T, cfg recorder.RedisConfig) *recorder.RedisStore {
	t.Helper()
	cfg.Prefix, cfg.FollowBlock = "e2e", 100*time.Millisecond
	st, err := recorder.NewRedisStore(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewRedisStore = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
