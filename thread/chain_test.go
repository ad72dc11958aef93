package thread_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// failingEvents fails every Events call after the first limit ones (limit < 0: none fails),
// as a store whose reads ran out of the request's time, and counts the calls.
type failingEvents struct {
	recorder.Store
	limit atomic.Int64
	calls atomic.Int64
}

var errOutOfTime = errors.New("the request's store deadline passed")

func (f *failingEvents) Events(ctx context.Context, th, run string, after int64, limit int) ([]recorder.Event, error) {
	n := f.calls.Add(1)
	if l := f.limit.Load(); l >= 0 && n > l {
		return nil, errOutOfTime
	}
	return f.Store.Events(ctx, th, run, after, limit)
}

// importChain writes a linear chain of n runs without checkpoints (as an import does), each
// with 5 events, and returns the head's id.
func importChain(t *testing.T, s recorder.Store, thread string, n int) string {
	t.Helper()
	ctx := t.Context()
	for i := 1; i <= n; i++ {
		r := recorder.Run{ThreadID: thread, RunID: fmt.Sprintf("r%d", i), Epoch: recorder.NewEpoch(), Status: recorder.StatusRunning}
		if i > 1 {
			r.ParentRunID = fmt.Sprintf("r%d", i-1)
		}
		if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var evs []recorder.Event
		for seq, data := range []string{
			fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":%q,"input":{"messages":[{"id":"u%d","role":"user","content":"q"}]}}`, thread, r.RunID, i),
			fmt.Sprintf(`{"type":"TEXT_MESSAGE_START","messageId":"m%d","role":"assistant"}`, i),
			fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m%d","delta":"a"}`, i),
			fmt.Sprintf(`{"type":"TEXT_MESSAGE_END","messageId":"m%d"}`, i),
			fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":%q}`, thread, r.RunID),
		} {
			f := recorder.AppendCursor([]byte("data: "+data+"\nid: "), r.RunID, r.Epoch, int64(seq+1))
			evs = append(evs, recorder.Event{Seq: int64(seq + 1), Type: strings.Split(data, `"`)[3], Frame: append(f, "\n\n"...)})
		}
		if err := s.Append(ctx, []recorder.Batch{{Run: r, Events: evs}}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishRun(ctx, thread, r.RunID, recorder.StatusFinished, "", 5); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf("r%d", n)
}

// TestLongChainReadKeepsItsProgress: the first read of a long chain without checkpoints
// stores checkpoints on the way (each time it folded as many events again), so a read that
// runs out of time part way leaves its work stored, and the next read goes on from there:
// it reads the events of fewer runs than the chain has, and builds the same branch.
func TestLongChainReadKeepsItsProgress(t *testing.T) {
	mem := recorder.NewMemoryStore(recorder.MemoryConfig{})
	defer mem.Close()
	const n = 3000 // 15,000 events: checkpoints after 4,096 and 8,192 folded
	head := importChain(t, mem, "t", n)
	f := &failingEvents{Store: mem}
	f.limit.Store(2500) // the first read runs out of time after 2,500 runs' events
	s := newService(t, thread.Config{Store: f})
	if _, err := s.Branch(t.Context(), "t", head); !errors.Is(err, errOutOfTime) {
		t.Fatalf("the first read = %v, want it out of time", err)
	}
	f.limit.Store(-1)
	f.calls.Store(0)
	events, err := s.Branch(t.Context(), "t", head)
	if err != nil {
		t.Fatal(err)
	}
	if c := f.calls.Load(); c >= 2500 {
		t.Fatalf("the second read read the events of %d runs: the first read's work was not kept", c)
	}
	// The whole branch: every run's two messages, in order.
	msgs, _, err := compact.Replay(events)
	if err != nil {
		t.Fatal(err)
	}
	var list []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(msgs, &list); err != nil || len(list) != 2*n || list[0].ID != "u1" || list[2*n-1].ID != fmt.Sprintf("m%d", n) {
		t.Fatalf("the branch read in two goes holds %d messages (%v), want %d from u1 to m%d", len(list), err, 2*n, n)
	}
	t.Logf("the second read read %d runs' events of %d", f.calls.Load(), n)
}
