//go:build darwin || linux || openbsd

package keepalive

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// readable returns a function that waits, in the Go runtime's network poller, until conn has
// something to read (data, or its client's end of the connection), without reading it: the
// server that gets conn next reads the request from its first byte. It returns nil when conn
// cannot be waited on this way (no system socket, like a TLS connection's own).
func readable(conn net.Conn) func() error {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() error {
		var peekErr error
		err := raw.Read(func(fd uintptr) bool {
			var b [1]byte
			_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			if errors.Is(err, unix.EAGAIN) {
				return false // nothing yet: the poller waits for the socket (or the deadline)
			}
			// The next request's first byte, the client's end of the connection (which the
			// server reads, and closes), or an error.
			peekErr = err
			return true
		})
		if err != nil {
			return err
		}
		return peekErr
	}
}
