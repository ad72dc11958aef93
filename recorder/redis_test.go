package recorder_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/recorder/recordertest"
	"github.com/redis/go-redis/v9"
)

var prefixSeq atomic.Int64

// uniquePrefix gives each store in a test its own key space on a shared server.
func uniquePrefix() string { return fmt.Sprintf("test%d", prefixSeq.Add(1)) }

func newRedisStore(t testing.TB, cfg recorder.RedisConfig) *recorder.RedisStore {
	t.Helper()
	s, err := recorder.NewRedisStore(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewRedisStore(%s) = %v", cfg.URL, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRedisStore(t *testing.T) {
	srv := redistest.Start(t)
	recordertest.Run(t, func(t *testing.T) recorder.Store {
		return newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix(), MaxEventsPerRun: recordertest.MaxEventsPerRun, FollowQueue: recordertest.FollowQueue})
	})
}

// keysUnder lists every key of a prefix.
func keysUnder(t *testing.T, c *redis.Client, prefix string) []string {
	t.Helper()
	keys, err := c.Keys(t.Context(), prefix+":*").Result()
	if err != nil {
		t.Fatalf("KEYS %s:* = %v", prefix, err)
	}
	return keys
}

// TestRedisKeyLayout pins the key template and the Cluster hash tag: every key of a thread
// hashes on exactly the thread id.
func TestRedisKeyLayout(t *testing.T) {
	srv := redistest.Start(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "app:v1"})
	ctx := t.Context()
	r := recorder.Run{ThreadID: "th:1", RunID: "run:1", Epoch: recorder.NewEpoch()}
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{{Seq: 1, Type: "A", Frame: []byte("x")}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCheckpoint(ctx, "th:1", "run:1", []byte("cp")); err != nil {
		t.Fatal(err)
	}
	c := srv.Client(t)
	got := strings.Join(sortedKeys(keysUnder(t, c, "app:v1")), " ")
	want := "app:v1:{#index/" + recorder.IndexTag("", "") + "}:threads " +
		"app:v1:{th:1}:checkpoint:run:1 app:v1:{th:1}:events:run:1 app:v1:{th:1}:run:run:1 app:v1:{th:1}:runs app:v1:{th:1}:thread"
	if got != want {
		t.Errorf("keys = %s, want %s", got, want)
	}
	ids, err := c.XRange(ctx, "app:v1:{th:1}:events:run:1", "-", "+").Result()
	if err != nil || len(ids) != 1 || ids[0].ID != "1-0" || ids[0].Values["t"] != "A" || ids[0].Values["f"] != "x" {
		t.Errorf("stream entries = %v, %v, want one entry 1-0 {t:A f:x}", ids, err)
	}

	// The same ids in an owner's namespace: every key hashes on the whole thread key (tag and
	// id), and the identity appears in no key.
	owner, route := "alice@example.com", "/agents/a"
	k := recorder.ThreadKey(owner, route, "th:1")
	r = recorder.Run{ThreadID: k, RunID: "run:1", Epoch: recorder.NewEpoch(), Owner: owner, Route: route}
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{{Seq: 1, Type: "B", Frame: []byte("y")}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCheckpoint(ctx, k, "run:1", []byte("cp2")); err != nil {
		t.Fatal(err)
	}
	tag := recorder.IndexTag(owner, route)
	got = strings.Join(sortedKeys(keysUnder(t, c, "app:v1")), " ")
	want = "app:v1:{#index/" + recorder.IndexTag("", "") + "}:threads app:v1:{#index/" + tag + "}:threads " +
		"app:v1:{" + tag + "/th:1}:checkpoint:run:1 app:v1:{" + tag + "/th:1}:events:run:1 app:v1:{" + tag + "/th:1}:run:run:1 " +
		"app:v1:{" + tag + "/th:1}:runs app:v1:{" + tag + "/th:1}:thread " +
		"app:v1:{th:1}:checkpoint:run:1 app:v1:{th:1}:events:run:1 app:v1:{th:1}:run:run:1 app:v1:{th:1}:runs app:v1:{th:1}:thread"
	if got != want {
		t.Errorf("keys = %s, want %s", got, want)
	}
	if strings.Contains(got, "alice") {
		t.Errorf("a key holds the identity: %s", got)
	}
	for _, key := range keysUnder(t, c, "app:v1") {
		if strings.Contains(key, "/th:1}") && recorder.KeySlot(key) != recorder.KeySlot("{"+k+"}") {
			t.Errorf("key %s is not in the thread's slot", key)
		}
	}
	if cp, err := s.Checkpoint(ctx, "th:1", "run:1"); err != nil || string(cp) != "cp" {
		t.Errorf("Checkpoint of the bare id = %q, %v; the namespaced thread touched it", cp, err)
	}
}

func sortedKeys(k []string) []string {
	out := append([]string(nil), k...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestRedisHostileIDsReachNoKey: refused ids issue no command (the key space stays empty).
func TestRedisHostileIDsReachNoKey(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "h"})
	before, _ := c.Info(t.Context(), "commandstats").Result()
	for _, id := range append(recordertest.HostileIDs, recordertest.NamespaceHostileKeys...) {
		s.CreateRun(t.Context(), recorder.Run{ThreadID: id, RunID: "r", Epoch: recorder.NewEpoch()}, recorder.CreateOptions{})
		s.Append(t.Context(), []recorder.Batch{{Run: recorder.Run{ThreadID: "t", RunID: id, Epoch: recorder.NewEpoch()}}})
		s.Events(t.Context(), id, "r", 0, 0)
	}
	after, _ := c.Info(t.Context(), "commandstats").Result()
	for _, cmd := range []string{"evalsha", "eval", "xrange", "hgetall", "exists"} {
		if a, b := callsOf(after, cmd), callsOf(before, cmd); a != b {
			t.Errorf("%s calls went from %d to %d during hostile calls, want unchanged", cmd, b, a)
		}
	}
	if keys := keysUnder(t, c, "h"); len(keys) != 0 {
		t.Errorf("keys after hostile calls = %v, want none", keys)
	}
}

// callsOf reads cmdstat_<cmd>:calls=N from INFO commandstats.
func callsOf(info, cmd string) int {
	_, rest, ok := strings.Cut(info, "cmdstat_"+cmd+":calls=")
	if !ok {
		return 0
	}
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func TestRedisConfigErrors(t *testing.T) {
	for _, p := range []string{"a{b", "a}b", "a b", "a\nb", "a\x00", strings.Repeat("p", 65)} {
		if _, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{URL: "redis://127.0.0.1:1", Prefix: p}); !errors.Is(err, recorder.ErrInvalidPrefix) {
			t.Errorf("NewRedisStore(prefix %q) = %v, want ErrInvalidPrefix", p, err)
		}
	}
	if _, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{}); err == nil {
		t.Errorf("NewRedisStore(no URL) = nil error, want one")
	}
	if _, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{URL: "http://x"}); err == nil {
		t.Errorf("NewRedisStore(http URL) = nil error, want one")
	}
}

// TestRedisTTL: with a TTL every key of the thread carries one (no key without TTL), including
// the keys of older runs refreshed when a later run is created or finished.
func TestRedisTTL(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "ttl", TTL: time.Hour})
	ctx := t.Context()
	for i := range 3 {
		r := recorder.Run{ThreadID: "t", RunID: fmt.Sprintf("r%d", i), Epoch: recorder.NewEpoch()}
		if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{{Seq: 1, Frame: []byte("x")}}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutCheckpoint(ctx, "t", r.RunID, []byte("cp")); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishRun(ctx, "t", r.RunID, recorder.StatusFinished, "", 1); err != nil {
			t.Fatal(err)
		}
	}
	keys := keysUnder(t, c, "ttl")
	if len(keys) != 12 {
		t.Errorf("keys = %v, want 12 (thread, runs, 3 × run/events/checkpoint, the owner's thread index)", keys)
	}
	for _, k := range keys {
		limit := time.Hour
		if strings.Contains(k, "{#index/") {
			limit = 2 * time.Hour // the index outlives its threads' last run start by 2 TTL
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil || ttl <= 0 || ttl > limit {
			t.Errorf("PTTL(%s) = %v, %v, want within (0, %v]", k, ttl, err, limit)
		}
	}
}

// TestRedisLostStream: a stream that vanished while its run's metadata stayed is reported as a
// gap by reads and recorded by the next append, never served as a whole run.
func TestRedisLostStream(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "ls"})
	ctx := t.Context()
	r := recorder.Run{ThreadID: "t", RunID: "r", Epoch: recorder.NewEpoch()}
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	evs := []recorder.Event{{Seq: 1, Frame: []byte("a")}, {Seq: 2, Frame: []byte("b")}}
	if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: evs}}); err != nil {
		t.Fatal(err)
	}
	c.Del(ctx, "ls:{t}:events:r")
	got, err := s.Run(ctx, "t", "r")
	if err != nil || got.Complete(0) {
		t.Errorf("Run after the stream vanished = %+v, %v, want incomplete", got, err)
	}
	if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{{Seq: 3, Frame: []byte("c")}}}}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Run(ctx, "t", "r")
	if len(got.Gaps) != 1 || got.Gaps[0] != (recorder.Gap{From: 1, To: 2}) || got.FirstSeq != 3 || got.LastSeq != 3 {
		t.Errorf("Run after the next append = first %d last %d gaps %v, want 3, 3, [{1 2}]", got.FirstSeq, got.LastSeq, got.Gaps)
	}
}

// TestRedisAppendManyRuns: one Append of the runs of several threads is one append.lua call
// (on one server), each run stored as if alone: a healthy run, a run never created (sent again
// with what re-creating it takes, a second call, and re-created with its head as a gap), a run
// id now holding another epoch (its events dropped), a run whose stream vanished (a gap), and
// a retried batch (nothing duplicated).
func TestRedisAppendManyRuns(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "mr"})
	ctx := t.Context()
	healthy := recorder.Run{ThreadID: "t1", RunID: "r1", Epoch: recorder.NewEpoch()}
	vanished := recorder.Run{ThreadID: "t2", RunID: "r2", Epoch: recorder.NewEpoch()}
	other := recorder.Run{ThreadID: "t3", RunID: "r3", Epoch: recorder.NewEpoch()}
	lost := recorder.Run{ThreadID: "t4", RunID: "r4", Epoch: recorder.NewEpoch(), Owner: "alice", Route: "/a"}
	for _, r := range []recorder.Run{healthy, vanished, other} {
		if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	evs := func(from, to int64) []recorder.Event {
		var out []recorder.Event
		for seq := from; seq <= to; seq++ {
			out = append(out, recorder.Event{Seq: seq, Type: "CUSTOM", Frame: fmt.Appendf(nil, "f%d", seq)})
		}
		return out
	}
	if err := s.Append(ctx, []recorder.Batch{{Run: vanished, Events: evs(1, 2)}}); err != nil {
		t.Fatal(err)
	}
	c.Del(ctx, "mr:{t2}:events:r2")
	stale := other
	stale.Epoch = recorder.NewEpoch()
	batch := []recorder.Batch{
		{Run: healthy, Events: evs(1, 3)},
		{Run: vanished, Events: evs(3, 4)},
		{Run: stale, Events: evs(1, 2)},
		{Run: lost, Events: evs(3, 4)},
	}
	before, _ := c.Info(ctx, "commandstats").Result()
	if err := s.Append(ctx, batch); err != nil {
		t.Fatal(err)
	}
	after, _ := c.Info(ctx, "commandstats").Result()
	if n := callsOf(after, "evalsha") - callsOf(before, "evalsha"); n != 2 {
		t.Errorf("append.lua calls = %d, want 2 (one for the four runs, one re-sending the lost run)", n)
	}
	if err := s.Append(ctx, batch); err != nil { // a retry stores nothing twice
		t.Fatal(err)
	}
	for _, tc := range []struct {
		run         recorder.Run
		first, last int64
		gaps        []recorder.Gap
	}{
		{healthy, 1, 3, nil},
		{vanished, 3, 4, []recorder.Gap{{From: 1, To: 2}}},
		{other, 0, 0, nil},
		{lost, 3, 4, []recorder.Gap{{From: 1, To: 2}}},
	} {
		got, err := s.Run(ctx, tc.run.ThreadID, tc.run.RunID)
		if err != nil || got.Epoch != tc.run.Epoch || got.FirstSeq != tc.first || got.LastSeq != tc.last || fmt.Sprint(got.Gaps) != fmt.Sprint(tc.gaps) {
			t.Errorf("Run(%s) = epoch %s first %d last %d gaps %v, %v; want %s, %d, %d, %v",
				tc.run.RunID, got.Epoch, got.FirstSeq, got.LastSeq, got.Gaps, err, tc.run.Epoch, tc.first, tc.last, tc.gaps)
		}
		stored, err := s.Events(ctx, tc.run.ThreadID, tc.run.RunID, 0, 0)
		if err != nil || int64(len(stored)) != tc.last-tc.first+min(tc.last, 1) {
			t.Errorf("Events(%s) = %d events, %v; want seqs %d..%d once each", tc.run.RunID, len(stored), err, tc.first, tc.last)
		}
		for i, ev := range stored {
			if want := fmt.Sprintf("f%d", tc.first+int64(i)); ev.Seq != tc.first+int64(i) || string(ev.Frame) != want {
				t.Errorf("Events(%s)[%d] = %d %q, want %d %q", tc.run.RunID, i, ev.Seq, ev.Frame, tc.first+int64(i), want)
			}
		}
	}
	if th, err := s.Thread(ctx, "t4"); err != nil || th.Owner != "alice" || th.Route != "/a" {
		t.Errorf("re-created thread t4 = %+v, %v; want owner alice, route /a", th, err)
	}
}

// pipelineCounter counts the pipelines and single commands sent through a client.
type pipelineCounter struct{ pipelines, singles atomic.Int64 }

func (h *pipelineCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.singles.Add(1); return next(ctx, cmd) }
}
func (h *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.pipelines.Add(1); return next(ctx, cmds) }
}

// TestRedisAppendFinish: the Writer's events and finishes of several runs go in one script
// call, one pipeline, and each run ends as FinishRun would end it: its last events stored
// first, a missing tail a gap, a vanished stream a gap, a run the store lost re-created (in a
// second call) and finished, and every key of the thread's runs given the TTL again.
func TestRedisAppendFinish(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "af", TTL: time.Hour})
	ctx := t.Context()
	ev := func(seq int64) recorder.Event {
		return recorder.Event{Seq: seq, Type: "CUSTOM", Frame: fmt.Appendf(nil, "data: %d\n\n", seq)}
	}
	var runs []recorder.Run
	for i := range 4 {
		r := recorder.Run{ThreadID: fmt.Sprintf("t%d", i), RunID: "r", Epoch: recorder.NewEpoch()}
		if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{ev(1), ev(2)}}}); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	c.Del(ctx, "af:{t3}:events:r")                  // t3's stream vanished
	c.PExpire(ctx, "af:{t0}:events:r", time.Minute) // t0's keys are due for the TTL again
	h := &pipelineCounter{}
	recorder.AddRedisHook(s, h)
	batches := []recorder.Batch{
		{Run: runs[0], Events: []recorder.Event{ev(3)}},
		{Run: runs[1], Events: []recorder.Event{ev(3)}},
		{Run: runs[2]},
		{Run: runs[3]},
		{Run: recorder.Run{ThreadID: "t0", RunID: "other", Epoch: recorder.NewEpoch()}, Events: []recorder.Event{ev(1)}},
	}
	fins := []*recorder.FinishSpec{
		{Status: recorder.StatusFinished, LastSeq: 3},
		{Status: recorder.StatusError, Detail: "boom", LastSeq: 5},
		{Status: recorder.StatusFinished, LastSeq: 2},
		{Status: recorder.StatusFinished, LastSeq: 2},
		nil,
	}
	if err := recorder.AppendFinish(ctx, s, batches, fins); err != nil {
		t.Fatal(err)
	}
	// One round trip (one script call), or two when the script was not loaded yet (NOSCRIPT,
	// then EVAL), and one more for "other", which does not exist yet and is sent again in full.
	if p, n := h.pipelines.Load(), h.singles.Load(); p+n < 2 || p+n > 3 {
		t.Errorf("appending and finishing took %d pipelines and %d single commands, want 2 or 3 round trips", p, n)
	}
	for i, want := range []struct {
		status recorder.RunStatus
		detail string
		last   int64
		gaps   string
	}{
		{recorder.StatusFinished, "", 3, "[]"},
		{recorder.StatusError, "boom", 3, "[{4 5}]"},
		{recorder.StatusFinished, "", 2, "[]"},
		{recorder.StatusFinished, "", 2, "[{1 2}]"},
	} {
		got, err := s.Run(ctx, runs[i].ThreadID, "r")
		if err != nil || got.Status != want.status || got.Detail != want.detail || got.LastSeq != want.last || fmt.Sprint(got.Gaps) != want.gaps {
			t.Errorf("Run(t%d) = status %s detail %q last %d gaps %v, %v; want %s %q %d %s",
				i, got.Status, got.Detail, got.LastSeq, got.Gaps, err, want.status, want.detail, want.last, want.gaps)
		}
	}
	evs, err := s.Events(ctx, "t0", "r", 0, 0)
	if err != nil || len(evs) != 3 || evs[2].Seq != 3 {
		t.Errorf("Events(t0) = %d events, %v, want 3", len(evs), err)
	}
	if got, err := s.Run(ctx, "t0", "other"); err != nil || got.Status != recorder.StatusRunning || got.LastSeq != 1 {
		t.Errorf("Run(t0/other) without a finish = %+v, %v, want running with 1 event", got, err)
	}
	if ttl, err := c.PTTL(ctx, "af:{t0}:events:r").Result(); err != nil || ttl < 59*time.Minute {
		t.Errorf("PTTL of t0's events after its finish = %v, %v, want the hour again", ttl, err)
	}

	// A run the store lost is re-created from its batch and finished.
	lost := recorder.Run{ThreadID: "lost", RunID: "r", Epoch: recorder.NewEpoch()}
	err = recorder.AppendFinish(ctx, s, []recorder.Batch{{Run: lost, Events: []recorder.Event{ev(2)}}},
		[]*recorder.FinishSpec{{Status: recorder.StatusFinished, LastSeq: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Run(ctx, "lost", "r"); err != nil || got.Status != recorder.StatusFinished || fmt.Sprint(got.Gaps) != "[{1 1}]" {
		t.Errorf("Run(lost) = status %s gaps %v, %v; want finished with gap 1-1", got.Status, got.Gaps, err)
	}
}

// logBuffer collects log output for assertions.
type logBuffer struct{ bytes.Buffer }

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(&b.Buffer, nil)) }

// TestRedisCheckConfig: risky server settings are warned about, a refused CONFIG too, never an
// error.
func TestRedisCheckConfig(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // substrings, one per expected warning
	}{
		{"defaults", nil, []string{"appendonly is off"}},
		{"safe", []string{"--appendonly", "yes"}, nil},
		{"volatile", []string{"--appendonly", "yes", "--maxmemory-policy", "volatile-lru"}, nil},
		{"evicting", []string{"--appendonly", "yes", "--maxmemory-policy", "allkeys-lru"}, []string{"maxmemory-policy"}},
		{"both", []string{"--maxmemory-policy", "allkeys-random"}, []string{"maxmemory-policy", "appendonly is off"}},
		{"config denied", []string{"--rename-command", "CONFIG", ""}, []string{"cannot read server configuration"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t, tc.args...)
			var logs logBuffer
			s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Logger: logs.logger()})
			got := s.CheckConfig(t.Context())
			if len(got) != len(tc.want) {
				t.Fatalf("CheckConfig() = %q, want %d warnings like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) || !strings.Contains(logs.String(), w) {
					t.Errorf("CheckConfig() warning %d = %q (log %q), want it to mention %q", i, got[i], logs.String(), w)
				}
			}
		})
	}
}

// TestRedisNoScriptRecovery: after the script cache is flushed (as after a restart) appends and
// the other scripts still work.
func TestRedisNoScriptRecovery(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "ns"})
	ctx := t.Context()
	r := recorder.Run{ThreadID: "t", RunID: "r", Epoch: recorder.NewEpoch()}
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 3; seq++ {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{{Seq: seq, Frame: []byte("x")}}}}); err != nil {
			t.Fatalf("Append after SCRIPT FLUSH = %v", err)
		}
	}
	c.ScriptFlush(ctx)
	if err := s.FinishRun(ctx, "t", "r", recorder.StatusFinished, "", 3); err != nil {
		t.Fatalf("FinishRun after SCRIPT FLUSH = %v", err)
	}
	if got, _ := s.Run(ctx, "t", "r"); got.LastSeq != 3 || got.Status != recorder.StatusFinished {
		t.Errorf("Run = last %d status %s, want 3 finished", got.LastSeq, got.Status)
	}
	// The Writer's way: events and finish in one append.lua call, after a flush too.
	r2 := recorder.Run{ThreadID: "t", RunID: "r2", Epoch: recorder.NewEpoch()}
	if _, err := s.CreateRun(ctx, r2, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.ScriptFlush(ctx)
	err := recorder.AppendFinish(ctx, s, []recorder.Batch{{Run: r2, Events: []recorder.Event{{Seq: 1, Frame: []byte("x")}}}},
		[]*recorder.FinishSpec{{Status: recorder.StatusFinished, LastSeq: 1}})
	if err != nil {
		t.Fatalf("AppendFinish after SCRIPT FLUSH = %v", err)
	}
	if got, _ := s.Run(ctx, "t", "r2"); got.LastSeq != 1 || got.Status != recorder.StatusFinished || len(got.Gaps) != 0 {
		t.Errorf("Run(r2) = last %d status %s gaps %v, want 1 finished without gaps", got.LastSeq, got.Status, got.Gaps)
	}
}

// TestRedisSeparatePools: appends use only the writer pool and reads only the other one, so a
// read storm cannot take the recorder's connections.
func TestRedisSeparatePools(t *testing.T) {
	srv := redistest.Start(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "pool"})
	ctx := t.Context()
	r := recorder.Run{ThreadID: "t", RunID: "r", Epoch: recorder.NewEpoch()}
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	uses := func(p *redis.PoolStats) uint32 {
		n := p.Hits + p.Misses
		if p.PipelineStats != nil {
			n += p.PipelineStats.Hits + p.PipelineStats.Misses
		}
		return n
	}
	w0, r0 := s.PoolStats()
	for seq := int64(1); seq <= 20; seq++ {
		if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{{Seq: seq, Frame: []byte("x")}}}}); err != nil {
			t.Fatal(err)
		}
	}
	w1, r1 := s.PoolStats()
	if uses(w1)-uses(w0) < 20 || uses(r1) != uses(r0) {
		t.Errorf("20 appends: writer pool uses +%d, reader pool +%d, want >= 20 and 0", uses(w1)-uses(w0), uses(r1)-uses(r0))
	}
	for range 20 {
		if _, err := s.Events(ctx, "t", "r", 0, 5); err != nil {
			t.Fatal(err)
		}
	}
	w2, r2 := s.PoolStats()
	if uses(w2) != uses(w1) || uses(r2)-uses(r1) < 20 {
		t.Errorf("20 reads: writer pool uses +%d, reader pool +%d, want 0 and >= 20", uses(w2)-uses(w1), uses(r2)-uses(r1))
	}
}

// TestRedisCompactShrinks: a run compacted at rest holds less than its compacted events: its
// stream is gone and its events are one packed (compressed) string with the store's TTL, which
// the store reads back as they were stored, and which expires and is deleted with the run.
func TestRedisCompactShrinks(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: "cmp", TTL: time.Hour})
	ctx := t.Context()
	r := recorder.Run{ThreadID: "t", RunID: "r1", Epoch: recorder.NewEpoch()}
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var raw []recorder.Event
	for i := 1; i <= 30; i++ {
		raw = append(raw, recorder.Event{Seq: int64(i), Type: "TEXT_MESSAGE_CONTENT", Frame: []byte(fmt.Sprintf("data: {%q:%q}\n\n", "delta", strings.Repeat("x", 80)))})
	}
	if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: raw}}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, "t", "r1", recorder.StatusFinished, "", 30); err != nil {
		t.Fatal(err)
	}
	epoch := recorder.NewEpoch()
	var merged []recorder.Event
	frames := 0
	for i := range 3 {
		merged = append(merged, recorder.Event{Type: "TEXT_MESSAGE_CONTENT", Frame: []byte(fmt.Sprintf("id: r1/%s/%d\ndata: {%q:%q}\n\n", epoch, i+1, "delta", strings.Repeat("x", 400)))})
		frames += len(merged[i].Frame)
	}
	if err := s.ReplaceRunEvents(ctx, "t", "r1", r.Epoch, epoch, merged); err != nil {
		t.Fatal(err)
	}
	var packed string
	for _, k := range keysUnder(t, c, "cmp") {
		if strings.Contains(k, "events") {
			t.Errorf("the compacted run still has its stream %q", k)
		}
		if strings.Contains(k, "packed") {
			packed = k
		}
	}
	after, err := c.MemoryUsage(ctx, packed).Result()
	if err != nil || after >= int64(frames)/2 {
		t.Errorf("MEMORY USAGE of the packed events (%q) = %d (%v), want under half their %d bytes", packed, after, err, frames)
	}
	if ttl, err := c.PTTL(ctx, packed).Result(); err != nil || ttl <= 0 || ttl > time.Hour {
		t.Errorf("PTTL of the packed events = %v, %v, want within (0, 1h]", ttl, err)
	}
	evs, err := s.Events(ctx, "t", "r1", 1, 0)
	if err != nil || len(evs) != 2 || evs[0].Seq != 2 || string(evs[1].Frame) != string(merged[2].Frame) {
		t.Errorf("Events after compaction from seq 1 = %v, %v", evs, err)
	}
	if run, err := s.Run(ctx, "t", "r1"); err != nil || run.FirstSeq != 1 || run.LastSeq != 3 || !run.Complete(0) {
		t.Errorf("Run after compaction = %+v, %v, want events 1..3, complete", run, err)
	}
	// A follower of the compacted run gets its packed events after its position, then the end.
	sub, err := s.Follow(ctx, "t", "r1", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range merged[1:] {
		if ev, err := sub.Next(ctx); err != nil || string(ev.Frame) != string(want.Frame) {
			t.Fatalf("Follow of the compacted run: %q, %v, want %q", ev.Frame, err, want.Frame)
		}
	}
	if ev, err := sub.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("Follow of the compacted run after its events: %q, %v, want io.EOF", ev.Frame, err)
	}
	sub.Close()
	if err := s.DeleteRun(ctx, "t", "r1"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, packed).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS of the packed events after DeleteRun = %d, %v, want 0", n, err)
	}
}

// TestRedisAppendRenewsLease: an append given a lease renews, in the same script call, the
// lease of each running run that stores events, as RenewLeases would (node and expiry), and
// answers 2 for a run asked to stop; a run that stores nothing (a batch sent again) or is no
// longer running keeps the lease it had, and an append without a lease touches none.
func TestRedisAppendRenewsLease(t *testing.T) {
	s := newRedisStore(t, recorder.RedisConfig{URL: redistest.Start(t).URL(), Prefix: uniquePrefix()})
	ctx := t.Context()
	runs := make([]recorder.Run, 4)
	for i := range runs {
		if _, err := s.CreateRun(ctx, recorder.Run{ThreadID: fmt.Sprintf("t%d", i), RunID: "r", Epoch: recorder.NewEpoch()}, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r, err := s.Run(ctx, fmt.Sprintf("t%d", i), "r")
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = r
	}
	ev := func(seq int64) []recorder.Event {
		return []recorder.Event{{Seq: seq, Type: "CUSTOM", Frame: []byte(`data: {"type":"CUSTOM","name":"x","value":1}` + "\n\n")}}
	}
	lease := func(i int) (string, time.Time) {
		t.Helper()
		r, err := s.Run(ctx, runs[i].ThreadID, "r")
		if err != nil {
			t.Fatal(err)
		}
		return r.Node, r.LeaseUntil
	}
	if err := s.RequestStop(ctx, "t1", "r"); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, "t2", "r", recorder.StatusFinished, "", 0); err != nil {
		t.Fatal(err)
	}
	until := time.UnixMilli(time.Now().Add(time.Minute).UnixMilli())
	// t0 running, t1 asked to stop, t2 finished, t3 running without events in this batch.
	out, err := recorder.AppendLeased(ctx, s, []recorder.Batch{{Run: runs[0], Events: ev(1)}, {Run: runs[1], Events: ev(1)}, {Run: runs[2], Events: ev(1)}, {Run: runs[3]}}, "node-a", until)
	if err != nil || !slices.Equal(out, []int{1, 2, 0, 0}) {
		t.Fatalf("AppendLeased = %v, %v, want [1 2 0 0]", out, err)
	}
	for i, want := range []string{"node-a", "node-a", "", ""} {
		if node, at := lease(i); node != want || (want != "" && !at.Equal(until)) {
			t.Errorf("run %d: lease %q until %v, want %q until %v", i, node, at, want, until)
		}
	}
	// The same batch again stores nothing: no renewal. A plain Append renews nothing either.
	later := until.Add(time.Minute)
	if out, err = recorder.AppendLeased(ctx, s, []recorder.Batch{{Run: runs[0], Events: ev(1)}}, "node-b", later); err != nil || out[0] != 0 {
		t.Fatalf("AppendLeased(same events again) = %v, %v, want [0]", out, err)
	}
	if err := s.Append(ctx, []recorder.Batch{{Run: runs[0], Events: ev(2)}}); err != nil {
		t.Fatal(err)
	}
	if node, at := lease(0); node != "node-a" || !at.Equal(until) {
		t.Errorf("after a batch sent again and a plain append: lease %q until %v, want node-a until %v", node, at, until)
	}
	if out, err = recorder.AppendLeased(ctx, s, []recorder.Batch{{Run: runs[0], Events: ev(3)}}, "node-b", later); err != nil || out[0] != 1 {
		t.Fatalf("AppendLeased(new event) = %v, %v, want [1]", out, err)
	}
	if node, at := lease(0); node != "node-b" || !at.Equal(later) {
		t.Errorf("lease %q until %v, want node-b until %v", node, at, later)
	}
	if evs, err := s.Events(ctx, "t0", "r", 0, 0); err != nil || len(evs) != 3 {
		t.Errorf("events of t0 = %d, %v, want 3", len(evs), err)
	}
}
