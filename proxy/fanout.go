package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// errSlowClient ends a subscriber whose queue grew past its limit. The client is disconnected
// and can resume from its last event id; the run is never slowed down for it.
var errSlowClient = errors.New("client too slow: queue limit exceeded")

// heartbeatFrame is the SSE comment written to a silent stream.
var heartbeatFrame = []byte(": ping\n\n")

// broadcast fans a run's frames out to its live subscribers. publish never blocks.
type broadcast struct {
	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	lastSeq int64 // seq of the last event published
	ended   bool
}

// subscribe adds a subscriber and returns it with the seq of the last event published before
// it: every later event reaches the subscriber. After the run ended it returns a subscriber that
// is already at EOF.
func (b *broadcast) subscribe(limit int, heartbeat time.Duration, clientGone <-chan struct{}) (*subscriber, int64) {
	s := &subscriber{
		b:          b,
		limit:      limit,
		heartbeat:  heartbeat,
		notify:     make(chan struct{}, 1),
		clientGone: clientGone,
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		s.ended = true
	} else {
		if b.subs == nil {
			b.subs = make(map[*subscriber]struct{})
		}
		b.subs[s] = struct{}{}
	}
	return s, b.lastSeq
}

// publish queues frame for every subscriber. seq > 0 marks an event (0: a comment or other
// frame without data, which does not advance the position). frame must not be modified later.
func (b *broadcast) publish(frame []byte, seq int64) {
	b.mu.Lock()
	if seq > 0 {
		b.lastSeq = seq
	}
	for s := range b.subs {
		if !s.push(frame) {
			delete(b.subs, s)
		}
	}
	b.mu.Unlock()
}

// end marks the run over: subscribers read what is queued, then EOF.
func (b *broadcast) end() {
	b.mu.Lock()
	b.ended = true
	for s := range b.subs {
		s.finish()
	}
	b.subs = nil
	b.mu.Unlock()
}

func (b *broadcast) remove(s *subscriber) {
	b.mu.Lock()
	delete(b.subs, s)
	b.mu.Unlock()
}

// subscriber is one client's bounded queue of frames. It is an io.ReadCloser whose Read returns
// whole frames (as many as fit), so a reverse proxy that flushes after each write flushes per
// event.
type subscriber struct {
	b          *broadcast
	limit      int
	heartbeat  time.Duration
	notify     chan struct{}
	clientGone <-chan struct{}
	onRead     func(frames, bytes int) // optional: counts what Read delivered
	onDrop     func()                  // optional: counts a drop for slowness

	mu     sync.Mutex // guards the fields below
	queue  [][]byte
	spare  [][]byte // the queue's other backing array (see writeDirect)
	head   []byte   // unread rest of a frame larger than the caller's buffer
	queued int      // bytes in queue and head, and in the batch writeTo is writing
	// writing is the size of the first frame of the batch writeTo is writing (0 when idle):
	// the frame the client is reading, which does not count against the limit.
	writing int
	ended   bool  // no more frames will come
	err     error // set when dropped for being slow
	closed  bool
}

// push queues a frame; it reports false when the subscriber must be dropped.
func (s *subscriber) push(frame []byte) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	// The frame the client is reading does not count against the limit, and a frame always
	// fits an empty queue: a client is never dropped on its first frame (RUN_STARTED carries
	// the run's input and may be the largest of the run), nor for the frame that follows a
	// large one it is still reading. The queue holds at most limit bytes plus that one frame.
	oldest := s.writing
	if oldest == 0 {
		oldest = len(s.head)
		if s.head == nil && len(s.queue) > 0 {
			oldest = len(s.queue[0])
		}
	}
	if s.queued > 0 && s.queued-oldest+len(frame) > s.limit {
		s.err = errSlowClient
		s.queue, s.head, s.queued = nil, nil, 0
		s.mu.Unlock()
		s.wake()
		if s.onDrop != nil {
			s.onDrop()
		}
		return false
	}
	s.queue = append(s.queue, frame)
	s.queued += len(frame)
	s.mu.Unlock()
	s.wake()
	return true
}

func (s *subscriber) finish() {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	s.wake()
}

func (s *subscriber) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Read copies queued frames into p, waiting for one if none is queued. It returns io.EOF once
// the run ended and everything was read, errSlowClient when dropped, and context.Canceled when
// the client went away. A heartbeat comment is returned after HeartbeatInterval of silence.
func (s *subscriber) Read(p []byte) (int, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		if n, frames := s.fill(p); n > 0 {
			s.mu.Unlock()
			if s.onRead != nil {
				s.onRead(frames, n)
			}
			return n, nil
		}
		err, ended := s.err, s.ended
		s.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if ended {
			return 0, io.EOF
		}
		var tick <-chan time.Time
		if s.heartbeat > 0 {
			if timer == nil {
				timer = time.NewTimer(s.heartbeat)
			}
			tick = timer.C
		}
		select {
		case <-s.notify:
		case <-s.clientGone:
			return 0, context.Canceled
		case <-tick:
			return copy(p, heartbeatFrame), nil
		}
	}
}

// writeTo writes every frame to w as it is queued, flushing after each batch, until the run
// ended (io.EOF), the subscriber was dropped (errSlowClient), the client went away
// (context.Canceled) or a write failed. Frames go from the queue to w's buffer with no copy
// buffer of their own (ReverseProxy would hold one for the stream's whole life). A queued
// frame counts against the limit until it is written. After HeartbeatInterval of silence a
// heartbeat comment is written. The caller must be w's only writer.
func (s *subscriber) writeTo(w http.ResponseWriter) error {
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil { // the headers, at once
		return err
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		take, head := s.queue, s.head
		if len(take) > 0 { // the two backing arrays swap: push appends to the other one
			s.queue, s.spare = s.spare[:0], nil
		}
		s.head = nil
		switch {
		case len(head) > 0:
			s.writing = len(head)
		case len(take) > 0:
			s.writing = len(take[0])
		}
		err, ended := s.err, s.ended
		s.mu.Unlock()
		if len(take) > 0 || len(head) > 0 {
			n, werr := writeFrames(w, rc, head, take)
			clear(take)
			s.mu.Lock()
			s.writing = 0
			if !s.closed && s.err == nil { // (a drop or Close reset the queue)
				s.spare = take[:0]
				s.queued -= n
			}
			s.mu.Unlock()
			if werr != nil {
				return werr
			}
			if s.onRead != nil {
				s.onRead(len(take), n)
			}
			if timer != nil {
				timer.Reset(s.heartbeat)
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
		if s.heartbeat > 0 {
			if timer == nil {
				timer = time.NewTimer(s.heartbeat)
			}
			tick = timer.C
		}
		select {
		case <-s.notify:
		case <-s.clientGone:
			return context.Canceled
		case <-tick:
			if _, err := w.Write(heartbeatFrame); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
			timer.Reset(s.heartbeat)
		}
	}
}

// writeFrames writes head (the unread rest of a frame) and frames to the client and flushes.
// It returns the bytes written.
func writeFrames(w io.Writer, rc *http.ResponseController, head []byte, frames [][]byte) (int, error) {
	n := 0
	if len(head) > 0 {
		c, err := w.Write(head)
		n += c
		if err != nil {
			return n, err
		}
	}
	for _, f := range frames {
		c, err := w.Write(f)
		n += c
		if err != nil {
			return n, err
		}
	}
	return n, rc.Flush()
}

// fill copies whole frames into p; a frame larger than p is copied in parts. It returns the
// bytes copied and the frames completed. s.mu is held.
func (s *subscriber) fill(p []byte) (n, frames int) {
	if len(s.head) > 0 {
		c := copy(p, s.head)
		s.head = s.head[c:]
		s.queued -= c
		if len(s.head) == 0 {
			frames = 1
		}
		return c, frames
	}
	for len(s.queue) > 0 {
		f := s.queue[0]
		if len(f) > len(p)-n {
			if n > 0 {
				break
			}
			c := copy(p, f)
			s.head = f[c:]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.queued -= c
			return c, 0
		}
		n += copy(p[n:], f)
		frames++
		s.queued -= len(f)
		s.queue[0] = nil
		s.queue = s.queue[1:]
	}
	return n, frames
}

// Close detaches the subscriber from the run. The run goes on.
func (s *subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	s.queue, s.head = nil, nil
	s.mu.Unlock()
	s.b.remove(s)
	return nil
}
