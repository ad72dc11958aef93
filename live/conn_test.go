package live

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/runtest"
)

// tcpPair returns the two ends of a loopback TCP connection; small shrinks both socket
// buffers so that a client that does not read fills them after a few KiB.
func tcpPair(t *testing.T, small bool) (server, client *net.TCPConn) {
	t.Helper()
	client, server = runtest.TCPPair(t)
	if small {
		server.SetWriteBuffer(4 << 10)
		client.SetReadBuffer(4 << 10)
	}
	return server, client
}

func frames(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		head := fmt.Sprintf("id: %d\ndata: {\"n\":%d,\"pad\":\"", i+1, i)
		pad := max(size-len(head)-4, 0)
		out[i] = []byte(head + string(bytes.Repeat([]byte{'x'}, pad)) + "\"}\n\n")
	}
	return out
}

// publishAll publishes fs as events 1..len(fs), ends the run, and returns the bytes a
// subscriber from the start must get.
func publishAll(h *Hub, fs [][]byte) []byte {
	var want bytes.Buffer
	for i, f := range fs {
		want.Write(f)
		h.Publish(Event{Seq: int64(i + 1), Frame: f})
	}
	h.End()
	return want.Bytes()
}

// readPaced reads r to io.EOF, size bytes at a time with pause after each read: a client
// that keeps up at its own pace. It returns what it read, and the error other than io.EOF
// that ended it.
func readPaced(r io.Reader, size int, pause time.Duration) ([]byte, error) {
	var got bytes.Buffer
	buf := make([]byte, size)
	for {
		n, err := r.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			return got.Bytes(), nil
		}
		if err != nil {
			return got.Bytes(), err
		}
		time.Sleep(pause)
	}
}

// readChunked reads the chunked body from c to its end: the bytes, and the error that ended
// it (nil: the last chunk arrived).
func readChunked(c net.Conn) ([]byte, error) {
	body, err := io.ReadAll(httputil.NewChunkedReader(bufio.NewReader(c)))
	return body, err
}

// TestServeConnWritesChunks: the events published after (and before) the connection was
// handed over reach the client whole, in order, as a valid chunked body that ends with the
// last chunk; then the connection goes to done, open (the response is complete: it may carry
// the client's next request), or is closed when there is no done.
func TestServeConnWritesChunks(t *testing.T) {
	for _, small := range []bool{false, true} {
		t.Run(fmt.Sprintf("small-buffers=%v", small), func(t *testing.T) { testServeConnWritesChunks(t, small, true) })
	}
	t.Run("without-done", func(t *testing.T) { testServeConnWritesChunks(t, false, false) })
}

func testServeConnWritesChunks(t *testing.T, small, withDone bool) {
	server, client := tcpPair(t, small)
	h := NewHub(0)
	sub, _ := h.Subscribe(0, Options{QueueBytes: 1 << 30})
	fs := frames(3000, 300)
	var want bytes.Buffer
	for _, f := range fs {
		want.Write(f)
	}
	h.Publish(Event{Seq: 1, Frame: fs[0]}) // queued before ServeConn
	kept := make(chan net.Conn, 1)
	if withDone {
		sub.ServeConn(server, func(c net.Conn) { kept <- c })
	} else {
		sub.ServeConn(server, nil)
	}
	go func() {
		for i, f := range fs[1:] {
			h.Publish(Event{Seq: int64(i + 2), Frame: f, More: i%4 != 0}) // (held, then written with the next)
		}
		h.End()
	}()
	got, err := readChunked(client)
	if err != nil {
		t.Fatalf("reading the chunked body: %v", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("client got %d bytes, want the %d bytes published, in order", len(got), want.Len())
	}
	if !withDone {
		if _, err := client.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("after the last chunk: read = %v, want io.EOF (connection closed)", err)
		}
		return
	}
	if c := <-kept; c != server {
		t.Fatalf("done got %v, want the connection", c)
	}
	client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after the last chunk: read = %v, want a timeout (the connection stays open for done)", err)
	}
}

// TestServeConnWritesQueuedAtOnce: what was published before the connection was handed over
// (a short run: the hub even ended) is written by ServeConn itself, with the writes that never
// block, not by a drain goroutine: the stream is complete when ServeConn returns.
func TestServeConnWritesQueuedAtOnce(t *testing.T) {
	server, client := tcpPair(t, false)
	h := NewHub(0)
	sub, _ := h.Subscribe(0, Options{QueueBytes: 1 << 20})
	want := publishAll(h, frames(3, 300))
	kept := make(chan net.Conn, 1)
	sub.ServeConn(server, func(c net.Conn) { kept <- c })
	select {
	case c := <-kept:
		if c != server {
			t.Fatalf("done got %v, want the connection", c)
		}
	default:
		t.Fatal("ServeConn returned before the stream was complete: a drain goroutine writes it")
	}
	got, err := readChunked(client)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("client got %d bytes (%v), want the %d bytes published", len(got), err, len(want))
	}
}

// TestServeConnSlowClient: a client that does not read fills the socket, then its queue; it
// is dropped (its connection closed without the last chunk) and the publisher never waited.
func TestServeConnSlowClient(t *testing.T) {
	server, client := tcpPair(t, true)
	h := NewHub(0)
	var drops atomic.Int32
	sub, _ := h.Subscribe(0, Options{QueueBytes: 32 << 10, OnDrop: func() { drops.Add(1) }})
	sub.ServeConn(server, nil)
	for i, f := range frames(2000, 500) { // 1 MB: far more than the socket buffers and the queue
		h.Publish(Event{Seq: int64(i + 1), Frame: f})
	}
	if drops.Load() != 1 || h.Subscribers() != 0 {
		t.Fatalf("drops %d, subscribers %d: want the client dropped once and removed", drops.Load(), h.Subscribers())
	}
	h.End()
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := readChunked(client)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("the dropped client's body ended with %v, want io.ErrUnexpectedEOF (a broken stream to resume)", err)
	}
}

// TestServeConnLaggingClient: a client that reads slowly (the socket fills, the rest waits in
// the queue for the drain goroutine) still gets every event once, in order, then the end.
func TestServeConnLaggingClient(t *testing.T) {
	server, client := tcpPair(t, true)
	h := NewHub(0)
	sub, _ := h.Subscribe(0, Options{QueueBytes: 8 << 20, WriteTimeout: 10 * time.Second})
	sub.ServeConn(server, nil)
	want := publishAll(h, frames(1500, 400))
	got, err := readPaced(httputil.NewChunkedReader(bufio.NewReaderSize(client, 512)), 512, 0)
	if err != nil {
		t.Fatalf("after %d bytes: %v", len(got), err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("client got %d bytes, want the %d published, in order", len(got), len(want))
	}
}

// TestServeConnSlowSteadyClient: WriteTimeout bounds each write, not the whole backlog: a
// client that keeps taking frames, but needs longer than WriteTimeout for all of them, gets
// every event and the end (the deadline once covered the whole backlog and cut it).
func TestServeConnSlowSteadyClient(t *testing.T) {
	server, client := tcpPair(t, false)
	// 256 KiB socket buffers: far below loopback's 64 KiB MSS, the TCP window stalls on the
	// persist timer (200 ms and up) and the test would time the kernel, not the proxy.
	server.SetWriteBuffer(256 << 10)
	client.SetReadBuffer(256 << 10)
	h := NewHub(0)
	const timeout = time.Second
	sub, _ := h.Subscribe(0, Options{QueueBytes: 8 << 20, WriteTimeout: timeout})
	sub.ServeConn(server, nil)
	want := publishAll(h, frames(10000, 400)) // 4 MB: ~1.5 s at 64 KiB per 25 ms
	start := time.Now()
	// Each read well inside the timeout; all of them not.
	got, err := readPaced(httputil.NewChunkedReader(bufio.NewReaderSize(client, 64<<10)), 64<<10, 25*time.Millisecond)
	if err != nil {
		t.Fatalf("after %d bytes in %v (WriteTimeout %v): %v", len(got), time.Since(start).Round(time.Millisecond), timeout, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("client got %d bytes, want the %d published, in order", len(got), len(want))
	}
	if d := time.Since(start); d < timeout {
		t.Logf("the client read everything in %v, inside WriteTimeout: this run did not exercise the bound", d)
	}
}

// TestServeConnHeartbeat: a silent stream gets the Heartbeat comment as a chunk.
func TestServeConnHeartbeat(t *testing.T) {
	server, client := tcpPair(t, false)
	h := NewHub(0)
	quiet := make(chan struct{}, 10)
	sub, _ := h.Subscribe(0, Options{Heartbeat: 20 * time.Millisecond, OnQuiet: func() { quiet <- struct{}{} }})
	sub.ServeConn(server, nil)
	r := httputil.NewChunkedReader(bufio.NewReader(client))
	got := make([]byte, len(Heartbeat))
	if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, Heartbeat) {
		t.Fatalf("read %q, %v; want the heartbeat %q", got, err, Heartbeat)
	}
	<-quiet
	h.End()
}

// TestServeConnClientGone: once the client closed its connection, a write fails and the
// subscriber leaves the hub; the run's publisher goes on.
func TestServeConnClientGone(t *testing.T) {
	server, client := tcpPair(t, false)
	h := NewHub(0)
	var closed atomic.Int32
	sub, _ := h.Subscribe(0, Options{QueueBytes: 1 << 20})
	sub.ServeConn(server, func(kept net.Conn) {
		if kept == nil {
			closed.Add(1)
		}
	})
	client.Close()
	fs := frames(1000, 200)
	for i := 0; h.Subscribers() > 0; i++ {
		if i == len(fs) {
			t.Fatal("1,000 events published to a client that closed its connection: the subscriber is still there")
		}
		h.Publish(Event{Seq: int64(i + 1), Frame: fs[i]})
		time.Sleep(time.Millisecond) // (the peer's reset arrives asynchronously)
	}
	waitFor(t, func() bool { return closed.Load() == 1 })
}

// TestServeConnHubFails: a hub that fails (a follower that lost the run) closes the
// connection without the last chunk, after what was published.
func TestServeConnHubFails(t *testing.T) {
	server, client := tcpPair(t, false)
	h := NewHub(0)
	sub, _ := h.Subscribe(0, Options{})
	sub.ServeConn(server, nil)
	h.Publish(Event{Seq: 1, Frame: []byte("data: {}\n\n")})
	h.Fail(errors.New("lost"))
	got, err := readChunked(client)
	if string(got) != "data: {}\n\n" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("got %q, %v; want the event then a broken stream", got, err)
	}
}

// TestServeConnClose: Close closes the connection at once.
func TestServeConnClose(t *testing.T) {
	server, client := tcpPair(t, false)
	h := NewHub(0)
	sub, _ := h.Subscribe(0, Options{})
	sub.ServeConn(server, nil)
	sub.Close()
	if _, err := readChunked(client); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		t.Errorf("after Close: %v, want the connection closed", err)
	}
	if h.Subscribers() != 0 {
		t.Error("a closed subscriber is still in the hub")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestServeConnMore: frames published with More are held and written with the next frame
// published without it, as one chunk; what is held when the hub ends or fails, or when the
// stream falls silent, is written then.
func TestServeConnMore(t *testing.T) {
	fs := frames(10, 100)
	var all []byte
	for _, f := range fs {
		all = append(all, f...)
	}
	t.Run("one chunk", func(t *testing.T) {
		server, client := tcpPair(t, false)
		h := NewHub(0)
		var events atomic.Int32
		sub, _ := h.Subscribe(0, Options{OnWrite: func(n, _ int) { events.Add(int32(n)) }})
		sub.ServeConn(server, nil)
		for i, f := range fs {
			h.Publish(Event{Seq: int64(i + 1), Frame: f, More: i < len(fs)-1})
		}
		br := bufio.NewReader(client)
		line, err := br.ReadString('\n')
		if want := fmt.Sprintf("%x\r\n", len(all)); err != nil || line != want {
			t.Fatalf("first chunk head %q, %v; want %q (every frame in one chunk)", line, err, want)
		}
		if events.Load() != int32(len(fs)) {
			t.Errorf("OnWrite counted %d events, want %d", events.Load(), len(fs))
		}
		h.End()
	})
	for _, end := range []string{"End", "Fail", "heartbeat", "Flush"} {
		t.Run("held then "+end, func(t *testing.T) {
			server, client := tcpPair(t, false)
			h := NewHub(0)
			hb := 20 * time.Millisecond
			if end != "heartbeat" {
				hb = time.Hour // (the held frames must not wait for it)
			}
			sub, _ := h.Subscribe(0, Options{Heartbeat: hb})
			sub.ServeConn(server, nil)
			for i, f := range fs {
				h.Publish(Event{Seq: int64(i + 1), Frame: f, More: true})
			}
			switch end {
			case "Flush":
				h.Flush()
			case "End":
				h.End()
			case "Fail":
				h.Fail(errors.New("lost"))
			}
			r := httputil.NewChunkedReader(bufio.NewReader(client))
			got := make([]byte, len(all))
			if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, all) {
				t.Fatalf("got %q, %v; want the held frames", got, err)
			}
			if end == "heartbeat" || end == "Flush" {
				h.End()
			}
		})
	}
}
