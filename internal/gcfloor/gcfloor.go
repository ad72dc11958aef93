// Package gcfloor keeps the garbage collector's heap goal at or above a floor.
//
// The collector starts a cycle when the heap reaches about live × (1 + GOGC/100). With a small
// live heap (a proxy with few streams) that goal is a few megabytes, and a process that
// allocates tens of megabytes a second (a long thread's run end builds its whole branch)
// collects hundreds of times a second, each cycle scanning every goroutine's stack again. A
// floor raises GOGC while the live heap is small, so that the goal is at least the floor, and
// lowers it back to the base percent as the live heap grows past floor / (1 + percent/100);
// a large heap (many streams) is paced by the base percent alone. A memory limit (GOMEMLIMIT)
// still applies.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the GOGC the floor sets (a nearly empty heap would ask for more): the goal
// of the cycle after one whose live heap jumped is computed with the GOGC set for the heap
// before, until the finalizer retunes it, and this bounds that goal to 101 times the live heap.
const maxPercent = 10_000

// Floor retunes GOGC after each garbage collection; Stop ends it.
type Floor struct {
	base  int
	floor uint64

	mu      sync.Mutex
	stopped bool
	current int
	sample  []metrics.Sample
}

// sentinel is garbage whose finalizer runs once per collection: it retunes, then arms a new
// one.
type sentinel struct{ f *Floor }

// Start sets GOGC to base and keeps the heap goal at or above floor bytes from then on. It
// returns the Floor, whose Stop ends the retuning (GOGC then stays as last set).
func Start(base int, floor uint64) *Floor {
	f := &Floor{base: base, floor: floor, current: base,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	debug.SetGCPercent(base)
	f.tune()
	f.arm()
	return f
}

func (f *Floor) arm() {
	runtime.SetFinalizer(&sentinel{f}, func(s *sentinel) {
		if s.f.tune() {
			s.f.arm()
		}
	})
}

// Percent returns GOGC as the floor last set it.
func (f *Floor) Percent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current
}

// Stop ends the retuning; GOGC keeps its last value.
func (f *Floor) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
}

// tune sets GOGC for the live heap measured by the last collection; it reports false once
// stopped.
func (f *Floor) tune() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	metrics.Read(f.sample)
	var live uint64
	if f.sample[0].Value.Kind() == metrics.KindUint64 {
		live = f.sample[0].Value.Uint64()
	}
	p := PercentFor(f.base, f.floor, live)
	// Small changes are left alone: the goal moves with the live heap anyway.
	if p != f.current && (p > f.current*9/8 || p < f.current*7/8) {
		debug.SetGCPercent(p)
		f.current = p
	}
	return true
}

// PercentFor returns the GOGC that puts the heap goal of a live heap of live bytes at floor
// bytes, never below base: floor/live×100 − 100. The runtime's smallest goal is 4 MB scaled by
// GOGC/100, so the percent is also at most floor/4 MB×100 (a heap smaller than 4 MB would
// otherwise get a goal far past the floor), and at most maxPercent.
func PercentFor(base int, floor, live uint64) int {
	if floor <= live {
		return base
	}
	p := uint64(maxPercent)
	if live > 0 {
		p = min(p, floor/live*100-100+(floor%live)*100/live)
	}
	p = min(p, floor*100/runtimeHeapMinimum)
	return max(base, int(p))
}

// runtimeHeapMinimum is the Go runtime's smallest heap goal at GOGC 100 (defaultHeapMinimum).
const runtimeHeapMinimum = 4 << 20
