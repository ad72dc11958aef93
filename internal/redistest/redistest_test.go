package redistest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestServerLifecycle(t *testing.T) {
	s := Start(t)
	c := s.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET = %v", err)
	}
	if s.URL() != "redis://"+s.Addr()+"/0" {
		t.Errorf("URL() = %q, want redis://%s/0", s.URL(), s.Addr())
	}

	s.Stop()
	short := redis.NewClient(&redis.Options{Addr: s.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer short.Close()
	if err := short.Ping(ctx).Err(); err == nil {
		t.Errorf("PING to a stopped server = nil, want a timeout")
	}
	s.Continue()
	WaitFor(t, 10*time.Second, "PING after SIGCONT", func() bool { return c.Ping(ctx).Err() == nil })

	s.Kill()
	if err := ping(s.Addr(), false); err == nil {
		t.Errorf("ping after Kill = nil, want an error")
	}
	s.Restart()
	if v, err := c.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k after a restart without AOF = %q, %v, want redis.Nil (empty)", v, err)
	}
}

func TestServerRestartKeepsAOF(t *testing.T) {
	s := Start(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Restart()
	WaitFor(t, 10*time.Second, "the AOF to load", func() bool {
		v, err := c.Get(ctx, "k").Result()
		return err == nil && v == "v"
	})
}

func TestFaultProxyModes(t *testing.T) {
	s := Start(t)
	p := NewFaultProxy(t, s.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 300 * time.Millisecond, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	defer c.Close()
	ctx := t.Context()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING through Pass = %v", err)
	}
	p.SetMode(Blackhole)
	if err := c.Ping(ctx).Err(); err == nil {
		t.Errorf("PING through Blackhole = nil, want a timeout")
	}
	p.SetMode(Pass)
	WaitFor(t, 10*time.Second, "PING through Pass again", func() bool { return c.Ping(ctx).Err() == nil })

	// DropNextReply ignores commands other than XADD/EVALSHA, then drops one reply.
	p.SetMode(DropNextReply)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING through DropNextReply = %v, want nil (not a write)", err)
	}
	err := c.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "1-0", Values: []string{"f", "v"}}).Err()
	if err == nil || p.Dropped() != 1 || p.Mode() != Pass {
		t.Errorf("XADD through DropNextReply = %v, dropped %d, mode %v; want an error, 1, Pass", err, p.Dropped(), p.Mode())
	}
	if n, _ := s.Client(t).XLen(ctx, "s").Result(); n != 1 {
		t.Errorf("XLEN s = %d, want 1 (the server executed the write)", n)
	}
	p.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Errorf("PING after Close = nil, want an error")
	}
}
