package chunked

import (
	"bufio"
	"bytes"
	"io"
	"net/http/httputil"
	"testing"
)

// TestChunks writes chunks of many sizes with AppendHead and CRLF, then Last, and reads them
// back with the standard library's chunked reader.
func TestChunks(t *testing.T) {
	var body, want []byte
	for _, n := range []int{1, 9, 10, 15, 16, 255, 256, 4095, 4096, 70000} {
		data := bytes.Repeat([]byte{byte('a' + n%26)}, n)
		body = AppendHead(body, n)
		body = append(body, data...)
		body = append(body, CRLF...)
		want = append(want, data...)
	}
	body = append(body, Last...)
	got, err := io.ReadAll(httputil.NewChunkedReader(bufio.NewReader(bytes.NewReader(body))))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes (err %v), want %d", len(got), err, len(want))
	}
}
