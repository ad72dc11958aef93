package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// eventReadsStore counts the reads of each run's events.
type eventReadsStore struct {
	recorder.Store
	mu    sync.Mutex
	reads map[string]int
}

func (s *eventReadsStore) Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]recorder.Event, error) {
	s.mu.Lock()
	s.reads[runID]++
	s.mu.Unlock()
	return s.Store.Events(ctx, threadID, runID, after, limit)
}

func (s *eventReadsStore) readsOf(runID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[runID]
}

// hiddenCheckpoints is a store whose checkpoints are never found: a branch read through it is
// folded from the events.
type hiddenCheckpoints struct{ recorder.Store }

func (hiddenCheckpoints) Checkpoint(context.Context, string, string) ([]byte, error) {
	return nil, recorder.ErrNotFound
}

// TestCheckpointFromKeptEvents: a run's checkpoint at its end is built from the events the
// pump handed the recorder (Config.CheckpointMemory) without reading them back, holds the
// branch folded from the stored events, and serves the next run's start (RUN_STARTED.input
// with only the new message). A run that does not fit the budget is read back. Every byte
// kept is given back once the runs ended.
func TestCheckpointFromKeptEvents(t *testing.T) {
	agent := turnAgent(t, func(in *agui.RunInput, reply string) []string {
		events := []string{
			`{"type":"RUN_STARTED","threadId":"` + in.ThreadID + `","runId":"` + in.RunID + `"}`,
			`{"type":"STATE_SNAPSHOT","snapshot":{"n":1}}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"` + reply + `","role":"assistant"}`,
		}
		for i := range 20 {
			events = append(events, fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":"w%d "}`, reply, i))
		}
		return append(events,
			`{"type":"TEXT_MESSAGE_END","messageId":"`+reply+`"}`,
			`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":2}]}`,
			`{"type":"RUN_FINISHED","threadId":"`+in.ThreadID+`","runId":"`+in.RunID+`"}`)
	}, nil)
	for _, tc := range []struct {
		name   string
		budget int64
		kept   bool
	}{
		{"budget", 1 << 20, true},
		{"default budget", 0, true},
		{"budget spent", 600, false}, // a few events: the run lets go of them
		{"none kept", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := recorder.NewMemoryStore(recorder.MemoryConfig{})
			t.Cleanup(func() { mem.Close() })
			store := &eventReadsStore{Store: mem, reads: map[string]int{}}
			h, px := startProxy(t, agent.URL, Config{Store: store, CheckpointMemory: tc.budget})
			msgs := `{"id":"u1","role":"user","content":"hello"}`
			for i := 1; i <= 3; i++ {
				run := fmt.Sprintf("r%d", i)
				res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t","runId":"`+run+`","messages":[`+msgs+`]}`, nil)
				frames, err := readFrames(t, res.Body)
				res.Body.Close()
				got := dataFrames(frames)
				if err != nil || len(got) == 0 || got[len(got)-1].eventType() != agui.RunFinished {
					t.Fatalf("run %s: %d frames, %v", run, len(got), err)
				}
				if _, err := store.Checkpoint(t.Context(), "t", run); err != nil {
					t.Fatalf("checkpoint of %s when the client read RUN_FINISHED: %v", run, err)
				}
				if n := store.readsOf(run); (n == 0) != tc.kept {
					t.Fatalf("run %s: its events were read %d times for its checkpoint; kept = %v", run, n, tc.kept)
				}
				if i > 1 {
					var started struct {
						Input struct {
							Messages []struct{ ID string } `json:"messages"`
						} `json:"input"`
					}
					want := fmt.Sprintf("u%d", i)
					if err := json.Unmarshal(got[0].data, &started); err != nil || len(started.Input.Messages) != 1 || started.Input.Messages[0].ID != want {
						t.Fatalf("%s RUN_STARTED = %s (%v), want input.messages holding only %s", run, got[0].data, err, want)
					}
				}
				msgs += fmt.Sprintf(`,{"id":"a-%s","role":"assistant","content":"x"},{"id":"u%d","role":"user","content":"more"}`, run, i+1)
			}
			for i := 1; i <= 3; i++ {
				runtest.WaitRunEnded(t, store, "t", fmt.Sprintf("r%d", i))
			}
			folded, err := thread.New(thread.Config{Store: hiddenCheckpoints{mem}})
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 3; i++ {
				run := fmt.Sprintf("r%d", i)
				got, err := h.threads.Branch(t.Context(), "t", run)
				if err != nil {
					t.Fatal(err)
				}
				want, err := folded.Branch(t.Context(), "t", run)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(got, want, func(a, b compact.Event) bool { return a.Type == b.Type && string(a.Raw) == string(b.Raw) }) {
					t.Fatalf("branch of %s from its checkpoint: %d events; folded from the events: %d", run, len(got), len(want))
				}
			}
			if left, budget := h.retainLeft.Load(), max(h.cfg.CheckpointMemory, 0); left != budget {
				t.Fatalf("after the runs: %d bytes of the %d kept-event budget left", left, budget)
			}
		})
	}
}
