package recorder

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Coalescing limits (see coalescer).
const (
	// coalesceSenders bounds the pipelines in flight at once, so a burst of run starts takes
	// at most this many pool connections instead of one per call.
	coalesceSenders = 4
	// coalesceMaxCalls bounds the calls sent in one pipeline.
	coalesceMaxCalls = 256
)

// coalescer merges concurrent small calls (a run start's thread read, run read and creation)
// into shared pipelines: each caller queues its commands; while fewer than coalesceSenders
// pipelines are in flight the caller starts a sender goroutine, which sends everything queued
// in one round trip, then whatever queued meanwhile, until the queue is empty, and ends. Under
// a burst of run starts that turns hundreds of round trips (and pool waits that end in
// "connection pool timeout") into a few pipelines. The sender is a goroutine, not the caller
// itself, so that every caller waits only as long as its own context allows (a paused Redis
// holds a pipeline until the client's read timeout); at most coalesceSenders run at once,
// and each ends with its last pipeline (bounded by the client's timeouts, failed at once
// after Close).
//
// A call made while nothing is queued or in flight (the usual case below a burst: one run
// start at a time) is sent by its caller, alone, under its own context, when that context has
// a deadline and the client bounds a command by it (bounded:
// redis.Options.ContextTimeoutEnabled, as the store's own options set it; the client does not
// stop a read when a context is merely cancelled). The caller then waits no longer than its
// context allows either, and the run start skips handing its call to a new goroutine and its
// answer back (a tenth to a fifth of a lone run creation's 0.4-0.5 ms on a 2-core machine).
type coalescer struct {
	c       redis.UniversalClient
	bounded bool // c bounds a command's I/O by its context's deadline: a lone call is sent inline

	mu      sync.Mutex
	queue   []*pipeCall
	senders int
}

// pipeCall is one caller's commands and the channel its result is sent on.
type pipeCall struct {
	ctx   context.Context         // the caller's: once done, the call is no longer sent
	queue func(p redis.Pipeliner) // adds the call's commands to the pipeline
	done  chan pipeResult         // buffered 1
}

// pipeResult answers a pipeCall.
type pipeResult struct {
	ran bool  // the pipeline ran: the call's commands hold their replies
	err error // the first error among the call's commands, or the pipeline's
}

// do queues the commands added by queue, makes sure a sender will send them, and waits for
// them to be answered or for ctx to end. answered reports that the pipeline ran: only then may
// the caller read the Cmds queue created (a sender creates them). err is the first error
// among the call's commands (redis.Nil included, as for a plain pipeline), the pipeline's, or
// ctx's when it ended first.
func (c *coalescer) do(ctx context.Context, queue func(p redis.Pipeliner)) (answered bool, err error) {
	call := &pipeCall{ctx: ctx, queue: queue, done: make(chan pipeResult, 1)}
	c.mu.Lock()
	if c.bounded && c.senders == 0 && len(c.queue) == 0 {
		if _, ok := ctx.Deadline(); ok {
			return c.sendInline(call)
		}
	}
	c.queue = append(c.queue, call)
	send := c.senders < coalesceSenders
	if send {
		c.senders++
	}
	c.mu.Unlock()
	if send {
		go c.send()
	}
	select {
	case res := <-call.done:
		return res.ran, res.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// sendInline sends call, alone, from its caller's goroutine, under its context (c.mu is held
// on entry, and released). It counts as a sender meanwhile. It never drains the queue, and
// needs not: it is the only sender when it starts, so a call queued meanwhile found fewer than
// coalesceSenders and started a sender goroutine, or found sender goroutines running, which
// take it before they end.
func (c *coalescer) sendInline(call *pipeCall) (answered bool, err error) {
	c.senders++
	c.mu.Unlock()
	if err := call.ctx.Err(); err == nil {
		c.sendBatch(call.ctx, []*pipeCall{call})
	} else {
		call.done <- pipeResult{err: err}
	}
	c.mu.Lock()
	c.senders--
	c.mu.Unlock()
	res := <-call.done // (buffered: answered above)
	if res.err != nil && expired(call.ctx) {
		// The deadline cut the round trip (the client's I/O deadline is the context's): the
		// caller is told so as do tells a caller whose context ended first.
		<-call.ctx.Done()
		return false, call.ctx.Err()
	}
	return res.ran, res.err
}

// expired reports whether ctx has ended or its deadline has passed (its timer may not have
// fired yet when the client's I/O deadline, the same instant, already did).
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// send sends queued calls, coalesceMaxCalls per pipeline, until the queue is empty. A call
// whose caller stopped waiting (its context ended while it was queued) is dropped unsent: its
// caller was told the call failed, so it must not take effect later (a run created after its
// request gave up would keep its thread busy with a run nobody pumps).
func (c *coalescer) send() {
	for {
		c.mu.Lock()
		n := min(len(c.queue), coalesceMaxCalls)
		if n == 0 {
			c.senders--
			c.mu.Unlock()
			return
		}
		batch := make([]*pipeCall, n)
		copy(batch, c.queue)
		rest := copy(c.queue, c.queue[n:])
		clear(c.queue[rest:])
		c.queue = c.queue[:rest]
		c.mu.Unlock()
		batch = slices.DeleteFunc(batch, func(call *pipeCall) bool { return call.ctx.Err() != nil })
		if len(batch) > 0 {
			// The pipeline serves many callers: none of their contexts may cancel it. The
			// client's read and write timeouts bound it.
			c.sendBatch(context.Background(), batch)
		}
	}
}

// sendBatch sends one pipeline under ctx and answers each call with the first error of its
// commands.
func (c *coalescer) sendBatch(ctx context.Context, batch []*pipeCall) {
	ends := make([]int, len(batch))
	p := c.c.Pipeline()
	for i, call := range batch {
		call.queue(p)
		ends[i] = p.Len()
	}
	cmds, err := p.Exec(ctx)
	if len(cmds) != ends[len(ends)-1] {
		// The pipeline failed before any reply (closed client, no connection).
		for _, call := range batch {
			call.done <- pipeResult{err: err}
		}
		return
	}
	lo := 0
	for i, call := range batch {
		var first error
		for _, cmd := range cmds[lo:ends[i]] {
			if e := cmd.Err(); e != nil {
				first = e
				break
			}
		}
		call.done <- pipeResult{ran: true, err: first}
		lo = ends[i]
	}
}
