package thread

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/live"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// Defaults for the zero values of Config.
const (
	DefaultRoute      = recorder.DefaultRoute
	DefaultLeaseGrace = 2 * time.Second
)

// Config configures a Service. Store is required.
type Config struct {
	// Store holds the threads. Stop and ReapOrphan need it to implement recorder.Leaser.
	Store recorder.Store
	// Logger receives structured logs. nil: discard.
	Logger *slog.Logger
	// Route is the route (room) of the threads served; each route has its own namespace of
	// thread ids (Key). Default DefaultRoute.
	Route string
	// IdentityHeader names the request header that identifies the caller (canonical form).
	// "": single-tenant, every caller may use every thread of the route.
	IdentityHeader string
	// TrustedProxies, when not empty, lists the peer networks allowed to set IdentityHeader.
	TrustedProxies []netip.Prefix
	// Compact configures the compaction of branches and checkpoints.
	Compact compact.Options
	// LeaseGrace is how long past its lease a running run still counts as alive (for the
	// busy rule and the orphan reaper). Default DefaultLeaseGrace.
	LeaseGrace time.Duration
	// AllowConcurrentRuns lets a run start while the thread's latest run is still running.
	AllowConcurrentRuns bool
}

// Service is the thread domain over one store and route. Create it with New.
type Service struct {
	cfg    Config
	log    *slog.Logger
	store  recorder.Store
	leaser recorder.Leaser // nil when the store keeps no leases
	live   *live.Registry  // the hubs of the running runs read in this process

	mu      sync.Mutex
	pumping map[runKey]func()  // runs this process pumps: their cancel
	flights map[runKey]*flight // branches being read or built (branch)
	recent  *recentBranches    // the branch of each thread's last checkpoint built here

	branchesFolded, branchesCompacted atomic.Uint64 // BranchStats
}

// BranchStats counts the branches this service built for a run's checkpoint: folded is
// those built by feeding the run to the fold kept with its parent's branch, compacted those
// built by compacting the whole branch (a first run, a fork, a parent built by another
// replica or before a restart, a parent's branch under 16 KiB, a run holding an event the
// client rejects). On a replica that serves consecutive runs of long threads, most are folded.
func (s *Service) BranchStats() (folded, compacted uint64) {
	return s.branchesFolded.Load(), s.branchesCompacted.Load()
}

type runKey struct{ thread, run string }

// New returns a Service for cfg.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("thread: Config.Store is required")
	}
	if cfg.Route == "" {
		cfg.Route = DefaultRoute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LeaseGrace <= 0 {
		cfg.LeaseGrace = DefaultLeaseGrace
	}
	s := &Service{cfg: cfg, log: cfg.Logger, store: cfg.Store, pumping: map[runKey]func(){}, flights: map[runKey]*flight{}, recent: newRecentBranches(recentBranchesBytes)}
	s.leaser, _ = cfg.Store.(recorder.Leaser)
	follower, _ := cfg.Store.(recorder.Follower)
	s.live = live.NewRegistry(live.RegistryConfig{
		Follower: follower,
		OnQuiet:  func(ctx context.Context, threadID, runID string) { s.ReapOrphan(ctx, threadID, runID) },
		LatestRun: func(ctx context.Context, threadID string) (string, error) {
			t, err := s.store.Thread(ctx, threadID)
			return t.LatestRunID, err
		},
	})
	return s, nil
}

// Live returns the registry of the live hubs: the hub of each run this process pumps (opened
// by Pumping) and the shared followers of runs pumped elsewhere.
func (s *Service) Live() *live.Registry { return s.live }

// Close stops the live delivery of runs pumped elsewhere (Live's shared followers and thread
// watches) and waits for their goroutines; their readers end. Runs this process pumps are
// ended by their pumps. Call it when the process shuts down, after the runs drained.
func (s *Service) Close() { s.live.Close() }

// Store returns the store the Service reads and writes.
func (s *Service) Store() recorder.Store { return s.store }

// Route returns the route the Service serves.
func (s *Service) Route() string { return s.cfg.Route }

// CompactOptions returns the compaction options of branches and checkpoints.
func (s *Service) CompactOptions() compact.Options { return s.cfg.Compact }

// Key returns the store key of owner's thread threadID on this route
// (recorder.ThreadKey): every owner and route has its own namespace of thread ids. Every
// thread id this package passes to the store is a key; recorder.ThreadIDOf gives back the id.
func (s *Service) Key(owner, threadID string) string {
	return recorder.ThreadKey(owner, s.cfg.Route, threadID)
}

// MultiTenant reports whether callers need an identity.
func (s *Service) MultiTenant() bool { return s.cfg.IdentityHeader != "" }

type ownerKey struct{}

type owner struct {
	id  string
	err error
}

// WithOwner returns ctx carrying the caller's identity as Identify computed it (id, err), so
// that Owner does not compute it again for the same request.
func WithOwner(ctx context.Context, id string, err error) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner{id, err})
}

// Owner returns the caller's identity: the one stored by WithOwner, else Identify(r).
func (s *Service) Owner(r *http.Request) (string, error) {
	if o, ok := r.Context().Value(ownerKey{}).(owner); ok {
		return o.id, o.err
	}
	return s.Identify(r)
}

// IdentityRequired is problem.ErrIdentityRequired with a detail naming header, the one the
// caller must send.
func IdentityRequired(header string) error {
	return problem.WithDetail(problem.ErrIdentityRequired,
		"this proxy is multi-tenant: send the caller's identity in the "+header+" header (your auth gateway sets it)")
}

// Caller checks that owner may use threads at all: in multi-tenant mode an anonymous caller
// gets problem.ErrIdentityRequired.
func (s *Service) Caller(owner string) error {
	if s.MultiTenant() && owner == "" {
		return IdentityRequired(s.cfg.IdentityHeader)
	}
	return nil
}

// Access returns owner's thread threadID on this route, looked up in owner's namespace (Key),
// so another owner's thread of the same id is not even read: it answers exactly like an
// unused id. The returned Thread.ID is the store key. Store errors other than the sentinels
// come back as problem.ErrStoreUnavailable.
func (s *Service) Access(ctx context.Context, owner, threadID string) (recorder.Thread, error) {
	if err := agui.ValidateID("threadId", threadID); err != nil {
		return recorder.Thread{}, err
	}
	if err := s.Caller(owner); err != nil {
		return recorder.Thread{}, err
	}
	th, err := s.store.Thread(ctx, s.Key(owner, threadID))
	if err != nil {
		return th, problem.StoreErr(err)
	}
	// The namespace already keeps other owners and routes out; these checks guard records
	// written under a key of the wrong namespace (see docs/design.md, upgrading).
	if th.Owner != owner {
		return recorder.Thread{}, fmt.Errorf("%w: %q", recorder.ErrThreadNotFound, threadID)
	}
	if th.Route != s.cfg.Route {
		return recorder.Thread{}, recorder.ErrThreadRoomMismatch
	}
	return th, nil
}

// AccessRun is Access for a thread and one of its runs.
func (s *Service) AccessRun(ctx context.Context, owner, threadID, runID string) (recorder.Thread, recorder.Run, error) {
	th, err := s.Access(ctx, owner, threadID)
	if err != nil {
		return th, recorder.Run{}, err
	}
	if err := agui.ValidateID("runId", runID); err != nil {
		return th, recorder.Run{}, err
	}
	run, err := s.store.Run(ctx, th.ID, runID)
	return th, run, problem.StoreErr(err)
}

// alive reports whether run keeps its thread busy at now: running, with no lease or a lease
// that expired less than the grace ago (else its replica is gone and it is an orphan).
func (s *Service) alive(run recorder.Run, now time.Time) bool {
	return s.createOptions().Busy(run, now)
}

func (s *Service) createOptions() recorder.CreateOptions {
	return recorder.CreateOptions{Exclusive: !s.cfg.AllowConcurrentRuns, LeaseGrace: s.cfg.LeaseGrace, ContinueLatest: true}
}

// StartRun registers run (ThreadID as the client sent it, RunID, Owner required;
// ParentRunID, Node and LeaseUntil as the caller has them) in owner's namespace in one store
// call and returns it as stored: ThreadID the store key (Key), the route, a fresh epoch,
// status running and, when it had no ParentRunID, the thread's latest run as its parent.
// Errors: problem.ErrIdentityRequired, ErrRunAlreadyStarted, ErrRunNotFound (unknown parent),
// ErrThreadBusy, problem.ErrStoreUnavailable.
func (s *Service) StartRun(ctx context.Context, run recorder.Run) (recorder.Run, error) {
	if err := s.Caller(run.Owner); err != nil {
		return run, err
	}
	if err := agui.ValidateID("threadId", run.ThreadID); err != nil {
		return run, err
	}
	now := time.Now()
	run.ThreadID = s.Key(run.Owner, run.ThreadID)
	run.Route, run.Status, run.CreatedAt, run.UpdatedAt = s.cfg.Route, recorder.StatusRunning, now, now
	if run.Epoch == "" {
		run.Epoch = recorder.NewEpoch()
	}
	prev, err := s.store.CreateRun(ctx, run, s.createOptions())
	if err != nil {
		return run, problem.StoreErr(err)
	}
	if run.ParentRunID == "" {
		run.ParentRunID = prev.LatestRunID
	}
	run.ParentEpoch = prev.ParentEpoch
	return run, nil
}

// ErrStopped is the cause a run's context is cancelled with when it is stopped on request.
var ErrStopped = errors.New("the run was stopped on request")

// Pumping registers a run this process pumps (threadID is the store key, Run.ThreadID): Stop cancels it by calling cancel, and hub is the
// live hub its pump publishes every event to (attachers in this process read it there). Call
// hub.End when the run ended, then release when the pump ends.
func (s *Service) Pumping(threadID, runID string, cancel func()) (hub *live.Hub, release func()) {
	k := runKey{threadID, runID}
	hub, closeHub := s.live.Open(threadID, runID)
	s.mu.Lock()
	s.pumping[k] = cancel
	s.mu.Unlock()
	return hub, func() {
		s.mu.Lock()
		delete(s.pumping, k)
		s.mu.Unlock()
		closeHub()
	}
}

// Stop asks a running run to end as stopped (its pump ends it as its route's StopEnding
// says: RUN_FINISHED outcome cancelled, or RUN_ERROR code CANCELLED): directly when this process
// pumps it, else through the store (the pumping replica's lease renewal sees the request).
// Errors: problem.ErrRunNotRunning, problem.ErrStoreUnavailable.
func (s *Service) Stop(ctx context.Context, run recorder.Run) error {
	if run.Status != recorder.StatusRunning {
		return problem.ErrRunNotRunning
	}
	s.mu.Lock()
	cancel := s.pumping[runKey{run.ThreadID, run.RunID}]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		return nil
	}
	if s.leaser == nil {
		return problem.ErrRunNotRunning
	}
	return problem.StoreErr(s.leaser.RequestStop(ctx, run.ThreadID, run.RunID))
}
