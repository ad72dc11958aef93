package live

import (
	"context"
	"sync"
	"time"
)

// ThreadWatch follows which run is a thread's latest, for the streams that stay open for a
// thread's next runs (a ?follow=1 thread attach). One goroutine per watched thread per process
// reads it (RegistryConfig.LatestRun) once per poll interval, however many streams watch it.
type ThreadWatch struct {
	r        *Registry
	threadID string
	refs     int // guarded by r.mu
	cancel   context.CancelFunc

	mu      sync.Mutex
	latest  string
	err     error
	changed chan struct{} // closed and replaced when latest or err changes
}

// WatchThread returns the watch of a thread's latest run, starting its poller (every `every`)
// if this is its first watcher. Call release when done: the poller stops with its last
// watcher.
func (r *Registry) WatchThread(threadID string, every time.Duration) (w *ThreadWatch, release func()) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		w = &ThreadWatch{r: r, threadID: threadID, cancel: func() {}, changed: make(chan struct{}), err: ErrClosed}
		return w, func() {}
	}
	w = r.watches[threadID]
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w = &ThreadWatch{r: r, threadID: threadID, cancel: cancel, changed: make(chan struct{})}
		r.watches[threadID] = w
		r.wg.Add(1)
		go w.poll(ctx, every)
	}
	w.refs++
	r.mu.Unlock()
	return w, func() {
		r.mu.Lock()
		w.refs--
		if w.refs == 0 {
			w.cancel()
			if r.watches[threadID] == w {
				delete(r.watches, threadID)
			}
		}
		r.mu.Unlock()
	}
}

// Next waits until the thread's latest run is known and differs from current, and returns it.
// It returns ctx's error when ctx ends first (and may be called again), or the error of the
// last read of the thread.
func (w *ThreadWatch) Next(ctx context.Context, current string) (string, error) {
	latest, _, err := w.NextOrTick(ctx.Done(), nil, current)
	if err == context.Canceled {
		return "", ctx.Err()
	}
	return latest, err
}

// NextOrTick is Next for a caller that keeps one timer across its waits (a heartbeat) instead
// of a context per wait: it returns ticked true when tick fires first, and context.Canceled
// when done is closed first. A nil tick never fires.
func (w *ThreadWatch) NextOrTick(done <-chan struct{}, tick <-chan time.Time, current string) (latest string, ticked bool, err error) {
	for {
		w.mu.Lock()
		latest, err, changed := w.latest, w.err, w.changed
		w.mu.Unlock()
		if err != nil {
			return "", false, err
		}
		if latest != "" && latest != current {
			return latest, false, nil
		}
		select {
		case <-changed:
		case <-done:
			return "", false, context.Canceled
		case <-tick:
			return "", true, nil
		}
	}
}

// fail ends the watch with err: every Next returns it.
func (w *ThreadWatch) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
		close(w.changed)
		w.changed = make(chan struct{})
	}
	w.mu.Unlock()
}

// poll reads the thread's latest run every interval until ctx ends.
func (w *ThreadWatch) poll(ctx context.Context, every time.Duration) {
	defer w.r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		latest, err := w.r.cfg.LatestRun(ctx, w.threadID)
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		if ctx.Err() != nil { // closed meanwhile (Close cancels before it fails the watch)
			w.mu.Unlock()
			return
		}
		if latest != w.latest || err != w.err {
			w.latest, w.err = latest, err
			close(w.changed)
			w.changed = make(chan struct{})
		}
		w.mu.Unlock()
		if err != nil { // every watcher ends with it; the next watcher starts a new watch
			w.r.mu.Lock()
			if w.r.watches[w.threadID] == w {
				delete(w.r.watches, w.threadID)
			}
			w.r.mu.Unlock()
			return
		}
	}
}
