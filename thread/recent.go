package thread

import (
	"container/list"
	"sync"

	"github.com/agui-proxy/agui-proxy/compact"
)

// recentBranchesBytes bounds the memory of Service.recent.
const recentBranchesBytes = 64 << 20

// foldMinBytes is the least size of a branch (its flat bytes) whose fold is kept: folding a
// smaller branch again costs less than keeping its fold (messages and state parsed, held by
// the garbage collector's graph) for every thread a replica serves. A variable for the tests.
var foldMinBytes = 16 << 10

// mayKeepFold reports whether the fold of the branch that extends base by evs can be kept
// (recent.put keeps those of branches from foldMinBytes on): the branch is at most base's
// bytes and the run's.
func mayKeepFold(base *loadedBranch, evs []compact.Event) bool {
	n := 0
	if base != nil {
		n = base.flat.bytes()
	}
	for _, e := range evs {
		if n >= foldMinBytes {
			break
		}
		n += len(e.Raw) + 1
	}
	return n >= foldMinBytes
}

// recentBranches keeps, per thread, the branch of the run whose checkpoint this process built
// last, with the run's epoch. The checkpoint of the next run (built as that run ends, before
// its terminal event is sent) extends it instead of reading the segment back from the store
// and splicing and parsing it again: a run's end then reads its own events, not the thread's.
// An entry serves only the run it names with the same epoch (a run deleted and made again has
// a new one). Bounded by bytes; the least recently used thread's entry goes first.
type recentBranches struct {
	mu       sync.Mutex
	byThread map[string]*list.Element // of *recentBranch
	order    *list.List               // most recently used first
	bytes    int
	max      int
}

type recentBranch struct {
	thread, run, epoch string
	b                  *loadedBranch
	size               int
}

func newRecentBranches(max int) *recentBranches {
	return &recentBranches{byThread: map[string]*list.Element{}, order: list.New(), max: max}
}

// get returns the kept branch of run (with epoch) of thread, or nil.
func (c *recentBranches) get(thread, run, epoch string) *loadedBranch {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byThread[thread]
	if !ok {
		return nil
	}
	e := el.Value.(*recentBranch)
	if e.run != run || e.epoch != epoch {
		return nil
	}
	c.order.MoveToFront(el)
	return e.b
}

// has reports whether run is the thread's kept run (whatever its epoch).
func (c *recentBranches) has(thread, run string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byThread[thread]
	return ok && el.Value.(*recentBranch).run == run
}

// put keeps b as the branch of run (with epoch) of thread, in place of the thread's previous one.
func (c *recentBranches) put(thread, run, epoch string, b *loadedBranch) {
	size := 2*b.flat.bytes() + 64
	if b.seg != nil && b.seg.Base != nil {
		size += b.seg.Base.bytes() + b.seg.deltaBytes()
	}
	if b.fold.Load() != nil {
		// A fold holds the branch's messages parsed and rendered, their content, and each
		// run's own events: 3.6 times the branch's bytes on a chat thread of 1,000 runs (heap
		// after GC, with the fold kept and without).
		if fold := 4 * b.flat.bytes(); b.flat.bytes() >= foldMinBytes && size+fold <= c.max {
			size += fold
		} else {
			b.fold.Store(nil) // small enough to fold again, or too large to keep with the branch
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(thread)
	if size > c.max {
		return
	}
	for c.bytes+size > c.max {
		c.remove(c.order.Back().Value.(*recentBranch).thread)
	}
	c.byThread[thread] = c.order.PushFront(&recentBranch{thread: thread, run: run, epoch: epoch, b: b, size: size})
	c.bytes += size
}

func (c *recentBranches) remove(thread string) {
	if el, ok := c.byThread[thread]; ok {
		c.bytes -= el.Value.(*recentBranch).size
		c.order.Remove(el)
		delete(c.byThread, thread)
	}
}
