package live

import (
	"errors"
	"sync"
)

// ErrSlowClient ends a subscriber whose queue grew past its limit (Options.QueueBytes). The
// client is disconnected and can resume from its last event id; the run is never slowed down
// for it. It is the one answer to "why was this client dropped".
var ErrSlowClient = errors.New("client too slow: queue limit exceeded")

// Heartbeat is the SSE comment written to a stream that stayed silent for Options.Heartbeat.
var Heartbeat = []byte(": ping\n\n")

// DefaultBacklogBytes is how many bytes of a run's latest events a hub keeps, so a subscriber
// that read the store up to a seq the hub already passed gets the events in between from
// memory (see Hub.Subscribe).
const DefaultBacklogBytes = 16 << 10

// Event is one frame of a run as published.
type Event struct {
	// Seq is the event's seq in its run; 0 for a frame that is not an event (a comment the
	// agent sent), which reaches the subscribers present but is neither kept nor counted.
	Seq int64
	// Type is the AG-UI event type; "" when the frame is not a JSON event.
	Type string
	// Frame is the SSE frame with its id line. It must not be modified after Publish.
	Frame []byte
	// More tells that the publisher has its next frame at hand (it is buffered, already
	// read): a subscriber that writes to its connection itself (ServeConn) may hold this one
	// and write both at once. A publisher about to wait publishes with More false (or ends
	// the hub), which writes what was held.
	More bool
}

// Hub fans one run's events out to its live subscribers. Publish never blocks; a subscriber
// that falls behind by more than its queue bound is dropped (ErrSlowClient). It keeps the
// latest events, at most DefaultBacklogBytes, so that a subscriber joining late misses nothing
// the store does not have yet; a publisher that knows what the store has (PublishStored)
// keeps only the rest. A Hub is safe for concurrent use.
type Hub struct {
	mu           sync.Mutex
	subs         map[*Subscriber]struct{}
	last         int64   // seq of the last event published
	backlog      []Event // the latest events, oldest first, at most backlogLimit bytes
	backlogArray []Event // the array backlog lies in, from its start (see dropFront)
	backlogBytes int
	backlogLimit int
	over         bool  // End or Fail was called
	err          error // delivered to subscribers at the end (nil: io.EOF)
}

// NewHub returns a hub that keeps backlogBytes of the latest events (0: DefaultBacklogBytes,
// negative: none).
func NewHub(backlogBytes int) *Hub {
	if backlogBytes == 0 {
		backlogBytes = DefaultBacklogBytes
	}
	return &Hub{backlogLimit: max(backlogBytes, 0)}
}

// Publish queues ev for every subscriber and keeps it in the backlog. Events must be
// published in seq order; ev.Frame must not be modified afterwards.
func (h *Hub) Publish(ev Event) { h.PublishStored(ev, 0) }

// PublishStored is Publish for a publisher that knows the store holds every event up to
// storedThrough: the backlog lets those go first, so it holds only what a subscriber could not
// read from the store yet (plus ev), still at most its byte limit. Subscribe reports the
// events it no longer holds as the gap to read from the store. On a run whose events are
// stored as fast as they come, the backlog then holds an event or two instead of the run's
// latest 16 KiB.
func (h *Hub) PublishStored(ev Event, storedThrough int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.over {
		return
	}
	if storedThrough > 0 {
		h.forget(storedThrough)
	}
	if ev.Seq > 0 {
		h.last = ev.Seq
		h.keep(ev)
	}
	for s := range h.subs {
		if !s.push(ev) {
			delete(h.subs, s)
		}
	}
}

// Flush makes the subscribers that hold frames published with More (see Event.More) write
// them now: the publisher is about to wait for something other than its next frame.
func (h *Hub) Flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if !s.flushHeld() {
			delete(h.subs, s)
		}
	}
}

// keep appends ev to the backlog and trims it to its limit. h.mu is held.
func (h *Hub) keep(ev Event) {
	if h.backlogLimit == 0 {
		return
	}
	if c := cap(h.backlog); len(h.backlog) == c {
		h.backlog = append(h.backlog, ev) // a new array
		h.backlogArray = h.backlog
	} else {
		h.backlog = append(h.backlog, ev)
	}
	h.backlogBytes += len(ev.Frame)
	drop := 0
	for h.backlogBytes > h.backlogLimit && drop < len(h.backlog) {
		h.backlogBytes -= len(h.backlog[drop].Frame)
		drop++
	}
	h.dropFront(drop)
}

// dropFront removes the backlog's first n events. The backlog slides along its array, and
// once the dead part at the array's front is as long as what is left, the rest moves to the
// front (amortized O(1) per event): a backlog trimmed at every event keeps its array instead
// of allocating a new one each time it reaches the end. h.mu is held.
func (h *Hub) dropFront(n int) {
	if n == 0 {
		return
	}
	clear(h.backlog[:n])
	h.backlog = h.backlog[n:]
	if dead := cap(h.backlogArray) - cap(h.backlog); dead >= len(h.backlog) {
		k := copy(h.backlogArray[:cap(h.backlogArray)], h.backlog) // (no overlap: dead >= k)
		clear(h.backlog)
		h.backlog = h.backlogArray[:k]
	}
}

// forget drops the backlog's events with seq <= through. h.mu is held.
func (h *Hub) forget(through int64) {
	drop := 0
	for drop < len(h.backlog) && h.backlog[drop].Seq <= through {
		h.backlogBytes -= len(h.backlog[drop].Frame)
		drop++
	}
	h.dropFront(drop)
}

// End marks the run over: subscribers write what is queued, then end with io.EOF. Later
// Publish calls are ignored.
func (h *Hub) End() { h.finish(nil) }

// Fail ends the hub like End, but its subscribers end with err once their queue is written
// (a follower that lost the run).
func (h *Hub) Fail(err error) { h.finish(err) }

func (h *Hub) finish(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.over {
		return
	}
	h.over, h.err = true, err
	for s := range h.subs {
		s.finish(err)
	}
	h.subs = nil
}

// Subscribe returns a subscriber that receives every event with seq > after published from
// now on, preceded by those the backlog still holds. When the backlog no longer holds the
// event after `after`, the events in (after, gapEnd] are not delivered: the caller reads them
// from the store first (they were published before the subscription, so the store has them
// or will). gapEnd == after means no gap. On a hub that has ended the subscriber delivers
// what the backlog holds, then ends.
func (h *Hub) Subscribe(after int64, o Options) (s *Subscriber, gapEnd int64) {
	s = newSubscriber(h, o)
	h.mu.Lock()
	defer h.mu.Unlock()
	gapEnd = after
	if after < h.last {
		i := 0
		for i < len(h.backlog) && h.backlog[i].Seq <= after {
			i++
		}
		switch {
		case i == len(h.backlog): // nothing after `after` kept
			gapEnd = h.last
		case h.backlog[i].Seq > after+1:
			gapEnd = h.backlog[i].Seq - 1
		}
		for _, ev := range h.backlog[i:] {
			s.queue = append(s.queue, ev)
			s.queued += len(ev.Frame)
		}
	}
	s.after = max(after, gapEnd)
	if h.over {
		s.ended, s.err = true, h.err
		return s, gapEnd
	}
	if h.subs == nil {
		h.subs = make(map[*Subscriber]struct{})
	}
	h.subs[s] = struct{}{}
	return s, gapEnd
}

// Last returns the seq of the last event published.
func (h *Hub) Last() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// Subscribers returns the number of subscribers receiving events.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func (h *Hub) remove(s *Subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

func (h *Hub) ended() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.over
}
