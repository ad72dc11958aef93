package live

import (
	"sync"
	"time"
)

// Heartbeats of direct-mode subscribers (ServeConn).
//
// A runtime timer per stream (time.AfterFunc) fires at its own instant and starts a goroutine
// each time: with thousands of streams, a heartbeat interval of 15 s means hundreds of separate
// wake-ups a second, each waking an idle thread of the process, and most of them only to find
// the stream was not silent and re-arm. A beatClock serves every subscriber that shares one
// heartbeat interval from one goroutine that wakes once per tick (the interval / beatSlots, at
// most maxBeatTick): the subscribers due in a tick are handled together, each heartbeat is
// written between Heartbeat and Heartbeat plus one tick after the last write, and a silent
// stream costs an entry in a list, not a timer.

// beatSlots is how many ticks a heartbeat interval spans: a heartbeat comes at most
// Heartbeat/beatSlots late.
const beatSlots = 16

// maxBeatTick bounds a clock's tick (a 15 s interval ticks every 0.94 s); minBeatTick keeps
// tiny intervals (tests) from spinning.
const (
	maxBeatTick = time.Second
	minBeatTick = time.Millisecond
)

// beatClock schedules the heartbeats of the direct-mode subscribers whose Options.Heartbeat is
// every. Subscribers wait in a ring of slots, one per tick, as intrusive lists; its goroutine
// runs while any subscriber is scheduled (it ends at the first tick that finds none, and the
// next schedule starts it again), so the clock owns it and an idle process keeps none.
type beatClock struct {
	every time.Duration
	tick  time.Duration

	mu      sync.Mutex // guards the fields below and the beat links of scheduled subscribers
	start   time.Time  // tick 0 (the goroutine's ticker started then)
	done    int64      // the last tick whose slot was handled
	slots   []*Subscriber
	n       int  // subscribers scheduled
	running bool // the goroutine runs
}

// beatLink is a subscriber's place in its clock; guarded by the clock's mu.
type beatLink struct {
	prev, next *Subscriber
	slot       int // index in slots; -1: not scheduled
}

var clocks struct {
	mu sync.Mutex
	m  map[time.Duration]*beatClock
}

// clockFor returns the clock of the heartbeat interval every (> 0), made on first use.
// Clocks are few (one per distinct interval a process configures) and kept.
func clockFor(every time.Duration) *beatClock {
	clocks.mu.Lock()
	defer clocks.mu.Unlock()
	if c := clocks.m[every]; c != nil {
		return c
	}
	tick := min(max(every/beatSlots, minBeatTick), maxBeatTick)
	// Room for a full interval ahead of the last tick handled, and for a goroutine that
	// lags a few ticks behind the clock (a later deadline is clamped and re-armed).
	n := int((every+tick-1)/tick) + 4
	c := &beatClock{every: every, tick: tick, slots: make([]*Subscriber, n)}
	if clocks.m == nil {
		clocks.m = make(map[time.Duration]*beatClock)
	}
	clocks.m[every] = c
	return c
}

// schedule arranges for s.heartbeat to run once `after` has passed (at the first tick at or
// after it), replacing any earlier schedule of s. s.mu is held.
func (c *beatClock) schedule(s *Subscriber, after time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unlink(s)
	now := time.Now()
	if !c.running {
		c.running = true
		c.start, c.done = now, 0
		go c.run()
	}
	c.link(s, now, after)
}

// link puts s, not scheduled, in the slot of the first tick at or after now+after; c.mu is
// held and the goroutine runs.
func (c *beatClock) link(s *Subscriber, now time.Time, after time.Duration) {
	k := int64(now.Sub(c.start)/c.tick) + int64((after+c.tick-1)/c.tick)
	k = min(max(k, c.done+1), c.done+int64(len(c.slots)))
	i := int(k % int64(len(c.slots)))
	s.beat.slot, s.beat.prev, s.beat.next = i, nil, c.slots[i]
	if head := c.slots[i]; head != nil {
		head.beat.prev = s
	}
	c.slots[i] = s
	c.n++
}

// unschedule removes s from the clock, if it is there. s.mu is held.
func (c *beatClock) unschedule(s *Subscriber) {
	c.mu.Lock()
	c.unlink(s)
	c.mu.Unlock()
}

// unlink removes s from its slot's list; c.mu is held.
func (c *beatClock) unlink(s *Subscriber) {
	b := &s.beat
	if b.slot < 0 {
		return
	}
	if b.prev != nil {
		b.prev.beat.next = b.next
	} else {
		c.slots[b.slot] = b.next
	}
	if b.next != nil {
		b.next.beat.prev = b.prev
	}
	b.prev, b.next, b.slot = nil, nil, -1
	c.n--
}

// run handles the slots of the ticks that passed, once per tick, until a tick finds no
// subscriber scheduled. A subscriber written to within the interval (the usual case: a
// stream's events come more often than its heartbeat) is moved to the slot of its new
// deadline right there, from its last write's time, without taking its mu: the clock never
// waits for a stream that is writing. The silent ones leave the clock before their heartbeat
// runs (with c.mu released: heartbeat takes s.mu, and s.mu is held when a subscriber
// schedules itself again), so a subscriber released meanwhile is simply not scheduled again.
func (c *beatClock) run() {
	t := time.NewTicker(c.tick)
	defer t.Stop()
	var passed, due []*Subscriber
	for range t.C {
		c.mu.Lock()
		now := time.Now()
		tick := int64(now.Sub(c.start) / c.tick)
		for ; c.done < tick; c.done++ {
			i := int((c.done + 1) % int64(len(c.slots)))
			for s := c.slots[i]; s != nil; {
				next := s.beat.next
				s.beat.prev, s.beat.next, s.beat.slot = nil, nil, -1
				c.n--
				passed = append(passed, s)
				s = next
			}
			c.slots[i] = nil
		}
		wall := now.UnixNano()
		for i, s := range passed {
			// (s.d was set before s was first scheduled, and every schedule since took c.mu:
			// reading it here does not race; lastWrite is atomic)
			if quiet := time.Duration(wall - s.d.lastWrite.Load()); quiet < c.every {
				c.link(s, now, c.every-quiet)
			} else {
				due = append(due, s)
			}
			passed[i] = nil
		}
		passed = passed[:0]
		if c.n == 0 && len(due) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		for i, s := range due {
			s.heartbeat()
			due[i] = nil
		}
		due = due[:0]
	}
}
