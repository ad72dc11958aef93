package inflight

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestCounter: Wait returns at once with nothing in progress, waits for the last Done, gives
// up with ctx, and may run concurrently with Adds from zero (run with -race).
func TestCounter(t *testing.T) {
	var c Counter
	if err := c.Wait(context.Background()); err != nil {
		t.Fatalf("Wait with nothing in progress: %v", err)
	}
	c.Add()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := c.Wait(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Wait with work in progress and a done ctx = %v, want DeadlineExceeded", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait(context.Background()) }()
	c.Done()
	if err := <-done; err != nil {
		t.Fatalf("Wait after the last Done: %v", err)
	}
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() { c.Add(); c.Done() })
		wg.Go(func() { c.Wait(context.Background()) })
	}
	wg.Wait()
	if c.Len() != 0 {
		t.Errorf("Len = %d, want 0", c.Len())
	}
}
