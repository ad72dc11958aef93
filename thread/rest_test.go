package thread_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// textRun is one chat turn streamed in several content deltas (what compaction at rest merges)
// with a tool call whose arguments arrive in pieces.
func textRun(threadID, runID, msgID string) []string {
	return []string{
		fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":%q,"input":{"threadId":%q,"runId":%q,"messages":[{"id":"u-%s","role":"user","content":"q"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}}`,
			threadID, runID, threadID, runID, msgID),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_START","messageId":%q,"role":"assistant"}`, msgID),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":"Hello"}`, msgID),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":", I am"}`, msgID),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":" streaming <this> & that"}`, msgID),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_END","messageId":%q}`, msgID),
		fmt.Sprintf(`{"type":"TOOL_CALL_START","toolCallId":"c-%s","toolCallName":"get","parentMessageId":%q}`, msgID, msgID),
		fmt.Sprintf(`{"type":"TOOL_CALL_ARGS","toolCallId":"c-%s","delta":"{\"city\":"}`, msgID),
		fmt.Sprintf(`{"type":"TOOL_CALL_ARGS","toolCallId":"c-%s","delta":"\"Paris\"}"}`, msgID),
		fmt.Sprintf(`{"type":"TOOL_CALL_END","toolCallId":"c-%s"}`, msgID),
		fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":%q}`, threadID, runID),
	}
}

// restStores returns the stores compaction at rest is tested on.
func restStores(t *testing.T) map[string]recorder.Store {
	mem := recorder.NewMemoryStore(recorder.MemoryConfig{})
	t.Cleanup(func() { mem.Close() })
	disk, err := recorder.OpenDiskStore(t.Context(), recorder.DiskConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { disk.Close() })
	srv := redistest.Start(t)
	rs, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{URL: srv.URL(), Prefix: "rest"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return map[string]recorder.Store{"memory": mem, "disk": disk, "redis": rs}
}

type replayed struct{ messages, state string }

func replayBranch(t *testing.T, s *thread.Service, runID string) replayed {
	t.Helper()
	evs, err := s.Branch(t.Context(), "t", runID)
	if err != nil {
		t.Fatal(err)
	}
	m, st, err := compact.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	return replayed{string(m), string(st)}
}

// TestCompactAtRest, on the memory, disk and Redis stores: a sweep replaces the ended runs'
// events by fewer merged ones with a new epoch; a run with state deltas and a running run stay
// as they are; every branch replays to the same messages and state afterwards, read from the
// checkpoints and rebuilt from the events alone; the held message ids are the same; a second
// sweep finds nothing to do; two sweepers at once compact each run once.
func TestCompactAtRest(t *testing.T) {
	for name, store := range restStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s := newService(t, thread.Config{Store: store})
			for i := 1; i <= 3; i++ {
				recordRun(t, s, "t", fmt.Sprintf("r%d", i), "", textRun("t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))...)
			}
			recordRun(t, s, "t", "r4", "", chatRun("t", "r4", "m4")...) // STATE_DELTA: kept raw
			recordRun(t, s, "t", "r5", "", textRun("t", "r5", "m5")...)
			if _, err := s.StartRun(ctx, recorder.Run{ThreadID: "t", RunID: "live"}); err != nil {
				t.Fatal(err)
			}
			runs := []string{"r1", "r2", "r3", "r4", "r5"}
			before := map[string]replayed{}
			beforeRuns := map[string]recorder.Run{}
			for _, r := range runs {
				before[r] = replayBranch(t, s, r)
				beforeRuns[r], _ = store.Run(ctx, "t", r)
			}
			wantIDs, err := s.MessageIDs(ctx, "t", "r5")
			if err != nil {
				t.Fatal(err)
			}

			var mu sync.Mutex
			results := map[thread.RestResult]int{}
			count := func(r thread.RestResult) { mu.Lock(); results[r]++; mu.Unlock() }
			sweepers := make([]*thread.RestSweeper, 2)
			for i := range sweepers {
				if sweepers[i], err = thread.NewRestSweeper(newService(t, thread.Config{Store: store}), time.Nanosecond, time.Hour, count); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			for _, sw := range sweepers {
				wg.Add(1)
				go func() { defer wg.Done(); sw.Sweep(ctx) }()
			}
			wg.Wait()
			if results[thread.RestCompacted] != 4 || results[thread.RestKept]+results[thread.RestConflict] == 0 {
				t.Errorf("two sweeps: %v, want 4 runs compacted once, r4 kept (or conflicts)", results)
			}

			for _, r := range runs {
				run, err := store.Run(ctx, "t", r)
				if err != nil {
					t.Fatal(err)
				}
				if r == "r4" {
					if !run.CompactedAt.IsZero() || run.Epoch != beforeRuns[r].Epoch {
						t.Errorf("r4 (state deltas) was compacted: %+v", run)
					}
				} else if run.CompactedAt.IsZero() || run.Epoch == beforeRuns[r].Epoch || run.LastSeq >= beforeRuns[r].LastSeq {
					t.Errorf("%s after the sweep: epoch %s (was %s), %d events (was %d), compacted at %v", r, run.Epoch, beforeRuns[r].Epoch,
						run.LastSeq, beforeRuns[r].LastSeq, run.CompactedAt)
				}
				if got := replayBranch(t, s, r); got != before[r] {
					t.Errorf("%s replays to %+v after the sweep, want %+v", r, got, before[r])
				}
				fresh := newService(t, thread.Config{Store: noCheckpoints{store}})
				if got := replayBranch(t, fresh, r); got != before[r] {
					t.Errorf("%s rebuilt from the compacted events replays to %+v, want %+v", r, got, before[r])
				}
			}
			evs, err := store.Events(ctx, "t", "r2", 0, 0)
			if err != nil || len(evs) == 0 || !bytes.Contains(evs[0].Frame, []byte("r2:")) {
				t.Fatalf("r2's events after the sweep: %d, %v", len(evs), err)
			}
			run2, _ := store.Run(ctx, "t", "r2")
			last := evs[len(evs)-1].Frame
			_, id, _ := bytes.Cut(last, []byte("\nid: "))
			id, _, _ = bytes.Cut(id, []byte("\n"))
			if c, err := recorder.ParseCursor(string(id)); err != nil || c.Epoch != run2.Epoch || c.Seq != run2.LastSeq {
				t.Errorf("r2's last frame %q does not carry the new epoch %s", evs[len(evs)-1].Frame, run2.Epoch)
			}
			if got, err := s.MessageIDs(ctx, "t", "r5"); err != nil || !maps.Equal(got, wantIDs) {
				t.Errorf("MessageIDs(r5) after the sweep = %v, %v, want %v", got, err, wantIDs)
			}
			clear(results)
			if err := sweepers[0].Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			if len(results) != 0 {
				t.Errorf("a second sweep examined runs again: %v", results)
			}
		})
	}
}

// TestCompactAtRestAge: runs that ended less than the age ago are left alone.
func TestCompactAtRestAge(t *testing.T) {
	s := newService(t, thread.Config{})
	recordRun(t, s, "t", "r1", "", textRun("t", "r1", "m1")...)
	n := 0
	sw, err := thread.NewRestSweeper(s, time.Hour, 0, func(thread.RestResult) { n++ })
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if run, _ := s.Store().Run(context.Background(), "t", "r1"); n != 0 || !run.CompactedAt.IsZero() {
		t.Errorf("a run ended just now was examined (%d) or compacted (%v) with a one-hour age", n, run.CompactedAt)
	}
}

// TestCompactAtRestPacksSegments, on the memory, disk and Redis stores: a segment is packed
// (version 3, smaller) when the next one starts, and a sweep packs the latest segment of a
// thread at rest; every branch reads
// exactly as before, from the packed segments (no rebuild) and from the events, and after a
// fork from inside one; a run that extends the latest segment stores it unpacked, and a sweep
// leaves it so while that run is not at rest.
func TestCompactAtRestPacksSegments(t *testing.T) {
	thread.SetSegmentMinBytes(t, 4<<10)
	for name, store := range restStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s := newService(t, thread.Config{Store: store})
			checkpoint := func(run string) []byte {
				data, err := store.Checkpoint(ctx, "t", run)
				if err != nil {
					t.Fatal(err)
				}
				return data
			}
			// Runs until a second segment starts (a record naming no segment: a base).
			var second string
			for i := 1; second == ""; i++ {
				run := fmt.Sprintf("r%d", i)
				recordRun(t, s, "t", run, "", textRun("t", run, fmt.Sprintf("m%d", i))...)
				if i > 1 && thread.RecordSegment(checkpoint(run)) == "" {
					second = run
				}
				if i > 500 {
					t.Fatal("no second segment after 500 runs")
				}
			}
			recordRun(t, s, "t", "last", "", textRun("t", "last", "mlast")...)
			// The first segment was packed when the second started; the second, which the
			// thread extends, is not.
			if data := checkpoint("r1"); !bytes.HasPrefix(data, []byte("AGCP\x03")) {
				t.Fatalf("r1's segment, closed by %s's, is %.6q, want packed", second, data)
			}
			raw := map[string][]byte{second: checkpoint(second)}
			sw, err := thread.NewRestSweeper(newService(t, thread.Config{Store: store}), time.Nanosecond, time.Hour, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := sw.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			packed := map[string][]byte{"r1": checkpoint("r1")}
			for run, data := range raw {
				packed[run] = checkpoint(run)
				if !bytes.HasPrefix(data, []byte("AGCP\x02")) || !bytes.HasPrefix(packed[run], []byte("AGCP\x03")) || len(packed[run])*2 > len(data) {
					t.Fatalf("%s's segment: %d bytes %.6q, after the sweep %d bytes %.6q; want packed, under half", run, len(data), data, len(packed[run]), packed[run])
				}
			}
			reader := newService(t, thread.Config{Store: store})
			for _, run := range []string{"r1", "r2", "r10", second, "last"} {
				sameBranch(t, reader, "t", run)
			}
			for run, data := range packed {
				if !bytes.Equal(checkpoint(run), data) {
					t.Fatalf("reading the branches stored %s's packed segment again (it was rebuilt)", run)
				}
			}
			recordRun(t, s, "t", "fork", "r3", textRun("t", "fork", "mfork")...)
			recordRun(t, s, "t", "more", "last", textRun("t", "more", "mmore")...)
			young, err := thread.NewRestSweeper(newService(t, thread.Config{Store: store}), time.Hour, time.Hour, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := young.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			if data := checkpoint(second); !bytes.HasPrefix(data, []byte("AGCP\x02")) {
				t.Errorf("the segment a new run extends is %.6q, want unpacked", data)
			}
			for _, run := range []string{"fork", "r3", "last", "more"} {
				sameBranch(t, newService(t, thread.Config{Store: store}), "t", run)
			}
		})
	}
}

// runsCounting is a memory store that counts Runs calls.
type runsCounting struct {
	*recorder.MemoryStore
	mu   sync.Mutex
	runs int
}

func (c *runsCounting) Runs(ctx context.Context, threadID string) ([]recorder.Run, error) {
	c.mu.Lock()
	c.runs++
	c.mu.Unlock()
	return c.MemoryStore.Runs(ctx, threadID)
}

// TestCompactAtRestSettledThreads: a sweep does not read the runs of a thread whose runs were
// all compacted or kept at an earlier sweep and did not change; a new run (or a run too young
// at the last sweep) makes the next sweep read them and compact it.
func TestCompactAtRestSettledThreads(t *testing.T) {
	mem := recorder.NewMemoryStore(recorder.MemoryConfig{})
	t.Cleanup(func() { mem.Close() })
	store := &runsCounting{MemoryStore: mem}
	s := newService(t, thread.Config{Store: store})
	ctx := t.Context()
	for _, th := range []string{"t", "u"} {
		recordRun(t, s, th, "r1", "", textRun(th, "r1", "m1")...)
		recordRun(t, s, th, "r2", "", chatRun(th, "r2", "m2")...) // STATE_DELTA: kept raw
	}
	compacted := 0
	sw, err := thread.NewRestSweeper(s, time.Nanosecond, time.Hour, func(r thread.RestResult) {
		if r == thread.RestCompacted {
			compacted++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	sweep := func() int {
		t.Helper()
		store.mu.Lock()
		before := store.runs
		store.mu.Unlock()
		if err := sw.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.runs - before
	}
	if n := sweep(); n != 2 || compacted != 2 {
		t.Fatalf("first sweep: %d Runs reads, %d runs compacted, want 2 and 2", n, compacted)
	}
	if n := sweep(); n != 0 {
		t.Errorf("second sweep over settled threads: %d Runs reads, want 0", n)
	}
	recordRun(t, s, "u", "r3", "", textRun("u", "r3", "m3")...)
	if n := sweep(); n != 1 || compacted != 3 {
		t.Errorf("after a new run in u: %d Runs reads, %d runs compacted, want 1 and 3", n, compacted)
	}
	if run, err := store.Run(ctx, "u", "r3"); err != nil || run.CompactedAt.IsZero() {
		t.Errorf("u's new run after the sweep: %+v, %v, want compacted", run, err)
	}
	if n := sweep(); n != 0 {
		t.Errorf("sweep after that: %d Runs reads, want 0", n)
	}
	// A run too young at a sweep leaves its thread unsettled.
	young, err := thread.NewRestSweeper(s, time.Hour, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		store.mu.Lock()
		before := store.runs
		store.mu.Unlock()
		if err := young.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if store.runs-before != 2 {
			t.Errorf("a sweep with runs too young: %d Runs reads, want 2 (one per thread, every sweep)", store.runs-before)
		}
	}
}
