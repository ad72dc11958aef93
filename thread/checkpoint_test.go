package thread_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/hydrate"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// recordRun stores an ended run of datas (event JSON) with the given parent ("" continues
// the thread's latest run) and builds its checkpoint.
func recordRun(t testing.TB, s *thread.Service, threadID, runID, parent string, datas ...string) {
	t.Helper()
	r, _ := storeRun(t, s, threadID, runID, parent, datas...)
	if err := s.Checkpoint(context.Background(), threadID, r.RunID); err != nil {
		t.Fatal(err)
	}
}

// storeRun stores an ended run of datas as recordRun does, without its checkpoint, and
// returns its metadata as created, with the status it ended with and its last seq, and the
// events stored.
func storeRun(t testing.TB, s *thread.Service, threadID, runID, parent string, datas ...string) (recorder.Run, []recorder.Event) {
	t.Helper()
	ctx := context.Background()
	r, err := s.StartRun(ctx, recorder.Run{ThreadID: threadID, RunID: runID, ParentRunID: parent})
	if err != nil {
		t.Fatal(err)
	}
	var evs []recorder.Event
	for i, d := range datas {
		var typ struct{ Type string }
		json.Unmarshal([]byte(d), &typ)
		seq := int64(i + 1)
		frame := "data: " + d + "\nid: " + recorder.Cursor{RunID: runID, Epoch: r.Epoch, Seq: seq}.String() + "\n\n"
		evs = append(evs, recorder.Event{Seq: seq, Type: typ.Type, Frame: []byte(frame)})
	}
	if err := s.Store().Append(ctx, []recorder.Batch{{Run: r, Events: evs}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Store().FinishRun(ctx, threadID, runID, recorder.StatusFinished, "", int64(len(evs))); err != nil {
		t.Fatal(err)
	}
	r.Status, r.LastSeq = recorder.StatusFinished, int64(len(evs))
	return r, evs
}

// keptOf is what the proxy keeps of records it handed the store (their type and data, in
// order).
func keptOf(t testing.TB, recs []recorder.Event) *thread.KeptEvents {
	t.Helper()
	var k thread.KeptEvents
	for _, rec := range recs {
		data, err := thread.FrameData(rec.Frame)
		if err != nil {
			t.Fatal(err)
		}
		k.Add(rec.Type, data)
	}
	return &k
}

// chatRun is the events of one chat turn: the user's message in RUN_STARTED.input, a state
// change, the assistant's answer msgID (with a < and an & that JSON encoders like to escape).
func chatRun(threadID, runID, msgID string) []string {
	return []string{
		fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":%q,"input":{"threadId":%q,"runId":%q,"messages":[{"id":"u-%s","role":"user","content":"question <%s> & more"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}}`,
			threadID, runID, threadID, runID, msgID, msgID),
		fmt.Sprintf(`{"type":"STATE_SNAPSHOT","snapshot":{"turn":%q,"history":["a","b"]}}`, runID),
		`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/history/-","value":"c"}]}`,
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_START","messageId":%q,"role":"assistant"}`, msgID),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":"hi <b>"}`, msgID),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":" & bye"}`, msgID),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_END","messageId":%q}`, msgID),
		`{"type":"STEP_STARTED","stepName":"s"}`,
		`{"type":"STEP_FINISHED","stepName":"s"}`,
		fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":%q}`, threadID, runID),
	}
}

// recordChatRun stores a finished chat run whose assistant message is msgID.
func recordChatRun(t testing.TB, s *thread.Service, threadID, runID, msgID string) {
	t.Helper()
	recordRun(t, s, threadID, runID, "", chatRun(threadID, runID, msgID)...)
}

// noCheckpoints is a store that keeps no checkpoint: every branch is folded from the events.
type noCheckpoints struct{ recorder.Store }

func (noCheckpoints) PutCheckpoint(context.Context, string, string, []byte) error { return nil }
func (noCheckpoints) WriteCheckpoints(_ context.Context, _ string, writes []recorder.CheckpointWrite) (int, error) {
	for i, w := range writes {
		if w.Append { // (there is no checkpoint to append to)
			return i, recorder.ErrNotFound
		}
	}
	return len(writes), nil
}
func (noCheckpoints) Checkpoint(context.Context, string, string) ([]byte, error) {
	return nil, recorder.ErrNotFound
}

// checkpointBytes sums the checkpoint bytes of a thread's runs.
func checkpointBytes(t testing.TB, store recorder.Store, threadID string) int {
	t.Helper()
	runs, err := store.Runs(context.Background(), threadID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range runs {
		data, err := store.Checkpoint(context.Background(), threadID, r.RunID)
		if err == nil {
			n += len(data)
		}
	}
	return n
}

// sameBranch checks that s's branch through runID is byte for byte the branch folded from the
// events alone.
func sameBranch(t *testing.T, s *thread.Service, threadID, runID string) {
	t.Helper()
	got, err := s.Branch(t.Context(), threadID, runID)
	if err != nil {
		t.Fatalf("Branch(%s) = %v", runID, err)
	}
	truth := newService(t, thread.Config{Store: noCheckpoints{s.Store()}})
	want, err := truth.Branch(t.Context(), threadID, runID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, want, func(a, b compact.Event) bool { return a.Type == b.Type && bytes.Equal(a.Raw, b.Raw) }) {
		t.Fatalf("Branch(%s) from checkpoints = %d events, folded from the events = %d events; first: %.300s / %.300s",
			runID, len(got), len(want), rawOf(got), rawOf(want))
	}
	// The held message ids (from the checkpoint) are those the client holds after replaying.
	messages, _, err := compact.Replay(want)
	if err != nil {
		t.Fatal(err)
	}
	known, err := s.MessageIDs(t.Context(), threadID, runID)
	if ids := compact.MessageIDs(messages); err != nil || !maps.Equal(known, maps.Collect(func(yield func(string, bool) bool) {
		for _, id := range ids {
			if !yield(id, true) {
				return
			}
		}
	})) {
		t.Fatalf("MessageIDs(%s) = %v, %v; the replayed branch holds %v", runID, slices.Sorted(maps.Keys(known)), err, ids)
	}
}

func rawOf(evs []compact.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.Write(e.Raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// eventBytes sums the stored frame bytes of a thread's runs.
func eventBytes(t testing.TB, store recorder.Store, threadID string) int {
	t.Helper()
	runs, err := store.Runs(context.Background(), threadID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range runs {
		evs, err := store.Events(context.Background(), threadID, r.RunID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			n += len(e.Frame)
		}
	}
	return n
}

// TestCheckpointsLinear: the checkpoint bytes of a chat thread stay within a constant factor
// of its event bytes as it grows (whole-branch checkpoints: about runs/4 times them at this
// size), and every run's branch read from them is exactly the branch folded from the events,
// on the main line and on forks from an early run.
func TestCheckpointsLinear(t *testing.T) {
	for _, runs := range []int{100, 200} {
		s := newService(t, thread.Config{})
		for i := 1; i <= runs; i++ {
			recordChatRun(t, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
		}
		if runs == 100 {
			for _, i := range []int{1, 2, 3, 50, 99, 100} {
				sameBranch(t, s, "t", fmt.Sprintf("r%d", i))
			}
			recordRun(t, s, "t", "fork", "r3", chatRun("t", "fork", "mf")...)
			recordRun(t, s, "t", "fork2", "fork", chatRun("t", "fork2", "mf2")...)
			recordRun(t, s, "t", "fork3", "r99", chatRun("t", "fork3", "mf3")...)
			for _, run := range []string{"fork", "fork2", "fork3", "r100"} {
				sameBranch(t, s, "t", run)
			}
		}
		cp, ev := checkpointBytes(t, s.Store(), "t"), eventBytes(t, s.Store(), "t")
		t.Logf("%d runs: checkpoint bytes %d, event bytes %d (x%.2f)", runs, cp, ev, float64(cp)/float64(ev))
		if cp > 2*ev {
			t.Errorf("%d runs: checkpoint bytes %d, more than twice the event bytes %d", runs, cp, ev)
		}
	}
}

// writeCounter is a store that counts the checkpoint bytes written to it and its store calls
// that write checkpoints.
type writeCounter struct {
	recorder.Store
	written, calls atomic.Int64
}

func (w *writeCounter) PutCheckpoint(ctx context.Context, threadID, runID string, data []byte) error {
	w.calls.Add(1)
	w.written.Add(int64(len(data)))
	return w.Store.PutCheckpoint(ctx, threadID, runID, data)
}

func (w *writeCounter) WriteCheckpoints(ctx context.Context, threadID string, writes []recorder.CheckpointWrite) (int, error) {
	w.calls.Add(1)
	for _, x := range writes {
		w.written.Add(int64(len(x.Data)))
	}
	return w.Store.WriteCheckpoints(ctx, threadID, writes)
}

// TestCheckpointWritesPerRun: what a chat run's end writes of checkpoints is about the size
// of the run, not of its thread: a run's delta is appended to its segment (a segment written
// whole every run, as before, wrote 113 times the run's event bytes per run at runs 201-300, and
// more the longer the thread); a new segment's base, every so often, is the rest. The delta and
// the run's pointer go in one store call (two before). It also checks the branches read back
// from the appended segments, on the main line and on a fork.
func TestCheckpointWritesPerRun(t *testing.T) {
	mem := recorder.NewMemoryStore(recorder.MemoryConfig{})
	t.Cleanup(func() { mem.Close() })
	counted := &writeCounter{Store: mem}
	s := newService(t, thread.Config{Store: counted})
	const runs = 300
	var from, fromCalls int64
	for i := 1; i <= runs; i++ {
		if i == 201 {
			from, fromCalls = counted.written.Load(), counted.calls.Load()
		}
		recordChatRun(t, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
	}
	written, calls := counted.written.Load()-from, counted.calls.Load()-fromCalls
	perRun := eventBytes(t, mem, "t") / runs
	t.Logf("runs 201-300: %d checkpoint bytes written, %.1f per run, %.2f times a run's %d event bytes; %d store calls",
		written, float64(written)/100, float64(written)/100/float64(perRun), perRun, calls)
	if calls > 110 {
		t.Errorf("runs 201-300 made %d checkpoint writing calls, want about one per run (a delta and its pointer together)", calls)
	}
	if written > 100*4*int64(perRun) {
		t.Errorf("runs 201-300 wrote %d checkpoint bytes, more than 4 times their event bytes (%d each): the writes grow with the thread", written, perRun)
	}
	recordRun(t, s, "t", "fork", "r250", chatRun("t", "fork", "mf")...)
	fresh := newService(t, thread.Config{Store: mem}) // (reads the segments, not its memory)
	for _, run := range []string{"r201", "r250", "r299", "r300", "fork"} {
		sameBranch(t, fresh, "t", run)
	}
}

// TestChatThreadLiveMemory: what a thread's checkpoints keep in memory (its last branch and
// segment, recentBranches) grows with the thread, not with its square. Each run's delta in
// the segment kept in memory used to alias its run's whole MESSAGES_SNAPSHOT: 300 runs kept
// ~30 times the stored bytes alive.
func TestChatThreadLiveMemory(t *testing.T) {
	mem := recorder.NewMemoryStore(recorder.MemoryConfig{})
	t.Cleanup(func() { mem.Close() })
	s := newService(t, thread.Config{Store: mem})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	long := strings.Repeat("an answer of some length. ", 20)
	for i := 1; i <= 300; i++ {
		run, msg := fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i)
		datas := chatRun("t", run, msg)
		datas = slices.Insert(datas, 5, fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":%q}`, msg, long))
		recordRun(t, s, "t", run, "", datas...)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	stored := eventBytes(t, mem, "t") + checkpointBytes(t, mem, "t")
	live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("300 runs: %d bytes live, %d bytes stored (x%.1f)", live, stored, float64(live)/float64(stored))
	if live > 8*int64(stored) {
		t.Errorf("300 runs keep %d bytes live, more than 8 times the %d bytes stored: the thread's memory grows faster than the thread", live, stored)
	}
	runtime.KeepAlive(s)
}

// TestCheckpointCorruptRebuilt: a damaged checkpoint (a byte changed inside a message of a
// segment or in a packed segment, a delta that keeps more than its parent has, a missing segment, a truncated record,
// an unknown version, a checksum that does not match) is detected and the branch is rebuilt
// from the events and stored again, never served.
func TestCheckpointCorruptRebuilt(t *testing.T) {
	s := newService(t, thread.Config{})
	ctx := t.Context()
	for i := 1; i <= 6; i++ {
		recordChatRun(t, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
	}
	store := s.Store()
	get := func(run string) []byte {
		data, err := store.Checkpoint(ctx, "t", run)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	put := func(run string, data []byte) {
		if err := store.PutCheckpoint(ctx, "t", run, data); err != nil {
			t.Fatal(err)
		}
	}
	segData, r4 := get("r1"), get("r4")
	if len(r4) > 200 || !bytes.Contains(r4, []byte("r1")) {
		t.Fatalf("r4's checkpoint is not a small pointer to r1's segment: %q", r4)
	}
	cases := []struct {
		name string
		run  string // whose record is damaged
		data func() []byte
	}{
		{"a byte changed in a message of the segment", "r1", func() []byte {
			return bytes.Replace(segData, []byte(`hi <b> & bye`), []byte(`hi <i> & bye`), 1)
		}},
		{"a delta keeping more than its parent has", "r1", func() []byte { return thread.CorruptRecord(segData, "keep-more") }},
		{"truncated", "r4", func() []byte { return r4[:len(r4)/2] }},
		{"truncated segment", "r1", func() []byte { return segData[:len(segData)-3] }},
		{"unknown version", "r4", func() []byte { return []byte(`{"v":9,"events":[]}`) }},
		{"checksum", "r4", func() []byte { return thread.CorruptRecord(r4, "checksum") }},
		{"names a run without a segment", "r4", func() []byte { return thread.CorruptRecord(r4, "seg:r3") }},
		{"names an unknown run", "r4", func() []byte { return thread.CorruptRecord(r4, "seg:nope") }},
		{"a byte changed in a packed segment", "r1", func() []byte {
			p := thread.PackRecord(segData, false)
			p[len(p)-len(p)/3] ^= 0x10
			return p
		}},
		{"a packed segment's CRC", "r1", func() []byte { return thread.PackRecord(segData, true) }},
		{"truncated packed segment", "r1", func() []byte { p := thread.PackRecord(segData, false); return p[:len(p)-3] }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			put(tc.run, tc.data())
			sameBranch(t, s, "t", "r4")
			// Rebuilt: read again, the stored checkpoint now serves the exact branch.
			sameBranch(t, s, "t", "r4")
			if bytes.Equal(get(tc.run), tc.data()) {
				t.Errorf("%s's damaged checkpoint was not stored again", tc.run)
			}
			put("r1", segData) // the other runs' deltas, for the next case
			put("r4", r4)
		})
	}
	// A whole segment lost: every run of it is rebuilt.
	if err := store.PutCheckpoint(ctx, "t", "r1", []byte("AGCP\x02")); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		sameBranch(t, s, "t", fmt.Sprintf("r%d", i))
	}
}

// TestCheckpointLegacy: a version 1 checkpoint (the whole branch, written before segments)
// is read as it is, and the next run's checkpoint builds on it.
func TestCheckpointLegacy(t *testing.T) {
	s := newService(t, thread.Config{})
	ctx := t.Context()
	for i := 1; i <= 3; i++ {
		recordChatRun(t, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
	}
	branch, err := s.Branch(ctx, "t", "r3")
	if err != nil {
		t.Fatal(err)
	}
	v1 := map[string]any{"v": 1, "events": slices.Collect(func(yield func(json.RawMessage) bool) {
		for _, e := range branch {
			if !yield(e.Raw) {
				return
			}
		}
	}), "messageIds": []string{"m1", "m2", "m3"}}
	data, _ := json.Marshal(v1)
	if err := s.Store().PutCheckpoint(ctx, "t", "r3", data); err != nil {
		t.Fatal(err)
	}
	same := func(run string) {
		t.Helper()
		got, err := s.Branch(ctx, "t", run)
		if err != nil {
			t.Fatal(err)
		}
		want, err := newService(t, thread.Config{Store: noCheckpoints{s.Store()}}).Branch(ctx, "t", run)
		if err != nil {
			t.Fatal(err)
		}
		// Version 1 was written by json.Marshal, which escapes <, > and &: the same JSON.
		gm, gs, err1 := compact.Replay(got)
		wm, ws, err2 := compact.Replay(want)
		if err1 != nil || err2 != nil || !jsonEqual(gm, wm) || !jsonEqual(gs, ws) {
			t.Fatalf("Branch(%s) replays to %s %s (%v), want %s %s (%v)", run, gm, gs, err1, wm, ws, err2)
		}
	}
	same("r3")
	if got, _ := s.Store().Checkpoint(ctx, "t", "r3"); !bytes.Equal(got, data) {
		t.Errorf("the version 1 checkpoint was rewritten: %.200s", got)
	}
	recordChatRun(t, s, "t", "r4", "m4")
	same("r4")
	known, err := s.MessageIDs(ctx, "t", "r4")
	if got := slices.Sorted(maps.Keys(known)); err != nil || !slices.Equal(got, []string{"m1", "m2", "m3", "m4", "u-m1", "u-m2", "u-m3", "u-m4"}) {
		t.Errorf("MessageIDs(r4) = %v, %v", got, err)
	}
}

// countingStore counts the checkpoint, event and run reads.
type countingStore struct {
	recorder.Store
	checkpoints, events atomic.Int64
	threadRuns          atomic.Int64 // Runs calls
	runs                sync.Map     // run id → *atomic.Int64: its Run reads
}

func (c *countingStore) Run(ctx context.Context, threadID, runID string) (recorder.Run, error) {
	n, _ := c.runs.LoadOrStore(runID, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	return c.Store.Run(ctx, threadID, runID)
}

// countingService returns a service on a memory store whose reads are counted; the store's
// Store is the memory store itself (reads through it are not counted).
func countingService(t *testing.T) (*thread.Service, *countingStore) {
	t.Helper()
	mem := recorder.NewMemoryStore(recorder.MemoryConfig{})
	t.Cleanup(func() { mem.Close() })
	store := &countingStore{Store: mem}
	return newService(t, thread.Config{Store: store}), store
}

// allRunReads returns how many times any run's metadata was read.
func (c *countingStore) allRunReads() int64 {
	var n int64
	c.runs.Range(func(_, v any) bool {
		n += v.(*atomic.Int64).Load()
		return true
	})
	return n
}

// runReads returns how many times runID's metadata was read.
func (c *countingStore) runReads(runID string) int64 {
	if n, ok := c.runs.Load(runID); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

func (c *countingStore) Checkpoint(ctx context.Context, threadID, runID string) ([]byte, error) {
	c.checkpoints.Add(1)
	return c.Store.Checkpoint(ctx, threadID, runID)
}

func (c *countingStore) Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]recorder.Event, error) {
	c.events.Add(1)
	return c.Store.Events(ctx, threadID, runID, after, limit)
}

// TestKnownMessageIDs: a run start whose request repeats the branch's messages learns the
// held ids from one small checkpoint read (no events, no segment); a request that lacks some,
// reorders them or sends others gets the exact set from the branch.
func TestKnownMessageIDs(t *testing.T) {
	s, store := countingService(t)
	ctx := t.Context()
	var held []string
	for i := 1; i <= 30; i++ {
		recordChatRun(t, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
		held = append(held, fmt.Sprintf("u-m%d", i), fmt.Sprintf("m%d", i))
	}
	want := slices.Sorted(slices.Values(held))
	cases := []struct {
		name string
		sent []string
		fast bool
	}{
		{"the branch's messages and a new one", append(slices.Clone(held), "new"), true},
		{"the branch's messages, an id-less one among them", append(append(slices.Clone(held[:5]), ""), held[5:]...), true},
		{"only a new message", []string{"new"}, false},
		{"reordered", append([]string{held[1], held[0]}, held[2:]...), false},
		{"one changed", append(slices.Clone(held[:len(held)-1]), "other"), false},
	}
	for _, tc := range cases {
		store.checkpoints.Store(0)
		store.events.Store(0)
		known, err := s.KnownMessageIDs(ctx, "t", "r30", "", tc.sent)
		if got := slices.Sorted(maps.Keys(known)); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: KnownMessageIDs = %v, %v, want %v", tc.name, got, err, want)
		}
		if fast := store.checkpoints.Load() == 1 && store.events.Load() == 0; fast != tc.fast {
			t.Errorf("%s: %d checkpoint and %d event reads, want the one-read path: %v", tc.name, store.checkpoints.Load(), store.events.Load(), tc.fast)
		}
	}
	if data, _ := store.Store.Checkpoint(ctx, "t", "r30"); len(data) > 200 {
		t.Errorf("r30's checkpoint record is %d bytes, want a small pointer: %s", len(data), data)
	}
	// With r30's epoch (the run start's Run.ParentEpoch), the branch built here a moment ago
	// answers every case without a read; another epoch is not that branch's, and is read.
	r30, err := store.Store.Run(ctx, "t", "r30")
	if err != nil {
		t.Fatal(err)
	}
	for _, epoch := range []string{r30.Epoch, recorder.NewEpoch()} {
		for _, tc := range cases {
			store.checkpoints.Store(0)
			store.events.Store(0)
			known, err := s.KnownMessageIDs(ctx, "t", "r30", epoch, tc.sent)
			if got := slices.Sorted(maps.Keys(known)); err != nil || !slices.Equal(got, want) {
				t.Errorf("%s, epoch %s: KnownMessageIDs = %v, %v, want %v", tc.name, epoch, got, err, want)
			}
			if reads, wantReads := store.checkpoints.Load()+store.events.Load(), epoch != r30.Epoch; (reads > 0) != wantReads {
				t.Errorf("%s, epoch %s: %d reads, want reads: %v", tc.name, epoch, reads, wantReads)
			}
		}
	}
	// A run start whose parent has no readable checkpoint yet (the checkpoint loop has not
	// built it) gets the exact ids without storing one: it does not wait for that write.
	if err := store.Store.PutCheckpoint(ctx, "t", "r30", []byte("not yet")); err != nil {
		t.Fatal(err)
	}
	known, err := s.KnownMessageIDs(ctx, "t", "r30", "", []string{"new"})
	if got := slices.Sorted(maps.Keys(known)); err != nil || !slices.Equal(got, want) {
		t.Errorf("KnownMessageIDs without the parent's checkpoint = %v, %v, want %v", got, err, want)
	}
	if data, _ := store.Store.Checkpoint(ctx, "t", "r30"); string(data) != "not yet" {
		t.Errorf("a run start's id read stored a checkpoint: %.100q", data)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	da, _ := json.Marshal(x)
	db, _ := json.Marshal(y)
	return bytes.Equal(da, db)
}

// TestBranchShared: concurrent reads of one branch (a run start and the checkpoint loop asking
// for the run that just ended) share one build and each get the exact branch, which they may
// extend without touching the other's.
func TestBranchShared(t *testing.T) {
	s := newService(t, thread.Config{})
	for i := 1; i <= 5; i++ {
		recordChatRun(t, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
	}
	recordChatRun(t, s, "t", "r6", "m6")
	if err := s.Store().PutCheckpoint(t.Context(), "t", "r6", []byte("damaged")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([][]compact.Event, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs, err := s.Branch(t.Context(), "t", "r6")
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = append(evs, compact.Event{Type: "CUSTOM", Raw: []byte(fmt.Sprintf(`{"type":"CUSTOM","name":"%d"}`, i))})
		}()
	}
	wg.Wait()
	for i, evs := range got {
		if want := fmt.Sprintf(`"name":"%d"`, i); len(evs) == 0 || !bytes.Contains(evs[len(evs)-1].Raw, []byte(want)) {
			t.Errorf("caller %d: its appended event was overwritten", i)
		}
	}
	sameBranch(t, s, "t", "r6")
}

// TestCheckpointPackedSegmentExtended: a run whose parent's branch is in a packed segment
// (version 3) extends it: the segment is read packed, stored unpacked with the new delta, and
// every branch reads exactly.
func TestCheckpointPackedSegmentExtended(t *testing.T) {
	s := newService(t, thread.Config{})
	ctx := t.Context()
	for i := 1; i <= 3; i++ {
		recordChatRun(t, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
	}
	store := s.Store()
	seg, err := store.Checkpoint(ctx, "t", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PutCheckpoint(ctx, "t", "r1", thread.PackRecord(seg, false)); err != nil {
		t.Fatal(err)
	}
	sameBranch(t, newService(t, thread.Config{Store: store}), "t", "r3")
	recordChatRun(t, s, "t", "r4", "m4")
	data, err := store.Checkpoint(ctx, "t", "r1")
	if err != nil || !bytes.HasPrefix(data, []byte("AGCP\x02")) || !bytes.Contains(data, []byte("r4")) {
		t.Fatalf("r1's segment after r4 = %.20q, %v, want unpacked with r4's delta", data, err)
	}
	for i := 1; i <= 4; i++ {
		sameBranch(t, newService(t, thread.Config{Store: store}), "t", fmt.Sprintf("r%d", i))
	}
}

// TestCheckpointExtendsRecentBranch: the checkpoint of a run whose parent's checkpoint this
// service just built extends that branch: it reads the run's own events and no segment (the
// parent's run record is read to check it is the same run). A thread deleted and made again
// with the same run ids (new epochs) is not served the old branch.
func TestCheckpointExtendsRecentBranch(t *testing.T) {
	s, store := countingService(t)
	ctx := t.Context()
	for i := 1; i <= 20; i++ {
		store.checkpoints.Store(0)
		store.events.Store(0)
		recordChatRun(t, s, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("m%d", i))
		// r's own (missing) checkpoint, then nothing but r's events.
		if c, e := store.checkpoints.Load(), store.events.Load(); i > 1 && (c != 1 || e != 1) {
			t.Fatalf("checkpoint of r%d: %d checkpoint and %d event reads, want 1 and 1", i, c, e)
		}
	}
	for i := 1; i <= 20; i++ {
		sameBranch(t, s, "t", fmt.Sprintf("r%d", i))
	}
	// The same ids again, other messages: r1 to r20 (recorded without checkpoints, by a
	// service whose store keeps none), then r21 on them, whose checkpoint must not extend the
	// old r20.
	if err := s.Delete(ctx, "", "t"); err != nil {
		t.Fatal(err)
	}
	other := newService(t, thread.Config{Store: noCheckpoints{store.Store}})
	for i := 1; i <= 20; i++ {
		recordChatRun(t, other, "t", fmt.Sprintf("r%d", i), fmt.Sprintf("other%d", i))
	}
	recordChatRun(t, s, "t", "r21", "other21")
	sameBranch(t, s, "t", "r21")
	known, err := s.MessageIDs(ctx, "t", "r21")
	if err != nil || len(known) != 42 || !known["other20"] || known["m20"] {
		t.Fatalf("MessageIDs(r21) after the thread was made again = %v, %v", known, err)
	}
}

// TestCheckpointEnded: the checkpoint of a run whose end its caller just recorded (the proxy's,
// before the terminal event) reads neither the run's own checkpoint nor its metadata, and,
// given the events it recorded, not those either; nor its parent's metadata when the branch
// built a moment ago is the parent's by the epoch the run's creation saw (Run.ParentEpoch).
// Records that are not exactly the run's events 1..LastSeq are read back instead. What it stores is what Checkpoint stores: every branch
// read from the checkpoints is the branch folded from the events, on the main line, on a
// fork, and from a service with nothing in memory. A run still running is refused.
func TestCheckpointEnded(t *testing.T) {
	s, store := countingService(t)
	ctx := t.Context()
	// keep is what the caller hands over of the run's events; ckpts how many checkpoint reads
	// the parent's branch takes (none for the run built just before, two for an older one:
	// its record and its segment); reads how many event reads the run's own events take.
	ended := func(svc *thread.Service, runID, parent, msgID string, keep func([]recorder.Event) *thread.KeptEvents, ckpts, reads int64) {
		t.Helper()
		r, evs := storeRun(t, svc, "t", runID, parent, chatRun("t", runID, msgID)...)
		store.checkpoints.Store(0)
		store.events.Store(0)
		before := store.allRunReads()
		if err := svc.CheckpointEnded(ctx, r, keep(evs)); err != nil {
			t.Fatal(err)
		}
		if c, e, rr := store.checkpoints.Load(), store.events.Load(), store.allRunReads()-before; c != ckpts || e != reads || rr != 0 {
			t.Fatalf("CheckpointEnded(%s): %d checkpoint, %d event and %d run reads; want %d, %d and 0", runID, c, e, rr, ckpts, reads)
		}
	}
	all := func(evs []recorder.Event) *thread.KeptEvents { return keptOf(t, evs) }
	none := func([]recorder.Event) *thread.KeptEvents { return nil }
	for i := 1; i <= 6; i++ {
		ended(s, fmt.Sprintf("r%d", i), "", fmt.Sprintf("m%d", i), all, 0, 0)
	}
	for i := 7; i <= 9; i++ {
		ended(s, fmt.Sprintf("r%d", i), "", fmt.Sprintf("m%d", i), none, 0, 1)
	}
	// Kept events missing the last one, or one more than the run's last seq: read back.
	ended(s, "r10", "", "m10", func(evs []recorder.Event) *thread.KeptEvents { return keptOf(t, evs[:len(evs)-1]) }, 0, 1)
	ended(s, "r11", "", "m11", func(evs []recorder.Event) *thread.KeptEvents {
		k := keptOf(t, evs)
		k.Add("CUSTOM", []byte(`{"type":"CUSTOM","name":"x","value":1}`))
		return k
	}, 0, 1)
	ended(s, "r12", "", "m12", all, 0, 0)
	// A parent epoch other than the branch's built here (as if the parent had been made
	// again since): the parent's metadata is read to check, and the branch is still right.
	stale, evs := storeRun(t, s, "t", "stale", "", chatRun("t", "stale", "ms")...)
	stale.ParentEpoch = recorder.NewEpoch()
	before := store.allRunReads()
	if err := s.CheckpointEnded(ctx, stale, keptOf(t, evs)); err != nil {
		t.Fatal(err)
	}
	if n := store.allRunReads() - before; n != 1 {
		t.Fatalf("CheckpointEnded with another parent epoch: %d run reads, want 1 (the parent's)", n)
	}
	ended(s, "fork", "r3", "mf", all, 2, 0)
	ended(s, "fork2", "fork", "mf2", all, 0, 0)
	for _, run := range []string{"r1", "r2", "r6", "r7", "r10", "r11", "r12", "stale", "fork", "fork2"} {
		sameBranch(t, s, "t", run)
	}
	// A second service (another replica, or this one restarted: nothing built in memory)
	// reads the parent's checkpoint instead.
	s2 := newService(t, thread.Config{Store: store})
	ended(s2, "r13", "r12", "m13", all, 2, 0)
	sameBranch(t, s2, "t", "r13")
	known, err := s2.MessageIDs(ctx, "t", "r13")
	if err != nil || len(known) != 26 || !known["m13"] || !known["u-m1"] {
		t.Fatalf("MessageIDs(r13) = %v, %v", known, err)
	}

	running, err := s.StartRun(ctx, recorder.Run{ThreadID: "t2", RunID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckpointEnded(ctx, running, nil); err == nil {
		t.Fatal("CheckpointEnded of a running run: no error")
	}
}

// Runs counts the reads of every run of a thread (BranchInput's check of the lineage).
func (c *countingStore) Runs(ctx context.Context, threadID string) ([]recorder.Run, error) {
	c.threadRuns.Add(1)
	return c.Store.Runs(ctx, threadID)
}

// TestBranchInputFromMemory: hydration of a run start continuing a run whose branch this
// process built from all its events (kept, or read back from a record without gaps) reads only
// that run's record, not every run of the thread nor the branch's checkpoint; a branch whose
// wholeness is not known (its run's events read back at its end, or another replica's) is
// checked against every run's record once, then known. Every answer is the branch's.
func TestBranchInputFromMemory(t *testing.T) {
	s, store := countingService(t)
	ctx := t.Context()
	input := func(svc *thread.Service, runID, epoch string, runsReads, ckptReads int64) hydrate.Branch {
		t.Helper()
		store.threadRuns.Store(0)
		store.checkpoints.Store(0)
		b, ended, err := svc.BranchInput(ctx, "t", runID, epoch)
		if err != nil || !ended {
			t.Fatalf("BranchInput(%s) = %v, %v", runID, ended, err)
		}
		if r, c := store.threadRuns.Load(), store.checkpoints.Load(); r != runsReads || c != ckptReads {
			t.Fatalf("BranchInput(%s): %d reads of the thread's runs and %d checkpoint reads, want %d and %d", runID, r, c, runsReads, ckptReads)
		}
		return b
	}
	ids := func(b hydrate.Branch) []string {
		var out []string
		for _, m := range b.Messages {
			out = append(out, agui.MessageID(m))
		}
		return out
	}
	r1, evs := storeRun(t, s, "t", "r1", "", chatRun("t", "r1", "m1")...)
	if err := s.CheckpointEnded(ctx, r1, keptOf(t, evs)); err != nil {
		t.Fatal(err)
	}
	fast := input(s, "r1", r1.Epoch, 0, 0)
	if got := ids(fast); !slices.Equal(got, []string{"u-m1", "m1"}) {
		t.Fatalf("BranchInput(r1) messages %v, want [u-m1 m1]", got)
	}
	if !slices.Equal(ids(input(s, "r1", "", 1, 1)), ids(fast)) {
		t.Fatal("BranchInput(r1) without the epoch answers another branch")
	}
	// r2's events read back at its end: its own record is not read then, so its branch's
	// wholeness is unknown until BranchInput checks the runs once.
	r2, _ := storeRun(t, s, "t", "r2", "", chatRun("t", "r2", "m2")...)
	if err := s.CheckpointEnded(ctx, r2, nil); err != nil {
		t.Fatal(err)
	}
	checked := input(s, "r2", r2.Epoch, 1, 2) // (its pointer and its segment, r1's)
	again := input(s, "r2", r2.Epoch, 0, 0)
	if want := []string{"u-m1", "m1", "u-m2", "m2"}; !slices.Equal(ids(checked), want) || !slices.Equal(ids(again), want) {
		t.Fatalf("BranchInput(r2) messages %v then %v, want %v", ids(checked), ids(again), want)
	}
	// Another replica built nothing: it reads the runs and the checkpoint.
	s2 := newService(t, thread.Config{Store: store})
	if got := ids(input(s2, "r2", r2.Epoch, 1, 2)); !slices.Equal(got, ids(again)) {
		t.Fatalf("BranchInput(r2) on another replica: %v", got)
	}
}
