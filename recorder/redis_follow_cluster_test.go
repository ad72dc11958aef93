package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/recorder/recordertest"
	"github.com/redis/go-redis/v9"
)

// eventsKey is the events stream key of a run (also the shard channel the tail listens on).
func eventsKey(prefix string, r recorder.Run) string {
	return prefix + ":{" + r.ThreadID + "}:events:" + r.RunID
}

// tailSubscribers reads every running master's tail subscriber connections (CLIENT LIST:
// name agui-proxy-tail with ssub above 0), as master address -> the ssub count of each such
// connection, and the shard channels under prefix each master has subscribers for (PUBSUB
// SHARDCHANNELS).
func tailSubscribers(ctx context.Context, c *redistest.Cluster, prefix string) (conns map[string][]int, channels map[string][]string, err error) {
	masters, err := c.Masters(ctx)
	if err != nil {
		return nil, nil, err
	}
	conns, channels = map[string][]int{}, map[string][]string{}
	for _, m := range masters {
		cl := redis.NewClient(&redis.Options{Addr: m.Addr()})
		list, err := cl.ClientList(ctx).Result()
		if err == nil {
			var chs []string
			chs, err = cl.PubSubShardChannels(ctx, prefix+":*").Result()
			sort.Strings(chs)
			channels[m.Addr()] = chs
		}
		cl.Close()
		if err != nil {
			return nil, nil, err
		}
		for line := range strings.SplitSeq(list, "\n") {
			if !strings.Contains(line, " name=agui-proxy-tail ") {
				continue
			}
			for f := range strings.FieldsSeq(line) {
				if v, ok := strings.CutPrefix(f, "ssub="); ok {
					if n, _ := strconv.Atoi(v); n > 0 {
						conns[m.Addr()] = append(conns[m.Addr()], n)
					}
				}
			}
		}
	}
	return conns, channels, nil
}

// waitOK polls cond until it holds (true) or timeout passes (false).
func waitOK(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// waitBells waits until the tail's subscriptions match the followed runs: each run's channel
// subscribed on the master that owns its slot and nowhere else, and one subscriber connection
// per master that owns followed runs, holding exactly those (none when runs is empty).
func waitBells(t *testing.T, c *redistest.Cluster, prefix string, runs []recorder.Run) {
	t.Helper()
	ctx := t.Context()
	var last string
	ok := waitOK(60*time.Second, func() bool {
		want := map[string][]string{}
		for _, r := range runs {
			m, err := c.MasterOf(ctx, eventsKey(prefix, r))
			if err != nil {
				last = err.Error()
				return false
			}
			want[m.Addr()] = append(want[m.Addr()], eventsKey(prefix, r))
		}
		conns, channels, err := tailSubscribers(ctx, c, prefix)
		if err != nil {
			last = err.Error()
			return false
		}
		for addr := range want {
			sort.Strings(want[addr])
		}
		last = fmt.Sprintf("want channels %v, have %v; tail subscriber connections (ssub each) %v", want, channels, conns)
		for addr, chs := range channels {
			if strings.Join(chs, " ") != strings.Join(want[addr], " ") {
				return false
			}
		}
		for addr, w := range want {
			if len(channels[addr]) != len(w) || len(conns[addr]) != 1 || conns[addr][0] != len(w) {
				return false
			}
		}
		for addr, cs := range conns {
			if len(want[addr]) == 0 && len(cs) > 0 {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("the tail's subscriptions do not match the followed runs: %s", last)
	}
}

// xreadCalls sums INFO commandstats' XREAD calls over the running masters.
func xreadCalls(t *testing.T, c *redistest.Cluster) int {
	t.Helper()
	masters, err := c.Masters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range masters {
		cl := redis.NewClient(&redis.Options{Addr: m.Addr()})
		info, err := cl.Info(t.Context(), "commandstats").Result()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		n += callsOf(info, "xread")
	}
	return n
}

// TestClusterTailOneReaderPerMaster follows 24 runs (two followers each) spread over a 3+3
// cluster's masters: the tail holds one subscriber connection per master, subscribed to the
// runs that master owns, and at most two pooled connections per master for its reads; an idle
// tail sends no XREAD at all; every follower gets its run exactly; once the runs end the
// subscriptions are gone.
func TestClusterTailOneReaderPerMaster(t *testing.T) {
	c := redistest.SharedCluster(t)
	ctx := t.Context()
	prefix := uniquePrefix()
	a := newRedisStore(t, recorder.RedisConfig{ClusterAddrs: c.Addrs(), Prefix: prefix})
	b := newRedisStore(t, recorder.RedisConfig{ClusterAddrs: c.Addrs(), Prefix: prefix})
	const runs, perRun, events = 24, 2, 40
	rs := make([]recorder.Run, runs)
	var subs []recorder.Subscription
	for i := range rs {
		rs[i] = followRun(fmt.Sprintf("bell-%d", i), "r")
		if _, err := a.CreateRun(ctx, rs[i], recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for range perRun {
			sub, err := b.Follow(ctx, rs[i].ThreadID, "r", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			subs = append(subs, sub)
		}
	}
	owners := map[string]bool{}
	for _, r := range rs {
		m, err := c.MasterOf(ctx, eventsKey(prefix, r))
		if err != nil {
			t.Fatal(err)
		}
		owners[m.Addr()] = true
	}
	if len(owners) < 2 {
		t.Fatalf("the runs landed on %d masters; the test needs them spread", len(owners))
	}
	waitBells(t, c, prefix, rs)
	if st := b.TailPoolStats(); st == nil || st.TotalConns > 2*3 {
		t.Errorf("TailPoolStats() = %+v, want at most 2 pooled connections per master", st)
	}
	// Idle: nothing is written, so nothing is read. A round still settling (a subscription's
	// confirmation triggers one read) is given another window.
	idle := waitOK(30*time.Second, func() bool {
		before := xreadCalls(t, c)
		time.Sleep(1500 * time.Millisecond) // longer than FollowBlock: a polling tail would read
		return xreadCalls(t, c) == before
	})
	if !idle {
		t.Errorf("the idle tail kept sending XREAD")
	}
	var wg sync.WaitGroup
	results := make([][]recorder.Event, len(subs))
	errs := make([]error, len(subs))
	for i, sub := range subs {
		wg.Go(func() { results[i], errs[i] = collect(sub) })
	}
	for seq := int64(1); seq <= events; seq += 8 {
		batches := make([]recorder.Batch, len(rs))
		for i, r := range rs {
			batches[i] = recorder.Batch{Run: r, Events: followEvents(r, seq, seq+7)}
		}
		if err := a.Append(ctx, batches); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rs {
		if err := a.FinishRun(ctx, r.ThreadID, r.RunID, recorder.StatusFinished, "", events); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i := range subs {
		if !errors.Is(errs[i], io.EOF) {
			t.Fatalf("follower %d: Next after %d events = %v, want io.EOF", i, len(results[i]), errs[i])
		}
		checkSeqs(t, fmt.Sprintf("follower %d", i), results[i], rs[i/perRun], 1, events)
	}
	waitBells(t, c, prefix, nil)
}

// TestRedisFollowWithoutShardedPubSub runs the contract suite on a server whose SSUBSCRIBE and
// SPUBLISH are disabled (rename-command to ""), as on Redis 6: the scripts' notification
// fails quietly, the tail falls back to its blocking XREAD, and no subscriber connection is
// opened.
func TestRedisFollowWithoutShardedPubSub(t *testing.T) {
	srv := redistest.Start(t, "--rename-command", "SSUBSCRIBE", "", "--rename-command", "SPUBLISH", "")
	recordertest.Run(t, func(t *testing.T) recorder.Store {
		return newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix(), MaxEventsPerRun: recordertest.MaxEventsPerRun, FollowQueue: recordertest.FollowQueue})
	})
	// A waiting follower is served by the blocking tail: a tail connection blocked in XREAD.
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix()})
	r := followRun("t", "r")
	if _, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Follow(t.Context(), "t", "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var list string
	if !waitOK(30*time.Second, func() bool {
		list, _ = srv.Client(t).ClientList(t.Context()).Result()
		for line := range strings.SplitSeq(list, "\n") {
			if strings.Contains(line, " name=agui-proxy-tail ") && strings.Contains(line, " flags=b ") && strings.Contains(line, " cmd=xread ") {
				return true
			}
		}
		return false
	}) {
		t.Errorf("no tail connection blocked in XREAD:\n%s", list)
	}
	if strings.Contains(list, " ssub=1") {
		t.Errorf("a connection subscribed although the server has no SSUBSCRIBE:\n%s", list)
	}
}
