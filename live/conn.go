package live

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/chunked"
)

// Direct mode: a subscriber that owns its client's connection (ServeConn).
//
// A stream served through net/http needs a goroutine blocked in the handler for the stream's
// whole life (the handler may not return before the response is complete), net/http's
// goroutine watching the connection for the client's close, and its buffers; and every event
// crosses from the goroutine that publishes it to the one that writes it. A subscriber that
// took the connection over (http.Hijacker) instead writes each event in the publisher's own
// call, with a write that never blocks: the socket takes what fits in its buffer. Only what
// does not fit (a client that lags) is queued, under the same bound as before, and written by
// a goroutine that lives while the queue is not empty. An idle stream then costs neither a
// goroutine nor a buffer of its own, and an event reaches the socket without a goroutine
// switch.

// direct is a subscriber's connection in direct mode. Its fields are guarded by the
// subscriber's mu.
type direct struct {
	conn net.Conn
	// nowait writes without blocking (nil: the connection cannot; drain writes everything).
	nowait *nowaitWriter
	// pending is what a write that did not block left of a chunk, written first by drain;
	// pendingFrame is the size of the frames it belongs to (0: the last chunk), pendingEvents
	// how many of them count as written events.
	pending       []byte
	pendingFrame  int
	pendingEvents int
	// cork holds the frames published with More, written with the next one (one chunk, one
	// writev); a buffer from corkBuffers while it holds any, nil otherwise.
	cork       *[]byte
	corkEvents int          // the events in cork
	draining   bool         // a drain goroutine is writing
	ending     bool         // the last chunk was written or handed to drain
	closed     bool         // conn is closed
	lastWrite  atomic.Int64 // time.Now().UnixNano() of the last write (read by the beatClock without mu)
	clock      *beatClock   // schedules the heartbeat (nil: Options.Heartbeat is off)
	// done is called once the stream is over, with conn when it ended cleanly (see ServeConn).
	done func(kept net.Conn)
}

// ServeConn hands the subscriber its client's connection, taken over from the HTTP server
// (http.Hijacker) after the response headers were sent with chunked transfer coding
// (HTTP/1.1), and returns at once. From then on each event is written as one chunk by the
// call that publishes it, without blocking; what the socket does not take at once is queued
// (Options.QueueBytes) and written by a goroutine that runs only while the client lags, each
// of its writes bounded by Options.WriteTimeout. After Options.Heartbeat of silence the
// Heartbeat comment is written. When the hub ends, the last chunk is written and the stream
// ends; a subscriber dropped for slowness, ended with the hub's failure, whose client went
// away or whose write failed gets conn closed without it, so its client sees a broken stream
// and resumes from its last event id. done (may be nil) is called once the stream is over:
// with conn when the last chunk was written (the response is complete; done owns conn, and
// may close it or let it carry the client's next request, see package keepalive), with nil
// once conn is closed. Without done, conn is closed in both cases.
// Options.Gone is not used: a client that went away is found by the next write (the
// heartbeat at the latest). ServeConn must be called at most once, and WriteTo not at all.
func (s *Subscriber) ServeConn(conn net.Conn, done func(kept net.Conn)) {
	d := &direct{conn: conn, done: done}
	d.lastWrite.Store(time.Now().UnixNano())
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			d.nowait = newNowaitWriter(raw)
		}
	}
	s.mu.Lock()
	s.d = d
	if s.o.Heartbeat > 0 {
		d.clock = clockFor(s.o.Heartbeat)
		d.clock.schedule(s, s.o.Heartbeat)
	}
	failed := false
	switch {
	case s.closed:
		s.closeConn()
	case len(s.queue) > 0: // published before the connection was handed over
		failed = !s.writeQueued()
	case s.ended || s.err != nil:
		s.endConn()
	}
	s.mu.Unlock()
	if failed {
		s.h.remove(s)
	}
}

// writeQueued writes what was published before the connection was handed over (usually
// RUN_STARTED, read while the handler was sending the headers) as one chunk without
// blocking, like a publish to a client that keeps up, and ends the stream when the hub
// already ended; what the socket does not take goes to a drain, as does a queue larger than
// a cork. It reports false when the write failed (the caller removes the subscriber from its
// hub once s.mu is released). s.mu is held.
func (s *Subscriber) writeQueued() bool {
	d := s.d
	size := 0
	for _, ev := range s.queue {
		size += len(ev.Frame)
	}
	if d.nowait == nil || size > corkBytes { // (d is new: it holds no cork)
		s.startDrain()
		return true
	}
	last := len(s.queue) - 1
	if last > 0 {
		d.cork = corkBuffers.Get().(*[]byte)
		for _, ev := range s.queue[:last] {
			*d.cork = append(*d.cork, ev.Frame...)
			d.corkEvents++
		}
	}
	frame := s.queue[last].Frame
	clear(s.queue)
	s.queue, s.queued = s.queue[:0], 0
	if !s.writeChunk(frame, true) {
		return false
	}
	if !d.draining && (s.ended || s.err != nil) {
		s.endConn()
	}
	return true
}

// pushDirect writes ev when nothing is queued or being written; s.mu is held. It reports
// handled false when ev must be queued instead, and ok false when the subscriber failed.
func (s *Subscriber) pushDirect(ev Event) (handled, ok bool) {
	d := s.d
	if d.closed {
		return true, false
	}
	if d.draining || len(s.queue) > 0 {
		return false, true
	}
	if ev.More && (d.cork == nil || len(*d.cork)+len(ev.Frame) <= corkBytes) {
		if d.cork == nil {
			d.cork = corkBuffers.Get().(*[]byte)
		}
		*d.cork = append(*d.cork, ev.Frame...)
		d.corkEvents++
		return true, true
	}
	if !s.writeChunk(ev.Frame, true) {
		return true, false
	}
	return true, true
}

// flushHeld writes what the subscriber holds for More (Hub.Flush); it reports false when the
// subscriber failed.
func (s *Subscriber) flushHeld() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.d
	if d == nil || d.cork == nil || d.closed || d.draining {
		return true
	}
	return s.writeChunk(nil, false)
}

// corkBytes bounds what a subscriber holds for More (see Event.More).
const corkBytes = 32 << 10

// corkBuffers lends the subscribers their cork while it holds frames.
var corkBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// uncork returns the cork's buffer to the pool; s.mu is held.
func (d *direct) uncork() {
	if d.cork == nil {
		return
	}
	if cap(*d.cork) <= 2*corkBytes {
		*d.cork = (*d.cork)[:0]
		corkBuffers.Put(d.cork)
	}
	d.cork, d.corkEvents = nil, 0
}

// writeChunk writes what the cork holds and frame as one chunk without blocking, or hands
// what the socket did not take to a drain goroutine; s.mu is held and no drain runs. event
// tells whether frame counts as a written event. It reports false when the write failed: the
// connection is then closed (the caller removes the subscriber from its hub).
func (s *Subscriber) writeChunk(frame []byte, event bool) bool {
	d := s.d
	var held []byte
	events := d.corkEvents
	if d.cork != nil {
		held = *d.cork
	}
	if event {
		events++
	}
	size := len(held) + len(frame)
	var head [20]byte
	h := chunked.AppendHead(head[:0], size)
	n := 0
	if d.nowait != nil {
		var err error
		n, err = d.nowait.write(h, held, frame, chunked.CRLF)
		if err != nil {
			d.uncork()
			s.fail(err)
			return false
		}
	}
	total := len(h) + size + len(chunked.CRLF)
	if n == total {
		d.uncork()
		d.lastWrite.Store(time.Now().UnixNano())
		if events > 0 && s.o.OnWrite != nil {
			s.o.OnWrite(events, size)
		}
		return true
	}
	// The socket's buffer is full: the rest of the chunk goes to drain, counted as the frame
	// being written.
	rest := make([]byte, 0, total-n)
	for _, b := range [][]byte{h, held, frame, chunked.CRLF} {
		if n >= len(b) {
			n -= len(b)
			continue
		}
		rest = append(rest, b[n:]...)
		n = 0
	}
	d.uncork()
	d.pending, d.pendingFrame, d.pendingEvents = rest, size, events
	s.queued += size
	s.writing = size
	s.startDrain()
	return true
}

// endConn ends the stream once the hub ended and everything queued was written; s.mu is held.
// A clean end writes the last chunk first; any other closes conn at once.
func (s *Subscriber) endConn() {
	d := s.d
	if d.closed || d.draining {
		return
	}
	if d.cork != nil && !d.ending { // what was held for a next frame that did not come
		if !s.writeChunk(nil, false) || d.draining {
			return // (drain ends the stream once it wrote the rest)
		}
	}
	if s.err != nil || d.ending {
		s.release(s.err == nil) // (ending: drain wrote the rest of the last chunk)
		return
	}
	d.ending = true
	n := 0
	if d.nowait != nil {
		var err error
		if n, err = d.nowait.write(chunked.Last, nil, nil, nil); err != nil {
			s.closeConn()
			return
		}
	}
	if n == len(chunked.Last) {
		s.release(true)
		return
	}
	d.pending, d.pendingFrame, d.pendingEvents = chunked.Last[n:], 0, 0
	s.startDrain() // ends the stream once the rest is written
}

// startDrain starts the goroutine that writes the queue; s.mu is held.
func (s *Subscriber) startDrain() {
	s.d.draining = true
	go s.drain()
}

// drain writes what is pending and queued with blocking writes until nothing is left, then
// ends the stream if the hub ended. It is the only writer while it runs.
func (s *Subscriber) drain() {
	for {
		s.mu.Lock()
		d := s.d
		if d.closed {
			d.draining = false
			s.mu.Unlock()
			return
		}
		pending, pendingFrame, pendingEvents := d.pending, d.pendingFrame, d.pendingEvents
		d.pending = nil
		take := s.queue
		if len(take) > 0 {
			s.queue, s.spare = s.spare[:0], nil
		}
		switch {
		case pending != nil:
			s.writing = pendingFrame
		case len(take) > 0:
			s.writing = len(take[0].Frame)
		default:
			d.draining = false
			s.writing = 0
			if s.ended {
				s.endConn()
			}
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()

		events, n, err := s.writeBlocking(d.conn, pending, pendingFrame, pendingEvents, take)
		clear(take)
		s.mu.Lock()
		s.writing = 0
		if !s.closed && s.err != ErrSlowClient {
			if cap(take) <= spareCap && take != nil {
				s.spare = take[:0]
			}
			s.queued -= n
		}
		d.lastWrite.Store(time.Now().UnixNano())
		if err != nil {
			d.draining = false
			s.fail(err)
			s.mu.Unlock()
			s.h.remove(s)
			return
		}
		s.mu.Unlock()
		if s.o.OnWrite != nil && events > 0 {
			s.o.OnWrite(events, n)
		}
	}
}

// writeBlocking writes pending, then each queued frame as a chunk, each write bounded by
// Options.WriteTimeout (the deadline is set again per frame: a client that keeps reading a
// backlog slower than the whole of it can be written in WriteTimeout is not cut while it
// takes each frame in time). It returns the frames written and the queued bytes they
// accounted for.
// (One writev per frame, not one chunk of every queued frame: with 4 KiB socket buffers,
// TestServeConnLaggingClient's 600 KB took 0.02 s this way and 10 s as writevs of 500 frames,
// each waiting on the tiny TCP window far longer than small writes do.)
func (s *Subscriber) writeBlocking(conn net.Conn, pending []byte, pendingFrame, pendingEvents int, take []Event) (events, n int, err error) {
	if s.o.WriteTimeout > 0 {
		conn.SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
	}
	if pending != nil {
		if _, err = conn.Write(pending); err != nil {
			return events, n, err
		}
		n += pendingFrame
		events += pendingEvents
	}
	var head [20]byte
	for _, ev := range take {
		if s.o.WriteTimeout > 0 {
			conn.SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
		}
		bufs := net.Buffers{chunked.AppendHead(head[:0], len(ev.Frame)), ev.Frame, chunked.CRLF}
		if _, err = bufs.WriteTo(conn); err != nil {
			return events, n, err
		}
		n += len(ev.Frame)
		events++
	}
	if s.o.WriteTimeout > 0 {
		conn.SetWriteDeadline(time.Time{}) // (a deadline left set would fail the next write that does not block)
	}
	return events, n, nil
}

// heartbeat writes the Heartbeat comment after Options.Heartbeat of silence; the subscriber's
// beatClock calls it (on the clock's goroutine, once the scheduled time passed), and it
// schedules itself again for the rest of the window. A write it makes never blocks.
func (s *Subscriber) heartbeat() {
	s.mu.Lock()
	d := s.d
	if d.closed || d.ending {
		s.mu.Unlock()
		return
	}
	if d.draining || len(s.queue) > 0 { // a write is under way: not silent
		d.clock.schedule(s, s.o.Heartbeat)
		s.mu.Unlock()
		return
	}
	if quiet := time.Duration(time.Now().UnixNano() - d.lastWrite.Load()); quiet < s.o.Heartbeat {
		d.clock.schedule(s, s.o.Heartbeat-quiet)
		s.mu.Unlock()
		return
	}
	if !s.writeChunk(Heartbeat, false) {
		s.mu.Unlock()
		s.h.remove(s)
		return
	}
	d.clock.schedule(s, s.o.Heartbeat)
	s.mu.Unlock()
	if s.o.OnQuiet != nil {
		s.o.OnQuiet()
	}
}

// fail records err (unless the subscriber already failed) and closes conn; s.mu is held.
func (s *Subscriber) fail(err error) {
	if s.err == nil {
		s.err = err
	}
	s.queue, s.queued = nil, 0
	s.closeConn()
}

// closeConn closes conn once; s.mu is held. A drain blocked in a write returns with an error.
func (s *Subscriber) closeConn() { s.release(false) }

// release ends the stream once; s.mu is held. complete: the last chunk was written, and conn
// goes to done (see ServeConn); otherwise conn is closed, and a drain blocked in a write
// returns with an error.
func (s *Subscriber) release(complete bool) {
	d := s.d
	if d.closed {
		return
	}
	d.closed = true
	d.uncork()
	if d.clock != nil {
		d.clock.unschedule(s)
	}
	switch {
	case complete && d.done != nil:
		d.done(d.conn)
	case d.done != nil:
		d.conn.Close()
		d.done(nil)
	default:
		d.conn.Close()
	}
}
