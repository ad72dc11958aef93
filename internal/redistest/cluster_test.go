package redistest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestSharedCluster checks the shared cluster has three masters with a replica each and serves
// keys of every slot owner.
func TestSharedCluster(t *testing.T) {
	c := SharedCluster(t)
	ctx := t.Context()
	masters, err := c.Masters(ctx)
	if err != nil || len(masters) != 3 {
		t.Fatalf("Masters() = %d nodes, %v; want 3", len(masters), err)
	}
	cl := c.Client()
	defer cl.Close()
	owners := map[string]bool{}
	for _, k := range []string{"{a}x", "{b}x", "{c}x", "{d}x", "{e}x", "{f}x", "{g}x"} {
		if err := cl.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s = %v", k, err)
		}
		m, err := c.MasterOf(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		owners[m.Addr()] = true
	}
	if len(owners) < 2 {
		t.Errorf("7 keys on %d masters; the slots are not spread", len(owners))
	}
}

// TestClusterFailover kills a master of a private cluster and waits for its replica to take
// over, then restarts the old master and waits for it to rejoin as a replica.
func TestClusterFailover(t *testing.T) {
	c := StartCluster(t)
	ctx := t.Context()
	cl := c.Client()
	defer cl.Close()
	if err := cl.Set(ctx, "{k}1", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m, err := c.MasterOf(ctx, "{k}1")
	if err != nil {
		t.Fatal(err)
	}
	node, err := cl.MasterForKey(ctx, "{k}1")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := node.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 on the master = %d, %v", n, err) // else the failover may lose the key
	}
	m.Kill()
	WaitFor(t, 30*time.Second, "a replica to serve {k}1", func() bool {
		v, err := cl.Get(ctx, "{k}1").Result()
		return err == nil && v == "v"
	})
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.MasterOf(ctx, "{k}1"); err != nil || n == m {
		t.Errorf("master of {k}1 after failover = %v, %v; want the promoted replica", n, err)
	}
}

// TestSentinelFailover kills the master of a private Sentinel setup and checks a failover
// client keeps working against the promoted replica.
func TestSentinelFailover(t *testing.T) {
	s := StartSentinel(t)
	ctx := t.Context()
	cl := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: s.SentinelAddrs()})
	defer cl.Close()
	if err := cl.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Wait(ctx, 1, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	old, err := s.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old.Kill()
	WaitFor(t, 30*time.Second, "the sentinels to promote the replica", func() bool {
		m, err := s.Master(ctx)
		return err == nil && m != old
	})
	WaitFor(t, 30*time.Second, "the failover client to reach the new master", func() bool {
		v, err := cl.Get(ctx, "k").Result()
		return err == nil && v == "v" && cl.Set(ctx, "k2", "v", 0).Err() == nil
	})
	if err := old.Restart(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
}
