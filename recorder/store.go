package recorder

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
)

// Sentinel errors returned by every Store. Implementations wrap them with the ids involved;
// callers test with errors.Is.
var (
	// ErrRunAlreadyStarted: CreateRun for a run id the thread already has.
	ErrRunAlreadyStarted = errors.New("run already started")
	// ErrThreadBusy: a new run on a thread whose latest run is still running on a live
	// replica; DeleteThread of a thread with a running run.
	ErrThreadBusy = errors.New("thread has a run in progress")
	// ErrThreadRoomMismatch: the thread was created through another route (room).
	ErrThreadRoomMismatch = errors.New("thread belongs to another route")
	// ErrThreadNotFound: no such thread, or it belongs to another identity (the two are
	// deliberately indistinguishable).
	ErrThreadNotFound = errors.New("thread not found")
	// ErrRunNotFound: no such run in the thread (also a parentRunId that is not in the thread).
	ErrRunNotFound = errors.New("run not found")
	// ErrNotFound: a checkpoint that was never stored (or expired).
	ErrNotFound = errors.New("not found")
	// ErrClosed: the store or writer was closed.
	ErrClosed = errors.New("recorder closed")
)

// RunStatus is the life-cycle state of a recorded run.
type RunStatus string

// Run statuses.
const (
	StatusRunning     RunStatus = "running"
	StatusFinished    RunStatus = "finished"
	StatusError       RunStatus = "error"
	StatusInterrupted RunStatus = "interrupted" // its recording replica stopped before the end
	StatusCancelled   RunStatus = "cancelled"   // stopped on request, ended with RUN_FINISHED outcome cancelled
)

// Run is the metadata of one recorded run.
type Run struct {
	ThreadID    string
	RunID       string
	ParentRunID string // "" for a root run
	// Epoch is chosen at random when the run is created and is part of every event id the proxy
	// puts on the wire (see Cursor), so a cursor into a store that lost or re-created the run is
	// detected instead of being served from the wrong data.
	Epoch     string
	Status    RunStatus
	Detail    string // why the run ended in error or was interrupted ("" otherwise)
	Route     string // the route (room) the thread was created through
	Owner     string // the identity owning the thread; "" in single-tenant mode
	CreatedAt time.Time
	UpdatedAt time.Time
	// LastSeq is the highest event sequence number stored (0 before the first event).
	LastSeq int64
	// FirstSeq is the lowest sequence number still stored (1 unless trimmed by retention;
	// 0 when no event is stored).
	FirstSeq int64
	// Gaps lists sequence ranges known to be missing (writer overflow, data lost in the store).
	Gaps []Gap
	// Node names the proxy process pumping the run while it is running, and LeaseUntil is
	// when its lease expires unless renewed (see Leaser). A running run whose lease expired
	// lost its replica: any other replica may end it as interrupted.
	Node       string
	LeaseUntil time.Time
	// CompactedAt is when the run's raw events were replaced by their compacted form
	// (RunCompactor); zero while the run holds the events as they were streamed.
	CompactedAt time.Time
	// Title is read by CreateRun only: it becomes the thread's title (ThreadSummary) when the
	// thread has none yet; the caller derives it from the run's input (its first user message).
	// It is cut to MaxTitleBytes.
	Title string
	// ParentEpoch is not stored: thread.Service.StartRun sets it from CreateRun's answer
	// (Thread.ParentEpoch), the epoch of the run's parent when the run was created ("" for a
	// root run). The run's end recognizes the parent's branch built in memory by it, without
	// reading the parent back.
	ParentEpoch string
}

// Gap is an inclusive range of event sequence numbers that were not stored.
type Gap struct{ From, To int64 }

// Complete reports whether every event with a sequence number in (after, r.LastSeq] is
// stored: none trimmed, none inside a gap.
func (r Run) Complete(after int64) bool {
	if r.LastSeq > after && r.FirstSeq > after+1 {
		return false
	}
	for _, g := range r.Gaps {
		if g.To > after {
			return false
		}
	}
	return true
}

// Thread is the metadata of a thread: who owns it, where it came from, its latest run.
type Thread struct {
	ID          string
	Owner       string
	Route       string
	CreatedAt   time.Time
	LatestRunID string // the run created last ("" for none)
	RunCount    int
	Title       string // from the first run that carried one (Run.Title); "" for none
	// ParentEpoch is CreateRun's only: the epoch of the new run's parent (the one given, or
	// the latest run it continues), "" for a root run.
	ParentEpoch string
}

// Event is one recorded SSE frame.
type Event struct {
	// Seq numbers the run's events 1, 2, 3, ... in wire order.
	Seq int64
	// Type is the AG-UI event type, "" when the frame's data is not a JSON object with a
	// string "type" (such frames are recorded raw and flagged by the empty type).
	Type string
	// Frame is the frame exactly as the proxy sent it to the client, `id:` line included.
	Frame []byte
}

// Batch is a run's events to append, in sequence order.
type Batch struct {
	Run    Run // ThreadID, RunID and Epoch are required; the rest re-creates lost metadata
	Events []Event
	// rec is the Recording a Writer built the batch from (nil from any other caller): its
	// run was checked when it was opened, and the store may keep the run's key in it.
	rec *Recording
}

// recreated returns the creation time and status a store gives b's run when it re-creates the
// run from the batch (its data was lost, or an import): the batch's own, else now and running.
func (b Batch) recreated(now time.Time) (created time.Time, status RunStatus) {
	created, status = b.Run.CreatedAt, b.Run.Status
	if created.IsZero() {
		created = now
	}
	if status == "" {
		status = StatusRunning
	}
	return created, status
}

// CreateOptions are the rules Store.CreateRun applies atomically with the creation, so that
// two concurrent starts on one thread cannot both pass them.
type CreateOptions struct {
	// Exclusive refuses the run with ErrThreadBusy while the thread's latest run is running
	// and alive: no lease, or a lease that expired less than LeaseGrace ago.
	Exclusive bool
	// LeaseGrace is how long past its lease a running run still counts as alive.
	LeaseGrace time.Duration
	// ContinueLatest makes a run without ParentRunID the child of the thread's latest run
	// (the returned Thread's LatestRunID); without it such a run is a root.
	ContinueLatest bool
	// At, when not zero, is the run's start instead of now: an import of recorded history
	// keeps its times. It becomes the run's CreatedAt and UpdatedAt, the thread's CreatedAt
	// when the run creates it, and the thread's activity (its place in the thread index);
	// expiry still counts from now. Not for use with Exclusive (the busy rule compares leases
	// with it).
	At time.Time
}

// startTime is the start of a run created at now with opts (opts.At when set), in ms.
func (o CreateOptions) startTime(now time.Time) time.Time {
	if o.At.IsZero() {
		return now
	}
	return time.UnixMilli(o.At.UnixMilli())
}

// Busy reports whether run, the latest of its thread, keeps a new run out under
// CreateOptions.Exclusive at now.
func (o CreateOptions) Busy(run Run, now time.Time) bool {
	return run.Status == StatusRunning && (run.LeaseUntil.IsZero() || now.Before(run.LeaseUntil.Add(o.LeaseGrace)))
}

// Store persists threads, runs and events. Implementations must pass the contract suite in
// package recordertest. All methods are safe for concurrent use.
type Store interface {
	// CreateRun atomically registers run (status running) on its thread, creating the thread
	// with run.Owner and run.Route if it does not exist, and applying opts in the same step.
	// It returns the thread as it was before (zero Thread when new), so the caller learns the
	// previous latest run (the parent, with opts.ContinueLatest).
	// Errors, in this order: ErrThreadNotFound (thread owned by another identity),
	// ErrThreadRoomMismatch, ErrRunAlreadyStarted, ErrRunNotFound (ParentRunID is not a run of
	// this thread), ErrThreadBusy (opts.Exclusive).
	CreateRun(ctx context.Context, run Run, opts CreateOptions) (Thread, error)
	// DeleteRun removes a run that never produced a stream (the upstream refused it), so that
	// its id can be used again. A thread left without runs is removed as well.
	DeleteRun(ctx context.Context, threadID, runID string) error
	// Append stores the batches' events. It is idempotent per (run, seq): an event whose seq is
	// not above the run's LastSeq is skipped, so retrying a batch whose reply was lost never
	// duplicates. A seq above LastSeq+1 records the missing range as a Gap. If the run's
	// metadata is missing (the store lost it), it is re-created from Batch.Run and the range
	// before the first appended seq is recorded as a Gap. Several batches should cost one
	// round trip.
	Append(ctx context.Context, batches []Batch) error
	// FinishRun sets the run's final status and detail. lastSeq is the seq of the run's last
	// event: if fewer were stored, the missing tail is recorded as a Gap.
	FinishRun(ctx context.Context, threadID, runID string, status RunStatus, detail string, lastSeq int64) error
	// Thread returns a thread's metadata or ErrThreadNotFound.
	Thread(ctx context.Context, threadID string) (Thread, error)
	// Run returns a run's metadata or ErrRunNotFound (ErrThreadNotFound if the thread is gone).
	Run(ctx context.Context, threadID, runID string) (Run, error)
	// Runs returns the thread's runs in creation order, or ErrThreadNotFound.
	Runs(ctx context.Context, threadID string) ([]Run, error)
	// Events returns up to limit events of the run with seq > afterSeq, in order (limit <= 0:
	// all). Errors: ErrRunNotFound. The frames may be shared with the store: callers never
	// modify them.
	Events(ctx context.Context, threadID, runID string, afterSeq int64, limit int) ([]Event, error)
	// PutCheckpoint stores data as the run's checkpoint (the compacted state at its end),
	// replacing any earlier one.
	PutCheckpoint(ctx context.Context, threadID, runID string, data []byte) error
	// WriteCheckpoints makes writes in order, in one round trip where the store can (a
	// segment's delta appended and the run's pointer to it): each stores a run's checkpoint
	// as PutCheckpoint does, or appends to it (CheckpointWrite.Append). It stops at the first
	// write that fails and returns how many were made before it, and that write's error:
	// ErrRunNotFound when its run is gone; for an append, ErrNotFound when the run has no
	// checkpoint, or one that does not start with the write's prefix (nothing appended).
	WriteCheckpoints(ctx context.Context, threadID string, writes []CheckpointWrite) (int, error)
	// Checkpoint returns the run's checkpoint or ErrNotFound.
	Checkpoint(ctx context.Context, threadID, runID string) ([]byte, error)
	// ListThreads returns one page of the threads of q.Owner on q.Route, most recently
	// active first (see ThreadQuery). The order is stable under concurrent writes: paging on
	// with NextCursor never repeats a thread and never skips one whose activity did not change
	// meanwhile (a thread that starts a run meanwhile moves to the top, before the cursor).
	// Errors: ErrInvalidPageCursor.
	ListThreads(ctx context.Context, q ThreadQuery) (ThreadPage, error)
	// DeleteThread removes the thread with every run, event and checkpoint, and its index
	// entry, so its id can be used again. It refuses with ErrThreadBusy while a run of the
	// thread is running, and answers ErrThreadNotFound for an unknown thread and for one owned
	// by another owner or created through another route (the same answer, so a caller cannot
	// learn that another identity's thread exists).
	DeleteThread(ctx context.Context, threadID, owner, route string) error
	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
	// Close releases the store's resources. Methods called after Close return ErrClosed.
	Close() error
}

// ErrSlowSubscriber ends a Subscription whose reader fell further behind than its queue bound.
var ErrSlowSubscriber = errors.New("subscriber too slow")

// Follower is implemented by stores that deliver a run's events as they are appended, to every
// process sharing the store (the Redis store tails its streams with one blocking reader per
// process, fanned out in memory; the memory store notifies in-process).
type Follower interface {
	// Follow returns the run's events with seq > afterSeq: those already stored, then each new
	// one as it is appended. Errors: ErrRunNotFound, ErrThreadNotFound.
	Follow(ctx context.Context, threadID, runID string, afterSeq int64) (Subscription, error)
}

// Subscription is a stream of one run's events, in seq order, each exactly once.
type Subscription interface {
	// Next returns the next event, waiting for it until ctx is done (then it returns ctx's
	// error and consumes nothing, so Next may be called again). It returns io.EOF once
	// the run is no longer running and every stored event was delivered, and ErrSlowSubscriber
	// when the subscriber fell too far behind (it may follow again from its last seq).
	Next(ctx context.Context) (Event, error)
	// Close releases the subscription; Next then returns ErrClosed.
	Close() error
}

// Leaser is implemented by stores that keep a lease per running run, so that a run whose
// proxy process died is detected by the others.
type Leaser interface {
	// RenewLease records that node pumps the run until until. It does nothing for a run that
	// is no longer running. stop reports whether RequestStop was called for the run: the
	// pumping node then cancels its upstream request.
	RenewLease(ctx context.Context, threadID, runID, node string, until time.Time) (stop bool, err error)
	// RequestStop asks the node pumping a running run to cancel it (POST .../stop reaching
	// another replica). Errors: ErrRunNotFound.
	RequestStop(ctx context.Context, threadID, runID string) error
}

// RunRef names one run of one thread.
type RunRef struct{ ThreadID, RunID string }

// LeaseOutcome is what renewing one run's lease found (BatchLeaser).
type LeaseOutcome int8

// The outcomes of a lease renewal.
const (
	// LeaseRenewed: the lease was renewed, or the run is no longer running (it keeps its lease).
	LeaseRenewed LeaseOutcome = iota
	// LeaseStop: renewed, and RequestStop was called for the run: the node cancels it.
	LeaseStop
	// LeaseNoRun: the store has no such run (RenewLease's ErrRunNotFound).
	LeaseNoRun
)

// BatchLeaser is a Leaser that renews the leases of many runs in a few round trips, for a
// replica that pumps thousands of runs (RedisStore: one script call per chunk of runs in one
// pipeline, instead of one call per run).
type BatchLeaser interface {
	Leaser
	// RenewLeases is RenewLease for every run in runs, with the same node and expiry:
	// outcomes[i] is runs[i]'s. An error means no outcome is known (the renewal as a whole
	// failed); an invalid id fails the whole call before anything is sent.
	RenewLeases(ctx context.Context, node string, until time.Time, runs []RunRef) (outcomes []LeaseOutcome, err error)
}

// ErrInvalidCursor is returned by ParseCursor for a malformed event id.
var ErrInvalidCursor = errors.New("invalid event id")

// Cursor is the position of one event: the id the proxy writes on the wire as
// "<runId>:<epoch>:<seq>". It is opaque to clients, which only send it back (Last-Event-ID).
type Cursor struct {
	RunID string
	Epoch string
	Seq   int64
}

// String formats c as it appears on an `id:` line.
func (c Cursor) String() string {
	return c.RunID + ":" + c.Epoch + ":" + strconv.FormatInt(c.Seq, 10)
}

// AppendCursor appends c.String() to dst without allocating.
func AppendCursor(dst []byte, runID, epoch string, seq int64) []byte {
	dst = append(dst, runID...)
	dst = append(dst, ':')
	dst = append(dst, epoch...)
	dst = append(dst, ':')
	return strconv.AppendInt(dst, seq, 10)
}

// ParseCursor parses an event id written by the proxy. The run id may itself contain ':', so
// the epoch and seq are taken from the right. Values that could not have come from the proxy
// are refused, which keeps client input out of storage commands.
func ParseCursor(s string) (Cursor, error) {
	if len(s) > agui.MaxIDLength+EpochLength+24 {
		return Cursor{}, fmt.Errorf("%w: %d bytes long", ErrInvalidCursor, len(s))
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Cursor{}, fmt.Errorf("%w: %q", ErrInvalidCursor, s)
	}
	seqText := s[i+1:]
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || seq < 0 || seqText == "" || seqText[0] == '+' || (len(seqText) > 1 && seqText[0] == '0') {
		return Cursor{}, fmt.Errorf("%w: %q", ErrInvalidCursor, s)
	}
	rest := s[:i]
	j := strings.LastIndexByte(rest, ':')
	if j < 0 || !ValidEpoch(rest[j+1:]) {
		return Cursor{}, fmt.Errorf("%w: %q", ErrInvalidCursor, s)
	}
	c := Cursor{RunID: rest[:j], Epoch: rest[j+1:], Seq: seq}
	if agui.ValidateID("runId", c.RunID) != nil {
		return Cursor{}, fmt.Errorf("%w: %q", ErrInvalidCursor, s)
	}
	return c, nil
}

// EpochLength is the length of a run epoch.
const EpochLength = 8

const epochAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

func validEpochByte(c byte) bool { return c >= 'a' && c <= 'z' || c >= '2' && c <= '7' }

// ValidEpoch reports whether s has the form of an epoch made by NewEpoch.
func ValidEpoch(s string) bool {
	if len(s) != EpochLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !validEpochByte(s[i]) {
			return false
		}
	}
	return true
}

// CheckpointWrite is one write of Store.WriteCheckpoints: Data stored as RunID's checkpoint,
// or, with Append, appended to it if it starts with Prefix (a segment takes one more run's
// delta without rewriting what it holds).
type CheckpointWrite struct {
	RunID  string
	Data   []byte
	Append bool
	Prefix []byte
}

// localCheckpoints is a store whose checkpoint writes are local (memory, disk).
type localCheckpoints interface {
	PutCheckpoint(ctx context.Context, threadID, runID string, data []byte) error
	appendCheckpoint(threadID, runID string, prefix, data []byte) error
}

// writeEach is WriteCheckpoints for a store whose writes are local: one write after the other.
func writeEach(ctx context.Context, s localCheckpoints, threadID string, writes []CheckpointWrite) (int, error) {
	for i, w := range writes {
		var err error
		if w.Append {
			err = s.appendCheckpoint(threadID, w.RunID, w.Prefix, w.Data)
		} else {
			err = s.PutCheckpoint(ctx, threadID, w.RunID, w.Data)
		}
		if err != nil {
			return i, err
		}
	}
	return len(writes), nil
}
