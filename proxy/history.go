package proxy

import (
	"bytes"
	"context"
	"fmt"

	"errors"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// maxLineageRuns bounds the walk up a run's ancestors.
const maxLineageRuns = 10000

// lineage returns the runs from the thread's root to runID, following parentRunId.
func lineage(ctx context.Context, store recorder.Store, threadID, runID string) ([]recorder.Run, error) {
	var chain []recorder.Run
	for id := runID; id != ""; {
		if len(chain) == maxLineageRuns {
			return nil, fmt.Errorf("lineage of run %q is longer than %d runs", runID, maxLineageRuns)
		}
		r, err := store.Run(ctx, threadID, id)
		if err != nil {
			return nil, fmt.Errorf("reading run %q: %w", id, err)
		}
		chain = append(chain, r)
		id = r.ParentRunID
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

// lineageEvents returns the recorded events of every run from the root to runID, parsed.
// Frames whose data is not a JSON event are skipped, as a client would fail on them.
func lineageEvents(ctx context.Context, store recorder.Store, threadID, runID string) ([]compact.Event, error) {
	chain, err := lineage(ctx, store, threadID, runID)
	if err != nil {
		return nil, err
	}
	var events []compact.Event
	for _, r := range chain {
		recs, err := store.Events(ctx, threadID, r.RunID, 0, 0)
		if err != nil {
			return nil, fmt.Errorf("reading events of run %q: %w", r.RunID, err)
		}
		for _, rec := range recs {
			if rec.Type == "" {
				continue
			}
			data, err := frameData(rec.Frame)
			if err != nil {
				continue
			}
			ev, err := compact.ParseEvent(data)
			if err != nil {
				continue
			}
			events = append(events, ev)
		}
	}
	return events, nil
}

// historyMessageIDs returns the ids of the messages a client holds after replaying the thread's
// branch up to runID ("" for none): the messages RUN_STARTED.input need not repeat.
func (h *Handler) historyMessageIDs(ctx context.Context, threadID, runID string) (map[string]bool, error) {
	if runID == "" {
		return nil, nil
	}
	events, err := lineageEvents(ctx, h.store, threadID, runID)
	if err != nil {
		return nil, err
	}
	messages, _, err := compact.Replay(events)
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool)
	for _, id := range compact.MessageIDs(messages) {
		known[id] = true
	}
	return known, nil
}

// frameData returns the data of a recorded frame.
func frameData(frame []byte) ([]byte, error) {
	f, err := sse.NewReader(bytes.NewReader(frame), sse.Limits{MaxLineBytes: len(frame) + 1, MaxFrameBytes: len(frame) + 1}).Next()
	if err != nil {
		return nil, err
	}
	if !f.HasData {
		return nil, errors.New("recorded frame has no data")
	}
	return f.Data, nil
}
