package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// TestRedisRunStartBurst starts 400 runs at once on a store whose pool has 2 connections
// and a short pool timeout: the run starts' reads and creations share pipelines, so none
// fails with a pool timeout, and each caller gets its own answer.
func TestRedisRunStartBurst(t *testing.T) {
	srv := redistest.Start(t)
	o, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	o.PoolSize, o.MaxActiveConns, o.PoolTimeout = 2, 2, 200*time.Millisecond
	o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second
	s := newRedisStore(t, recorder.RedisConfig{Options: o, Prefix: uniquePrefix()})
	const n = 400
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			ctx := t.Context()
			tid, rid := fmt.Sprintf("t%d", i%100), fmt.Sprintf("r%d", i)
			if _, err := s.Thread(ctx, tid); err != nil && !errors.Is(err, recorder.ErrThreadNotFound) {
				errs[i] = fmt.Errorf("Thread: %w", err)
				return
			}
			r := testRun(tid, rid)
			if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
				errs[i] = fmt.Errorf("CreateRun: %w", err)
				return
			}
			got, err := s.Run(ctx, tid, rid)
			if err != nil || got.RunID != rid || got.Epoch != r.Epoch {
				errs[i] = fmt.Errorf("Run = %+v, %v, want run %s epoch %s", got, err, rid, r.Epoch)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// A second creation of the same run is still refused: each call gets its own reply.
	if _, err := s.CreateRun(t.Context(), testRun("t1", "r1"), recorder.CreateOptions{}); !errors.Is(err, recorder.ErrRunAlreadyStarted) {
		t.Errorf("CreateRun(existing) = %v, want ErrRunAlreadyStarted", err)
	}
	for i := range 100 {
		th, err := s.Thread(t.Context(), fmt.Sprintf("t%d", i))
		if err != nil || th.RunCount != 4 {
			t.Errorf("Thread(t%d) = %+v, %v, want 4 runs", i, th, err)
		}
	}
}

// TestRedisCreateRunAfterScriptFlush: a coalesced EVALSHA that finds the script cache empty
// (Redis restarted) is retried with EVAL.
func TestRedisCreateRunAfterScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix()})
	if _, err := s.CreateRun(t.Context(), testRun("t", "r1"), recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRun(t.Context(), testRun("t", "r2"), recorder.CreateOptions{}); err != nil {
		t.Errorf("CreateRun after SCRIPT FLUSH = %v, want nil", err)
	}
}

// TestRedisCreateRunRetried: a creation applied by an attempt whose reply was lost, sent again
// with the same epoch, succeeds; another creation of the same run id is still refused.
func TestRedisCreateRunRetried(t *testing.T) {
	srv := redistest.Start(t)
	s := newRedisStore(t, recorder.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix()})
	ctx := t.Context()
	if _, err := s.CreateRun(ctx, testRun("t", "r1"), recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r2 := testRun("t", "r2")
	r2.ParentRunID = "r1"
	if _, err := s.CreateRun(ctx, r2, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	th, err := s.CreateRun(ctx, r2, recorder.CreateOptions{})
	if err != nil || th.LatestRunID != "r1" {
		t.Errorf("CreateRun(same run, same epoch) = %+v, %v, want success with latest run r1", th, err)
	}
	if _, err := s.CreateRun(ctx, testRun("t", "r2"), recorder.CreateOptions{}); !errors.Is(err, recorder.ErrRunAlreadyStarted) {
		t.Errorf("CreateRun(same run, new epoch) = %v, want ErrRunAlreadyStarted", err)
	}
}

// TestRedisCoalescedCallDroppedWhenCallerLeft pauses a private redis-server (SIGSTOP) so that
// every pipeline sender is stuck, queues a run creation behind them whose caller gives up, then
// lets Redis continue: the senders drain the queue, and the creation whose caller was told it
// failed is not sent, so no run appears later that nobody pumps. Reads queued meanwhile with a
// live caller are still answered.
func TestRedisCoalescedCallDroppedWhenCallerLeft(t *testing.T) {
	srv := redistest.Start(t)
	o, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	o.ReadTimeout, o.WriteTimeout, o.MaxRetries, o.ContextTimeoutEnabled = 20*time.Second, 20*time.Second, -1, true
	s := newRedisStore(t, recorder.RedisConfig{Options: o, Prefix: uniquePrefix()})
	// A first creation loads the script into Redis (a pipeline sends it by its hash).
	if _, err := s.CreateRun(t.Context(), testRun("warm", "r"), recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its sender goroutine ends after it answered: a call queued before then would be sent by
	// it, not inline.
	for giveUp := time.Now().Add(10 * time.Second); recorder.CoalescerSenders(s) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(giveUp) {
			t.Fatalf("%d senders still in flight after the warm-up answered", recorder.CoalescerSenders(s))
		}
	}
	srv.Stop()
	stopped := true
	defer func() {
		if stopped {
			srv.Continue()
		}
	}()
	// A lone read whose caller gives up is sent by that caller (nothing else in flight) and
	// returns at its deadline: the client's I/O deadline is the caller's.
	for i := range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		_, err := s.Thread(ctx, fmt.Sprintf("lone%d", i))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("lone read %d while Redis is paused = %v, want the caller's deadline", i, err)
		}
	}
	if n := recorder.CoalescerSenders(s); n != 0 {
		t.Fatalf("%d senders in flight after the lone reads returned, want 0", n)
	}
	// Reads whose callers keep waiting (no deadline: never sent inline) fill every sender
	// slot, so the next call is queued, not sent. Two reads queued at once may be taken by
	// one sender (the other, started for the second, then finds nothing and ends): reads are
	// started until every slot holds a stuck pipeline, at most maxReads of them, and the test
	// fails rather than waits for ever.
	const slots, maxReads = 4, 64
	reads := make(chan error, maxReads)
	started := 0
	giveUp := time.Now().Add(30 * time.Second)
	for recorder.CoalescerSenders(s) < slots {
		if started == maxReads || time.Now().After(giveUp) {
			t.Fatalf("%d senders in flight after %d reads while Redis is paused, want %d", recorder.CoalescerSenders(s), started, slots)
		}
		before := recorder.CoalescerSenders(s)
		go func(i int) {
			_, err := s.Thread(t.Context(), fmt.Sprintf("w%d", i))
			reads <- err
		}(started)
		started++
		for wait := time.Now().Add(time.Second); recorder.CoalescerSenders(s) <= before && time.Now().Before(wait); {
			time.Sleep(time.Millisecond)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	_, err = s.CreateRun(ctx, testRun("t", "r"), recorder.CreateOptions{})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreateRun while Redis is paused = %v, want the caller's deadline", err)
	}
	srv.Continue()
	stopped = false
	for range started {
		if err := <-reads; !errors.Is(err, recorder.ErrThreadNotFound) {
			t.Fatalf("a read waiting through the pause = %v, want ErrThreadNotFound", err)
		}
	}
	// Queued after the creation: answered once the senders drained the queue.
	if _, err := s.Thread(t.Context(), "t"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Fatalf("Thread(t) after Redis continued = %v, want ErrThreadNotFound: the abandoned creation was sent", err)
	}
	if _, err := s.Run(t.Context(), "t", "r"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Fatalf("Run(t, r) after Redis continued = %v, want ErrThreadNotFound", err)
	}
}
