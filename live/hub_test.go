package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// event returns event seq of a test run: an SSE frame with its id and a body of size bytes.
func event(seq int64, size int) Event {
	typ := agui.TextMessageContent
	f := fmt.Appendf(nil, "id: r:aaaaaaaa:%d\ndata: {\"type\":%q,\"pad\":%q}\n\n", seq, typ, bytes.Repeat([]byte{'x'}, size))
	return Event{Seq: seq, Type: typ, Frame: f}
}

// seqs parses the ids of the frames a client received.
func seqs(t *testing.T, b []byte) []int64 {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(b), sse.Limits{})
	var out []int64
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if !f.HasData {
			continue
		}
		c, err := recorder.ParseCursor(f.ID)
		if err != nil {
			t.Fatalf("frame id %q: %v", f.ID, err)
		}
		out = append(out, c.Seq)
	}
}

// TestHubSeamRandomCuts is the seam between the store and the hub, property style: a run of
// n events is published while the store lags the hub by a random amount; a subscriber that
// read the store up to a random cut subscribes after it, reads the gap Subscribe reports from
// the store, then the hub. Whatever the cut, the backlog size and the interleaving, it gets
// every event after the cut exactly once, in order.
func TestHubSeamRandomCuts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		n := 1 + rng.IntN(60)
		size := rng.IntN(200)
		backlog := []int{-1, 1, 300, 2000, 1 << 20}[rng.IntN(5)]
		all := make([]Event, n+1)
		for i := 1; i <= n; i++ {
			all[i] = event(int64(i), size)
		}
		h := NewHub(backlog)
		// Half the trials publish as the pump does, telling the hub how far the store got
		// (which lags by up to 5 events) so the backlog forgets what the store has.
		tellStored := rng.IntN(2) == 0
		var stored int64
		publish := func(i int) {
			if !tellStored {
				h.Publish(all[i])
				return
			}
			stored = max(stored, int64(i-1-rng.IntN(6)))
			h.PublishStored(all[i], stored)
		}
		published := rng.IntN(n + 1) // what the pump published before the subscriber came
		for i := 1; i <= published; i++ {
			publish(i)
		}
		cut := int64(rng.IntN(published + 1)) // the store had this much when the subscriber read it
		sub, gapEnd := h.Subscribe(cut, Options{})
		if gapEnd < cut || gapEnd > int64(published) {
			t.Fatalf("trial %d: Subscribe(%d) after %d published: gap end %d", trial, cut, published, gapEnd)
		}
		var got bytes.Buffer
		for seq := cut + 1; seq <= gapEnd; seq++ { // the gap, from the store (which has it by now)
			got.Write(all[seq].Frame)
		}
		done := make(chan error, 1)
		rec := httptest.NewRecorder()
		go func() { done <- sub.WriteTo(rec, nil) }()
		for i := published + 1; i <= n; i++ {
			publish(i)
			if rng.IntN(4) == 0 {
				runtime.Gosched()
			}
		}
		h.End()
		if err := <-done; !errors.Is(err, io.EOF) {
			t.Fatalf("trial %d: WriteTo = %v", trial, err)
		}
		got.Write(rec.Body.Bytes())
		want := make([]int64, 0, n)
		for seq := cut + 1; seq <= int64(n); seq++ {
			want = append(want, seq)
		}
		if g := seqs(t, got.Bytes()); fmt.Sprint(g) != fmt.Sprint(want) {
			t.Fatalf("trial %d (n %d, backlog %d, stored told %v, published %d, cut %d, gap end %d): got %v, want %v",
				trial, n, backlog, tellStored, published, cut, gapEnd, g, want)
		}
	}
}

// TestHubForgetsStoredEvents: PublishStored lets the backlog go up to the stored seq, so a
// subscriber from the start is told to read those from the store; the rest comes from memory.
func TestHubForgetsStoredEvents(t *testing.T) {
	h := NewHub(0)
	for i := int64(1); i <= 5; i++ {
		h.Publish(event(i, 10))
	}
	h.PublishStored(event(6, 10), 4)
	sub, gapEnd := h.Subscribe(0, Options{})
	if gapEnd != 4 {
		t.Fatalf("gap end %d, want 4 (events 1-4 are stored)", gapEnd)
	}
	h.PublishStored(event(7, 10), 7) // the event published may be stored already: still kept
	h.End()
	rec := httptest.NewRecorder()
	if err := sub.WriteTo(rec, nil); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if g := seqs(t, rec.Body.Bytes()); fmt.Sprint(g) != "[5 6 7]" {
		t.Errorf("got %v, want [5 6 7]", g)
	}
	late, gapEnd := h.Subscribe(0, Options{})
	late.Close()
	if gapEnd != 6 {
		t.Errorf("after PublishStored(7, 7), gap end %d, want 6 (the backlog keeps the latest event)", gapEnd)
	}
}

// TestHubBacklogReusesItsArray: a backlog trimmed at every event (by the store's progress or
// by its byte bound) keeps one array, and holds no frame outside its live events.
func TestHubBacklogReusesItsArray(t *testing.T) {
	for _, stored := range []bool{true, false} {
		h := NewHub(2000) // ~10 events of 200 bytes
		var arrays int
		var last *Event
		for i := int64(1); i <= 5000; i++ {
			if stored {
				h.PublishStored(event(i, 200), max(i-3, 0))
			} else {
				h.Publish(event(i, 200))
			}
			if a := unsafe.SliceData(h.backlogArray); a != last {
				arrays, last = arrays+1, a
			}
		}
		if arrays > 6 {
			t.Errorf("stored %v: the backlog changed arrays %d times over 5,000 events", stored, arrays)
		}
		held := 0
		for _, ev := range h.backlogArray[:cap(h.backlogArray)] {
			if ev.Frame != nil {
				held++
			}
		}
		if held != len(h.backlog) {
			t.Errorf("stored %v: the backlog's array holds %d frames, %d of them live", stored, held, len(h.backlog))
		}
	}
}

// TestHubSubscriberAheadOfHub: a subscriber that read the store further than a follower's hub
// has published (the hub started behind) gets nothing twice.
func TestHubSubscriberAheadOfHub(t *testing.T) {
	h := NewHub(0)
	h.Publish(event(1, 10))
	sub, gapEnd := h.Subscribe(3, Options{})
	if gapEnd != 3 {
		t.Fatalf("gap end %d, want 3", gapEnd)
	}
	for i := int64(2); i <= 5; i++ {
		h.Publish(event(i, 10))
	}
	h.End()
	rec := httptest.NewRecorder()
	if err := sub.WriteTo(rec, nil); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if g := seqs(t, rec.Body.Bytes()); fmt.Sprint(g) != "[4 5]" {
		t.Errorf("got %v, want [4 5]", g)
	}
}

// TestHubSlowSubscriberDropped: of three clients of one run, the one that stops reading is
// dropped by the byte rule (ErrSlowClient) while the two others receive every event, and the
// publisher never waits.
func TestHubSlowSubscriberDropped(t *testing.T) {
	const limit, n = 4 << 10, 200
	h := NewHub(0)
	var drops int
	var mu sync.Mutex
	o := Options{QueueBytes: limit, OnDrop: func() { mu.Lock(); drops++; mu.Unlock() }}
	slow, _ := h.Subscribe(0, o)
	w := &blockingWriter{ResponseRecorder: httptest.NewRecorder(), entered: make(chan struct{}), release: make(chan struct{})}
	slowDone := make(chan error, 1)
	go func() { slowDone <- slow.WriteTo(w, nil) }()
	var fast [2]*signalWriter
	fastDone := make(chan error, 2)
	for i := range fast {
		sub, _ := h.Subscribe(0, o)
		fast[i] = &signalWriter{ResponseRecorder: httptest.NewRecorder(), wrote: make(chan struct{}, n)}
		go func() { fastDone <- sub.WriteTo(fast[i], nil) }()
	}
	h.Publish(event(1, 100))
	<-w.entered // the slow client is stuck in its first write
	for i := int64(1); i <= n; i++ {
		if i > 1 {
			h.Publish(event(i, 100))
		}
		for _, f := range fast { // the fast clients read each event before the next
			<-f.wrote
		}
	}
	h.End()
	for range fast {
		if err := <-fastDone; !errors.Is(err, io.EOF) {
			t.Errorf("a fast client's WriteTo = %v, want io.EOF", err)
		}
	}
	close(w.release)
	if err := <-slowDone; !errors.Is(err, ErrSlowClient) {
		t.Errorf("the slow client's WriteTo = %v, want ErrSlowClient", err)
	}
	for i, f := range fast {
		if g := seqs(t, f.Body.Bytes()); len(g) != n || g[0] != 1 || g[n-1] != n {
			t.Errorf("fast client %d got %d events, want %d", i, len(g), n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if drops != 1 {
		t.Errorf("%d drops counted, want 1", drops)
	}
}

// TestHubHeartbeat: a silent stream gets the one Heartbeat comment.
func TestHubHeartbeat(t *testing.T) {
	h := NewHub(0)
	sub, _ := h.Subscribe(0, Options{Heartbeat: time.Millisecond})
	w := &signalWriter{ResponseRecorder: httptest.NewRecorder(), wrote: make(chan struct{}, 100)}
	done := make(chan error, 1)
	go func() { done <- sub.WriteTo(w, nil) }()
	<-w.wrote
	h.End()
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(w.Body.Bytes(), Heartbeat) {
		t.Errorf("client got %q, want heartbeats %q", w.Body.String(), Heartbeat)
	}
}

// signalWriter signals each write.
type signalWriter struct {
	*httptest.ResponseRecorder
	wrote chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseRecorder.Write(p)
	select {
	case w.wrote <- struct{}{}:
	default: // nobody counts these writes any more
	}
	return n, err
}

// countingFollower counts the subscriptions opened on a real store.
type countingFollower struct {
	recorder.Follower
	mu      sync.Mutex
	follows int
}

func (c *countingFollower) Follow(ctx context.Context, threadID, runID string, after int64) (recorder.Subscription, error) {
	c.mu.Lock()
	c.follows++
	c.mu.Unlock()
	return c.Follower.Follow(ctx, threadID, runID, after)
}

// TestRegistrySharedFollower: 100 subscribers of a run pumped elsewhere (here: appended to a
// memory store directly) share one store subscription; every subscriber gets every event; the
// follower's goroutine ends with the run and the registry forgets it (no goroutine left).
func TestRegistrySharedFollower(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := t.Context()
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	defer store.Close()
	run := recorder.Run{ThreadID: "t", RunID: "r", Epoch: recorder.NewEpoch()}
	if _, err := store.CreateRun(ctx, run, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run, err := store.Run(ctx, "t", "r")
	if err != nil {
		t.Fatal(err)
	}
	cf := &countingFollower{Follower: store}
	reg := NewRegistry(RegistryConfig{Follower: cf})
	const subs, n = 100, 30
	var wg sync.WaitGroup
	recs := make([]*httptest.ResponseRecorder, subs)
	subscribed := make(chan struct{}, subs)
	for i := range subs {
		wg.Go(func() {
			s, gapEnd, release, err := reg.Subscribe("t", "r", 0, Options{})
			if err != nil || gapEnd != 0 {
				t.Errorf("Subscribe = %d, %v", gapEnd, err)
				return
			}
			defer release()
			subscribed <- struct{}{}
			recs[i] = httptest.NewRecorder()
			if err := s.WriteTo(recs[i], nil); !errors.Is(err, io.EOF) {
				t.Errorf("WriteTo = %v", err)
			}
		})
	}
	for range subs {
		<-subscribed
	}
	if f := reg.Followers(); f != 1 {
		t.Errorf("%d shared followers for one run, want 1", f)
	}
	for i := int64(1); i <= n; i++ {
		ev := event(i, 20)
		if i == n {
			ev.Type = agui.RunFinished
		}
		if err := store.Append(ctx, []recorder.Batch{{Run: run, Events: []recorder.Event{{Seq: ev.Seq, Type: ev.Type, Frame: ev.Frame}}}}); err != nil {
			t.Fatal(err)
		}
	}
	store.FinishRun(ctx, "t", "r", recorder.StatusFinished, "", n)
	wg.Wait()
	for i, rec := range recs {
		if g := seqs(t, rec.Body.Bytes()); len(g) != n {
			t.Errorf("subscriber %d got %d events, want %d", i, len(g), n)
		}
	}
	if cf.follows != 1 {
		t.Errorf("%d store subscriptions for %d subscribers, want 1", cf.follows, subs)
	}
	reg.Close()
	if f := reg.Followers(); f != 0 {
		t.Errorf("%d shared followers left after the run ended", f)
	}
	waitGoroutines(t, before)
}

// TestRegistryLastSubscriberLeaves: the shared follower of a run stops when its last
// subscriber leaves, though the run goes on; a later subscriber starts a new one.
func TestRegistryLastSubscriberLeaves(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := t.Context()
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	defer store.Close()
	if _, err := store.CreateRun(ctx, recorder.Run{ThreadID: "t", RunID: "r", Epoch: recorder.NewEpoch()}, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry(RegistryConfig{Follower: store})
	for range 3 {
		var releases []func()
		for range 5 {
			_, _, release, err := reg.Subscribe("t", "r", 0, Options{})
			if err != nil {
				t.Fatal(err)
			}
			releases = append(releases, release)
		}
		if f := reg.Followers(); f != 1 {
			t.Fatalf("%d followers, want 1", f)
		}
		for _, r := range releases {
			r()
		}
		if f := reg.Followers(); f != 0 {
			t.Fatalf("%d followers after every subscriber left, want 0", f)
		}
	}
	reg.Close()
	waitGoroutines(t, before)
}

// TestRegistryLocalHub: a run this process pumps is read from its own hub, not the store.
func TestRegistryLocalHub(t *testing.T) {
	reg := NewRegistry(RegistryConfig{}) // no follower: only local runs
	hub, release := reg.Open("t", "r")
	hub.Publish(event(1, 10))
	s, gapEnd, done, err := reg.Subscribe("t", "r", 0, Options{})
	if err != nil || gapEnd != 0 {
		t.Fatalf("Subscribe = %d, %v", gapEnd, err)
	}
	hub.Publish(event(2, 10))
	hub.End()
	release()
	rec := httptest.NewRecorder()
	if err := s.WriteTo(rec, nil); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	done()
	if g := seqs(t, rec.Body.Bytes()); fmt.Sprint(g) != "[1 2]" {
		t.Errorf("got %v", g)
	}
	if _, _, _, err := reg.Subscribe("t", "r", 0, Options{}); !errors.Is(err, ErrNoFollower) {
		t.Errorf("Subscribe after the run ended = %v, want ErrNoFollower", err)
	}
}

// waitGoroutines waits until the goroutine count is back to before (a leak fails the test
// once the test's own deadline passes).
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	for i := 0; runtime.NumGoroutine() > before; i++ {
		if i == 1000 {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, want %d:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchThreadShared: 50 streams following one thread share one poller; each learns the
// thread's next run; a failed read ends every watcher and the next watcher starts afresh; the
// poller stops with its last watcher.
func TestWatchThreadShared(t *testing.T) {
	before := runtime.NumGoroutine()
	var mu sync.Mutex
	latest, fail, inFlight, maxInFlight := "r1", error(nil), 0, 0
	reg := NewRegistry(RegistryConfig{LatestRun: func(ctx context.Context, threadID string) (string, error) {
		mu.Lock()
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		l, err := latest, fail
		mu.Unlock()
		time.Sleep(time.Millisecond) // a read that takes a while: concurrent pollers would overlap
		mu.Lock()
		inFlight--
		mu.Unlock()
		return l, err
	}})
	const watchers = 50
	var wg sync.WaitGroup
	got := make([]string, watchers)
	ready := make(chan struct{}, watchers)
	for i := range watchers {
		w, release := reg.WatchThread("t", time.Millisecond)
		wg.Go(func() {
			defer release()
			ready <- struct{}{}
			got[i], _ = w.Next(t.Context(), "r1")
		})
	}
	for range watchers {
		<-ready
	}
	if n := reg.Watches(); n != 1 {
		t.Errorf("%d pollers for one thread, want 1", n)
	}
	mu.Lock()
	latest = "r2"
	mu.Unlock()
	wg.Wait()
	for i, g := range got {
		if g != "r2" {
			t.Errorf("watcher %d got %q, want r2", i, g)
		}
	}
	mu.Lock()
	if maxInFlight != 1 {
		t.Errorf("%d concurrent reads of the thread, want 1", maxInFlight)
	}
	fail = errors.New("store down")
	mu.Unlock()
	w, release := reg.WatchThread("t", time.Millisecond)
	if _, err := w.Next(t.Context(), "r2"); err == nil {
		t.Error("Next after a failed read = nil error")
	}
	release()
	mu.Lock()
	fail, latest = nil, "r3"
	mu.Unlock()
	w, release = reg.WatchThread("t", time.Millisecond)
	if l, err := w.Next(t.Context(), "r2"); l != "r3" || err != nil {
		t.Errorf("a new watch after the failure: %q, %v, want r3", l, err)
	}
	release()
	reg.Close()
	if n := reg.Watches(); n != 0 {
		t.Errorf("%d pollers left", n)
	}
	waitGoroutines(t, before)
}
