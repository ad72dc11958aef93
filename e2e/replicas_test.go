package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// twoReplicas starts a private redis-server and two proxies in front of upstream, each with
// its own RedisStore (own clients and pools) on the same key prefix: two replicas of one
// deployment. It returns their URLs. FollowBlock is short because a Redis live tail notices
// a run's end only after that much quiet (the attach streams close up to FollowBlock after
// the terminal event), which at the 1 s default doubles this package's run time.
func twoReplicas(t testing.TB, upstream string) (a, b string) {
	t.Helper()
	srv := redistest.Start(t)
	var urls [2]string
	for i := range urls {
		st, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{URL: srv.URL(), Prefix: "e2e", FollowBlock: 100 * time.Millisecond})
		if err != nil {
			t.Fatalf("NewRedisStore(%s) error = %v", srv.URL(), err)
		}
		t.Cleanup(func() { st.Close() }) // runs after the proxy's Shutdown (cleanups are LIFO)
		urls[i] = startProxy(t, upstream, st)
	}
	return urls[0], urls[1]
}

// twoClusterReplicas is twoReplicas on a private 3-master, 3-replica Redis Cluster: each
// proxy's store reaches it through seed addresses.
func twoClusterReplicas(t testing.TB, upstream string) (a, b string) {
	t.Helper()
	c := redistest.StartCluster(t)
	var urls [2]string
	for i := range urls {
		st, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{ClusterAddrs: c.Addrs(), Prefix: "e2e", FollowBlock: 100 * time.Millisecond})
		if err != nil {
			t.Fatalf("NewRedisStore(cluster %v) error = %v", c.Addrs(), err)
		}
		t.Cleanup(func() { st.Close() })
		urls[i] = startProxy(t, upstream, st)
	}
	return urls[0], urls[1]
}

// TestResumeAcrossReplicasCluster is TestResumeAcrossReplicas with both proxies on Redis
// Cluster: B serves the prelude from the cluster and A's live tail through the Cluster tail
// (per-slot reads).
func TestResumeAcrossReplicasCluster(t *testing.T) {
	requireOfficialClient(t)
	a, b := twoClusterReplicas(t, startDemo(t))
	scen := harnessScenarios()
	out, err := runResumeHarness(t, a, b, scen)
	requireResumed(t, "resume-scenarios(replica A, reattach on B, Redis Cluster)", scen, out, err)
}

// TestResumeAcrossReplicas is the cross-replica resume (docs/design.md F1): the official client runs every scenario
// through replica A, is cut after K events, and reattaches through replica B (both ways,
// live and after the run ended); B serves the prelude and A's live tail from Redis.
func TestResumeAcrossReplicas(t *testing.T) {
	requireOfficialClient(t)
	a, b := twoReplicas(t, startDemo(t))
	scen := harnessScenarios()
	out, err := runResumeHarness(t, a, b, scen)
	requireResumed(t, "resume-scenarios(replica A, reattach on B)", scen, out, err)
}

// gatedAgent serves the demo agent but holds every response after its first hold events until
// open is closed, so a test can attach while a run is in a known position.
type gatedAgent struct {
	agent http.Handler
	hold  int
	open  chan struct{}
}

func (g *gatedAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.agent.ServeHTTP(&gatedWriter{ResponseWriter: w, g: g, ctx: r.Context()}, r)
}

type gatedWriter struct {
	http.ResponseWriter
	g      *gatedAgent
	ctx    context.Context
	events int
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("data:")) {
		if w.events == w.g.hold {
			select {
			case <-w.g.open:
			case <-w.ctx.Done():
				return 0, w.ctx.Err()
			}
		}
		w.events++
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the real writer's Flush.
func (w *gatedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sseFrame is one dispatched SSE event: its id field and data.
type sseFrame struct {
	ID   string
	Data string
}

// readSSEFrames reads an SSE body to its end, calling each (if not nil) on every event.
func readSSEFrames(body io.Reader, each func(sseFrame)) ([]sseFrame, error) {
	rd := sse.NewReader(body, sse.Limits{})
	var out []sseFrame
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if !f.HasData {
			continue
		}
		fr := sseFrame{ID: f.ID, Data: string(f.Data)}
		out = append(out, fr)
		if each != nil {
			each(fr)
		}
	}
}

// replayFrames applies frames like the official client and returns the final messages and state.
func replayFrames(frames []sseFrame) (messages, state string, err error) {
	evs := make([]compact.Event, 0, len(frames))
	for _, f := range frames {
		e, err := compact.ParseEvent([]byte(f.Data))
		if err != nil {
			return "", "", fmt.Errorf("event %q: %w", f.Data, err)
		}
		evs = append(evs, e)
	}
	m, s, err := compact.Replay(evs)
	return string(m), string(s), err
}

// splitPrelude splits an attach stream at the end of its prelude: the
// agui-proxy.replay_complete event, then the events that re-open streams open at its cursor
// (they carry no id or the cursor's). It returns the prelude, the tail (the raw events after
// the cursor) and the cursor; ok is false without a marker.
func splitPrelude(frames []sseFrame) (prelude, tail []sseFrame, cursor string, ok bool) {
	for i, f := range frames {
		var e struct {
			Type, Name string
			Value      struct{ Cursor string }
		}
		if json.Unmarshal([]byte(f.Data), &e) != nil || e.Type != "CUSTOM" || e.Name != attach.EventReplayComplete {
			continue
		}
		j := i + 1
		for j < len(frames) && (frames[j].ID == "" || frames[j].ID == e.Value.Cursor) {
			j++
		}
		return frames[:j], frames[j:], e.Value.Cursor, true
	}
	return frames, nil, "", false
}

// runProgress returns the run's status and event count as the history endpoint of base says.
func runProgress(ctx context.Context, base, threadID, runID string) (string, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"agui/threads/"+threadID+"/runs", nil)
	if err != nil {
		return "", 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer res.Body.Close()
	var tree attach.RunsView
	if err := json.NewDecoder(res.Body).Decode(&tree); err != nil {
		return "", 0, fmt.Errorf("GET runs: status %d: %w", res.StatusCode, err)
	}
	for _, r := range tree.Runs {
		if r.RunID == runID {
			return r.Status, r.Events, nil
		}
	}
	return "", 0, fmt.Errorf("run %s not in %+v", runID, tree)
}

// waitRunProgress polls base until the run has at least events events stored, or (events < 0) is
// no longer running.
func waitRunProgress(t *testing.T, base, threadID, runID string, events int64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		status, n, err := runProgress(ctx, base, threadID, runID)
		if err == nil && (events >= 0 && n >= events || events < 0 && status != "running") {
			return status
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s on %s: status %q, %d events, err %v; want %d events or the end", runID, base, status, n, err, events)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestReplicaAttachersIdentical checks that attachers on another replica get identical streams: a run is pumped by
// replica A and held after hold events; 50 clients attach to its thread through replica B;
// once each has its prelude the run continues. Every attacher must receive the same stream,
// byte for byte (prelude up to the same cursor, then A's events after it with A's ids and
// data), and replaying it must give the messages and state the run's own client ends with.
func TestReplicaAttachersIdentical(t *testing.T) {
	const attachers, hold = 50, 9 // the 9th event of tools is inside its TOOL_CALL_ARGS burst
	gate := &gatedAgent{agent: demoagent.New(demoagent.Config{}), hold: hold, open: make(chan struct{})}
	agent := httptest.NewServer(gate)
	t.Cleanup(agent.Close)
	t.Cleanup(func() {
		select {
		case <-gate.open:
		default:
			close(gate.open)
		}
	})
	a, b := twoReplicas(t, agent.URL+"/")

	const threadID, runID = "replicas-thread", "replicas-run"
	body := `{"threadId":"` + threadID + `","runId":"` + runID + `","state":{},"tools":[],"context":[],` +
		`"messages":[{"id":"u1","role":"user","content":"scenario:tools"}],"forwardedProps":{"scenario":"tools"}}`
	res := runtest.PostRun(t, t.Context(), a, body, nil)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("POST run to replica A: status %d: %s", res.StatusCode, b)
	}
	var live []sseFrame
	liveDone := make(chan error, 1)
	go func() {
		var err error
		live, err = readSSEFrames(res.Body, nil)
		liveDone <- err
	}()
	waitRunProgress(t, b, threadID, runID, hold)

	streams := make([][]sseFrame, attachers)
	errs := make([]error, attachers)
	var prelude, done sync.WaitGroup
	prelude.Add(attachers)
	done.Add(attachers)
	for i := range attachers {
		go func() {
			defer done.Done()
			signalled := false
			signal := func() {
				if !signalled {
					signalled = true
					prelude.Done()
				}
			}
			defer signal()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b+"agui/threads/"+threadID+"/events", nil)
			if err != nil {
				errs[i] = err
				return
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				errs[i] = fmt.Errorf("status %d", res.StatusCode)
				return
			}
			streams[i], errs[i] = readSSEFrames(res.Body, func(f sseFrame) {
				if strings.Contains(f.Data, attach.EventReplayComplete) {
					signal()
				}
			})
		}()
	}
	prelude.Wait()
	close(gate.open)
	done.Wait()
	if err := <-liveDone; err != nil {
		t.Fatalf("reading the run's own stream from replica A: %v", err)
	}
	if status := waitRunProgress(t, b, threadID, runID, -1); status != "finished" {
		t.Errorf("run status on replica B = %q, want finished", status)
	}

	wantMsgs, wantState, err := replayFrames(live)
	if err != nil {
		t.Fatalf("replayFrames(the run's own stream) error = %v", err)
	}
	liveIndex := map[string]int{}
	for i, f := range live {
		liveIndex[f.ID] = i
	}
	for i, got := range streams {
		if errs[i] != nil {
			t.Errorf("attacher %d: %v", i, errs[i])
			continue
		}
		_, tail, cursor, ok := splitPrelude(got)
		from, known := liveIndex[cursor]
		if !ok || !known || from != hold-1 {
			t.Errorf("attacher %d: replay_complete %v with cursor %q (event %d of the run), want the cursor of event %d", i, ok, cursor, from+1, hold)
			continue
		}
		if want := live[from+1:]; !slices.Equal(tail, want) {
			t.Errorf("attacher %d: after the prelude got %d events %v, want the run's %d events after %s %v", i, len(tail), tail, len(want), cursor, want)
		}
		msgs, state, err := replayFrames(got)
		if err != nil || msgs != wantMsgs || state != wantState {
			t.Errorf("attacher %d: replay = %s, %s, %v; want the run's %s, %s", i, msgs, state, err, wantMsgs, wantState)
		}
		if i > 0 && !slices.Equal(got, streams[0]) {
			t.Errorf("attacher %d: stream differs from attacher 0's:\n%v\nvs\n%v", i, got, streams[0])
		}
	}
	if prelude, tail, _, ok := splitPrelude(streams[0]); ok {
		t.Logf("%d attachers on replica B: %d prelude events, then %d live events from replica A, all identical",
			attachers, len(prelude), len(tail))
	}
}
