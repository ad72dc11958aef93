package live

import (
	"bufio"
	"bytes"
	"io"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clockState returns what c holds: subscribers scheduled (counted and as found in the slots)
// and whether its goroutine runs.
func clockState(c *beatClock) (n, linked int, running bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, head := range c.slots {
		var prev *Subscriber
		for s := head; s != nil; s = s.beat.next {
			if s.beat.prev != prev {
				panic("beat links out of order")
			}
			prev = s
			linked++
		}
	}
	return c.n, linked, c.running
}

// TestBeatClockSchedule: schedule, reschedule and unschedule keep one entry per subscriber;
// the clock's goroutine runs while any is scheduled and ends once none is.
func TestBeatClockSchedule(t *testing.T) {
	c := clockFor(time.Hour + 7*time.Millisecond) // a clock of this test's own
	h := NewHub(0)
	subs := make([]*Subscriber, 100)
	for i := range subs {
		subs[i], _ = h.Subscribe(0, Options{})
		c.schedule(subs[i], time.Duration(i+1)*time.Minute) // (none comes due: they have no connection)
	}
	for _, s := range subs[:50] {
		c.schedule(s, time.Minute) // moved, not added
	}
	if n, linked, running := clockState(c); n != 100 || linked != 100 || !running {
		t.Fatalf("n %d, linked %d, running %v; want 100, 100, true", n, linked, running)
	}
	for _, s := range subs {
		c.unschedule(s)
		c.unschedule(s) // (twice: no effect)
	}
	if n, linked, _ := clockState(c); n != 0 || linked != 0 {
		t.Fatalf("n %d, linked %d after unscheduling all; want 0", n, linked)
	}
	deadline := time.Now().Add(10 * time.Second) // the goroutine ends at its next tick (1 s)
	for {
		if _, _, running := clockState(c); !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the clock's goroutine still runs with nothing scheduled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.schedule(subs[0], time.Minute) // starts it again
	if _, _, running := clockState(c); !running {
		t.Error("schedule did not start the goroutine again")
	}
	c.unschedule(subs[0])
}

// TestBeatClockManyStreams: 200 silent streams sharing one interval each get the Heartbeat
// comment, none before the interval of silence, from one clock; once the streams end the clock
// holds nothing.
func TestBeatClockManyStreams(t *testing.T) {
	const streams, every = 200, 40 * time.Millisecond
	c := clockFor(every)
	h := NewHub(0)
	var quiet atomic.Int64
	type stream struct {
		r     io.Reader
		begun time.Time
	}
	ss := make([]stream, streams)
	for i := range ss {
		server, client := tcpPair(t, false)
		client.SetReadDeadline(time.Now().Add(30 * time.Second)) // (a heartbeat never written fails the read)
		sub, _ := h.Subscribe(0, Options{Heartbeat: every, OnQuiet: func() { quiet.Add(1) }})
		ss[i] = stream{r: httputil.NewChunkedReader(bufio.NewReader(client)), begun: time.Now()}
		sub.ServeConn(server, nil)
	}
	var wg sync.WaitGroup
	for i, st := range ss {
		wg.Go(func() {
			got := make([]byte, len(Heartbeat))
			if _, err := io.ReadFull(st.r, got); err != nil || !bytes.Equal(got, Heartbeat) {
				t.Errorf("stream %d read %q, %v; want the heartbeat", i, got, err)
				return
			}
			if since := time.Since(st.begun); since < every {
				t.Errorf("stream %d got its heartbeat after %v of silence, want at least %v", i, since, every)
			}
		})
	}
	wg.Wait()
	for deadline := time.Now().Add(10 * time.Second); quiet.Load() < streams; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // (OnQuiet runs just after the heartbeat is written)
			t.Fatalf("OnQuiet called %d times, want at least %d", quiet.Load(), streams)
		}
	}

	h.End() // every stream ends: none stays scheduled
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, linked, _ := clockState(c); n == 0 && linked == 0 {
			break
		}
		if time.Now().After(deadline) {
			n, linked, _ := clockState(c)
			t.Fatalf("%d subscribers (%d linked) still scheduled after the streams ended", n, linked)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHeartbeatNotSilent: a heartbeat due on a stream written to since writes nothing and
// schedules itself for the rest of the interval.
func TestHeartbeatNotSilent(t *testing.T) {
	const every = time.Hour + 11*time.Millisecond
	c := clockFor(every)
	h := NewHub(0)
	server, client := tcpPair(t, false)
	sub, _ := h.Subscribe(0, Options{Heartbeat: every})
	sub.ServeConn(server, nil)
	r := httputil.NewChunkedReader(bufio.NewReader(client))
	first, second := []byte("id: 1\ndata: {}\n\n"), []byte("id: 2\ndata: {}\n\n")
	h.Publish(Event{Seq: 1, Frame: first})
	sub.heartbeat() // due early: the stream was written to just now
	if n, _, _ := clockState(c); n != 1 {
		t.Errorf("%d scheduled after the heartbeat, want 1 (itself, again)", n)
	}
	h.Publish(Event{Seq: 2, Frame: second})
	h.End()
	got, err := io.ReadAll(r)
	if want := append(append([]byte(nil), first...), second...); err != nil || !bytes.Equal(got, want) {
		t.Errorf("read %q, %v; want the two events and nothing between", got, err)
	}
	if n, _, _ := clockState(c); n != 0 {
		t.Errorf("%d scheduled once the stream ended, want 0", n)
	}
}

// TestBeatClockWrittenStream: a stream written to within the interval stays scheduled by the
// clock itself, tick after tick, and gets no heartbeat.
func TestBeatClockWrittenStream(t *testing.T) {
	const every = 30*time.Millisecond + 3*time.Microsecond // a clock of this test's own
	c := clockFor(every)
	h := NewHub(0)
	server, client := tcpPair(t, false)
	client.SetReadDeadline(time.Now().Add(30 * time.Second))
	sub, _ := h.Subscribe(0, Options{Heartbeat: every})
	sub.ServeConn(server, nil)
	sub.mu.Lock()
	sub.d.lastWrite.Store(time.Now().Add(time.Hour).UnixNano()) // written "later": never silent
	sub.mu.Unlock()
	c.mu.Lock()
	until := c.done + 3*int64(len(c.slots)) // three full turns of the ring
	c.mu.Unlock()
	for {
		c.mu.Lock()
		done, n := c.done, c.n
		c.mu.Unlock()
		if n != 1 {
			t.Fatalf("%d scheduled, want 1 (the stream, moved by the clock)", n)
		}
		if done >= until {
			break
		}
		time.Sleep(time.Millisecond)
	}
	frame := []byte("id: 1\ndata: {}\n\n")
	h.Publish(Event{Seq: 1, Frame: frame})
	h.End()
	got, err := io.ReadAll(httputil.NewChunkedReader(bufio.NewReader(client)))
	if err != nil || !bytes.Equal(got, frame) {
		t.Errorf("read %q, %v; want the event alone", got, err)
	}
}
