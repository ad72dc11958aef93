package recorder_test

import (
	"context"
	"fmt"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// The proxy's pump records each frame through a Writer, as a Recording of its run; readers
// use the Store.
func Example() {
	ctx := context.Background()
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	w := recorder.NewWriter(recorder.WriterConfig{Store: store})
	defer w.Shutdown(ctx)

	run := recorder.Run{ThreadID: "thread-1", RunID: "run-1", Epoch: "abcdefgh", Owner: "alice", Route: "/agent"}
	if _, err := store.CreateRun(ctx, run, recorder.CreateOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	rec, err := w.Open(run) // the run's ids and epoch are checked once, here
	if err != nil {
		fmt.Println(err)
		return
	}
	for seq, typ := range []string{"RUN_STARTED", "RUN_FINISHED"} {
		id := recorder.AppendCursor([]byte("id: "), run.RunID, run.Epoch, int64(seq+1))
		frame := fmt.Appendf(id, "\ndata: {\"type\":%q}\n\n", typ)
		rec.Append(recorder.Event{Seq: int64(seq + 1), Type: typ, Frame: frame})
	}
	rec.Finish(recorder.StatusFinished, "", 2)
	w.Flush(ctx)

	evs, _ := store.Events(ctx, "thread-1", "run-1", 1, 0)
	r, _ := store.Run(ctx, "thread-1", "run-1")
	fmt.Printf("%s%s %d events, complete: %v\n", evs[0].Frame, r.Status, r.LastSeq, r.Complete(0))
	// Output:
	// id: run-1:abcdefgh:2
	// data: {"type":"RUN_FINISHED"}
	//
	// finished 2 events, complete: true
}

// A reader attaching to a run that is still being written gets what is stored, then each new
// event as it is appended, then io.EOF when the run ends.
func ExampleMemoryStore_Follow() {
	ctx := context.Background()
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	run := recorder.Run{ThreadID: "thread-1", RunID: "run-1", Epoch: "abcdefgh"}
	store.CreateRun(ctx, run, recorder.CreateOptions{})
	appendEvent := func(seq int64, typ string) {
		frame := fmt.Appendf(nil, "data: {\"type\":%q}\n\n", typ)
		store.Append(ctx, []recorder.Batch{{Run: run, Events: []recorder.Event{{Seq: seq, Type: typ, Frame: frame}}}})
	}
	appendEvent(1, "RUN_STARTED")

	sub, _ := store.Follow(ctx, "thread-1", "run-1", 0)
	defer sub.Close()
	go func() {
		appendEvent(2, "RUN_FINISHED")
		store.FinishRun(ctx, "thread-1", "run-1", recorder.StatusFinished, "", 2)
	}()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			fmt.Println(err) // io.EOF: the run ended and everything was delivered
			return
		}
		fmt.Println(ev.Seq, ev.Type)
	}
	// Output:
	// 1 RUN_STARTED
	// 2 RUN_FINISHED
	// EOF
}
