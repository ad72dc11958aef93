//go:build darwin || linux || openbsd

package live

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// nowaitWriter writes to a socket with one writev that never blocks: a full socket buffer
// takes part of the bytes, or none. Its fields are used by one write at a time (the
// subscriber's mu is held).
type nowaitWriter struct {
	raw syscall.RawConn
	iov [4][]byte
	n   int
	err error
	fn  func(fd uintptr) bool // w.writev, bound once
}

func newNowaitWriter(raw syscall.RawConn) *nowaitWriter {
	w := &nowaitWriter{raw: raw}
	w.fn = w.writev
	return w
}

// writev runs inside raw.Write: one attempt, whatever it returns (true: do not wait for the
// socket to become writable).
func (w *nowaitWriter) writev(fd uintptr) bool {
	iov := w.iov[:0]
	for _, b := range w.iov {
		if len(b) > 0 {
			iov = append(iov, b)
		}
	}
	w.n, w.err = unix.Writev(int(fd), iov)
	return true
}

// write writes a, b, c and d (empty ones skipped) as far as the socket takes them without
// blocking. It returns how many bytes were written; err is nil when the socket was merely
// full, and the write's error otherwise (the client is gone, the connection broke or is
// closed).
func (w *nowaitWriter) write(a, b, c, d []byte) (int, error) {
	w.iov = [4][]byte{a, b, c, d}
	err := w.raw.Write(w.fn)
	n, werr := w.n, w.err
	w.iov, w.n, w.err = [4][]byte{}, 0, nil // (holds no frame)
	if err != nil {
		return 0, err
	}
	if werr == unix.EAGAIN || werr == unix.EINTR {
		werr = nil
	}
	return max(n, 0), werr
}
