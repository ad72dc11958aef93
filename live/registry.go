package live

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// ErrNoFollower is returned by Registry.Subscribe for a run this process does not pump when
// the store cannot follow runs (it does not implement recorder.Follower).
var ErrNoFollower = errors.New("live: the store cannot follow runs pumped elsewhere")

// ErrClosed is returned by Registry.Subscribe, and by the ThreadWatch.Next of every watch,
// once the registry was closed (the process is shutting down).
var ErrClosed = errors.New("live: the process is shutting down")

// RegistryConfig configures a Registry.
type RegistryConfig struct {
	// Follower follows runs pumped by another process (or before this one registered them).
	// nil: only runs pumped here can be subscribed to.
	Follower recorder.Follower
	// OnQuiet, when set, is called by a shared follower whose run stayed silent for the
	// subscriber's Options.Heartbeat (the orphan reaper: a run whose replica died is ended
	// by one check per run per process, not one per attacher).
	OnQuiet func(ctx context.Context, threadID, runID string)
	// BacklogBytes is each hub's backlog (see NewHub).
	BacklogBytes int
	// LatestRun reads the id of a thread's latest run, for WatchThread.
	LatestRun func(ctx context.Context, threadID string) (string, error)
}

// Registry holds the hubs of one process: the hub of each run this process pumps (Open), and
// for a run pumped elsewhere one hub fed by a single recorder.Follower subscription, shared by
// every local subscriber of that run and ended when the last one leaves or the run ends. The
// store is thus read once per run per process, whatever the number of subscribers. A Registry
// is safe for concurrent use.
type Registry struct {
	cfg RegistryConfig

	mu      sync.Mutex
	local   map[runKey]*Hub
	shared  map[runKey]*sharedHub
	watches map[string]*ThreadWatch
	closed  bool           // set by Close: no new follower or watch starts
	wg      sync.WaitGroup // the shared followers' and thread watches' goroutines
}

type runKey struct{ thread, run string }

// sharedHub is a hub fed by one follower goroutine; refs counts its subscribers.
type sharedHub struct {
	hub    *Hub
	refs   int
	cancel context.CancelFunc
}

// NewRegistry returns an empty registry.
func NewRegistry(cfg RegistryConfig) *Registry {
	return &Registry{cfg: cfg, local: map[runKey]*Hub{}, shared: map[runKey]*sharedHub{}, watches: map[string]*ThreadWatch{}}
}

// Open registers the hub a run's pump publishes to, from its first event. The pump calls
// Hub.End when the run ended, then release.
func (r *Registry) Open(threadID, runID string) (hub *Hub, release func()) {
	k := runKey{threadID, runID}
	hub = NewHub(r.cfg.BacklogBytes)
	r.mu.Lock()
	r.local[k] = hub
	r.mu.Unlock()
	return hub, func() {
		r.mu.Lock()
		if r.local[k] == hub {
			delete(r.local, k)
		}
		r.mu.Unlock()
	}
}

// Local returns the hub of a run this process pumps, or nil.
func (r *Registry) Local(threadID, runID string) *Hub {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.local[runKey{threadID, runID}]
}

// Streaming reports whether this process pumps the run and its hub has not ended: the run
// goes on here even when the store already records its end (a response kept after its
// RUN_FINISHED, which the store records as the run's end until the response's next one).
func (r *Registry) Streaming(threadID, runID string) bool {
	h := r.Local(threadID, runID)
	return h != nil && !h.ended()
}

// Subscribe subscribes to the run's events after `after` (see Hub.Subscribe for gapEnd):
// through the run's hub when this process pumps it, else through the run's shared follower,
// started if this is its first subscriber. Call release when done (it closes the subscriber).
func (r *Registry) Subscribe(threadID, runID string, after int64, o Options) (s *Subscriber, gapEnd int64, release func(), err error) {
	k := runKey{threadID, runID}
	r.mu.Lock()
	if hub := r.local[k]; hub != nil {
		r.mu.Unlock()
		s, gapEnd = hub.Subscribe(after, o)
		return s, gapEnd, func() { s.Close() }, nil
	}
	if r.cfg.Follower == nil {
		r.mu.Unlock()
		return nil, after, nil, ErrNoFollower
	}
	if r.closed {
		r.mu.Unlock()
		return nil, after, nil, ErrClosed
	}
	sh := r.shared[k]
	if sh == nil || sh.hub.ended() {
		ctx, cancel := context.WithCancel(context.Background())
		sh = &sharedHub{hub: NewHub(r.cfg.BacklogBytes), cancel: cancel}
		sh.hub.last = after // the follower starts here: earlier events are a gap
		r.shared[k] = sh
		r.wg.Add(1)
		go r.follow(ctx, k, sh, after, o.Heartbeat)
	}
	sh.refs++
	r.mu.Unlock()
	s, gapEnd = sh.hub.Subscribe(after, o)
	return s, gapEnd, func() {
		s.Close()
		r.mu.Lock()
		sh.refs--
		if sh.refs == 0 {
			sh.cancel()
			if r.shared[k] == sh {
				delete(r.shared, k)
			}
		}
		r.mu.Unlock()
	}, nil
}

// Followers returns the number of shared followers running (one per run pumped elsewhere
// with subscribers here).
func (r *Registry) Followers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.shared)
}

// Watches returns the number of threads watched (one poller each).
func (r *Registry) Watches() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.watches)
}

// Close stops every shared follower and thread watch and waits for their goroutines: their
// subscribers end with context.Canceled, their watchers' Next returns ErrClosed. Later
// subscriptions to runs pumped elsewhere, and later watches, get ErrClosed; the hubs of runs
// this process pumps are not affected (their pumps end them). Close is idempotent.
func (r *Registry) Close() {
	r.mu.Lock()
	r.closed = true
	for _, sh := range r.shared {
		sh.cancel()
	}
	for _, w := range r.watches {
		w.cancel()
		w.fail(ErrClosed)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// follow feeds sh.hub from one store subscription until the run ends, the last subscriber
// leaves (ctx) or the store fails. A follower dropped for lagging (recorder.ErrSlowSubscriber)
// follows again from its last seq.
func (r *Registry) follow(ctx context.Context, k runKey, sh *sharedHub, after int64, quiet time.Duration) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		if r.shared[k] == sh {
			delete(r.shared, k)
		}
		r.mu.Unlock()
	}()
	last := after
	for {
		sub, err := r.cfg.Follower.Follow(ctx, k.thread, k.run, last)
		if err == nil {
			err = r.relay(ctx, k, sub, sh.hub, &last, quiet)
			sub.Close()
		}
		switch {
		case errors.Is(err, recorder.ErrSlowSubscriber) && ctx.Err() == nil:
			continue
		case errors.Is(err, io.EOF):
			sh.hub.End()
		case ctx.Err() != nil:
			sh.hub.Fail(context.Canceled)
		default:
			sh.hub.Fail(err)
		}
		return
	}
}

// relay publishes sub's events to hub until the run's terminal event (io.EOF) or an error.
func (r *Registry) relay(ctx context.Context, k runKey, sub recorder.Subscription, hub *Hub, last *int64, quiet time.Duration) error {
	for {
		next, cancel := ctx, context.CancelFunc(func() {})
		if quiet > 0 {
			next, cancel = context.WithTimeout(ctx, quiet)
		}
		ev, err := sub.Next(next)
		cancel()
		switch {
		case err == nil:
			if ev.Seq <= *last {
				continue // never twice
			}
			*last = ev.Seq
			hub.Publish(Event{Seq: ev.Seq, Type: ev.Type, Frame: ev.Frame})
			if agui.IsTerminal(ev.Type) {
				return io.EOF // the proxy ends every recorded run with one of these
			}
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			if r.cfg.OnQuiet != nil {
				r.cfg.OnQuiet(ctx, k.thread, k.run)
			}
		default:
			return err
		}
	}
}
