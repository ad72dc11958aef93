package thread_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
	"github.com/agui-proxy/agui-proxy/thread"
)

// record stores a run's events as the proxy's pump does (each frame with its cursor id) and
// ends the run.
func record(ctx context.Context, store recorder.Store, run recorder.Run, events ...string) {
	var evs []recorder.Event
	for i, data := range events {
		seq := int64(i + 1)
		id := recorder.Cursor{RunID: run.RunID, Epoch: run.Epoch, Seq: seq}.String()
		frame, _ := sse.AppendEvent(nil, sse.Event{ID: id, Data: []byte(data)})
		typ, _ := agui.EventType([]byte(data))
		evs = append(evs, recorder.Event{Seq: seq, Type: typ, Frame: frame})
	}
	if err := store.Append(ctx, []recorder.Batch{{Run: run, Events: evs}}); err != nil {
		panic(err)
	}
	store.FinishRun(ctx, run.ThreadID, run.RunID, recorder.StatusFinished, "", int64(len(evs)))
}

// A Service starts runs under the busy rule and access check, and serves a thread's branch
// compacted from its checkpoint.
func Example() {
	ctx := context.Background()
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	defer store.Close()
	threads, err := thread.New(thread.Config{Store: store, IdentityHeader: "X-User"})
	if err != nil {
		fmt.Println(err)
		return
	}

	r1, _ := threads.StartRun(ctx, recorder.Run{ThreadID: "t1", RunID: "r1", Owner: "alice"})
	// One running run per thread: a second start is refused until r1 ends.
	_, err = threads.StartRun(ctx, recorder.Run{ThreadID: "t1", RunID: "r2", Owner: "alice"})
	fmt.Println(errors.Is(err, recorder.ErrThreadBusy))
	record(ctx, store, r1,
		`{"type":"RUN_STARTED","threadId":"t1","runId":"r1","input":{"messages":[{"id":"u1","role":"user","content":"Hi"}]}}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hello"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`,
		`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`)
	// Past the access check, threads are named by their store key (the id in alice's
	// namespace), as StartRun returned it.
	threads.Checkpoint(ctx, r1.ThreadID, "r1")

	// The next run continues the latest one; the messages its client already holds are known.
	r2, _ := threads.StartRun(ctx, recorder.Run{ThreadID: "t1", RunID: "r2", Owner: "alice"})
	held, _ := threads.MessageIDs(ctx, r2.ThreadID, r2.ParentRunID)
	fmt.Println(r2.ParentRunID, slices.Sorted(maps.Keys(held)))

	// Every identity has its own thread ids: to another identity, alice's t1 is unknown.
	_, err = threads.Access(ctx, "mallory", "t1")
	fmt.Println(errors.Is(err, recorder.ErrThreadNotFound))

	branch, _ := threads.Branch(ctx, r1.ThreadID, "r1")
	for _, e := range branch {
		fmt.Println(string(e.Raw))
	}
	// Output:
	// true
	// r1 [m1 u1]
	// true
	// {"type":"RUN_STARTED","threadId":"t1","runId":"r1","input":{"messages":[]}}
	// {"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u1","role":"user","content":"Hi"},{"id":"m1","role":"assistant","content":"Hello"}]}
	// {"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}
}

// RunError is the one RUN_ERROR event the proxy writes when it ends a run itself; StatusFor
// is the status the store records for its code.
func ExampleRunError() {
	fmt.Println(string(thread.RunError(thread.CodeUpstreamIdle, "agui-proxy: the agent sent nothing for 60s")))
	fmt.Println(thread.StatusFor(thread.CodeUpstreamIdle), thread.StatusFor(thread.CodeInterrupted))
	// Output:
	// {"type":"RUN_ERROR","message":"agui-proxy: the agent sent nothing for 60s","code":"UPSTREAM_IDLE"}
	// error interrupted
}
