package thread

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// maxLineageRuns bounds the walk up a run's ancestors.
const maxLineageRuns = 100000

// checkpointVersion is the format version of stored checkpoints.
const checkpointVersion = 1

// checkpoint is what the store keeps for an ended run: the compacted events of its whole
// branch, root to this run, so a prelude costs one checkpoint plus the events after it.
type checkpoint struct {
	V      int               `json:"v"`
	Events []json.RawMessage `json:"events"`
	// MessageIDs are the ids of the messages a client holds after replaying Events, sorted:
	// a run start reads them instead of parsing and replaying the events. Checkpoints written
	// before the field existed lack it; their readers replay the events as before.
	MessageIDs *[]string `json:"messageIds,omitempty"`
}

// Lineage returns the runs from the thread's root to runID, following parentRunId.
func (s *Service) Lineage(ctx context.Context, threadID, runID string) ([]recorder.Run, error) {
	var chain []recorder.Run
	for id := runID; id != ""; {
		if len(chain) == maxLineageRuns {
			return nil, fmt.Errorf("lineage of run %q is longer than %d runs", runID, maxLineageRuns)
		}
		r, err := s.store.Run(ctx, threadID, id)
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

// RunEvents returns the run's stored events with afterSeq < seq <= upTo (upTo < 0: all),
// parsed. Frames whose data is not a JSON event are skipped: the official client would fail
// on them (they are kept in the store and in exports).
func (s *Service) RunEvents(ctx context.Context, threadID, runID string, afterSeq, upTo int64) ([]compact.Event, int64, error) {
	recs, err := s.store.Events(ctx, threadID, runID, afterSeq, 0)
	if err != nil {
		return nil, afterSeq, fmt.Errorf("reading events of run %q: %w", runID, err)
	}
	last := afterSeq
	events := make([]compact.Event, 0, len(recs))
	for _, rec := range recs {
		if upTo >= 0 && rec.Seq > upTo {
			break
		}
		last = rec.Seq
		if ev, ok := parseRecord(rec); ok {
			events = append(events, ev)
		}
	}
	return events, last, nil
}

// parseRecord decodes a recorded frame into an event.
func parseRecord(rec recorder.Event) (compact.Event, bool) {
	if rec.Type == "" {
		return compact.Event{}, false
	}
	data, err := FrameData(rec.Frame)
	if err != nil {
		return compact.Event{}, false
	}
	ev, err := compact.ParseEvent(data)
	return ev, err == nil
}

// FrameData returns the data of one recorded SSE frame. The result may alias frame (frames
// from a store are never modified).
func FrameData(frame []byte) ([]byte, error) {
	// Fast path: the proxy's own LF framing, "data: <one line>\n" followed by other fields.
	if bytes.HasPrefix(frame, []byte("data: ")) && bytes.IndexByte(frame, '\r') < 0 {
		if nl := bytes.IndexByte(frame, '\n'); nl > 0 && !bytes.Contains(frame[nl:], []byte("\ndata")) {
			return frame[6:nl], nil
		}
	}
	f, err := sse.NewReader(bytes.NewReader(frame), sse.Limits{MaxLineBytes: len(frame) + 1, MaxFrameBytes: len(frame) + 1}).Next()
	if err != nil {
		return nil, err
	}
	if !f.HasData {
		return nil, errors.New("recorded frame has no data")
	}
	return bytes.Clone(f.Data), nil
}

// Branch returns the compacted events of the branch from the root through runID, which
// must have ended: from runID's checkpoint, or computed from the nearest ancestor checkpoint
// and stored for next time. "" returns nothing.
func (s *Service) Branch(ctx context.Context, threadID, runID string) ([]compact.Event, error) {
	if runID == "" {
		return nil, nil
	}
	// The run's own checkpoint first: one read, without walking the lineage.
	cp, err := s.loadCheckpoint(ctx, threadID, runID)
	if err == nil {
		return cp, nil
	}
	if !errors.Is(err, recorder.ErrNotFound) {
		s.log.Warn("ignoring an unreadable checkpoint", "thread_id", threadID, "run_id", runID, "err", err)
	}
	chain, err := s.Lineage(ctx, threadID, runID)
	if err != nil {
		return nil, err
	}
	// Find the latest ancestor that has a checkpoint.
	var base []compact.Event
	start := 0
	for i := len(chain) - 2; i >= 0; i-- {
		cp, err := s.loadCheckpoint(ctx, threadID, chain[i].RunID)
		if err == nil {
			base, start = cp, i+1
			break
		}
		if !errors.Is(err, recorder.ErrNotFound) {
			s.log.Warn("ignoring an unreadable checkpoint", "thread_id", threadID, "run_id", chain[i].RunID, "err", err)
		}
	}
	for _, r := range chain[start:] {
		evs, _, err := s.RunEvents(ctx, threadID, r.RunID, 0, -1)
		if err != nil {
			return nil, err
		}
		base = s.Compact(append(base, evs...))
		if r.Status != recorder.StatusRunning {
			s.storeCheckpoint(ctx, threadID, r.RunID, base)
		}
	}
	return base, nil
}

// Compact compacts events with compact.Readable: events the official client would reject (an
// orphan, an event after a run's terminal event, a bad patch) are left out and a CUSTOM
// agui-proxy.events_omitted event says how many, so a thread stays readable whatever bad
// events it holds and its prelude still starts with RUN_STARTED. A stream past one of the
// compaction limits is returned as it is: replaying it raw is then the faithful answer.
func (s *Service) Compact(events []compact.Event) []compact.Event {
	out, omitted, err := compact.Readable(events, s.cfg.Compact)
	if err != nil {
		s.log.Warn("compaction refused a thread; serving it raw", "err", err)
		return events
	}
	if omitted > 0 {
		s.log.Info("left out events the official client rejects", "omitted", omitted)
	}
	return out
}

func (s *Service) loadCheckpoint(ctx context.Context, threadID, runID string) ([]compact.Event, error) {
	data, err := s.store.Checkpoint(ctx, threadID, runID)
	if err != nil {
		return nil, err
	}
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil || cp.V != checkpointVersion {
		return nil, fmt.Errorf("checkpoint of run %q has an unknown format", runID)
	}
	events := make([]compact.Event, 0, len(cp.Events))
	for _, raw := range cp.Events {
		ev, err := compact.ParseEvent(raw)
		if err != nil {
			return nil, fmt.Errorf("checkpoint of run %q: %w", runID, err)
		}
		events = append(events, ev)
	}
	return events, nil
}

func (s *Service) storeCheckpoint(ctx context.Context, threadID, runID string, events []compact.Event) {
	cp := checkpoint{V: checkpointVersion, Events: make([]json.RawMessage, len(events))}
	for i, e := range events {
		cp.Events[i] = e.Raw
	}
	if known, err := messageIDs(events); err == nil {
		ids := slices.Sorted(maps.Keys(known))
		cp.MessageIDs = &ids
	}
	data, err := json.Marshal(cp)
	if err == nil {
		err = s.store.PutCheckpoint(ctx, threadID, runID, data)
	}
	if err != nil {
		s.log.Warn("could not store a checkpoint", "thread_id", threadID, "run_id", runID, "err", err)
	}
}

// Checkpoint computes and stores the checkpoint of an ended run (the proxy calls it when a
// run ends, so the next prelude or run start reads one checkpoint instead of the whole
// branch).
func (s *Service) Checkpoint(ctx context.Context, threadID, runID string) error {
	_, err := s.Branch(ctx, threadID, runID)
	return err
}

// MessageIDs returns the ids of the messages a client holds after replaying the branch through
// runID ("" for none): the messages RUN_STARTED.input need not repeat.
func (s *Service) MessageIDs(ctx context.Context, threadID, runID string) (map[string]bool, error) {
	if runID == "" {
		return nil, nil
	}
	// The usual case at a run start: the parent ended and its checkpoint lists its message
	// ids (one read, no replay); an older checkpoint without the list is replayed.
	data, err := s.store.Checkpoint(ctx, threadID, runID)
	if err == nil {
		var ids struct {
			V          int       `json:"v"`
			MessageIDs *[]string `json:"messageIds"`
		}
		if json.Unmarshal(data, &ids) == nil && ids.V == checkpointVersion && ids.MessageIDs != nil {
			known := make(map[string]bool, len(*ids.MessageIDs))
			for _, id := range *ids.MessageIDs {
				known[id] = true
			}
			return known, nil
		}
	}
	events, err := s.loadCheckpoint(ctx, threadID, runID)
	if err == nil {
		return messageIDs(events)
	}
	run, err := s.store.Run(ctx, threadID, runID)
	if err != nil {
		return nil, err
	}
	if run.Status == recorder.StatusRunning {
		if events, err = s.Branch(ctx, threadID, run.ParentRunID); err != nil {
			return nil, err
		}
		cur, _, err := s.RunEvents(ctx, threadID, runID, 0, -1)
		if err != nil {
			return nil, err
		}
		events = append(events, cur...)
	} else if events, err = s.Branch(ctx, threadID, runID); err != nil {
		return nil, err
	}
	return messageIDs(events)
}

func messageIDs(events []compact.Event) (map[string]bool, error) {
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
