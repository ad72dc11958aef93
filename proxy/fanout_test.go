package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"runtime"
	"testing"
)

// TestSubscriberWriteTo: frames published while the subscription writes to the client arrive
// whole, in order, once each (the queue's two backing arrays swap under the writer), and the
// write ends with io.EOF when the run ends.
func TestSubscriberWriteTo(t *testing.T) {
	var b broadcast
	sub, _ := b.subscribe(1<<30, 0, nil)
	var want bytes.Buffer
	frames := make([][]byte, 5000)
	for i := range frames {
		frames[i] = fmt.Appendf(nil, "id: %d\ndata: {\"n\":%d}\n\n", i+1, i)
		want.Write(frames[i])
	}
	go func() {
		for i, f := range frames {
			b.publish(f, int64(i+1))
			if i%3 == 0 {
				runtime.Gosched() // let the writer find the queue empty now and then
			}
		}
		b.end()
	}()
	rec := httptest.NewRecorder()
	if err := sub.writeTo(rec); !errors.Is(err, io.EOF) {
		t.Fatalf("writeTo = %v, want io.EOF", err)
	}
	if !bytes.Equal(rec.Body.Bytes(), want.Bytes()) {
		t.Errorf("client got %d bytes, want the %d bytes published in order", rec.Body.Len(), want.Len())
	}
	if !rec.Flushed {
		t.Error("writeTo never flushed")
	}
}

// TestSubscriberWriteToSlowClient: a client that lags past its queue limit is dropped with
// errSlowClient; the publisher never waits.
func TestSubscriberWriteToSlowClient(t *testing.T) {
	var b broadcast
	sub, _ := b.subscribe(100, 0, nil)
	for i := range 10 {
		b.publish(bytes.Repeat([]byte{'x'}, 30), int64(i+1)) // 300 bytes > 100: dropped
	}
	if err := sub.writeTo(httptest.NewRecorder()); !errors.Is(err, errSlowClient) {
		t.Errorf("writeTo = %v, want errSlowClient", err)
	}
}
