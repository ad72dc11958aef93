// Package inflight counts work in progress that a shutdown waits for, when the work may start
// while the shutdown already waits (a request that was being served when the server stopped
// accepting): sync.WaitGroup forbids an Add from zero concurrent with Wait.
package inflight

import (
	"context"
	"sync"
)

// Counter counts work in progress. The zero value is ready to use; it is safe for concurrent
// use.
type Counter struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n reaches 0; nil until a Wait needs it
}

// Add counts one more piece of work.
func (c *Counter) Add() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

// Done counts one piece of work finished.
func (c *Counter) Done() {
	c.mu.Lock()
	c.n--
	if c.n < 0 {
		c.mu.Unlock()
		panic("inflight: Done without Add")
	}
	if c.n == 0 && c.zero != nil {
		close(c.zero)
		c.zero = nil
	}
	c.mu.Unlock()
}

// Wait waits until no work is in progress, or ctx is done (its error then).
func (c *Counter) Wait(ctx context.Context) error {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return nil
	}
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	zero := c.zero
	c.mu.Unlock()
	select {
	case <-zero:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Len returns the work in progress.
func (c *Counter) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
