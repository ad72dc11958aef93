// Package chunked writes the HTTP/1.1 chunked transfer coding (RFC 9112, section 7.1) of a
// response body on a connection taken over from net/http (http.Hijacker) after its headers:
// the run streams of package live and the attach streams of package attach.
package chunked

import "strconv"

var (
	// CRLF ends a chunk's data.
	CRLF = []byte("\r\n")
	// Last is the last chunk, with no trailers: it ends the body.
	Last = []byte("0\r\n\r\n")
)

// AppendHead appends the head of a chunk of n bytes (n > 0: a chunk of 0 bytes is Last): its
// size in hexadecimal and CRLF. The chunk is then its n bytes followed by CRLF.
func AppendHead(b []byte, n int) []byte {
	return append(strconv.AppendUint(b, uint64(n), 16), '\r', '\n')
}
