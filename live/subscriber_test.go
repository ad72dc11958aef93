package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"
)

// TestSubscriberWriteTo: frames published while the subscription writes to the client arrive
// whole, in order, once each (the queue's two backing arrays swap under the writer), and the
// write ends with io.EOF when the run ends.
func TestSubscriberWriteTo(t *testing.T) {
	b := NewHub(0)
	sub, _ := b.Subscribe(0, Options{QueueBytes: 1 << 30})
	var want bytes.Buffer
	frames := make([][]byte, 5000)
	for i := range frames {
		frames[i] = fmt.Appendf(nil, "id: %d\ndata: {\"n\":%d}\n\n", i+1, i)
		want.Write(frames[i])
	}
	go func() {
		for i, f := range frames {
			b.Publish(Event{Seq: int64(i + 1), Frame: f})
			if i%3 == 0 {
				runtime.Gosched() // let the writer find the queue empty now and then
			}
		}
		b.End()
	}()
	rec := httptest.NewRecorder()
	if err := sub.WriteTo(rec, nil); !errors.Is(err, io.EOF) {
		t.Fatalf("WriteTo = %v, want io.EOF", err)
	}
	if !bytes.Equal(rec.Body.Bytes(), want.Bytes()) {
		t.Errorf("client got %d bytes, want the %d bytes published in order", rec.Body.Len(), want.Len())
	}
	if !rec.Flushed {
		t.Error("WriteTo never flushed")
	}
}

// TestSubscriberWriteToSlowClient: a client that lags past its queue limit is dropped with
// ErrSlowClient; the publisher never waits.
func TestSubscriberWriteToSlowClient(t *testing.T) {
	b := NewHub(0)
	sub, _ := b.Subscribe(0, Options{QueueBytes: 100})
	for i := range 10 {
		b.Publish(Event{Seq: int64(i + 1), Frame: bytes.Repeat([]byte{'x'}, 30)}) // 300 bytes > 100: dropped
	}
	if err := sub.WriteTo(httptest.NewRecorder(), nil); !errors.Is(err, ErrSlowClient) {
		t.Errorf("WriteTo = %v, want ErrSlowClient", err)
	}
}

// blockingWriter is an http.ResponseWriter whose Write blocks until release is closed, after
// signalling entered: a client that is slow to read the frame being written.
type blockingWriter struct {
	*httptest.ResponseRecorder
	entered chan struct{}
	release chan struct{}
	once    bool
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if !w.once {
		w.once = true
		close(w.entered)
		<-w.release
	}
	return w.ResponseRecorder.Write(p)
}

// TestSubscriberWriteToLargeFirstFrame: a frame as large as the queue limit (RUN_STARTED
// carrying a large input) is being written to a client that is slow to read it; the frames
// published meanwhile are queued, not counted with the one in flight, and the client is not
// dropped (a CI failure: the stream was cut right after RUN_STARTED).
func TestSubscriberWriteToLargeFirstFrame(t *testing.T) {
	const limit = 1000
	b := NewHub(0)
	sub, _ := b.Subscribe(0, Options{QueueBytes: limit})
	first := bytes.Repeat([]byte{'x'}, limit)
	b.Publish(Event{Seq: 1, Frame: first})
	w := &blockingWriter{ResponseRecorder: httptest.NewRecorder(), entered: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- sub.WriteTo(w, nil) }()
	<-w.entered // the first frame is in flight
	next := []byte("data: {\"type\":\"TEXT_MESSAGE_START\"}\n\n")
	b.Publish(Event{Seq: 2, Frame: next})
	b.Publish(Event{Seq: 3, Frame: next})
	b.End()
	close(w.release)
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatalf("WriteTo = %v, want io.EOF (the client was dropped while reading the first frame)", err)
	}
	if want := len(first) + 2*len(next); w.Body.Len() != want {
		t.Errorf("client got %d bytes, want %d", w.Body.Len(), want)
	}
}

// TestSubscriberWriteToSlowSteadyClient: as TestServeConnSlowSteadyClient, through net/http:
// WriteTimeout bounds each write, so a client that keeps reading a backlog that takes longer
// than WriteTimeout in all gets every event.
func TestSubscriberWriteToSlowSteadyClient(t *testing.T) {
	const timeout = time.Second
	h := NewHub(0)
	sub, _ := h.Subscribe(0, Options{QueueBytes: 8 << 20, WriteTimeout: timeout})
	want := publishAll(h, frames(10000, 400)) // 4 MB: ~1.5 s at 64 KiB per 25 ms
	served := make(chan error, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served <- sub.WriteTo(w, nil)
	}))
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			c.(*net.TCPConn).SetWriteBuffer(256 << 10)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			c.(*net.TCPConn).SetReadBuffer(256 << 10) // (see TestServeConnSlowSteadyClient)
		}
		return c, err
	}}}
	res, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	start := time.Now()
	got, err := readPaced(res.Body, 64<<10, 25*time.Millisecond)
	if err != nil {
		t.Fatalf("after %d bytes (WriteTimeout %v): %v (WriteTo: %v)", len(got), timeout, err, <-served)
	}
	if err := <-served; !errors.Is(err, io.EOF) {
		t.Errorf("WriteTo = %v, want io.EOF (the run's end)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("client got %d bytes, want the %d published, in order", len(got), len(want))
	}
	if d := time.Since(start); d < timeout {
		t.Logf("the client read everything in %v, inside WriteTimeout: this run did not exercise the bound", d)
	}
}
