package thread_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// recordChatRun stores a finished run whose assistant message is msgID.
func recordChatRun(t testing.TB, s *thread.Service, threadID, runID, msgID string) {
	t.Helper()
	ctx := t.Context()
	r, err := s.StartRun(ctx, recorder.Run{ThreadID: threadID, RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	datas := []string{
		fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":%q}`, threadID, runID),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_START","messageId":%q,"role":"assistant"}`, msgID),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":%q,"delta":"hi"}`, msgID),
		fmt.Sprintf(`{"type":"TEXT_MESSAGE_END","messageId":%q}`, msgID),
		fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":%q}`, threadID, runID),
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
	if err := s.Checkpoint(ctx, threadID, runID); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointMessageIDs: a checkpoint lists its branch's message ids, which a run start
// reads without replaying the events; a checkpoint without the list (written before it
// existed) and a damaged one still give the right ids (replayed, or rebuilt from the events).
func TestCheckpointMessageIDs(t *testing.T) {
	s := newService(t, thread.Config{})
	ctx := t.Context()
	recordChatRun(t, s, "t", "r1", "m1")
	recordChatRun(t, s, "t", "r2", "m2")
	want := []string{"m1", "m2"}
	data, err := s.Store().Checkpoint(ctx, "t", "r2")
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		V          int
		MessageIDs []string `json:"messageIds"`
	}
	if err := json.Unmarshal(data, &cp); err != nil || !slices.Equal(cp.MessageIDs, want) {
		t.Fatalf("checkpoint of r2 = %s (%v), want messageIds %v", data, err, want)
	}
	check := func(what string) {
		t.Helper()
		known, err := s.MessageIDs(ctx, "t", "r2")
		if got := slices.Sorted(maps.Keys(known)); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: MessageIDs(r2) = %v, %v, want %v", what, got, err, want)
		}
	}
	check("with the list")
	var old map[string]json.RawMessage
	json.Unmarshal(data, &old)
	delete(old, "messageIds")
	legacy, _ := json.Marshal(old)
	if err := s.Store().PutCheckpoint(ctx, "t", "r2", legacy); err != nil {
		t.Fatal(err)
	}
	check("checkpoint without the list")
	if err := s.Store().PutCheckpoint(ctx, "t", "r2", []byte(`{"v":1,"events":[{"type":`)); err != nil {
		t.Fatal(err)
	}
	check("damaged checkpoint")
	if data, err := s.Store().Checkpoint(ctx, "t", "r2"); err != nil || json.Unmarshal(data, &cp) != nil || !slices.Equal(cp.MessageIDs, want) {
		t.Errorf("checkpoint of r2 after the damaged one was read = %.200s, %v, want it rebuilt with the list", data, err)
	}
}
