package attach

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/chunked"
	"github.com/agui-proxy/agui-proxy/keepalive"
)

// Taking an attach stream's connection over.
//
// An attach stream, a ?follow=1 one above all, stays open for as long as a browser tab does,
// mostly idle. Served through net/http it holds, for that whole time, the handler's goroutine,
// net/http's goroutine watching the connection and net/http's buffers (4 KiB to read, 4 + 2
// KiB to write). With Config.TakeOver, once the headers of an HTTP/1.1 stream are sent
// the stream takes the connection over (http.Hijacker), the handler returns, and the rest of
// the stream runs on one goroutine of the Handler's own (Wait), writing chunks itself from a
// buffer it holds only while it writes. A client that went away is then found by a write
// failing (the heartbeat at the latest), which is why TakeOver needs a heartbeat. At a clean
// end the connection goes back to the server (package keepalive) for the client's next
// request, or, when the server has no keepalive.Listener, is closed (the headers said
// Connection: close).

// chunkBuffers lends connWriter the buffer of one flush.
var chunkBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// connWriter is the http.ResponseWriter of a stream whose connection was taken over after its
// headers: each Flush writes what was written since as one chunk of the body.
type connWriter struct {
	conn   net.Conn
	buf    *[]byte // borrowed from chunkBuffers between a Write and its Flush
	header http.Header
	broken bool // end closes the connection without the last chunk: the client sees the stream break
	// keepAlive takes the connection at a clean end (nil: end closes it).
	keepAlive *keepalive.Listener
}

func (c *connWriter) Header() http.Header {
	if c.header == nil {
		c.header = http.Header{} // (the headers were sent: what is set here is not)
	}
	return c.header
}

func (c *connWriter) WriteHeader(int) {}

func (c *connWriter) Write(p []byte) (int, error) {
	if c.buf == nil {
		c.buf = chunkBuffers.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

// FlushError writes what was written since the last flush as one chunk (one writev).
func (c *connWriter) FlushError() error {
	if c.buf == nil {
		return nil
	}
	b := *c.buf
	var err error
	if len(b) > 0 {
		var head [20]byte
		bufs := net.Buffers{chunked.AppendHead(head[:0], len(b)), b, chunked.CRLF}
		_, err = bufs.WriteTo(c.conn)
	}
	if cap(b) <= 64<<10 { // (a large prelude's buffer is let go)
		*c.buf = b[:0]
		chunkBuffers.Put(c.buf)
	}
	c.buf = nil
	return err
}

// SetWriteDeadline bounds the next writes (http.ResponseController).
func (c *connWriter) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }

// end writes what is left and the last chunk (unless broken), then hands the connection to
// keepAlive (the response is complete: it may carry the client's next request) or closes it.
func (c *connWriter) end() {
	c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	complete := false
	if c.FlushError() == nil && !c.broken {
		_, err := c.conn.Write(chunked.Last)
		complete = err == nil
	}
	if complete && c.conn.SetWriteDeadline(time.Time{}) == nil {
		c.keepAlive.Return(c.conn) // (it closes what it cannot keep, and nil keeps none)
		return
	}
	c.conn.Close()
}

// streamSlot carries, in a stream request's context, the stream its handler began, so the
// handler finds a connection taken over whatever path the request took.
type streamSlot struct{ s *stream }

type streamSlotKey struct{}

// withStreamSlot returns r with a new slot for the stream it will begin.
func withStreamSlot(r *http.Request) (*http.Request, *streamSlot) {
	slot := &streamSlot{}
	return r.WithContext(context.WithValue(r.Context(), streamSlotKey{}, slot)), slot
}

// newStream returns the stream of an answer to r. It takes its connection over when it begins
// if Config.TakeOver allows it for r (HTTP/1.1, heartbeats on) and r has a slot.
func (h *Handler) newStream(w http.ResponseWriter, r *http.Request) *stream {
	s := newStream(w, h.cfg.WriteTimeout)
	if slot, _ := r.Context().Value(streamSlotKey{}).(*streamSlot); slot != nil &&
		h.cfg.TakeOver && h.cfg.HeartbeatInterval > 0 && r.ProtoMajor == 1 && r.ProtoMinor >= 1 {
		s.takeOver = true
		s.keepAlive = keepalive.For(r)
		slot.s = s
	}
	return s
}

// finish ends a stream request's handler: a stream that took its connection over goes on
// (t, when not nil) on a goroutine of the Handler's own, so that the handler returns and
// net/http lets go of the connection and its buffers; one that did not is waited on here.
func (h *Handler) finish(slot *streamSlot, t *tailing) {
	var cw *connWriter
	if slot.s != nil {
		cw = slot.s.conn
	}
	switch {
	case cw == nil:
		if t != nil {
			t.wait()
		}
	case t == nil:
		cw.end()
	default:
		// The request's context ends when the handler returns: the stream keeps its values.
		t.r = t.r.WithContext(context.WithoutCancel(t.r.Context()))
		h.streams.Add()
		go func() {
			defer h.streams.Done()
			defer cw.end()
			t.wait()
		}()
	}
}

// Wait waits until the streams whose connections were taken over (Config.TakeOver) have ended,
// or ctx is done. They end with their runs, and followed threads with the thread service's
// Close.
func (h *Handler) Wait(ctx context.Context) error { return h.streams.Wait(ctx) }
