package sse_test

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agui-proxy/agui-proxy/sse"
)

// Example reads a CRLF-framed upstream stream, forwards each data frame with
// an id of its own (LF framing, as the official AG-UI client needs), and
// writes a keep-alive comment.
func Example() {
	upstream := strings.NewReader("data: {\"type\":\"RUN_STARTED\"}\r\n\r\n: ping\r\n\r\nid: up-9\r\ndata: {\"type\":\"RUN_FINISHED\"}\r\n\r\n")
	r := sse.NewReader(upstream, sse.Limits{MaxFrameBytes: 1 << 20})
	var out []byte
	n := 0
	for {
		f, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if !f.HasData {
			continue // comments and empty frames
		}
		n++
		fmt.Printf("event %d: %s (upstream id %q)\n", n, f.Data, f.ID)
		out = f.AppendWithID(out, fmt.Sprint(n))
	}
	out = sse.AppendComment(out, "keep-alive")
	fmt.Printf("%q\n", out)

	w := sse.NewWriter(os.Stdout)
	if err := w.WriteEvent(sse.Event{ID: "3", Data: []byte("line one\r\nline two")}); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// event 1: {"type":"RUN_STARTED"} (upstream id "")
	// event 2: {"type":"RUN_FINISHED"} (upstream id "up-9")
	// "data: {\"type\":\"RUN_STARTED\"}\r\nid: 1\n\nid: up-9\r\ndata: {\"type\":\"RUN_FINISHED\"}\r\nid: 2\n\n: keep-alive\n\n"
	// data: line one
	// data: line two
	// id: 3
}
