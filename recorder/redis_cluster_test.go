package recorder_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/recorder/recordertest"
	"github.com/redis/go-redis/v9"
)

// TestMain shares one Redis Cluster and one Sentinel setup between the tests of the package
// (redistest.SharedCluster, SharedSentinel) and stops them at the end.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestRedisStoreCluster runs the store contract suite on a 3-master, 3-replica Redis Cluster.
func TestRedisStoreCluster(t *testing.T) {
	c := redistest.SharedCluster(t)
	recordertest.Run(t, func(t *testing.T) recorder.Store {
		s := newRedisStore(t, recorder.RedisConfig{ClusterAddrs: c.Addrs()[:1], Prefix: uniquePrefix(), MaxEventsPerRun: recordertest.MaxEventsPerRun, FollowQueue: recordertest.FollowQueue})
		if s.Topology() != recorder.TopologyCluster {
			t.Fatalf("Topology() = %v, want cluster", s.Topology())
		}
		return s
	})
}

// TestRedisStoreSentinel runs the store contract suite on a master + replica watched by three
// sentinels.
func TestRedisStoreSentinel(t *testing.T) {
	sn := redistest.SharedSentinel(t)
	recordertest.Run(t, func(t *testing.T) recorder.Store {
		s := newRedisStore(t, recorder.RedisConfig{SentinelAddrs: sn.SentinelAddrs(), SentinelMaster: redistest.SentinelMaster, Prefix: uniquePrefix(), MaxEventsPerRun: recordertest.MaxEventsPerRun, FollowQueue: recordertest.FollowQueue})
		if s.Topology() != recorder.TopologySentinel {
			t.Fatalf("Topology() = %v, want sentinel", s.Topology())
		}
		return s
	})
}

// TestKeySlot compares the store's hash slot computation with the server's CLUSTER KEYSLOT.
func TestKeySlot(t *testing.T) {
	c := redistest.SharedCluster(t)
	cl := c.Client()
	defer cl.Close()
	for _, k := range []string{"agui:{th-1}:events:r", "agui:{}:x", "plain", "a{b", "{a}{b}", "agui:{123456789}:run:x", "{user1000}.following",
		"agui:{0123456789abcdef0123456789abcdef/th-1}:events:r", "agui:{#index/0123456789abcdef0123456789abcdef}:threads"} {
		want, err := cl.ClusterKeySlot(t.Context(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := recorder.KeySlot(k); int64(got) != want {
			t.Errorf("KeySlot(%q) = %d, want %d", k, got, want)
		}
	}
}

// slotChecker is a go-redis hook that records, for every script call (EVAL, EVALSHA), the
// script's name and whether all its KEYS hash to one slot.
type slotChecker struct {
	mu        sync.Mutex
	calls     map[string]int // by the script's first line
	crossSlot []string
	names     map[string]string // sha or body → name
}

func (h *slotChecker) check(cmd redis.Cmder) {
	args := cmd.Args()
	name := strings.ToLower(fmt.Sprint(args[0]))
	if name != "eval" && name != "evalsha" || len(args) < 3 {
		return
	}
	n, _ := args[2].(int)
	keys := make([]string, 0, n)
	for i := range n {
		k := args[3+i]
		if p, ok := k.(*string); ok { // sent as the string it points to
			k = *p
		}
		keys = append(keys, fmt.Sprint(k))
	}
	script, ok := h.names[fmt.Sprint(args[1])] // EVALSHA
	if !ok {
		sum := sha1.Sum([]byte(fmt.Sprint(args[1]))) // EVAL after NOSCRIPT: the body
		script = h.names[hex.EncodeToString(sum[:])]
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[script]++
	for _, k := range keys[1:] {
		if recorder.KeySlot(k) != recorder.KeySlot(keys[0]) {
			h.crossSlot = append(h.crossSlot, fmt.Sprintf("%s: %v", script, keys))
			return
		}
	}
}

func (h *slotChecker) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *slotChecker) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.check(cmd)
		return next(ctx, cmd)
	}
}
func (h *slotChecker) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.check(c)
		}
		return next(ctx, cmds)
	}
}

// TestScriptKeysOneSlot runs the contract suite with a hook that checks every Lua script call
// names KEYS of one hash slot only (Redis Cluster refuses others with CROSSSLOT), and that
// every script of the store was called. The store groups its appends by slot as on Cluster
// (on one server a single append.lua call carries the runs of several threads).
func TestScriptKeysOneSlot(t *testing.T) {
	srv := redistest.Start(t)
	h := &slotChecker{calls: map[string]int{}, names: map[string]string{}}
	for name, sha := range recorder.ScriptSHAs() {
		h.names[sha] = name
	}
	recordertest.Run(t, func(t *testing.T) recorder.Store {
		s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix(), MaxEventsPerRun: recordertest.MaxEventsPerRun, FollowQueue: recordertest.FollowQueue})
		recorder.AddRedisHook(s, h)
		recorder.AppendBySlot(s)
		return s
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.crossSlot {
		t.Errorf("script call with KEYS in several slots: %s", c)
	}
	for name := range recorder.ScriptSHAs() {
		if h.calls[name] == 0 {
			t.Errorf("script %s was never called by the contract suite; the check did not see it", name)
		}
	}
	t.Logf("script calls checked: %v", h.calls)
}

// TestRedisWaitReplicas checks WaitReplicas on Sentinel and on Cluster: with as many replicas
// as there are, writes succeed and are on the replica; asking for more than exist fails with
// ErrNotReplicated (the write itself stays in the master and a retry is harmless).
func TestRedisWaitReplicas(t *testing.T) {
	sn := redistest.SharedSentinel(t)
	cl := redistest.SharedCluster(t)
	topologies := map[string]func(n int) recorder.RedisConfig{
		"sentinel": func(n int) recorder.RedisConfig {
			return recorder.RedisConfig{SentinelAddrs: sn.SentinelAddrs(), SentinelMaster: redistest.SentinelMaster, WaitReplicas: n, WaitTimeout: 200 * time.Millisecond}
		},
		"cluster": func(n int) recorder.RedisConfig {
			return recorder.RedisConfig{ClusterAddrs: cl.Addrs(), WaitReplicas: n, WaitTimeout: 200 * time.Millisecond}
		},
	}
	for name, cfg := range topologies {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			c := cfg(1)
			c.Prefix = uniquePrefix()
			s := newRedisStore(t, c)
			var batches []recorder.Batch
			for i := range 8 { // threads on every master of the cluster
				r := recorder.Run{ThreadID: fmt.Sprintf("th%d", i), RunID: "r", Epoch: recorder.NewEpoch()}
				if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				batches = append(batches, recorder.Batch{Run: r, Events: []recorder.Event{{Seq: 1, Type: "A", Frame: []byte("x")}}})
			}
			if err := s.Append(ctx, batches); err != nil {
				t.Fatalf("Append with WaitReplicas 1 = %v", err)
			}
			if err := s.FinishRun(ctx, "th0", "r", recorder.StatusFinished, "", 1); err != nil {
				t.Fatalf("FinishRun with WaitReplicas 1 = %v", err)
			}
			// The Writer's way: a run's last events and its finish in one call, one WAIT.
			last := recorder.Batch{Run: batches[1].Run, Events: []recorder.Event{{Seq: 2, Type: "A", Frame: []byte("z")}}}
			fin := []*recorder.FinishSpec{{Status: recorder.StatusFinished, LastSeq: 2}}
			if err := recorder.AppendFinish(ctx, s, []recorder.Batch{last}, fin); err != nil {
				t.Fatalf("AppendFinish with WaitReplicas 1 = %v", err)
			}
			if r, err := s.Run(ctx, "th1", "r"); err != nil || r.Status != recorder.StatusFinished || r.LastSeq != 2 {
				t.Errorf("Run(th1) after AppendFinish = %s last %d, %v; want finished with 2 events", r.Status, r.LastSeq, err)
			}
			c2 := cfg(2)
			c2.Prefix = c.Prefix
			s2 := newRedisStore(t, c2)
			batches[0].Events = []recorder.Event{{Seq: 2, Type: "A", Frame: []byte("y")}}
			err := s2.Append(ctx, batches[:1])
			if !errors.Is(err, recorder.ErrNotReplicated) {
				t.Fatalf("Append with WaitReplicas 2 of 1 replica = %v, want ErrNotReplicated", err)
			}
			evs, err := s.Events(ctx, "th0", "r", 0, 0)
			if err != nil || len(evs) != 2 {
				t.Errorf("events after the unreplicated append = %d, %v; want 2 (stored on the master)", len(evs), err)
			}
			if err := s2.Append(ctx, batches[:1]); !errors.Is(err, recorder.ErrNotReplicated) {
				t.Errorf("retried Append = %v, want ErrNotReplicated again", err)
			}
			if evs, _ := s.Events(ctx, "th0", "r", 0, 0); len(evs) != 2 {
				t.Errorf("events after a retried append = %d, want 2 (no duplicate)", len(evs))
			}
		})
	}
}

// TestRedisCheckConfigTopologies: CheckConfig reads every cluster master and the Sentinel
// master, warns once per risk (these servers run without AOF), and warns when WaitReplicas
// asks for more replicas than a master has.
func TestRedisCheckConfigTopologies(t *testing.T) {
	cl := redistest.SharedCluster(t)
	sn := redistest.SharedSentinel(t)
	for name, cfg := range map[string]recorder.RedisConfig{
		"cluster":  {ClusterAddrs: cl.Addrs(), WaitReplicas: 2},
		"sentinel": {SentinelAddrs: sn.SentinelAddrs(), SentinelMaster: redistest.SentinelMaster, WaitReplicas: 2},
	} {
		t.Run(name, func(t *testing.T) {
			var logs logBuffer
			cfg.Logger = logs.logger()
			s := newRedisStore(t, cfg)
			got := s.CheckConfig(t.Context())
			want := []string{"fewer connected replicas", "appendonly is off"}
			if len(got) != len(want) {
				t.Fatalf("CheckConfig() = %q, want %d warnings like %q", got, len(want), want)
			}
			for i, w := range want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to mention %q", i, got[i], w)
				}
			}
			if name == "cluster" && strings.Count(logs.String(), "appendonly is off") != 3 {
				t.Errorf("cluster: appendonly warning logged %d times, want once per master (3): %s", strings.Count(logs.String(), "appendonly is off"), logs.String())
			}
		})
	}
}
