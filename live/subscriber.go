package live

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// Options are one subscriber's bounds and hooks: the same for the client that started a run
// and for every attacher.
type Options struct {
	// QueueBytes bounds the bytes queued for the client; a client that falls further behind
	// is dropped with ErrSlowClient. The frame being written does not count, and a frame
	// always fits an empty queue. 0: no bound.
	QueueBytes int
	// Heartbeat is the silence after which the Heartbeat comment is written; <= 0: never.
	Heartbeat time.Duration
	// WriteTimeout bounds each write to the client; 0: no deadline.
	WriteTimeout time.Duration
	// Gone is closed when the client went away (its request's context).
	Gone <-chan struct{}
	// OnWrite, when set, counts the frames and bytes each write delivered.
	OnWrite func(events, bytes int)
	// OnDrop, when set, counts a drop for slowness.
	OnDrop func()
	// OnQuiet, when set, is called after each heartbeat (in direct mode on the goroutine
	// that serves the heartbeats of every such stream: it must not block).
	OnQuiet func()
}

// spareCap is the largest queue backing array a subscriber keeps for reuse: an idle client
// holds little.
const spareCap = 32

// Filter decides what a subscriber writes for ev: the frame (nil: nothing) and whether the
// stream ends after it.
type Filter func(ev Event) (frame []byte, last bool)

// Subscriber is one client's bounded queue of a run's events. WriteTo writes them to the
// client; Close detaches it.
type Subscriber struct {
	h      *Hub
	o      Options
	notify chan struct{}

	mu     sync.Mutex // guards the fields below
	queue  []Event
	spare  []Event // the queue's other backing array (see WriteTo)
	queued int     // bytes in queue and in the batch WriteTo is writing
	// writing is the size of the first frame of the batch WriteTo is writing (0 when idle):
	// the frame the client is reading, which does not count against the limit.
	writing int
	after   int64 // events with seq <= after are not queued
	ended   bool  // no more events will come
	err     error // ErrSlowClient when dropped, or the hub's failure once ended
	closed  bool
	d       *direct // the client's connection in direct mode (ServeConn); nil: WriteTo writes

	beat beatLink // the subscriber's place in its beatClock (direct mode; guarded by the clock)
}

func newSubscriber(h *Hub, o Options) *Subscriber {
	return &Subscriber{h: h, o: o, notify: make(chan struct{}, 1), beat: beatLink{slot: -1}}
}

// push queues ev; it reports false when the subscriber must be dropped.
func (s *Subscriber) push(ev Event) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if ev.Seq > 0 && ev.Seq <= s.after {
		s.mu.Unlock()
		return true
	}
	if s.d != nil {
		if handled, ok := s.pushDirect(ev); handled {
			s.mu.Unlock()
			return ok
		}
	}
	// The frame the client is reading does not count against the limit, and a frame always
	// fits an empty queue: a client is never dropped on its first frame (RUN_STARTED carries
	// the run's input and may be the largest of the run), nor for the frame that follows a
	// large one it is still reading. The queue holds at most limit bytes plus that one frame.
	oldest := s.writing
	if oldest == 0 && len(s.queue) > 0 {
		oldest = len(s.queue[0].Frame)
	}
	if s.o.QueueBytes > 0 && s.queued > 0 && s.queued-oldest+len(ev.Frame) > s.o.QueueBytes {
		s.err = ErrSlowClient
		s.queue, s.queued = nil, 0
		if s.d != nil {
			s.closeConn() // (a drain blocked writing to the client returns)
		}
		s.mu.Unlock()
		s.wake()
		if s.o.OnDrop != nil {
			s.o.OnDrop()
		}
		return false
	}
	s.queue = append(s.queue, ev)
	s.queued += len(ev.Frame)
	if s.d != nil && !s.d.draining {
		s.startDrain()
	}
	s.mu.Unlock()
	s.wake()
	return true
}

func (s *Subscriber) finish(err error) {
	s.mu.Lock()
	s.ended = true
	if s.err == nil {
		s.err = err
	}
	if s.d != nil {
		s.endConn()
	}
	s.mu.Unlock()
	s.wake()
}

func (s *Subscriber) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// WriteTo writes every event to w as it is queued, flushing after each batch, until the hub
// ended (io.EOF, or the hub's failure), filter marked an event the last (io.EOF), the
// subscriber was dropped (ErrSlowClient), the client went away (context.Canceled) or a write
// failed. filter nil writes every frame as published. Events go from the queue to w's buffer
// with no copy buffer of their own. A queued event counts against the limit until it is
// written. After Options.Heartbeat of silence the Heartbeat comment is written. The caller
// must be w's only writer and must have sent the headers.
func (s *Subscriber) WriteTo(w http.ResponseWriter, filter Filter) error {
	rc := http.NewResponseController(w)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		take := s.queue
		if len(take) > 0 { // the two backing arrays swap: push appends to the other one
			s.queue, s.spare = s.spare[:0], nil
			s.writing = len(take[0].Frame)
		}
		err, ended := s.err, s.ended
		s.mu.Unlock()
		if len(take) > 0 {
			events, n, last, werr := s.write(w, rc, take, filter)
			clear(take)
			s.mu.Lock()
			s.writing = 0
			if !s.closed && s.err != ErrSlowClient { // (a drop or Close reset the queue)
				if cap(take) <= spareCap {
					s.spare = take[:0] // (a large one, after a backlog or a burst, is let go)
				}
				s.queued -= n
			}
			s.mu.Unlock()
			if werr != nil {
				return werr
			}
			if s.o.OnWrite != nil && events > 0 {
				s.o.OnWrite(events, n)
			}
			if last {
				return io.EOF
			}
			if timer != nil {
				timer.Reset(s.o.Heartbeat)
			}
			continue
		}
		if err != nil {
			return err
		}
		if ended {
			return io.EOF
		}
		var tick <-chan time.Time
		if s.o.Heartbeat > 0 {
			if timer == nil {
				timer = time.NewTimer(s.o.Heartbeat)
			}
			tick = timer.C
		}
		select {
		case <-s.notify:
		case <-s.o.Gone:
			return context.Canceled
		case <-tick:
			if err := s.flushOut(w, rc, Heartbeat); err != nil {
				return err
			}
			if s.o.OnQuiet != nil {
				s.o.OnQuiet()
			}
			timer.Reset(s.o.Heartbeat)
		}
	}
}

// write writes the frames of evs (through filter) and flushes, each write bounded by
// Options.WriteTimeout (set again per frame, as in writeBlocking). It returns the frames
// written, the queued bytes they accounted for, and whether filter marked one the last.
func (s *Subscriber) write(w io.Writer, rc *http.ResponseController, evs []Event, filter Filter) (events, n int, last bool, err error) {
	wrote := false
	for _, ev := range evs {
		if s.o.WriteTimeout > 0 {
			rc.SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
		}
		n += len(ev.Frame)
		f := ev.Frame
		if filter != nil {
			f, last = filter(ev)
		}
		if len(f) > 0 {
			if _, err := w.Write(f); err != nil {
				return events, n, last, err
			}
			wrote = true
			events++
		}
		if last {
			break
		}
	}
	if wrote {
		err = rc.Flush()
	}
	return events, n, last, err
}

// flushOut writes b and flushes, under the write deadline.
func (s *Subscriber) flushOut(w io.Writer, rc *http.ResponseController, b []byte) error {
	if s.o.WriteTimeout > 0 {
		rc.SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return rc.Flush()
}

// Close detaches the subscriber from the hub. The run goes on.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	s.queue = nil
	if s.d != nil {
		s.closeConn()
	}
	s.mu.Unlock()
	s.h.remove(s)
	return nil
}
