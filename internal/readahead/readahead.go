// Package readahead gives a connection large reads while data arrives faster than it is read,
// and no buffer at all while it waits.
//
// net/http reads a response through a bufio.Reader of Transport.ReadBufferSize bytes that the
// connection holds for its whole life. The proxy keeps that buffer small (1 KiB): thousands of
// streams spend most of their life waiting for their agent's next event. But an agent that
// streams without a pause then costs one read system call per KiB, where a plain proxy's 4 KiB
// buffer costs one per 4 KiB. A Conn reads straight into its caller's buffer, as the
// connection would, until a read fills it (more is waiting in the socket): it then reads up to
// Size bytes at once into a pooled buffer and serves the next reads from it, for as long as
// such a read brings more than its caller asked for. The buffer goes back to the pool as soon
// as it is drained, so a connection that waits holds none.
package readahead

import (
	"net"
	"sync"
)

// Size is the most a Conn reads ahead at once.
const Size = 16 << 10

var buffers = sync.Pool{New: func() any { return new([Size]byte) }}

// Conn is a net.Conn whose reads go through a read-ahead buffer while it receives a burst
// (see the package doc). Read must not be called concurrently (net/http's connection reader
// is one goroutine); the other methods are the wrapped connection's.
type Conn struct {
	net.Conn
	buf   *[Size]byte // nil unless it holds unread bytes, buf[r:w]
	r, w  int
	err   error // returned once buf is drained: the error that came with its bytes
	burst bool  // the last read filled its caller's buffer: read ahead next time
}

// New wraps c.
func New(c net.Conn) *Conn { return &Conn{Conn: c} }

// Read reads from what was read ahead, else from the connection (see the package doc).
func (c *Conn) Read(p []byte) (int, error) {
	if c.buf != nil {
		n := copy(p, c.buf[c.r:c.w])
		c.r += n
		if c.r == c.w {
			c.release()
		}
		return n, nil
	}
	if err := c.err; err != nil {
		c.err = nil
		return 0, err
	}
	if !c.burst || len(p) == 0 || len(p) >= Size {
		n, err := c.Conn.Read(p)
		c.burst = n == len(p) && n > 0 && len(p) < Size
		return n, err
	}
	buf := buffers.Get().(*[Size]byte)
	n, err := c.Conn.Read(buf[:])
	// The burst goes on while reading ahead brings more than the caller asked for.
	c.burst = n > len(p)
	k := copy(p, buf[:n])
	if k == n {
		buffers.Put(buf)
		return k, err
	}
	c.buf, c.r, c.w, c.err = buf, k, n, err
	return k, nil
}

// release gives the drained buffer back to the pool.
func (c *Conn) release() {
	buffers.Put(c.buf)
	c.buf, c.r, c.w = nil, 0, 0
}
