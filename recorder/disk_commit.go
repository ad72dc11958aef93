package recorder

import (
	"errors"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// groupCommit merges the DiskStore's small concurrent writes (run starts, finishes, lease
// renewals, stop requests) into shared transactions: each commit costs an fsync and the pages
// it dirties, and at a burst of run starts (2,000 streams opened over 10 s) one transaction
// per start kept bbolt's single writer busy with fsyncs while the events waited; the first
// event of a run waited 4.4 s at the median.
//
// There is no goroutine and no delay: a write made while none is in flight commits at once,
// alone, in its caller (the usual case below a burst). A write made while one is in flight
// queues, and when the one in flight ends its caller hands the queue to the first queued
// write's caller, which commits everything queued in one transaction and hands on what queued
// meanwhile. Each caller so commits at most one transaction, and waits at most for the one in
// flight and its own.
//
// A write whose function fails (an errAbort refusal, an error, a panic) is taken out and
// committed alone by its own caller, and the others are committed again without it, as
// bbolt's DB.Batch does: a write's function must therefore be idempotent (it may run more
// than once, on rolled-back transactions).
type groupCommit struct {
	db *bolt.DB

	mu    sync.Mutex
	busy  bool         // a transaction is being committed, or the baton is being handed on
	queue []*groupCall // writes waiting for the next transaction
}

// groupCall is one queued write.
type groupCall struct {
	fn     func(tx *bolt.Tx) error
	lead   chan []*groupCall // the writes this caller commits, as the next leader (buffered 1)
	done   chan error        // this write's outcome, when another caller committed it (buffered 1)
	result error             // calls[0]'s outcome, for the leader itself
}

// errSolo answers a write that failed in a shared transaction: its caller commits it alone.
var errSolo = errors.New("commit alone")

// update commits fn, alone or with the writes queued beside it (see groupCommit).
func (g *groupCommit) update(fn func(tx *bolt.Tx) error) error {
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		defer g.handOn() // also when fn panics: the next caller must not wait forever
		return g.db.Update(fn)
	}
	c := &groupCall{fn: fn, lead: make(chan []*groupCall, 1), done: make(chan error, 1)}
	g.queue = append(g.queue, c)
	g.mu.Unlock()
	var err error
	select {
	case err = <-c.done:
	case calls := <-c.lead:
		g.commitAll(calls)
		g.handOn()
		err = c.result
	}
	if err == errSolo {
		// Its own function failed (or panicked) beside others: the refusal, the error or the
		// panic is this caller's alone.
		return g.db.Update(fn)
	}
	return err
}

// handOn ends this caller's turn: the queued writes go to the first one's caller, which
// commits them; with none queued the next write commits at once.
func (g *groupCommit) handOn() {
	g.mu.Lock()
	calls := g.queue
	g.queue = nil
	if len(calls) == 0 {
		g.busy = false
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	calls[0].lead <- calls
}

// commitAll commits calls in one transaction, again without each one whose function fails
// (answered errSolo), and answers every one: calls[0], whose caller is this goroutine, in
// calls[0].result.
func (g *groupCommit) commitAll(calls []*groupCall) {
	answer := func(c *groupCall, err error) {
		if c == calls[0] {
			c.result = err
			return
		}
		c.done <- err
	}
	pending := calls
	for len(pending) > 0 {
		failed := -1
		err := g.db.Update(func(tx *bolt.Tx) error {
			for i, c := range pending {
				if err := callSafely(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, c := range pending {
				answer(c, err)
			}
			return
		}
		answer(pending[failed], errSolo)
		pending = append(pending[:failed:failed], pending[failed+1:]...)
	}
}

// callSafely runs fn, turning a panic into an error: the write is then committed alone by
// its own caller, where it panics again, in the goroutine it belongs to.
func callSafely(fn func(tx *bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if recover() != nil {
			err = errSolo
		}
	}()
	return fn(tx)
}
