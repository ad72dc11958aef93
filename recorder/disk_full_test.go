package recorder_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// fillDisk appends 1 KB events to runs of fresh threads "fill-<n>" (each finished after 20
// events) until the store refuses a write with ErrDiskFull, and returns the threads it
// filled (named prefix-<n>). The run it was writing when the disk filled is left running, as a process that
// could not record a run's end leaves it.
func fillDisk(t *testing.T, s *recorder.DiskStore, prefix string) []string {
	t.Helper()
	ctx := t.Context()
	pad := strings.Repeat("p", 1000)
	var threads []string
	for n := 0; ; n++ {
		if n > 10000 {
			t.Fatalf("the disk never filled after %d threads", n)
		}
		r := testRun(fmt.Sprintf("%s-%d", prefix, n), "r1")
		if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); errors.Is(err, recorder.ErrDiskFull) {
			return threads
		} else if err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		threads = append(threads, r.ThreadID)
		for seq := int64(1); seq <= 20; seq++ {
			f := recorder.AppendCursor([]byte("id: "), r.RunID, r.Epoch, seq)
			f = fmt.Appendf(f, "\ndata: {\"type\":\"CUSTOM\",\"n\":%d,\"pad\":%q}\n\n", seq, pad)
			err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{{Seq: seq, Type: "CUSTOM", Frame: f}}}})
			if errors.Is(err, recorder.ErrDiskFull) {
				return threads
			}
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
		}
		if err := s.FinishRun(ctx, r.ThreadID, r.RunID, recorder.StatusFinished, "", 20); errors.Is(err, recorder.ErrDiskFull) {
			return threads
		} else if err != nil {
			t.Fatalf("FinishRun: %v", err)
		}
	}
}

// TestDiskStoreFullDiskOpensAndFrees: on a 2 MB tmpfs filled to the last byte by the store
// itself (no ballast to remove), the store reports the full disk on Ping, still serves reads,
// lets a thread be deleted (the delete's copy-on-write pages come from the store's reserve
// file), and after the delete new writes fit in the pages the delete freed. Closed while full,
// with a run left running, it opens again (the interrupted run is ended once a write fits),
// serves the history it holds and says the disk is full.
func TestDiskStoreFullDiskOpensAndFrees(t *testing.T) {
	fsDir := mountTinyFS(t, 2<<20)
	dir := filepath.Join(fsDir, "store")
	ctx := t.Context()
	s, err := recorder.OpenDiskStore(ctx, recorder.DiskConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	threads := fillDisk(t, s, "fill")
	if len(threads) < 3 {
		t.Fatalf("only %d threads fit on the file system", len(threads))
	}
	if err := s.Ping(ctx); !errors.Is(err, recorder.ErrDiskFull) {
		t.Fatalf("Ping on a full disk = %v, want ErrDiskFull", err)
	}
	running := threads[len(threads)-1]
	if r, err := s.Run(ctx, running, "r1"); err != nil || r.Status != recorder.StatusRunning {
		t.Fatalf("the run cut by the full disk: %+v, %v; want it running", r, err)
	}
	// Close while full, with the run left running, then open again.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = recorder.OpenDiskStore(ctx, recorder.DiskConfig{Dir: dir})
	if err != nil {
		t.Fatalf("OpenDiskStore on a full disk = %v, want it open (reads must stay possible)", err)
	}
	defer s.Close()
	if err := s.Ping(ctx); !errors.Is(err, recorder.ErrDiskFull) {
		t.Fatalf("Ping after opening on a full disk = %v, want ErrDiskFull", err)
	}
	for _, th := range threads[:len(threads)-1] {
		evs, err := s.Events(ctx, th, "r1", 0, 0)
		if err != nil || len(evs) != 20 {
			t.Fatalf("Events(%s) on a full disk = %d events, %v; want 20", th, len(evs), err)
		}
	}
	// Deletes free space: the first threads go, through the API the proxy's DELETE uses.
	for _, th := range threads[:3] {
		if err := s.DeleteThread(ctx, th, "alice", "/a"); err != nil {
			t.Fatalf("DeleteThread(%s) on a full disk = %v, want it deleted", th, err)
		}
	}
	// The freed pages take new writes: a thread of 20 events fits again, the interrupted run
	// is ended, and Ping is healthy once a write succeeded.
	r := testRun("after", "r1")
	if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
		t.Fatalf("CreateRun after the deletes = %v", err)
	}
	for seq := int64(1); seq <= 20; seq++ {
		if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{testEvent(r, seq)}}}); err != nil {
			t.Fatalf("Append(%d) after the deletes = %v", seq, err)
		}
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after writes succeeded again = %v", err)
	}
	waitFor(t, "the run left running by the previous process to be ended", func() bool {
		got, err := s.Run(ctx, running, "r1")
		return err == nil && got.Status == recorder.StatusInterrupted
	})
	// Filled again (the reserve is gone, the file system still full): the store keeps the
	// last free pages for deletes, so a second round of deletes works too.
	again := fillDisk(t, s, "again")
	if err := s.Ping(ctx); !errors.Is(err, recorder.ErrDiskFull) {
		t.Fatalf("Ping on the disk full again = %v, want ErrDiskFull", err)
	}
	// The run the disk cut can still record its end (one record, from the room kept), so its
	// thread is not left busy for ever.
	if err := s.FinishRun(ctx, again[len(again)-1], "r1", recorder.StatusError, "STORAGE_UNAVAILABLE", 0); err != nil {
		t.Fatalf("FinishRun on the disk full again = %v", err)
	}
	for _, th := range append(threads[3:6], again...) {
		if err := s.DeleteThread(ctx, th, "alice", "/a"); err != nil {
			t.Fatalf("DeleteThread(%s) on the disk full again = %v, want it deleted", th, err)
		}
	}
	r2 := testRun("after-again", "r1")
	if _, err := s.CreateRun(ctx, r2, recorder.CreateOptions{}); err != nil {
		t.Fatalf("CreateRun after the second deletes = %v", err)
	}
	st := s.Stats()
	t.Logf("%d threads filled 2 MB; file %d bytes, events %d bytes", len(threads), st.FileBytes, st.EventBytes)
}

// waitFor polls cond (every millisecond, at most 10 s) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDiskStoreFullDiskRetentionFrees: retention frees a full disk by itself. The threads
// that filled it expire; a large write then still finds the disk full (the sweep inside it
// is rolled back with it, and the pages a transaction frees are not reusable within it), so
// the store sweeps in a transaction of its own, and the same write fits the next time in the
// pages the expired threads left. Without that sweep it would fail for ever.
func TestDiskStoreFullDiskRetentionFrees(t *testing.T) {
	fsDir := mountTinyFS(t, 2<<20)
	ctx := t.Context()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	s := openDisk(t, recorder.DiskConfig{Dir: filepath.Join(fsDir, "store"), TTL: time.Hour,
		Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	big := testRun("big", "r1")
	if _, err := s.CreateRun(ctx, big, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	threads := fillDisk(t, s, "fill")
	clock.Add((2 * time.Hour).Milliseconds())
	pad := strings.Repeat("b", 1000)
	var batch []recorder.Event
	for seq := int64(1); seq <= 400; seq++ {
		f := recorder.AppendCursor([]byte("id: "), big.RunID, big.Epoch, seq)
		f = fmt.Appendf(f, "\ndata: {\"type\":\"CUSTOM\",\"n\":%d,\"pad\":%q}\n\n", seq, pad)
		batch = append(batch, recorder.Event{Seq: seq, Type: "CUSTOM", Frame: f})
	}
	first := s.Append(ctx, []recorder.Batch{{Run: big, Events: batch}})
	if !errors.Is(first, recorder.ErrDiskFull) {
		t.Fatalf("the first large write after the threads expired = %v, want ErrDiskFull (the test needs it to fail)", first)
	}
	if err := s.Append(ctx, []recorder.Batch{{Run: big, Events: batch}}); err != nil {
		t.Fatalf("the same write after the store swept on its own = %v, want it stored", err)
	}
	if _, err := s.Thread(ctx, threads[0]); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Fatalf("expired thread %s: %v, want ErrThreadNotFound", threads[0], err)
	}
	if evs, err := s.Events(ctx, "big", "r1", 0, 0); err != nil || len(evs) != len(batch) {
		t.Fatalf("the large write: %d events stored, %v", len(evs), err)
	}
}
