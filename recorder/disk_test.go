package recorder_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/recorder/recordertest"
)

// openDisk opens a DiskStore in a fresh directory (NoSync unless sync: the contract does not
// depend on fsync, and the suite opens hundreds of stores).
func openDisk(t testing.TB, cfg recorder.DiskConfig) *recorder.DiskStore {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := recorder.OpenDiskStore(context.Background(), cfg)
	if err != nil {
		t.Fatalf("OpenDiskStore(%s) = %v", cfg.Dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestDiskStore(t *testing.T) {
	recordertest.Run(t, func(t *testing.T) recorder.Store {
		return openDisk(t, recorder.DiskConfig{MaxEventsPerRun: recordertest.MaxEventsPerRun, FollowQueue: recordertest.FollowQueue, NoSync: true})
	})
}

// TestDiskStoreReopen: everything written is there after Close and Open, runs that were
// finished stay as they were, and the byte counters survive.
func TestDiskStoreReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s, err := recorder.OpenDiskStore(ctx, recorder.DiskConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := testRun("t1", "r1")
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 300; seq += 50 {
		var evs []recorder.Event
		for i := seq; i < seq+50; i++ {
			evs = append(evs, testEvent(r, i))
		}
		if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: evs}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FinishRun(ctx, "t1", "r1", recorder.StatusFinished, "", 300); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCheckpoint(ctx, "t1", "r1", []byte("cp")); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openDisk(t, recorder.DiskConfig{Dir: dir})
	checkStored(t, s2, r, 300)
	got, err := s2.Run(ctx, "t1", "r1")
	if err != nil || got.Status != recorder.StatusFinished || got.LastSeq != 300 || got.FirstSeq != 1 || len(got.Gaps) != 0 {
		t.Errorf("Run(t1/r1) after reopen = %+v, %v, want finished 1..300 without gaps", got, err)
	}
	if cp, err := s2.Checkpoint(ctx, "t1", "r1"); err != nil || string(cp) != "cp" {
		t.Errorf("Checkpoint after reopen = %q, %v", cp, err)
	}
	if after := s2.Stats(); after.EventBytes != before.EventBytes || after.CheckpointBytes != 2 || after.EventBytes < 300*40 {
		t.Errorf("Stats after reopen = %+v, before %+v", after, before)
	}
}

// TestDiskStoreLocked: a second process (here: a second Open) cannot use the directory.
func TestDiskStoreLocked(t *testing.T) {
	dir := t.TempDir()
	openDisk(t, recorder.DiskConfig{Dir: dir})
	_, err := recorder.OpenDiskStore(t.Context(), recorder.DiskConfig{Dir: dir, LockTimeout: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Errorf("second OpenDiskStore = %v, want an in-use error", err)
	}
}

// TestDiskStoreTTL: a thread expires TTL after its last write; a later write sweeps it.
func TestDiskStoreTTL(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := openDisk(t, recorder.DiskConfig{TTL: time.Hour, Now: clock.Now})
	ctx := t.Context()
	r := testRun("t1", "r1")
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.now = clock.now.Add(50 * time.Minute)
	if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{testEvent(r, 1)}}}); err != nil {
		t.Fatal(err)
	}
	clock.now = clock.now.Add(50 * time.Minute)
	if _, err := s.Thread(ctx, "t1"); err != nil {
		t.Errorf("Thread(t1) 50 min after the last write = %v, want nil", err)
	}
	clock.now = clock.now.Add(11 * time.Minute)
	if _, err := s.Run(ctx, "t1", "r1"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("Run(t1/r1) 61 min after the last write = %v, want ErrThreadNotFound", err)
	}
	if _, err := s.CreateRun(ctx, testRun("t2", "r1"), recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.EventBytes != 0 {
		t.Errorf("event bytes after the sweep = %d, want 0", st.EventBytes)
	}
}

// TestDiskStoreDamagedChunk: a chunk whose bytes were altered on disk is reported as an
// error, never served.
func TestDiskStoreDamagedChunk(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s, err := recorder.OpenDiskStore(ctx, recorder.DiskConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := testRun("t1", "r1")
	marker := "DAMAGE-ME-" + strings.Repeat("z", 40)
	ev := recorder.Event{Seq: 1, Type: "CUSTOM", Frame: []byte("data: {\"type\":\"CUSTOM\",\"v\":\"" + marker + "\"}\n\n")}
	if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{ev}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, recorder.DiskFileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(marker))
	if i < 0 {
		t.Fatal("marker not found in the database file")
	}
	data[i] = 'X'
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openDisk(t, recorder.DiskConfig{Dir: dir})
	evs, err := s2.Events(ctx, "t1", "r1", 0, 0)
	if err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("Events of a damaged chunk = %d events, %v, want a damaged-chunk error", len(evs), err)
	}
}

// crashChildEnv names the directory a TestDiskStoreCrashChild process records into.
const crashChildEnv = "AGUI_TEST_DISK_CRASH_DIR"

// TestDiskStoreCrashChild is the process TestDiskStoreCrash kills: it records one run's
// events through a Writer, printing "stored <seq>" after each flush, until it is killed.
func TestDiskStoreCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("run by TestDiskStoreCrash")
	}
	s, err := recorder.OpenDiskStore(context.Background(), recorder.DiskConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := recorder.Run{ThreadID: "t1", RunID: "r1", Epoch: os.Getenv(crashChildEnv + "_EPOCH"), Owner: "alice", Route: "/a"}
	if _, err := s.CreateRun(context.Background(), r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := recorder.NewWriter(recorder.WriterConfig{Store: s})
	for seq := int64(1); ; seq++ {
		if err := recOf(t, w, r).Append(testEvent(r, seq)); err != nil {
			t.Fatal(err)
		}
		if seq%10 == 0 {
			if err := w.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("stored %d\n", seq)
		}
	}
}

// TestDiskStoreCrash: a real process recording a run is killed with SIGKILL mid-run. On the
// next Open the run holds every event the process reported stored (and any later ones it got
// to store) without a hole, then a RUN_ERROR with code INTERRUPTED, and it is marked
// interrupted.
func TestDiskStoreCrash(t *testing.T) {
	dir := t.TempDir()
	epoch := recorder.NewEpoch()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskStoreCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashChildEnv+"_EPOCH="+epoch)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var reported int64
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "stored "); ok {
			reported, _ = strconv.ParseInt(n, 10, 64)
			if reported >= 500 {
				break
			}
		}
	}
	if reported < 500 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child stopped after reporting %d stored events (scanner: %v)", reported, sc.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, out)
	cmd.Wait()

	s := openDisk(t, recorder.DiskConfig{Dir: dir})
	ctx := t.Context()
	got, err := s.Run(ctx, "t1", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != recorder.StatusInterrupted || got.Detail != recorder.InterruptedDetail || got.LastSeq <= reported ||
		len(got.Gaps) != 0 || !got.Complete(0) {
		t.Fatalf("Run after the crash = %+v, want interrupted, complete, last seq above the %d reported stored", got, reported)
	}
	evs, err := s.Events(ctx, "t1", "r1", 0, 0)
	if err != nil || int64(len(evs)) != got.LastSeq {
		t.Fatalf("Events after the crash = %d, %v, want %d", len(evs), err, got.LastSeq)
	}
	r := recorder.Run{ThreadID: "t1", RunID: "r1", Epoch: epoch}
	for i, e := range evs[:len(evs)-1] {
		if want := testEvent(r, int64(i+1)); e.Seq != want.Seq || !bytes.Equal(e.Frame, want.Frame) {
			t.Fatalf("event %d = %d %q, want %d %q", i, e.Seq, e.Frame, want.Seq, want.Frame)
		}
	}
	last := evs[len(evs)-1]
	wantID := "\nid: " + recorder.Cursor{RunID: "r1", Epoch: epoch, Seq: got.LastSeq}.String() + "\n\n"
	if last.Type != "RUN_ERROR" || !bytes.Contains(last.Frame, []byte(`"code":"INTERRUPTED"`)) || !bytes.HasSuffix(last.Frame, []byte(wantID)) {
		t.Errorf("last event = %s %q, want RUN_ERROR INTERRUPTED with id %q", last.Type, last.Frame, wantID)
	}
	t.Logf("killed after %d reported stored; %d events recovered", reported, got.LastSeq-1)
}

// mountTinyFS mounts a tmpfs of size bytes in a new directory, or skips the test where the
// process may not mount (not root, no CAP_SYS_ADMIN).
func mountTinyFS(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): the disk-full path is covered only where tests may mount", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// TestDiskStoreDiskFull: on a full file system the store behaves like Redis down. Writes fail
// with ErrDiskFull and are rolled back, Ping says so (readiness), the Writer keeps accepting
// the live run's events and drops what its buffer cannot hold; once space is freed the
// buffered events are stored, the dropped ones are recorded as a gap, and Ping is healthy.
func TestDiskStoreDiskFull(t *testing.T) {
	fsDir := mountTinyFS(t, 8<<20)
	ballast := filepath.Join(fsDir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openDisk(t, recorder.DiskConfig{Dir: filepath.Join(fsDir, "store")})
	w := newTestWriter(t, s, recorder.WriterConfig{MaxBufferedEvents: 300, RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	r := testRun("t1", "r1")
	ctx := t.Context()
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("p", 1000)
	event := func(seq int64) recorder.Event {
		f := recorder.AppendCursor([]byte("id: "), r.RunID, r.Epoch, seq)
		f = fmt.Appendf(f, "\ndata: {\"type\":\"CUSTOM\",\"n\":%d,\"pad\":%q}\n\n", seq, pad)
		return recorder.Event{Seq: seq, Type: "CUSTOM", Frame: f}
	}
	var seq int64
	refused := 0
	push := func() {
		seq++
		if err := recOf(t, w, r).Append(event(seq)); errors.Is(err, recorder.ErrBufferFull) {
			refused++
		} else if err != nil {
			t.Fatalf("Writer.Append(%d) = %v", seq, err)
		}
	}
	// Fill the disk until the store reports it full. A write can fail and a later, smaller one
	// still fit (bbolt reuses freed pages), so the condition is the store's own report, not
	// the first failed write.
	for !errors.Is(s.Ping(ctx), recorder.ErrDiskFull) {
		if seq > 20000 {
			t.Fatalf("the store never reported a full disk after %d events of 1 KB on an 8 MB file system (store errors %d, ping %v)",
				seq, w.Stats().StoreErrors, s.Ping(ctx))
		}
		push()
		if seq%50 == 0 {
			time.Sleep(time.Millisecond) // let the writer catch up, so the buffer holds while the disk has room
		}
	}
	// The live run goes on: the Writer never blocks, it buffers then drops.
	for range 400 {
		push()
	}
	if refused == 0 || w.Stats().Dropped == 0 {
		t.Fatalf("no event was dropped while the disk was full (refused %d)", refused)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		push()
	}
	recOf(t, w, r).Finish(recorder.StatusFinished, "", seq)
	flushCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.Flush(flushCtx); err != nil {
		t.Fatalf("Flush after freeing space = %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after freeing space = %v, want nil", err)
	}
	got, err := s.Run(ctx, "t1", "r1")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "t1", "r1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	missing := int64(0)
	for _, g := range got.Gaps {
		missing += g.To - g.From + 1
	}
	// Every seq is either stored or inside a recorded gap (the tail the Writer dropped is
	// recorded by FinishRun, so LastSeq may stay below seq).
	if got.Status != recorder.StatusFinished || int64(len(evs))+missing != seq || missing < int64(refused) || got.Complete(0) {
		t.Errorf("after the outage: status %s, %d events stored + %d in gaps %v, want finished, %d in all, at least %d missing",
			got.Status, len(evs), missing, got.Gaps, seq, refused)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Fatalf("events out of order or repeated at %d: %d after %d", i, evs[i].Seq, evs[i-1].Seq)
		}
	}
	t.Logf("%d events, %d refused by the full buffer, gaps %v", seq, refused, got.Gaps)
}

// TestDiskStoreCheckpointPieces: a checkpoint longer than a piece reads back whole; a shorter
// one stored over it, and DeleteRun, leave no piece behind (the store's checkpoint bytes are
// exact); and a segment-like checkpoint rewritten longer at every run (400 writes up to 400
// KB) keeps the file within 3x its data (2.5x; one 400 KB value rewritten each time: 3.8x).
func TestDiskStoreCheckpointPieces(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, recorder.DiskConfig{Dir: dir, NoSync: true})
	ctx := t.Context()
	run := func(id string) recorder.Run {
		return recorder.Run{ThreadID: "t", RunID: id, Epoch: recorder.NewEpoch()}
	}
	for _, id := range []string{"r1", "r2"} {
		if _, err := s.CreateRun(ctx, run(id), recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 100_000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for _, data := range [][]byte{big, []byte("small"), big[:40_000]} {
		if err := s.PutCheckpoint(ctx, "t", "r1", data); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Checkpoint(ctx, "t", "r1"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Checkpoint after storing %d bytes = %d bytes, %v", len(data), len(got), err)
		}
		if st := s.Stats(); st.CheckpointBytes != int64(len(data)) {
			t.Fatalf("CheckpointBytes after storing %d bytes = %d", len(data), st.CheckpointBytes)
		}
	}
	if err := s.PutCheckpoint(ctx, "t", "r2", []byte("r2's")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRun(ctx, "t", "r1"); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.CheckpointBytes != 4 {
		t.Errorf("CheckpointBytes after deleting r1 = %d, want r2's 4", st.CheckpointBytes)
	}
	if got, err := s.Checkpoint(ctx, "t", "r2"); err != nil || string(got) != "r2's" {
		t.Errorf("r2's checkpoint = %q, %v", got, err)
	}
	seg := make([]byte, 0, 400_000)
	for i := range 400 {
		for j := range 1000 {
			seg = append(seg, byte(i^j))
		}
		if err := s.PutCheckpoint(ctx, "t", "r2", seg); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Checkpoint(ctx, "t", "r2"); err != nil || !bytes.Equal(got, seg) {
		t.Fatalf("the grown checkpoint reads back as %d bytes, %v", len(got), err)
	}
	s.Close()
	fi, err := os.Stat(filepath.Join(dir, recorder.DiskFileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("file %d bytes for a %d-byte checkpoint", fi.Size(), len(seg))
	if fi.Size() > 3*int64(len(seg)) {
		t.Errorf("file %d bytes for a %d-byte checkpoint rewritten longer 400 times, want within 3x", fi.Size(), len(seg))
	}
}

// TestDiskStoreGroupCommit: concurrent run starts, appends, finishes and lease renewals share
// transactions (groupCommit) without changing one answer: a refused start among them
// (ErrRunAlreadyStarted) gets its refusal and the others their runs, every event and finish
// is stored, and the byte counters, which every write of a shared transaction updates, add up
// (in memory and after a reopen).
func TestDiskStoreGroupCommit(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s := openDisk(t, recorder.DiskConfig{Dir: dir})
	const n = 48
	rs := make([]recorder.Run, n)
	for i := range rs {
		rs[i] = testRun(fmt.Sprintf("t%d", i), "r")
	}
	batch := func(r recorder.Run, seq int64) []recorder.Batch {
		return []recorder.Batch{{Run: r, Events: []recorder.Event{testEvent(r, seq), testEvent(r, seq+1), testEvent(r, seq+2), testEvent(r, seq+3)}}}
	}
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n { // every run started twice at once: one start wins
		wg.Go(func() {
			_, errs[i] = s.CreateRun(ctx, rs[i%n], recorder.CreateOptions{})
		})
	}
	wg.Wait()
	for i := range n {
		a, b := errs[i], errs[i+n]
		if (a == nil) == (b == nil) || !errors.Is(errors.Join(a, b), recorder.ErrRunAlreadyStarted) {
			t.Fatalf("run %d started twice at once: %v and %v; want one start and one ErrRunAlreadyStarted", i, a, b)
		}
	}
	for i := range rs {
		wg.Go(func() {
			r := rs[i]
			for seq := int64(1); seq <= 20; seq += 4 {
				if err := s.Append(ctx, batch(r, seq)); err != nil {
					t.Errorf("Append(%s, %d) = %v", r.ThreadID, seq, err)
					return
				}
			}
			if _, err := s.RenewLeases(ctx, "node-a", time.Now().Add(time.Minute), []recorder.RunRef{{ThreadID: r.ThreadID, RunID: r.RunID}}); err != nil {
				t.Errorf("RenewLeases(%s) = %v", r.ThreadID, err)
			}
			if err := s.FinishRun(ctx, r.ThreadID, r.RunID, recorder.StatusFinished, "", 20); err != nil {
				t.Errorf("FinishRun(%s) = %v", r.ThreadID, err)
			}
		})
	}
	wg.Wait()
	for _, r := range rs {
		got, err := s.Run(ctx, r.ThreadID, r.RunID)
		if err != nil || got.Status != recorder.StatusFinished || got.LastSeq != 20 || len(got.Gaps) != 0 {
			t.Fatalf("Run(%s) = %+v, %v; want finished at seq 20 without gaps", r.ThreadID, got, err)
		}
		evs, err := s.Events(ctx, r.ThreadID, r.RunID, 0, 0)
		if err != nil || len(evs) != 20 {
			t.Fatalf("Events(%s) = %d events, %v; want 20", r.ThreadID, len(evs), err)
		}
	}
	// The same appends one at a time make the same chunks: the counters must agree.
	serial := openDisk(t, recorder.DiskConfig{NoSync: true})
	for _, r := range rs {
		if _, err := serial.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for seq := int64(1); seq <= 20; seq += 4 {
			if err := serial.Append(ctx, batch(r, seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := serial.Stats().EventBytes
	if got := s.Stats().EventBytes; got != want || want == 0 {
		t.Fatalf("Stats().EventBytes = %d; want %d, as the same appends made one at a time", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openDisk(t, recorder.DiskConfig{Dir: dir})
	if got := s2.Stats().EventBytes; got != want {
		t.Fatalf("after reopen, Stats().EventBytes = %d; want %d", got, want)
	}
}

// TestDiskStoreWriterTogether: through a Writer with a lease, the disk store writes a run's
// events, the lease its appends renew and its finish in the batch's one transaction: the run
// ends finished with every event, and a running run holds the Writer's lease.
func TestDiskStoreWriterTogether(t *testing.T) {
	s := openDisk(t, recorder.DiskConfig{NoSync: true})
	ctx := t.Context()
	done, running := testRun("t1", "r1"), testRun("t2", "r2")
	for _, r := range []recorder.Run{done, running} {
		if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w := newTestWriter(t, s, recorder.WriterConfig{Lease: &recorder.WriterLease{Node: "node-a", TTL: time.Minute}})
	for seq := int64(1); seq <= 30; seq++ {
		for _, r := range []recorder.Run{done, running} {
			if err := recOf(t, w, r).Append(testEvent(r, seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := recOf(t, w, done).FinishSync(ctx, recorder.StatusFinished, "", 30); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(ctx, done.ThreadID, done.RunID)
	if err != nil || got.Status != recorder.StatusFinished || got.LastSeq != 30 || len(got.Gaps) != 0 {
		t.Fatalf("Run(finished) = %+v, %v; want finished at 30", got, err)
	}
	got, err = s.Run(ctx, running.ThreadID, running.RunID)
	if err != nil || got.Status != recorder.StatusRunning || got.LastSeq != 30 || got.Node != "node-a" || time.Until(got.LeaseUntil) < 30*time.Second {
		t.Fatalf("Run(running) = %+v, %v; want running at 30, leased by node-a for about a minute", got, err)
	}
}
