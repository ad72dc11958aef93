package attach_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
	"github.com/agui-proxy/agui-proxy/thread"
)

// seedThread records a thread of n events as runs of 1,000 (a user turn, a streamed answer of
// ~990 deltas, a state delta), every run finished.
func seedThread(b *testing.B, store recorder.Store, thread string, n int) {
	b.Helper()
	ctx := context.Background()
	parent := ""
	for r := 0; r*1000 < n; r++ {
		run := recorder.Run{ThreadID: thread, RunID: fmt.Sprintf("r%d", r), ParentRunID: parent, Epoch: recorder.NewEpoch(),
			Status: recorder.StatusRunning, Route: "default", CreatedAt: time.Now()}
		if _, err := store.CreateRun(ctx, run, recorder.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		msg := fmt.Sprintf("m%d", r)
		datas := []string{
			fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":%q,"input":{"threadId":%q,"runId":%q,"messages":[{"id":"u%d","role":"user","content":"question %d"}]}}`, thread, run.RunID, thread, run.RunID, r, r),
			fmt.Sprintf(`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/turn%d","value":%d}]}`, r, r),
			fmt.Sprintf(`{"type":"TEXT_MESSAGE_START","messageId":%q,"role":"assistant"}`, msg),
		}
		for len(datas) < 998 {
			datas = append(datas, fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":"token %d "}`, msg, len(datas)))
		}
		datas = append(datas, fmt.Sprintf(`{"type":"TEXT_MESSAGE_END","messageId":%q}`, msg),
			fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":%q}`, thread, run.RunID))
		if r == 0 {
			datas[1] = `{"type":"STATE_SNAPSHOT","snapshot":{}}`
		}
		evs := make([]recorder.Event, len(datas))
		for i, d := range datas {
			frame, _ := sse.AppendEvent(nil, sse.Event{ID: recorder.Cursor{RunID: run.RunID, Epoch: run.Epoch, Seq: int64(i + 1)}.String(), Data: []byte(d)})
			typ, _ := agui.EventType([]byte(d))
			evs[i] = recorder.Event{Seq: int64(i + 1), Type: typ, Frame: frame}
		}
		if err := store.Append(ctx, []recorder.Batch{{Run: run, Events: evs}}); err != nil {
			b.Fatal(err)
		}
		if err := store.FinishRun(ctx, thread, run.RunID, recorder.StatusFinished, "", int64(len(evs))); err != nil {
			b.Fatal(err)
		}
		parent = run.RunID
	}
}

// BenchmarkPrelude measures a thread attach (compacted prelude of a finished thread) for
// threads of 1k, 10k and 100k events. Checkpoints keep it flat: one checkpoint read plus the
// last run's events.
//
// The "no-checkpoints" rows are the same with a store that keeps none: every attach compacts
// the whole thread. prelude-bytes is what the client receives (the thread's messages grow with
// it: one answer per 1,000 events).
func BenchmarkPrelude(b *testing.B) {
	for _, mode := range []string{"checkpoints", "no-checkpoints"} {
		for _, n := range []int{1000, 10000, 100000} {
			b.Run(fmt.Sprintf("%s/events=%d", mode, n), func(b *testing.B) { benchPrelude(b, n, mode == "checkpoints") })
		}
	}
}

// noCheckpoints is a store that never keeps a checkpoint.
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

func benchPrelude(b *testing.B, n int, checkpoints bool) {
	mem := recorder.NewMemoryStore(recorder.MemoryConfig{})
	defer mem.Close()
	var store recorder.Store = mem
	if !checkpoints {
		store = noCheckpoints{mem}
	}
	seedThread(b, store, "bench", n)
	threads, err := thread.New(thread.Config{Store: store})
	if err != nil {
		b.Fatal(err)
	}
	h, err := attach.New(attach.Config{Threads: threads})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func() int64 {
		res, err := http.Get(srv.URL + "/agui/threads/bench/events")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatalf("status %d", res.StatusCode)
		}
		return n
	}
	// The first attach builds the missing checkpoints (the proxy does it as runs end).
	for r := 0; r*1000 < n; r++ {
		if err := threads.Checkpoint(context.Background(), "bench", fmt.Sprintf("r%d", r)); err != nil {
			b.Fatal(err)
		}
	}
	bytes := get()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		get()
	}
	b.ReportMetric(float64(bytes), "prelude-bytes")
}
