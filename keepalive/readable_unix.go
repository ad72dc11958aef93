//go:build darwin || linux || openbsd

package keepalive

import (
	"errors"
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// readable returns a function that waits, in the Go runtime's network poller, until conn has
// something to read, without reading it: the server that gets conn next reads the request
// from its first byte. The wait ends with io.EOF when the client closed its end instead. It
// returns nil when conn cannot be waited on this way (no system socket, like a TLS
// connection's own).
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
			n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			switch {
			case errors.Is(err, unix.EAGAIN):
				return false // nothing yet: the poller waits for the socket (or the deadline)
			case err == nil && n == 0:
				peekErr = io.EOF // the client closed its end
			default:
				peekErr = err // nil: the next request's first byte is there
			}
			return true
		})
		if err != nil {
			return err
		}
		return peekErr
	}
}
