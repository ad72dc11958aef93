package thread

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// Codes of the RUN_ERROR events the proxy writes when it has to end a run itself (the agent's
// own RUN_ERROR events keep their codes).
const (
	CodeUpstreamEnded        = "UPSTREAM_ENDED"        // clean EOF without RUN_FINISHED/RUN_ERROR
	CodeUpstreamDisconnected = "UPSTREAM_DISCONNECTED" // the connection broke mid-stream
	CodeUpstreamIdle         = "UPSTREAM_IDLE"         // the agent sent nothing for too long
	CodeRunTimeout           = "RUN_TIMEOUT"           // the run exceeded the maximum run duration
	CodeFrameTooLarge        = "FRAME_TOO_LARGE"       // the agent sent an event over the limit
	CodeRunTooLarge          = "RUN_TOO_LARGE"         // the run's events passed the limit of a run's bytes
	CodeInterrupted          = "INTERRUPTED"           // the proxy pumping it shut down or died
	CodeStorageUnavailable   = "STORAGE_UNAVAILABLE"   // sync durability: the store did not answer
	CodeCancelled            = "CANCELLED"             // POST .../stop, with the ending before AG-UI 1.0
	CodeInternal             = "INTERNAL"              // the proxy failed (a recovered panic); its log has the stack
)

// RunError returns the data of the RUN_ERROR event the proxy writes to end a run itself:
// {"type":"RUN_ERROR","message":...,"code":...}. message should start with "agui-proxy: ".
func RunError(code, message string) []byte {
	out := []byte(`{"type":"RUN_ERROR","message":`)
	out = appendJSONString(out, message)
	out = append(out, `,"code":`...)
	out = appendJSONString(out, code)
	return append(out, '}')
}

// RunFinishedCancelled returns the data of the RUN_FINISHED event that ends a run stopped on
// request, as AG-UI 1.0 ends a cancelled run:
// {"type":"RUN_FINISHED","threadId":...,"runId":...,"outcome":{"type":"cancelled"}}.
// threadID is the client's thread id (not the store key).
func RunFinishedCancelled(threadID, runID string) []byte {
	out := []byte(`{"type":"RUN_FINISHED","threadId":`)
	out = appendJSONString(out, threadID)
	out = append(out, `,"runId":`...)
	out = appendJSONString(out, runID)
	return append(out, `,"outcome":{"type":"cancelled"}}`...)
}

// StatusFor is the status a run ended by the proxy with code is recorded with.
func StatusFor(code string) recorder.RunStatus {
	if code == CodeInterrupted {
		return recorder.StatusInterrupted
	}
	return recorder.StatusError
}

// appendJSONString appends s as a JSON string (encoding/json escaping: control characters,
// U+2028/U+2029 and HTML characters are escaped, so the result is safe on a data: line).
func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

// ReapOrphan ends a running run whose pumping replica stopped renewing its lease more than
// the lease grace ago: it appends RUN_ERROR (code INTERRUPTED) and records the run as
// interrupted, so nobody waits for it forever. It reports whether it did. Several replicas may
// race here; the store's per-seq idempotence lets only one append win.
func (s *Service) ReapOrphan(ctx context.Context, threadID, runID string) bool {
	run, err := s.store.Run(ctx, threadID, runID)
	if err != nil || run.Status != recorder.StatusRunning || run.LeaseUntil.IsZero() || s.alive(run, time.Now()) {
		return false
	}
	seq := run.LastSeq + 1
	data := RunError(CodeInterrupted, "agui-proxy: the proxy serving this run stopped before it ended")
	frame, _ := sse.AppendEvent(nil, sse.Event{ID: recorder.Cursor{RunID: runID, Epoch: run.Epoch, Seq: seq}.String(), Data: data})
	err = s.store.Append(ctx, []recorder.Batch{{Run: run, Events: []recorder.Event{{Seq: seq, Type: agui.RunError, Frame: frame}}}})
	if err == nil {
		err = s.store.FinishRun(ctx, threadID, runID, StatusFor(CodeInterrupted), CodeInterrupted, seq)
	}
	s.log.LogAttrs(ctx, slog.LevelWarn, "ended a run whose replica stopped renewing its lease",
		slog.String("thread_id", threadID), slog.String("run_id", runID), slog.String("node", run.Node), slog.Any("err", err))
	return err == nil
}
