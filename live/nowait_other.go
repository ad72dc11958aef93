//go:build !(darwin || linux || openbsd)

package live

import "syscall"

// nowaitWriter is not available here: a subscriber in direct mode writes every frame from its
// drain goroutine.
type nowaitWriter struct{}

func newNowaitWriter(syscall.RawConn) *nowaitWriter { return nil }

func (*nowaitWriter) write(a, b, c, d []byte) (int, error) { return 0, nil }
