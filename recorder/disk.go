package recorder

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/sse"
)

// DiskConfig configures a DiskStore.
type DiskConfig struct {
	// Dir is the directory holding the store's file (DiskFileName); it is created if missing.
	// One process at a time may open it (a second Open fails after LockTimeout).
	Dir string
	// TTL removes a thread, with everything in it, TTL after the last write to it (0: never).
	// Expiry is lazy as in MemoryStore: an expired thread is invisible at once and its data
	// is deleted by a sweep inside a later write (at most once per half TTL).
	TTL time.Duration
	// MaxEventsPerRun keeps about the newest MaxEventsPerRun events of each run (whole chunks
	// are dropped, so up to one chunk more is kept, like Redis's MAXLEN ~). Zero keeps all.
	MaxEventsPerRun int
	// FollowQueue bounds how far a Subscription may fall behind (see MemoryConfig.FollowQueue).
	// Zero: DefaultFollowQueue.
	FollowQueue int
	// NoSync skips the fsync of each write transaction: a process crash still loses nothing
	// (the pages are in the kernel), but a machine crash may lose recent writes or damage
	// the file. For tests and benchmarks only.
	NoSync bool
	// LockTimeout bounds the wait for the directory's lock (default 1 s).
	LockTimeout time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Logger receives the recovery report at open and write failures (nil: discard).
	Logger *slog.Logger
	// ReserveBytes is the size of a file (DiskReserveFileName) the store keeps beside its
	// database while the file system has room, and gives back when a delete (DeleteThread,
	// DeleteRun) or a retention sweep finds the disk full: bbolt writes copies of the pages a
	// delete changes before it frees the old ones, so on a disk with no byte left a delete
	// could not run without it. It is made at most a quarter of the space the file system
	// has free. 0: DefaultDiskReserve; negative: no reserve.
	ReserveBytes int64
}

// DefaultDiskReserve is DiskConfig.ReserveBytes' default: room for the copy-on-write pages
// of deletes (a thread delete rewrites a few pages per bucket it touches).
const DefaultDiskReserve = 1 << 20

// DiskReserveFileName is the name of the DiskStore's reserve file inside DiskConfig.Dir.
const DiskReserveFileName = "agui.reserve"

// DiskFileName is the name of the DiskStore's database file inside DiskConfig.Dir.
const DiskFileName = "agui.db"

// ErrDiskFull wraps write errors caused by a full disk (ENOSPC, EDQUOT, EFBIG): the write was
// rolled back whole, the store stays usable and succeeds again once space is freed.
var ErrDiskFull = errors.New("disk full")

// Bucket names. Every key inside starts with the thread id and a 0 byte (ids never hold 0,
// agui.ValidateID), so a thread's keys are one contiguous range of each bucket.
var (
	bucketThreads = []byte("threads") // threadId → diskThread (JSON)
	bucketRuns    = []byte("runs")    // threadId 0 runId → diskRun (JSON)
	bucketOrder   = []byte("order")   // threadId 0 idx (8 bytes BE) → runId: creation order
	bucketEvents  = []byte("events")  // threadId 0 runId 0 firstSeq (8 bytes BE) → chunk
	bucketCkpt    = []byte("ckpt")    // threadId 0 runId [0 piece (4 bytes BE)] → checkpoint (ckptPiece)
	bucketRunning = []byte("running") // threadId 0 runId → "": runs with status running
	bucketMeta    = []byte("meta")    // "stats" → diskStats (JSON)
	// bucketIndex is the thread index: indexTag(owner, route) 0 ^activity ms (8 bytes BE, so
	// the newest comes first) threadId → "". It holds one entry per thread.
	bucketIndex = []byte("index")
)

// maxChunkEvents bounds the events of one stored chunk, the unit of retention trimming.
const maxChunkEvents = 128

// chunkVersion is the first byte of every event chunk but a packed one.
const chunkVersion = 1

// chunkPacked is the first byte of the one chunk of a run compacted at rest: its events
// packed (packed.go), then the CRC-32C of everything before it.
const chunkPacked = 2

// diskThread is a thread's record.
type diskThread struct {
	Owner   string `json:"o,omitempty"`
	Route   string `json:"r,omitempty"`
	Created int64  `json:"c"`           // ms
	Expires int64  `json:"x,omitempty"` // ms; 0: never
	Next    uint64 `json:"n"`           // next creation index
	Count   int    `json:"k"`           // runs
	Latest  string `json:"l,omitempty"` // the run created last
	Active  int64  `json:"a,omitempty"` // ms: start of the latest run (the index order)
	Title   string `json:"t,omitempty"`
}

// indexKey is the thread's entry in bucketIndex.
func indexKey(owner, route string, active int64, threadID string) []byte {
	k := append([]byte(indexTag(owner, route)), 0)
	k = binary.BigEndian.AppendUint64(k, ^uint64(active))
	return append(k, threadID...)
}

// setActive moves the thread's index entry to activity now.
func setActive(tx *bolt.Tx, threadID string, t *diskThread, now time.Time) error {
	b := tx.Bucket(bucketIndex)
	if t.Active != 0 {
		if err := b.Delete(indexKey(t.Owner, t.Route, t.Active, threadID)); err != nil {
			return err
		}
	}
	t.Active = max(now.UnixMilli(), t.Active) // never backwards, even if the clock steps back
	return b.Put(indexKey(t.Owner, t.Route, t.Active, threadID), nil)
}

// diskRun is a run's record.
type diskRun struct {
	Epoch   string `json:"e"`
	Parent  string `json:"p,omitempty"`
	Status  string `json:"s"`
	Detail  string `json:"d,omitempty"`
	Route   string `json:"r,omitempty"`
	Owner   string `json:"o,omitempty"`
	Created int64  `json:"c"`
	Updated int64  `json:"u"`
	Last    int64  `json:"l,omitempty"`
	First   int64  `json:"f,omitempty"` // lowest stored seq (0: none)
	Count   int64  `json:"n,omitempty"` // events stored
	Trimmed int64  `json:"t,omitempty"` // highest seq dropped by retention
	Gaps    string `json:"g,omitempty"` // formatGaps
	Node    string `json:"nd,omitempty"`
	Lease   int64  `json:"ls,omitempty"`
	Stop    bool   `json:"st,omitempty"`
	Idx     uint64 `json:"i"`
	Bytes   int64  `json:"b,omitempty"` // stored event bytes (chunks)
	// Compacted is when the raw events were replaced by their compacted form (ms; 0: never).
	Compacted int64 `json:"cp,omitempty"`
}

// chunkKey is the key of the run's chunk starting at seq.
func chunkKey(threadID, runID string, seq int64) []byte {
	return binary.BigEndian.AppendUint64(eventsPrefix(threadID, runID), uint64(seq))
}

// diskStats are the store-wide byte counters, kept in the meta bucket by every write.
type diskStats struct {
	EventBytes      int64 `json:"e"`
	CheckpointBytes int64 `json:"c"`
}

// DiskStore is a Store kept in one local file by bbolt (go.etcd.io/bbolt), for a single
// process that wants its history to survive a restart without running Redis. Every write is
// part of one bbolt transaction (all-or-nothing, fsynced before it returns unless NoSync),
// which concurrent writes share (groupCommit); a run's events are stored as chunks, one per
// run per Append (at most maxChunkEvents events each), so a batch of events of many runs,
// with the finishes and lease renewals taken with it, costs one commit and one key per run.
//
// Only one process may open a directory (bbolt holds a file lock), so at Open every run
// still marked running was cut by the death of the previous process: Open ends each with a
// RUN_ERROR event (code INTERRUPTED) after its last stored event and the status interrupted.
//
// A full disk makes writes fail with ErrDiskFull (rolled back, nothing half written) and
// Ping report it until a write succeeds again: the Writer keeps retrying with backoff and
// its buffer, then the gap, cover the outage exactly as for a Redis outage. Reads go on, the
// store opens on a full disk (the runs to end as interrupted are ended once a write fits
// again), and deletes and retention can free space: they use the reserve file
// (DiskConfig.ReserveBytes) when nothing else is left, and the pages they free take the next
// writes (bbolt reuses them in place; the file never shrinks).
//
// It implements Follower (in-process notification) and Leaser.
type DiskStore struct {
	cfg    DiskConfig
	db     *bolt.DB
	commit groupCommit // every write goes through it (update)
	log    *slog.Logger
	path   string

	closeMu sync.RWMutex // held shared by every call, exclusively by Close
	closed  bool
	done    chan struct{} // closed by Close

	writeErr atomic.Pointer[error] // the last write's error, nil after a success

	notifyMu sync.Mutex
	notify   map[string]chan struct{} // runKey → closed by the next change of the run

	sweepMu       sync.Mutex
	nextSweep     time.Time
	nextFullSweep time.Time   // sweepFull's earliest next run
	sweeping      atomic.Bool // sweepFull is running

	stats atomic.Pointer[diskStats]

	// The runs the previous process left running, until a write ended them (see recover).
	recoverMu  sync.Mutex // held by recover only
	cuts       []runCut
	cutsLeft   atomic.Int32 // len(cuts)
	recovering atomic.Bool  // recoverLater's goroutine runs

	// The reserve file (DiskConfig.ReserveBytes); reserved is false once it was given back.
	reserveMu   sync.Mutex
	reservePath string
	reserved    atomic.Bool
	nextReserve time.Time // earliest time to try making the reserve again
}

// runCut is a run the previous process left running.
type runCut struct{ thread, run string }

// OpenDiskStore opens (creating if needed) the store in cfg.Dir and ends the runs the
// previous process left running (see DiskStore).
func OpenDiskStore(ctx context.Context, cfg DiskConfig) (*DiskStore, error) {
	if cfg.Dir == "" {
		return nil, errors.New("disk store: no directory")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FollowQueue <= 0 {
		cfg.FollowQueue = DefaultFollowQueue
	}
	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("disk store: %w", err)
	}
	path := filepath.Join(cfg.Dir, DiskFileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: cfg.LockTimeout,
		NoSync:  cfg.NoSync,
		// The free list is rebuilt at open (a scan of the page headers) instead of being
		// written by every commit, which keeps commits small.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
		// Growth is made durable by the commit's fdatasync, which includes the file size.
		NoGrowSync: true,
	})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("disk store %s is in use by another process: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("disk store %s: %w", path, err)
	}
	s := &DiskStore{cfg: cfg, db: db, commit: groupCommit{db: db}, log: log, path: path, done: make(chan struct{}), notify: map[string]chan struct{}{},
		reservePath: filepath.Join(cfg.Dir, DiskReserveFileName)}
	buckets := [][]byte{bucketThreads, bucketRuns, bucketOrder, bucketEvents, bucketCkpt, bucketRunning, bucketMeta, bucketIndex}
	// An existing store is opened without a write (a full disk must not keep it shut): the
	// buckets are created only when one is missing.
	missing := false
	err = db.View(func(tx *bolt.Tx) error {
		for _, b := range buckets {
			missing = missing || tx.Bucket(b) == nil
		}
		return nil
	})
	if err == nil && missing {
		err = db.Update(func(tx *bolt.Tx) error {
			for _, b := range buckets {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err == nil {
		err = db.View(func(tx *bolt.Tx) error {
			var st diskStats
			if v := tx.Bucket(bucketMeta).Get([]byte("stats")); v != nil {
				if err := json.Unmarshal(v, &st); err != nil {
					return fmt.Errorf("stats record: %w", err)
				}
			}
			s.stats.Store(&st)
			return nil
		})
	}
	if err == nil {
		err = s.scanCuts()
	}
	if err == nil {
		s.makeReserve()
		if s.fsRoom() < diskCushion {
			// Full already, the file cannot grow: say so (Ping, readiness) before a write finds
			// it (bbolt's free pages may take small writes, not a large chunk of events).
			full := fmt.Errorf("%w: the file system holds less than %d KiB (%s)", ErrDiskFull, diskCushion>>10, path)
			s.writeErr.Store(&full)
		}
		if err = s.recover(ctx); errors.Is(err, ErrDiskFull) {
			// Reads stay possible; the runs are ended once a write fits (recover runs again).
			log.Warn("disk store opened on a full disk: it serves reads and deletes, and records again once space is freed",
				slog.String("path", path), slog.Int("runs_to_end", len(s.cuts)), slog.Any("err", err))
			err = nil
		}
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("disk store %s: %w", path, diskErr(err))
	}
	return s, nil
}

// InterruptedDetail is the Run.Detail of runs ended because their process stopped.
const InterruptedDetail = "INTERRUPTED"

// interruptedData is the RUN_ERROR the store appends to a run its previous process left open.
var interruptedData = []byte(`{"type":"RUN_ERROR","message":"agui-proxy: the proxy serving this run stopped before it ended","code":"INTERRUPTED"}`)

// scanCuts lists the runs a previous process left running (s.cuts), for recover.
func (s *DiskStore) scanCuts() error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRunning).ForEach(func(k, _ []byte) error {
			th, run, ok := bytes.Cut(k, []byte{0})
			if !ok {
				return fmt.Errorf("running index: malformed key %q", k)
			}
			s.cuts = append(s.cuts, runCut{string(th), string(run)})
			s.cutsLeft.Store(int32(len(s.cuts)))
			return nil
		})
	})
}

// recover ends every run left running by a previous process (listed at open, s.cuts) with
// a RUN_ERROR INTERRUPTED. On a full disk it stops at the first write that does not fit and
// keeps the rest for the next call: Ping and the first write that succeeds after a failed
// one call it again.
func (s *DiskStore) recover(ctx context.Context) error {
	s.recoverMu.Lock()
	defer s.recoverMu.Unlock()
	for len(s.cuts) > 0 {
		c := s.cuts[0]
		r, err := s.Run(ctx, c.thread, c.run)
		switch {
		case errors.Is(err, ErrRunNotFound) || errors.Is(err, ErrThreadNotFound):
			if err := s.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketRunning).Delete(runKey(c.thread, c.run)) }); err != nil {
				return err
			}
		case err != nil:
			return err
		case r.Status == StatusRunning:
			seq := r.LastSeq + 1
			frame, _ := sse.AppendEvent(nil, sse.Event{ID: Cursor{RunID: r.RunID, Epoch: r.Epoch, Seq: seq}.String(), Data: interruptedData})
			if err := s.Append(ctx, []Batch{{Run: r, Events: []Event{{Seq: seq, Type: agui.RunError, Frame: frame}}}}); err != nil {
				return err
			}
			if err := s.FinishRun(ctx, c.thread, c.run, StatusInterrupted, InterruptedDetail, seq); err != nil {
				return err
			}
			s.log.Warn("ended a run the previous process left running", slog.String("thread_id", c.thread),
				slog.String("run_id", c.run), slog.Int64("last_stored_seq", r.LastSeq))
		}
		// A run no longer running was ended meanwhile (an orphan reaper, a delete and a new
		// run under the same id would have another epoch but the same key: it is this
		// process's, and left alone).
		s.cuts = s.cuts[1:]
		s.cutsLeft.Store(int32(len(s.cuts)))
	}
	return nil
}

// recoverLater runs recover in the background, when runs are left to end. It never blocks:
// its callers may hold the close lock, which recover's own store calls take.
func (s *DiskStore) recoverLater() {
	if s.cutsLeft.Load() == 0 || !s.recovering.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.recovering.Store(false)
		if err := s.recover(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			s.log.Warn("disk store: ending the runs the previous process left running failed; tried again later", slog.Any("err", err))
		}
	}()
}

// makeReserve makes (or completes) the reserve file, at most a quarter of the file system's
// free space; it is best effort: a store without its reserve works, its deletes on a full
// disk only depend on the pages bbolt has free.
func (s *DiskStore) makeReserve() {
	want := s.cfg.ReserveBytes
	if want == 0 {
		want = DefaultDiskReserve
	}
	if want < 0 {
		return
	}
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	if s.reserved.Load() {
		return
	}
	now := time.Now()
	if now.Before(s.nextReserve) {
		return
	}
	s.nextReserve = now.Add(time.Second)
	have := int64(0)
	if fi, err := os.Stat(s.reservePath); err == nil {
		have = fi.Size()
	}
	if have < want {
		var fsst syscall.Statfs_t
		if err := syscall.Statfs(s.cfg.Dir, &fsst); err != nil {
			return
		}
		if room := int64(fsst.Bavail) * int64(fsst.Bsize) / 4; have+room < want {
			if have == 0 && room < 64<<10 {
				return // not now: the file system has too little room
			}
			want = have + room
		}
		f, err := os.OpenFile(s.reservePath, os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			return
		}
		// Written, not truncated: a sparse file would hold no blocks to give back.
		_, err = f.WriteAt(make([]byte, want-have), have)
		if err == nil && !s.cfg.NoSync {
			err = f.Sync()
		}
		f.Close()
		if err != nil {
			os.Remove(s.reservePath)
			return
		}
	}
	s.reserved.Store(true)
}

// releaseReserve gives the reserve file back to the file system; it reports whether there
// was one.
func (s *DiskStore) releaseReserve() bool {
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	if !s.reserved.Swap(false) {
		return false
	}
	if err := os.Remove(s.reservePath); err != nil {
		s.log.Warn("disk store: removing the reserve file failed", slog.String("path", s.reservePath), slog.Any("err", err))
		return false
	}
	s.log.Warn("disk store: the disk is full; gave the reserve file back to let a delete free space", slog.String("path", s.reservePath))
	return true
}

// freeing runs a delete's write: on a full disk it gives the reserve back and tries once
// more, so that the delete's copy-on-write pages fit.
func (s *DiskStore) freeing(fn func(tx *bolt.Tx) error) error {
	err := s.write(fn, true)
	if errors.Is(err, ErrDiskFull) && s.releaseReserve() {
		err = s.write(fn, true)
	}
	return err
}

// diskCushion is the room a store without its reserve keeps for deletes (see write).
const diskCushion = 256 << 10

// shortOfRoom reports whether a write that is not a delete must be refused to keep room for
// deletes: only once the reserve was given back (or never made) and while both the file
// system and bbolt's free pages are below diskCushion.
func (s *DiskStore) shortOfRoom() bool {
	if s.cfg.ReserveBytes < 0 || s.reserved.Load() {
		return false
	}
	return !s.hasRoom(diskCushion)
}

// hasRoom reports whether the file system or bbolt's free pages hold n bytes.
func (s *DiskStore) hasRoom(n int64) bool {
	return int64(s.db.Stats().FreePageN)*int64(s.db.Info().PageSize) >= n || s.fsRoom() >= n
}

// fsRoom is the file system's free space for the store's directory (unknown: as if ample).
func (s *DiskStore) fsRoom() int64 {
	var fsst syscall.Statfs_t
	if syscall.Statfs(s.cfg.Dir, &fsst) != nil {
		return 1 << 62
	}
	return int64(fsst.Bavail) * int64(fsst.Bsize)
}

// diskErr marks a full disk with ErrDiskFull.
func diskErr(err error) error {
	if err == nil {
		return nil
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && (errno == syscall.ENOSPC || errno == syscall.EDQUOT || errno == syscall.EFBIG) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && errors.As(pe.Err, &errno) && errno == syscall.ENOSPC {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}

// begin takes the shared close lock; the caller must call s.closeMu.RUnlock.
func (s *DiskStore) begin() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

// errAbort carries a sentinel out of a transaction that must not be retried or logged.
type errAbort struct{ err error }

func (e errAbort) Error() string {
	if e.err == nil {
		return "transaction abandoned"
	}
	return e.err.Error()
}
func (e errAbort) Unwrap() error { return e.err }

// update runs fn in a write transaction and records the outcome for Ping.
func (s *DiskStore) update(fn func(tx *bolt.Tx) error) error { return s.write(fn, false) }

// write is update; a delete or a run's end (deleting) may use the last free pages, any other write is
// refused with ErrDiskFull while the store has given its reserve back and neither the file
// system nor bbolt's free pages hold diskCushion bytes: those are kept for the next deletes.
func (s *DiskStore) write(fn func(tx *bolt.Tx) error, deleting bool) error {
	if !deleting && s.shortOfRoom() {
		err := fmt.Errorf("%w: the store keeps its last %d KiB of free pages for deletes (%s)", ErrDiskFull, diskCushion>>10, s.path)
		s.writeErr.Store(&err)
		s.sweepFull()
		return err
	}
	err := s.commit.update(fn)
	var abort errAbort
	if errors.As(err, &abort) {
		s.writeErr.Store(nil) // the store answered; the refusal is the caller's
		return abort.err
	}
	if err != nil {
		err = diskErr(err)
		if s.writeErr.Swap(&err) == nil {
			s.log.Error("disk store write failed", slog.String("path", s.path), slog.Any("err", err))
		}
		if errors.Is(err, ErrDiskFull) {
			s.sweepFull()
		}
		return err
	}
	if s.writeErr.Swap(nil) != nil {
		s.log.Info("disk store writes succeed again", slog.String("path", s.path))
		s.recoverLater()
	}
	if !s.reserved.Load() && s.cfg.ReserveBytes >= 0 {
		s.makeReserve()
	}
	return nil
}

func (s *DiskStore) now() time.Time { return time.UnixMilli(s.cfg.Now().UnixMilli()) }

func threadPrefix(threadID string) []byte { return append([]byte(threadID), 0) }

func runKey(threadID, runID string) []byte {
	return append(threadPrefix(threadID), runID...)
}

func eventsPrefix(threadID, runID string) []byte { return append(runKey(threadID, runID), 0) }

func orderKey(threadID string, idx uint64) []byte {
	return binary.BigEndian.AppendUint64(threadPrefix(threadID), idx)
}

func getJSON[T any](b *bolt.Bucket, key []byte) (*T, error) {
	v := b.Get(key)
	if v == nil {
		return nil, nil
	}
	var out T
	if err := json.Unmarshal(v, &out); err != nil {
		return nil, fmt.Errorf("record %q: %w", key, err)
	}
	return &out, nil
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

// thread reads a live thread (nil when missing or expired).
func (s *DiskStore) thread(tx *bolt.Tx, id string, now time.Time) (*diskThread, error) {
	t, err := getRecord[diskThread](tx.Bucket(bucketThreads), []byte(id))
	if err != nil || t == nil {
		return nil, err
	}
	if t.Expires != 0 && now.UnixMilli() >= t.Expires {
		return nil, nil
	}
	return t, nil
}

// putThread writes t, extending its life.
func (s *DiskStore) putThread(tx *bolt.Tx, id string, t *diskThread, now time.Time) error {
	if s.cfg.TTL > 0 {
		t.Expires = now.Add(s.cfg.TTL).UnixMilli()
	}
	return putRecord(tx.Bucket(bucketThreads), []byte(id), t)
}

// refreshThread extends the life of a thread that was written to without changing its
// record: only with a TTL, and only when the stored expiry is more than 1% of TTL stale, so
// most appends leave the threads bucket untouched (fewer pages per commit).
func (s *DiskStore) refreshThread(tx *bolt.Tx, id string, t *diskThread, now time.Time) error {
	if s.cfg.TTL <= 0 || now.Add(s.cfg.TTL-s.cfg.TTL/100).UnixMilli() < t.Expires {
		return nil
	}
	return s.putThread(tx, id, t, now)
}

// dropThread deletes every key of a thread. It returns the run keys it removed.
func (s *DiskStore) dropThread(tx *bolt.Tx, id string) ([]string, error) {
	p := threadPrefix(id)
	var runs []string
	st := s.statsIn(tx)
	if t, err := getRecord[diskThread](tx.Bucket(bucketThreads), []byte(id)); err != nil {
		return nil, err
	} else if t != nil && t.Active != 0 {
		if err := tx.Bucket(bucketIndex).Delete(indexKey(t.Owner, t.Route, t.Active, id)); err != nil {
			return nil, err
		}
	}
	for _, name := range [][]byte{bucketRuns, bucketOrder, bucketEvents, bucketCkpt, bucketRunning} {
		b := tx.Bucket(name)
		c := b.Cursor()
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Seek(p) {
			switch {
			case bytes.Equal(name, bucketRuns):
				runs = append(runs, string(k))
			case bytes.Equal(name, bucketEvents):
				st.EventBytes -= int64(len(v))
			case bytes.Equal(name, bucketCkpt):
				st.CheckpointBytes -= int64(len(v))
			}
			if err := b.Delete(k); err != nil {
				return nil, err
			}
		}
	}
	if err := tx.Bucket(bucketThreads).Delete([]byte(id)); err != nil {
		return nil, err
	}
	return runs, s.putStats(tx, st)
}

// statsIn returns the counters as tx holds them, for it to update: as tx's earlier writes
// left them (writes share a transaction, groupCommit), else as last committed.
func (s *DiskStore) statsIn(tx *bolt.Tx) *diskStats {
	if st, err := getJSON[diskStats](tx.Bucket(bucketMeta), []byte("stats")); err == nil && st != nil {
		return st
	}
	st := *s.stats.Load()
	return &st
}

// putStats writes the counters in tx and publishes them once tx commits.
func (s *DiskStore) putStats(tx *bolt.Tx, st *diskStats) error {
	if err := putJSON(tx.Bucket(bucketMeta), []byte("stats"), st); err != nil {
		return err
	}
	tx.OnCommit(func() { s.stats.Store(st) })
	return nil
}

// sweep deletes expired threads, at most once per half TTL. It runs inside a write.
func (s *DiskStore) sweep(tx *bolt.Tx, now time.Time) ([]string, error) {
	if s.cfg.TTL <= 0 {
		return nil, nil
	}
	s.sweepMu.Lock()
	due := !now.Before(s.nextSweep)
	if due {
		s.nextSweep = now.Add(max(s.cfg.TTL/2, time.Second))
	}
	s.sweepMu.Unlock()
	if !due {
		return nil, nil
	}
	var expired []string
	err := tx.Bucket(bucketThreads).ForEach(func(k, v []byte) error {
		var t diskThread
		if decodeRecord(&t, v) == nil && t.Expires != 0 && now.UnixMilli() >= t.Expires {
			expired = append(expired, string(k))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var woken []string
	for _, id := range expired {
		runs, err := s.dropThread(tx, id)
		if err != nil {
			return nil, err
		}
		woken = append(woken, runs...)
	}
	return woken, nil
}

// sweepFull runs the retention sweep in a transaction of its own when a write found the disk
// full (the sweep inside that write was rolled back with it): expired threads are deleted,
// with the reserve if need be, and their pages take the next writes. At most once a second.
func (s *DiskStore) sweepFull() {
	if s.cfg.TTL <= 0 || !s.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer s.sweeping.Store(false)
	s.sweepMu.Lock()
	now := s.now()
	due := !now.Before(s.nextFullSweep)
	if due {
		s.nextFullSweep = now.Add(time.Second)
		s.nextSweep = time.Time{} // the sweep below is due whatever the last one did
	}
	s.sweepMu.Unlock()
	if !due {
		return
	}
	var woken []string
	if err := s.freeing(func(tx *bolt.Tx) error {
		var err error
		woken, err = s.sweep(tx, s.now())
		return err
	}); err == nil {
		s.wake(woken...)
	}
}

// wake releases the followers waiting on the runs (keys as runKey builds them).
func (s *DiskStore) wake(keys ...string) {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	for _, k := range keys {
		if ch := s.notify[k]; ch != nil {
			close(ch)
			delete(s.notify, k)
		}
	}
}

// waitChan returns the channel the run's next change closes.
func (s *DiskStore) waitChan(key string) <-chan struct{} {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	ch := s.notify[key]
	if ch == nil {
		ch = make(chan struct{})
		s.notify[key] = ch
	}
	return ch
}

// CreateRun implements Store.
func (s *DiskStore) CreateRun(ctx context.Context, run Run, opts CreateOptions) (Thread, error) {
	if err := validateRun(run); err != nil {
		return Thread{}, err
	}
	if err := s.begin(); err != nil {
		return Thread{}, err
	}
	defer s.closeMu.RUnlock()
	var prev Thread
	var woken []string
	var now time.Time // read inside the transaction: writes are serialized, so times only grow
	asked := run
	err := s.update(func(tx *bolt.Tx) error {
		// It may run again on a fresh transaction (groupCommit): everything starts over.
		run, prev, now = asked, Thread{}, s.now()
		var err error
		if woken, err = s.sweep(tx, now); err != nil {
			return err
		}
		t, err := s.thread(tx, run.ThreadID, now)
		if err != nil {
			return err
		}
		if t == nil {
			// A thread that expired but was not swept yet is replaced whole.
			if tx.Bucket(bucketThreads).Get([]byte(run.ThreadID)) != nil {
				runs, err := s.dropThread(tx, run.ThreadID)
				if err != nil {
					return err
				}
				woken = append(woken, runs...)
			}
		} else {
			if t.Owner != run.Owner {
				return errAbort{fmt.Errorf("thread %q: %w", run.ThreadID, ErrThreadNotFound)}
			}
			if t.Route != run.Route {
				return errAbort{fmt.Errorf("thread %q: %w", run.ThreadID, ErrThreadRoomMismatch)}
			}
			if tx.Bucket(bucketRuns).Get(runKey(run.ThreadID, run.RunID)) != nil {
				return errAbort{fmt.Errorf("run %q in thread %q: %w", run.RunID, run.ThreadID, ErrRunAlreadyStarted)}
			}
			prev = t.info(run.ThreadID)
		}
		if run.ParentRunID != "" {
			var parent *diskRun
			if t != nil {
				if parent, err = getRecord[diskRun](tx.Bucket(bucketRuns), runKey(run.ThreadID, run.ParentRunID)); err != nil {
					return err
				}
			}
			if parent == nil {
				return errAbort{fmt.Errorf("parent run %q in thread %q: %w", run.ParentRunID, run.ThreadID, ErrRunNotFound)}
			}
			prev.ParentEpoch = parent.Epoch
		}
		if t != nil && t.Latest != "" {
			latest, err := getRecord[diskRun](tx.Bucket(bucketRuns), runKey(run.ThreadID, t.Latest))
			if err != nil {
				return err
			}
			if latest != nil {
				if opts.Exclusive {
					lr, err := latest.run(run.ThreadID, t.Latest)
					if err != nil {
						return err
					}
					if opts.Busy(lr, now) {
						return errAbort{fmt.Errorf("thread %q, run %q: %w", run.ThreadID, t.Latest, ErrThreadBusy)}
					}
				}
				if run.ParentRunID == "" && opts.ContinueLatest {
					run.ParentRunID, prev.ParentEpoch = t.Latest, latest.Epoch
				}
			}
		}
		if t == nil {
			t = &diskThread{Owner: run.Owner, Route: run.Route, Created: opts.startTime(now).UnixMilli()}
		}
		if t.Title == "" {
			t.Title = cleanTitle(run.Title)
		}
		if err := setActive(tx, run.ThreadID, t, opts.startTime(now)); err != nil {
			return err
		}
		r := &diskRun{Epoch: run.Epoch, Parent: run.ParentRunID, Status: string(StatusRunning), Route: t.Route, Owner: t.Owner,
			Created: opts.startTime(now).UnixMilli(), Updated: opts.startTime(now).UnixMilli(), Node: run.Node, Lease: msOrZero(run.LeaseUntil)}
		return s.addRun(tx, run.ThreadID, run.RunID, t, r, now)
	})
	s.wake(woken...)
	return prev, err
}

// addRun registers a new run record in t.
func (s *DiskStore) addRun(tx *bolt.Tx, threadID, runID string, t *diskThread, r *diskRun, now time.Time) error {
	r.Idx = t.Next
	t.Next++
	t.Count++
	t.Latest = runID
	k := runKey(threadID, runID)
	if err := tx.Bucket(bucketOrder).Put(orderKey(threadID, r.Idx), []byte(runID)); err != nil {
		return err
	}
	if r.Status == string(StatusRunning) {
		if err := tx.Bucket(bucketRunning).Put(k, nil); err != nil {
			return err
		}
	}
	if err := putRecord(tx.Bucket(bucketRuns), k, r); err != nil {
		return err
	}
	return s.putThread(tx, threadID, t, now)
}

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func timeOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func (t *diskThread) info(id string) Thread {
	return Thread{ID: id, Owner: t.Owner, Route: t.Route, CreatedAt: time.UnixMilli(t.Created), LatestRunID: t.Latest, RunCount: t.Count, Title: t.Title}
}

func (r *diskRun) run(threadID, runID string) (Run, error) {
	gaps, err := parseGaps(r.Gaps)
	if err != nil {
		return Run{}, fmt.Errorf("run %q in thread %q: %w", runID, threadID, err)
	}
	return Run{
		ThreadID: threadID, RunID: runID, ParentRunID: r.Parent, Epoch: r.Epoch, Status: RunStatus(r.Status),
		Detail: r.Detail, Route: r.Route, Owner: r.Owner, CreatedAt: time.UnixMilli(r.Created), UpdatedAt: time.UnixMilli(r.Updated),
		LastSeq: r.Last, FirstSeq: r.First, Gaps: gaps, Node: r.Node, LeaseUntil: timeOrZero(r.Lease),
		CompactedAt: timeOrZero(r.Compacted),
	}, nil
}

// DeleteRun implements Store.
func (s *DiskStore) DeleteRun(ctx context.Context, threadID, runID string) error {
	if err := validateIDs(threadID, &runID); err != nil {
		return err
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	var now time.Time // read inside the transaction: writes are serialized, so times only grow
	k := runKey(threadID, runID)
	err := s.freeing(func(tx *bolt.Tx) error {
		now = s.now()
		t, err := s.thread(tx, threadID, now)
		if err != nil {
			return err
		}
		if t == nil {
			return errAbort{fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)}
		}
		r, err := getRecord[diskRun](tx.Bucket(bucketRuns), k)
		if err != nil {
			return err
		}
		if r == nil {
			return errAbort{fmt.Errorf("run %q in thread %q: %w", runID, threadID, ErrRunNotFound)}
		}
		if t.Count <= 1 {
			_, err := s.dropThread(tx, threadID)
			return err
		}
		st := s.statsIn(tx)
		if err := s.deleteEvents(tx, threadID, runID, st, 0); err != nil {
			return err
		}
		freed, err := deleteCheckpoint(tx.Bucket(bucketCkpt), k)
		if err != nil {
			return err
		}
		st.CheckpointBytes -= freed
		for _, del := range []struct {
			b []byte
			k []byte
		}{{bucketRuns, k}, {bucketRunning, k}, {bucketOrder, orderKey(threadID, r.Idx)}} {
			if err := tx.Bucket(del.b).Delete(del.k); err != nil {
				return err
			}
		}
		t.Count--
		if t.Latest == runID {
			t.Latest = s.latest(tx, threadID)
		}
		if err := s.putStats(tx, st); err != nil {
			return err
		}
		return s.putThread(tx, threadID, t, now)
	})
	s.wake(string(k))
	return err
}

// latest returns the run id with the highest creation index of the thread.
func (s *DiskStore) latest(tx *bolt.Tx, threadID string) string {
	p := threadPrefix(threadID)
	k, v := seekAtOrBefore(tx.Bucket(bucketOrder).Cursor(), orderKey(threadID, ^uint64(0)), p)
	if k != nil && len(k) == len(p)+8 {
		return string(v)
	}
	return ""
}

// seekAtOrBefore positions c on the last key <= target that starts with prefix; without one,
// on the first key after target that starts with prefix; else it returns nil.
func seekAtOrBefore(c *bolt.Cursor, target, prefix []byte) ([]byte, []byte) {
	k, v := c.Seek(target)
	if k != nil && bytes.Equal(k, target) {
		return k, v
	}
	var pk, pv []byte
	if k == nil {
		pk, pv = c.Last()
	} else {
		pk, pv = c.Prev()
	}
	if pk != nil && bytes.HasPrefix(pk, prefix) {
		return pk, pv
	}
	k, v = c.Seek(target)
	if k != nil && bytes.HasPrefix(k, prefix) {
		return k, v
	}
	return nil, nil
}

// deleteEvents removes the run's chunks whose first seq is >= from (0: all).
func (s *DiskStore) deleteEvents(tx *bolt.Tx, threadID, runID string, st *diskStats, from int64) error {
	p := eventsPrefix(threadID, runID)
	b := tx.Bucket(bucketEvents)
	c := b.Cursor()
	for k, v := c.Seek(binary.BigEndian.AppendUint64(slices.Clone(p), uint64(from))); k != nil && bytes.HasPrefix(k, p); k, v = c.Seek(p) {
		st.EventBytes -= int64(len(v))
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Append implements Store. All batches are one transaction.
func (s *DiskStore) Append(ctx context.Context, batches []Batch) error {
	return s.appendFinish(ctx, batches, nil, nil, nil)
}

// groupCommit implements groupCommitter: every Append is one bbolt transaction.
func (s *DiskStore) groupCommit() {}

// appendFinish implements appendFinisher: a batch's events of every run, the finishes taken
// with them and the leases their appends renew are one transaction and one fsync (group
// commit), however many runs the batch carries. Lease renewals and finishes otherwise cost a
// transaction each: at 2,000 streams they were as many commits as the batches themselves.
func (s *DiskStore) appendFinish(ctx context.Context, batches []Batch, fins []*finishOp, lease *appendLease, out []appendOutcome) error {
	for _, b := range batches {
		if err := validateRun(b.Run); err != nil {
			return err
		}
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	var now time.Time // read inside the transaction: writes are serialized, so times only grow
	woken := make([]string, 0, len(batches))
	err := s.update(func(tx *bolt.Tx) error {
		now = s.now()
		woken = woken[:0]
		st := s.statsIn(tx)
		for i, b := range batches {
			var fin *finishOp
			if fins != nil {
				fin = fins[i]
			}
			o, err := s.appendBatch(tx, b, fin, lease, now, st)
			if err != nil {
				return err
			}
			if out != nil {
				out[i] = o
			}
			woken = append(woken, string(runKey(b.Run.ThreadID, b.Run.RunID)))
		}
		return s.putStats(tx, st)
	})
	if err == nil {
		s.wake(woken...)
	}
	return err
}

// appendBatch stores one batch inside tx, then applies fin (FinishRun's rules) and, when
// lease is given and the run is running and stored events, renews the run's lease (as
// RenewLease does), answering as append.lua does.
func (s *DiskStore) appendBatch(tx *bolt.Tx, b Batch, fin *finishOp, lease *appendLease, now time.Time, st *diskStats) (appendOutcome, error) {
	threadID, runID := b.Run.ThreadID, b.Run.RunID
	t, err := s.thread(tx, threadID, now)
	if err != nil {
		return appendNotLeased, err
	}
	k := runKey(threadID, runID)
	var r *diskRun
	if t != nil {
		if r, err = getRecord[diskRun](tx.Bucket(bucketRuns), k); err != nil {
			return appendNotLeased, err
		}
	} else {
		if tx.Bucket(bucketThreads).Get([]byte(threadID)) != nil {
			if _, err := s.dropThread(tx, threadID); err != nil {
				return appendNotLeased, err
			}
		}
		t = &diskThread{Owner: b.Run.Owner, Route: b.Run.Route, Created: now.UnixMilli()}
		if err := setActive(tx, threadID, t, now); err != nil {
			return appendNotLeased, err
		}
	}
	if r == nil {
		// The run is unknown (its data was lost, or an import): re-create it from the batch.
		created, status := b.recreated(now)
		r = &diskRun{Epoch: b.Run.Epoch, Parent: b.Run.ParentRunID, Status: string(status), Route: b.Run.Route, Owner: b.Run.Owner,
			Created: created.UnixMilli(), Updated: now.UnixMilli(), Detail: b.Run.Detail}
		if len(b.Events) > 0 && b.Events[0].Seq > 1 {
			r.Gaps = formatGaps([]Gap{{From: 1, To: b.Events[0].Seq - 1}})
		}
		if err := s.addRun(tx, threadID, runID, t, r, now); err != nil {
			return appendNotLeased, err
		}
	} else if r.Epoch != b.Run.Epoch {
		return appendNotLeased, nil // another run now uses this id: these events are not its
	}
	var gaps []Gap
	if r.Gaps != "" {
		if gaps, err = parseGaps(r.Gaps); err != nil {
			return appendNotLeased, err
		}
	}
	stored := false
	evs := b.Events
	for len(evs) > 0 && evs[0].Seq <= r.Last {
		evs = evs[1:]
	}
	for len(evs) > 0 {
		n := min(len(evs), maxChunkEvents)
		chunk := evs[:n]
		evs = evs[n:]
		var kept []Event
		for _, ev := range chunk {
			if ev.Seq <= r.Last {
				continue // out of order inside the batch: skipped like a duplicate
			}
			if ev.Seq > r.Last+1 {
				gaps = addGap(gaps, r.Last+1, ev.Seq-1)
			}
			kept = append(kept, ev)
			r.Last = ev.Seq
		}
		if len(kept) == 0 {
			continue
		}
		data := encodeChunk(kept)
		key := binary.BigEndian.AppendUint64(eventsPrefix(threadID, runID), uint64(kept[0].Seq))
		if err := tx.Bucket(bucketEvents).Put(key, data); err != nil {
			return appendNotLeased, err
		}
		stored = true
		if r.First == 0 {
			r.First = kept[0].Seq
		}
		r.Count += int64(len(kept))
		r.Bytes += int64(len(data))
		st.EventBytes += int64(len(data))
	}
	if err := s.trim(tx, threadID, runID, r, st); err != nil {
		return appendNotLeased, err
	}
	out := appendNotLeased
	if lease != nil && stored && r.Status == string(StatusRunning) {
		r.Node, r.Lease = lease.node, lease.untilMs
		out = appendLeased
		if r.Stop {
			out = appendStop
		}
	}
	if fin != nil {
		r.Status, r.Detail = string(fin.status), fin.detail
		if fin.lastSeq > r.Last {
			gaps = addGap(gaps, r.Last+1, fin.lastSeq)
		}
		if fin.status != StatusRunning {
			if err := tx.Bucket(bucketRunning).Delete(k); err != nil {
				return appendNotLeased, err
			}
		}
	}
	r.Gaps = formatGaps(gaps)
	r.Updated = now.UnixMilli()
	if err := putRecord(tx.Bucket(bucketRuns), k, r); err != nil {
		return appendNotLeased, err
	}
	return out, s.refreshThread(tx, threadID, t, now)
}

// trim drops the run's oldest chunks while at least MaxEventsPerRun events remain without them.
func (s *DiskStore) trim(tx *bolt.Tx, threadID, runID string, r *diskRun, st *diskStats) error {
	keep := int64(s.cfg.MaxEventsPerRun)
	if keep <= 0 || r.Count <= keep {
		return nil
	}
	p := eventsPrefix(threadID, runID)
	b := tx.Bucket(bucketEvents)
	c := b.Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Seek(p) {
		n, last, err := chunkHeader(v)
		if err != nil {
			return fmt.Errorf("run %q in thread %q: %w", runID, threadID, err)
		}
		if r.Count-int64(n) < keep {
			r.First = int64(binary.BigEndian.Uint64(k[len(p):]))
			return nil
		}
		r.Count -= int64(n)
		r.Bytes -= int64(len(v))
		st.EventBytes -= int64(len(v))
		r.Trimmed = last
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	r.First = 0
	return nil
}

// errBadChunk reports a stored event chunk that does not decode or fails its checksum.
var errBadChunk = errors.New("damaged event chunk")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodePackedChunk encodes events (stored as seq 1..n) as the one chunk of a run compacted
// at rest.
func encodePackedChunk(evs []Event) []byte {
	b := append([]byte{chunkPacked}, packEvents(evs)...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// encodeChunk encodes events as: version, count, last seq, then per event seq, type and
// frame (lengths as uvarints), then the CRC-32C of everything before it.
func encodeChunk(evs []Event) []byte {
	size := 1 + 2*binary.MaxVarintLen64 + 4
	for _, e := range evs {
		size += 3*binary.MaxVarintLen64 + len(e.Type) + len(e.Frame)
	}
	b := make([]byte, 0, size)
	b = append(b, chunkVersion)
	b = binary.AppendUvarint(b, uint64(len(evs)))
	b = binary.AppendUvarint(b, uint64(evs[len(evs)-1].Seq))
	for _, e := range evs {
		b = binary.AppendUvarint(b, uint64(e.Seq))
		b = binary.AppendUvarint(b, uint64(len(e.Type)))
		b = append(b, e.Type...)
		b = binary.AppendUvarint(b, uint64(len(e.Frame)))
		b = append(b, e.Frame...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// chunkHeader returns a chunk's event count and last seq after checking its checksum.
func chunkHeader(b []byte) (int, int64, error) {
	if len(b) < 5 || (b[0] != chunkVersion && b[0] != chunkPacked) || crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return 0, 0, errBadChunk
	}
	if b[0] == chunkPacked {
		n, _, _, _, err := packedHeader(b[1 : len(b)-4])
		if err != nil || n == 0 {
			return 0, 0, errBadChunk
		}
		return n, int64(n), nil
	}
	n, i := binary.Uvarint(b[1:])
	if i <= 0 || n == 0 || n > maxChunkEvents {
		return 0, 0, errBadChunk
	}
	last, j := binary.Uvarint(b[1+i:])
	if j <= 0 {
		return 0, 0, errBadChunk
	}
	return int(n), int64(last), nil
}

// decodeChunk appends to dst the chunk's events with seq > after, at most limit in all
// (limit <= 0: no bound). The frames are copies (the chunk lives in the mmap).
func decodeChunk(dst []Event, b []byte, after int64, limit int) ([]Event, error) {
	n, _, err := chunkHeader(b)
	if err != nil {
		return dst, err
	}
	if b[0] == chunkPacked {
		if dst, err = unpackEvents(dst, b[1:len(b)-4], after, limit); err != nil {
			return dst, errBadChunk
		}
		return dst, nil
	}
	p := b[1 : len(b)-4]
	_, i := binary.Uvarint(p)
	p = p[i:]
	_, i = binary.Uvarint(p)
	p = p[i:]
	field := func() ([]byte, bool) {
		l, i := binary.Uvarint(p)
		if i <= 0 || l > uint64(len(p)-i) {
			return nil, false
		}
		v := p[i : i+int(l)]
		p = p[i+int(l):]
		return v, true
	}
	for range n {
		seq, i := binary.Uvarint(p)
		if i <= 0 {
			return dst, errBadChunk
		}
		p = p[i:]
		typ, ok1 := field()
		frame, ok2 := field()
		if !ok1 || !ok2 {
			return dst, errBadChunk
		}
		if int64(seq) > after && (limit <= 0 || len(dst) < limit) {
			dst = append(dst, Event{Seq: int64(seq), Type: string(typ), Frame: slices.Clone(frame)})
		}
	}
	if len(p) != 0 {
		return dst, errBadChunk
	}
	return dst, nil
}

// FinishRun implements Store.
func (s *DiskStore) FinishRun(ctx context.Context, threadID, runID string, status RunStatus, detail string, lastSeq int64) error {
	k := runKey(threadID, runID)
	// A run's end may use the room kept for deletes (write): it is one record, and a thread
	// whose run could not end stays busy, so it could not be deleted to free space.
	err := s.writeRunAs(threadID, runID, true, func(tx *bolt.Tx, r *diskRun, now time.Time) error {
		r.Status, r.Detail, r.Updated = string(status), detail, now.UnixMilli()
		if lastSeq > r.Last {
			gaps, err := parseGaps(r.Gaps)
			if err != nil {
				return err
			}
			r.Gaps = formatGaps(addGap(gaps, r.Last+1, lastSeq))
		}
		if status != StatusRunning {
			return tx.Bucket(bucketRunning).Delete(k)
		}
		return nil
	})
	s.wake(string(k))
	return err
}

// writeRun runs fn on an existing run's record in a write transaction and stores the record.
func (s *DiskStore) writeRun(threadID, runID string, fn func(tx *bolt.Tx, r *diskRun, now time.Time) error) error {
	return s.writeRunAs(threadID, runID, false, fn)
}

// writeRunAs is writeRun; small writes may use the room kept for deletes (see write).
func (s *DiskStore) writeRunAs(threadID, runID string, small bool, fn func(tx *bolt.Tx, r *diskRun, now time.Time) error) error {
	if err := validateIDs(threadID, &runID); err != nil {
		return err
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	var now time.Time // read inside the transaction: writes are serialized, so times only grow
	k := runKey(threadID, runID)
	return s.write(func(tx *bolt.Tx) error {
		now = s.now()
		t, r, err := s.findRun(tx, threadID, runID, now)
		if err != nil {
			return err
		}
		if err := fn(tx, r, now); err != nil {
			return err
		}
		if err := putRecord(tx.Bucket(bucketRuns), k, r); err != nil {
			return err
		}
		return s.refreshThread(tx, threadID, t, now)
	}, small)
}

// findRun reads a live run; missing ones are errAbort-wrapped sentinels.
func (s *DiskStore) findRun(tx *bolt.Tx, threadID, runID string, now time.Time) (*diskThread, *diskRun, error) {
	t, err := s.thread(tx, threadID, now)
	if err != nil {
		return nil, nil, err
	}
	if t == nil {
		return nil, nil, errAbort{fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)}
	}
	r, err := getRecord[diskRun](tx.Bucket(bucketRuns), runKey(threadID, runID))
	if err != nil {
		return nil, nil, err
	}
	if r == nil {
		return nil, nil, errAbort{fmt.Errorf("run %q in thread %q: %w", runID, threadID, ErrRunNotFound)}
	}
	return t, r, nil
}

// view runs fn in a read transaction after the close check, unwrapping errAbort.
func (s *DiskStore) view(fn func(tx *bolt.Tx) error) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	err := s.db.View(fn)
	var abort errAbort
	if errors.As(err, &abort) {
		return abort.err
	}
	return err
}

// Thread implements Store.
func (s *DiskStore) Thread(ctx context.Context, threadID string) (Thread, error) {
	if err := validateIDs(threadID, nil); err != nil {
		return Thread{}, err
	}
	var out Thread
	err := s.view(func(tx *bolt.Tx) error {
		t, err := s.thread(tx, threadID, s.now())
		if err != nil {
			return err
		}
		if t == nil {
			return errAbort{fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)}
		}
		out = t.info(threadID)
		return nil
	})
	return out, err
}

// Run implements Store.
func (s *DiskStore) Run(ctx context.Context, threadID, runID string) (Run, error) {
	if err := validateIDs(threadID, &runID); err != nil {
		return Run{}, err
	}
	var out Run
	err := s.view(func(tx *bolt.Tx) error {
		_, r, err := s.findRun(tx, threadID, runID, s.now())
		if err != nil {
			return err
		}
		out, err = r.run(threadID, runID)
		return err
	})
	return out, err
}

// Runs implements Store.
func (s *DiskStore) Runs(ctx context.Context, threadID string) ([]Run, error) {
	if err := validateIDs(threadID, nil); err != nil {
		return nil, err
	}
	var out []Run
	err := s.view(func(tx *bolt.Tx) error {
		t, err := s.thread(tx, threadID, s.now())
		if err != nil {
			return err
		}
		if t == nil {
			return errAbort{fmt.Errorf("thread %q: %w", threadID, ErrThreadNotFound)}
		}
		out = make([]Run, 0, t.Count)
		p := threadPrefix(threadID)
		c := tx.Bucket(bucketOrder).Cursor()
		runs := tx.Bucket(bucketRuns)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			r, err := getRecord[diskRun](runs, runKey(threadID, string(v)))
			if err != nil {
				return err
			}
			if r == nil {
				return fmt.Errorf("thread %q: run %q is listed without a record", threadID, v)
			}
			run, err := r.run(threadID, string(v))
			if err != nil {
				return err
			}
			out = append(out, run)
		}
		return nil
	})
	return out, err
}

// Events implements Store.
func (s *DiskStore) Events(ctx context.Context, threadID, runID string, afterSeq int64, limit int) ([]Event, error) {
	if err := validateIDs(threadID, &runID); err != nil {
		return nil, err
	}
	var out []Event
	err := s.view(func(tx *bolt.Tx) error {
		_, r, err := s.findRun(tx, threadID, runID, s.now())
		if errors.Is(err, ErrThreadNotFound) || errors.Is(err, ErrRunNotFound) {
			return errAbort{fmt.Errorf("events of run %q in thread %q: %w", runID, threadID, ErrRunNotFound)}
		}
		if err != nil {
			return err
		}
		out, err = s.readEvents(tx, threadID, runID, r, afterSeq, limit)
		return err
	})
	return out, err
}

// readEvents reads up to limit events of the run with seq > after.
func (s *DiskStore) readEvents(tx *bolt.Tx, threadID, runID string, r *diskRun, after int64, limit int) ([]Event, error) {
	if after >= r.Last {
		return nil, nil
	}
	p := eventsPrefix(threadID, runID)
	c := tx.Bucket(bucketEvents).Cursor()
	// The chunk holding after+1 starts at or before it: the last chunk starting at or before
	// after+1, else the first one after.
	start := binary.BigEndian.AppendUint64(slices.Clone(p), uint64(max(after, 0)+1))
	k, v := seekAtOrBefore(c, start, p)
	var out []Event
	for ; k != nil && bytes.HasPrefix(k, p) && (limit <= 0 || len(out) < limit); k, v = c.Next() {
		var err error
		if out, err = decodeChunk(out, v, after, limit); err != nil {
			return nil, fmt.Errorf("run %q in thread %q, chunk at seq %d: %w", runID, threadID, binary.BigEndian.Uint64(k[len(p):]), err)
		}
	}
	return out, nil
}

// PutCheckpoint implements Store. Errors: ErrRunNotFound, ErrThreadNotFound.
func (s *DiskStore) PutCheckpoint(ctx context.Context, threadID, runID string, data []byte) error {
	k := runKey(threadID, runID)
	return s.writeRun(threadID, runID, func(tx *bolt.Tx, r *diskRun, now time.Time) error {
		return s.putCheckpointIn(tx, k, data)
	})
}

// appendCheckpoint is WriteCheckpoints' append: the checkpoint is written again whole, in its
// pieces (a disk store writes checkpoints off the runs' way, see
// proxy.Handler.checkpointsAtEnd).
func (s *DiskStore) appendCheckpoint(threadID, runID string, prefix, data []byte) error {
	k := runKey(threadID, runID)
	return s.writeRun(threadID, runID, func(tx *bolt.Tx, r *diskRun, now time.Time) error {
		old := readCheckpoint(tx.Bucket(bucketCkpt), k)
		if old == nil || !bytes.HasPrefix(old, prefix) {
			return errAbort{fmt.Errorf("checkpoint of run %q in thread %q to append to: %w", runID, threadID, ErrNotFound)}
		}
		return s.putCheckpointIn(tx, k, append(old, data...))
	})
}

// WriteCheckpoints implements Store, one write (and transaction) after the other.
func (s *DiskStore) WriteCheckpoints(ctx context.Context, threadID string, writes []CheckpointWrite) (int, error) {
	return writeEach(ctx, s, threadID, writes)
}

// putCheckpointIn stores data as the checkpoint at k, in pieces, replacing any earlier one.
func (s *DiskStore) putCheckpointIn(tx *bolt.Tx, k, data []byte) error {
	st := s.statsIn(tx)
	b := tx.Bucket(bucketCkpt)
	freed, err := deleteCheckpoint(b, k)
	if err != nil {
		return err
	}
	st.CheckpointBytes += int64(len(data)) - freed
	first := min(len(data), ckptPiece)
	if err := b.Put(k, slices.Clone(data[:first])); err != nil {
		return err
	}
	for i, off := uint32(1), first; off < len(data); i, off = i+1, off+ckptPiece {
		if err := b.Put(ckptPieceKey(k, i), slices.Clone(data[off:min(off+ckptPiece, len(data))])); err != nil {
			return err
		}
	}
	return s.putStats(tx, st)
}

// ckptPiece is the most bytes of a checkpoint one key holds: a longer one (a segment) is
// stored in pieces, so that rewriting it (a segment grows by one delta per run) reuses the
// pages its previous pieces freed instead of needing a longer run of free pages each time (a
// 500 KB value rewritten per run grew the file to several times its data).
const ckptPiece = 16 << 10

// ckptPieceKey is the key of piece i (from 1) of the checkpoint at k: k, 0, i. Run ids hold no
// 0 byte, so no other run's key starts with k and a 0.
func ckptPieceKey(k []byte, i uint32) []byte {
	return binary.BigEndian.AppendUint32(append(slices.Clone(k), 0), i)
}

// deleteCheckpoint deletes the checkpoint at k with its pieces and returns their bytes.
func deleteCheckpoint(b *bolt.Bucket, k []byte) (int64, error) {
	var n int64
	if v := b.Get(k); v != nil {
		n += int64(len(v))
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	p := append(slices.Clone(k), 0)
	c := b.Cursor()
	for pk, v := c.Seek(p); pk != nil && bytes.HasPrefix(pk, p); pk, v = c.Seek(p) {
		n += int64(len(v))
		if err := b.Delete(pk); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// readCheckpoint returns a copy of the checkpoint at k joined from its pieces, nil if none.
func readCheckpoint(b *bolt.Bucket, k []byte) []byte {
	v := b.Get(k)
	if v == nil {
		return nil
	}
	out := slices.Clone(v)
	p := append(slices.Clone(k), 0)
	c := b.Cursor()
	for pk, v := c.Seek(p); pk != nil && bytes.HasPrefix(pk, p); pk, v = c.Next() {
		out = append(out, v...)
	}
	return out
}

// Checkpoint implements Store.
func (s *DiskStore) Checkpoint(ctx context.Context, threadID, runID string) ([]byte, error) {
	if err := validateIDs(threadID, &runID); err != nil {
		return nil, err
	}
	var out []byte
	err := s.view(func(tx *bolt.Tx) error {
		_, _, err := s.findRun(tx, threadID, runID, s.now())
		if errors.Is(err, ErrThreadNotFound) || errors.Is(err, ErrRunNotFound) {
			return errAbort{fmt.Errorf("checkpoint of run %q in thread %q: %w", runID, threadID, ErrNotFound)}
		}
		if err != nil {
			return err
		}
		if out = readCheckpoint(tx.Bucket(bucketCkpt), runKey(threadID, runID)); out == nil {
			return errAbort{fmt.Errorf("checkpoint of run %q in thread %q: %w", runID, threadID, ErrNotFound)}
		}
		return nil
	})
	return out, err
}

// Ping implements Store: it fails after Close, and while the last write failed (a full disk:
// ErrDiskFull) until a write succeeds again, or, for a full disk, until the file system has
// room again (a store opened on a full file system fails at once). A
// failing Ping tries again to end the runs the previous process left running.
func (s *DiskStore) Ping(ctx context.Context) error {
	if err := s.begin(); err != nil {
		return err
	}
	p := s.writeErr.Load()
	if p != nil && errors.Is(*p, ErrDiskFull) && s.fsRoom() >= 2*diskCushion {
		// The file system has room again (an operator freed space) while no write came: ready
		// again, the next write tells. (Deletes through the store are writes: they clear it.)
		if s.writeErr.CompareAndSwap(p, nil) {
			s.log.Info("disk store has room again", slog.String("path", s.path))
		}
		p = nil
	}
	s.closeMu.RUnlock()
	if p != nil {
		s.recoverLater() // a probe tries again: the write that ends them may fit now
		return fmt.Errorf("disk store %s: the last write failed: %w", s.path, *p)
	}
	return nil
}

// Close implements Store. Waiting followers get ErrClosed.
func (s *DiskStore) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.done)
	return s.db.Close()
}

// DiskStats are a DiskStore's sizes.
type DiskStats struct {
	EventBytes      int64 // encoded event chunks stored
	CheckpointBytes int64 // checkpoints stored
	FileBytes       int64 // the database file's size (bbolt reuses freed pages; the file never shrinks)
}

// Stats returns the store's sizes.
func (s *DiskStore) Stats() DiskStats {
	st := s.stats.Load()
	out := DiskStats{EventBytes: st.EventBytes, CheckpointBytes: st.CheckpointBytes}
	if fi, err := os.Stat(s.path); err == nil {
		out.FileBytes = fi.Size()
	}
	return out
}

var _ Store = (*DiskStore)(nil)
