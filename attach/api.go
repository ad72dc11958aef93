package attach

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
	"github.com/agui-proxy/agui-proxy/thread"
)

// ExportFormatVersion is the formatVersion of export documents this version writes and reads.
const ExportFormatVersion = 1

// ThreadView is the JSON answer of GET {prefix}threads/{thread}: the messages and state a
// client holds after replaying the branch through RunID.
type ThreadView struct {
	ThreadID string          `json:"threadId"`
	RunID    string          `json:"runId"`
	Status   string          `json:"status"`
	Messages json.RawMessage `json:"messages"`
	State    json.RawMessage `json:"state"`
	// EventsOmitted is set when the branch holds events the official client rejects (an
	// orphan, a MESSAGES_SNAPSHOT with one invalid message): they are left out of messages
	// and state, as from the prelude, where a CUSTOM agui-proxy.events_omitted event says so.
	EventsOmitted *OmittedView `json:"eventsOmitted,omitempty"`
}

// OmittedView says how many events a thread's history left out, and why the first was.
type OmittedView struct {
	Omitted int    `json:"omitted"`
	Reason  string `json:"reason"`
}

// omittedIn sums the agui-proxy.events_omitted markers of a compacted branch (nil: none).
func omittedIn(events []compact.Event) *OmittedView {
	var out *OmittedView
	for _, e := range events {
		if e.Type != "CUSTOM" || !bytes.Contains(e.Raw, []byte(compact.OmittedEventName)) {
			continue
		}
		var m struct {
			Name  string      `json:"name"`
			Value OmittedView `json:"value"`
		}
		if json.Unmarshal(e.Raw, &m) != nil || m.Name != compact.OmittedEventName {
			continue
		}
		if out == nil {
			out = &OmittedView{Reason: m.Value.Reason}
		}
		out.Omitted += m.Value.Omitted
	}
	return out
}

// RunView describes one run in GET {prefix}threads/{thread}/runs and in exports.
type RunView struct {
	RunID       string         `json:"runId"`
	ParentRunID string         `json:"parentRunId,omitempty"`
	Status      string         `json:"status"`
	Detail      string         `json:"detail,omitempty"`
	CreatedAt   time.Time      `json:"createdAt"`
	UpdatedAt   time.Time      `json:"updatedAt"`
	Events      int64          `json:"events"`
	Gaps        []recorder.Gap `json:"gaps,omitempty"`
}

// RunsView is the JSON answer of GET {prefix}threads/{thread}/runs: every run, in creation
// order; parentRunId links make the tree.
type RunsView struct {
	ThreadID  string    `json:"threadId"`
	HeadRunID string    `json:"headRunId"`
	Runs      []RunView `json:"runs"`
}

// ExportDoc is a whole thread as one JSON document (GET .../export, POST .../import).
type ExportDoc struct {
	FormatVersion int         `json:"formatVersion"`
	ThreadID      string      `json:"threadId"`
	ExportedAt    time.Time   `json:"exportedAt"`
	Runs          []ExportRun `json:"runs"`
	// Cursor is set in the bulk export (GET {prefix}export) only: passed as ?cursor=, it
	// continues the export after this thread. Import ignores it.
	Cursor string `json:"cursor,omitempty"`
	// Origin is set by agui-proxy export only (an operator's backup of a whole store): where
	// the thread lives. POST .../import ignores it (the caller owns what it imports).
	Origin *ExportOrigin `json:"origin,omitempty"`
}

// ExportOrigin is the owner and route of an exported thread (ExportDoc.Origin).
type ExportOrigin struct {
	// Owner is the identity owning the thread; "" in single-tenant mode.
	Owner string `json:"owner"`
	// Route is the route (room) the thread was created through.
	Route string `json:"route"`
}

// ExportRun is one run of an ExportDoc with its recorded frames, in order: each event as its
// JSON, a frame whose data is JSON but not an event as that JSON, and a frame whose data is not
// JSON as {"agui-proxy.frame": "<data>"} (RawFrameKey).
type ExportRun struct {
	RunView
	EventList []json.RawMessage `json:"eventList"`
}

func runView(r recorder.Run) RunView {
	return RunView{RunID: r.RunID, ParentRunID: r.ParentRunID, Status: string(r.Status), Detail: r.Detail,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Events: r.LastSeq, Gaps: r.Gaps}
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONStatus(w, http.StatusOK, v) }

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	b, _ := json.Marshal(v)
	// An agent may stream invalid UTF-8 (forwarded to it live untouched); JSON text is UTF-8,
	// so such bytes are answered as U+FFFD in history and exports (and an import refuses them).
	w.Write(append(validUTF8(b), '\n'))
}

// validUTF8 replaces invalid UTF-8 in a JSON answer by U+FFFD.
func validUTF8(b []byte) []byte { return bytes.ToValidUTF8(b, []byte("\uFFFD")) }

// serveThread answers the thread's messages and state at its head, or as of ?run= (time
// travel along parentRunId).
func (h *Handler) serveThread(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	th, err := h.access(ctx, r, r.PathValue("thread"))
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	runID := th.LatestRunID
	if q := r.URL.Query().Get("run"); q != "" {
		if err := agui.ValidateID("run", q); err != nil {
			writeErr(w, r, h.log, err)
			return
		}
		runID = q
	}
	run, err := h.store.Run(ctx, th.ID, runID)
	if err != nil {
		writeErr(w, r, h.log, storeErr(err))
		return
	}
	events, _, _, err := h.prelude(ctx, &run)
	if err != nil {
		writeErr(w, r, h.log, storeErr(err))
		return
	}
	messages, state, err := compact.Replay(events)
	if err != nil {
		writeErr(w, r, h.log, fmt.Errorf("replaying thread %q: %w", th.ID, err))
		return
	}
	writeJSON(w, ThreadView{ThreadID: recorder.ThreadIDOf(th.ID), RunID: run.RunID, Status: string(run.Status), Messages: messages, State: state,
		EventsOmitted: omittedIn(events)})
}

// serveRuns answers the runs tree with statuses.
func (h *Handler) serveRuns(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	th, err := h.access(ctx, r, r.PathValue("thread"))
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	runs, err := h.store.Runs(ctx, th.ID)
	if err != nil {
		writeErr(w, r, h.log, storeErr(err))
		return
	}
	v := RunsView{ThreadID: recorder.ThreadIDOf(th.ID), HeadRunID: th.LatestRunID, Runs: make([]RunView, len(runs))}
	for i, run := range runs {
		v.Runs[i] = runView(run)
	}
	writeJSON(w, v)
}

// serveExport answers the whole thread as one versioned document.
func (h *Handler) serveExport(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	th, err := h.access(ctx, r, r.PathValue("thread"))
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	doc, err := ExportThread(ctx, h.store, th.ID)
	if err != nil {
		writeErr(w, r, h.log, storeErr(err))
		return
	}
	w.Header().Set("Content-Disposition", `attachment; filename="thread-`+recorder.ThreadIDOf(th.ID)+`.json"`)
	writeJSON(w, doc)
}

// ExportThread reads a whole thread from the store as one export document (formatVersion 1).
// threadID is the store key (recorder.ThreadKey); the document names the thread id. It does
// no access check: the endpoints check the caller first.
func ExportThread(ctx context.Context, store recorder.Store, threadID string) (ExportDoc, error) {
	runs, err := store.Runs(ctx, threadID)
	if err != nil {
		return ExportDoc{}, err
	}
	doc := ExportDoc{FormatVersion: ExportFormatVersion, ThreadID: recorder.ThreadIDOf(threadID), ExportedAt: time.Now().UTC()}
	for _, run := range runs {
		recs, err := store.Events(ctx, threadID, run.RunID, 0, 0)
		if err != nil {
			return ExportDoc{}, err
		}
		er := ExportRun{RunView: runView(run), EventList: make([]json.RawMessage, 0, len(recs))}
		for _, rec := range recs {
			// Every recorded frame is exported (see exportFrame), so the document re-imports
			// to the same thread.
			if data, err := thread.FrameData(rec.Frame); err == nil {
				er.EventList = append(er.EventList, exportFrame(data))
			}
		}
		doc.Runs = append(doc.Runs, er)
	}
	return doc, nil
}

// serveImport loads an export document into a thread that does not exist yet. The owner is
// the caller and the route this handler's, never what the document says. The document is
// validated whole before anything is written; a thread with history is refused.
func (h *Handler) serveImport(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	threadID := r.PathValue("thread")
	if err := agui.ValidateID("threadId", threadID); err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	owner, err := h.threads.Owner(r)
	if err == nil {
		err = h.threads.Caller(owner)
	}
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxImportBytes))
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	doc, err := DecodeExport(body)
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	// Each store call of the import is bounded by StoreTimeout, not the import: its deadline
	// grows with the document (see ImportThreadBounded).
	runs, err := ImportThreadBounded(ctx, h.store, ImportTarget{ThreadID: threadID, Owner: owner, Route: h.threads.Route()}, doc, h.cfg.StoreTimeout)
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	writeJSONStatus(w, http.StatusCreated, map[string]any{"threadId": threadID, "runs": runs})
}

// DecodeExport parses one export document (the body of POST .../import, a line of the bulk
// export); ImportThread validates it. Errors wrap problem.ErrInvalidImport.
func DecodeExport(data []byte) (ExportDoc, error) {
	var doc ExportDoc
	if !utf8.Valid(data) {
		// Refused like a run body with invalid UTF-8 (JSON text is UTF-8).
		return doc, fmt.Errorf("%w: the document is not valid UTF-8", problem.ErrInvalidImport)
	}
	if !agui.Valid(data) {
		err := json.Unmarshal(data, &doc) // says where it is malformed
		if err == nil {
			err = errors.New("not one JSON value")
		}
		return doc, fmt.Errorf("%w: %v", problem.ErrInvalidImport, err)
	}
	// The proxy's one rule for the documents it reads (agui.CheckMembers): a member twice, or
	// two spellings of one, are refused rather than read as the last. The events are kept as
	// recorded (their reader is the client, which takes the last, as the proxy's event type
	// does).
	if err := agui.CheckMembers(data, exportOpaque); err != nil {
		return doc, fmt.Errorf("%w: %v", problem.ErrInvalidImport, err)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return doc, fmt.Errorf("%w: %v", problem.ErrInvalidImport, err)
	}
	return doc, nil
}

// exportOpaque marks the parts of an export document kept as they were recorded: each event
// of a run's eventList.
func exportOpaque(path []string) bool {
	return len(path) == 4 && path[0] == "runs" && path[2] == "eventList"
}

// ValidateExport checks doc exactly as ImportThread does before writing, without a store:
// what a dry run of an import reports. Errors wrap problem.ErrInvalidImport.
func ValidateExport(doc ExportDoc) error {
	_, err := validateImport(doc)
	return err
}

// ImportTarget is where ImportThread writes a thread: its id, owner ("" in single-tenant
// mode) and route.
type ImportTarget struct {
	ThreadID, Owner, Route string
}

// Key is the store key the thread is written under: its id in the namespace of its owner
// and route (recorder.ThreadKey).
func (to ImportTarget) Key() string { return recorder.ThreadKey(to.Owner, to.Route, to.ThreadID) }

// ImportThread writes doc into store as the new thread to.ThreadID, owned by to.Owner on
// to.Route (never what the document says). It does no access check: the import endpoint
// checks the caller first, and the agui-proxy import command writes as the store's operator.
// The document is validated whole before anything is written (errors wrap
// problem.ErrInvalidImport); a thread that exists already is left as it is and refused with
// problem.ErrThreadNotEmpty; a failed write removes the runs it created. Store errors are
// mapped by problem.StoreErr. Runs keep their recorded start (createdAt), so the thread keeps
// its creation time and its place in the thread list; updatedAt becomes the time of the
// import. It returns the number of runs written. It is ImportThreadBounded without a bound
// per store call (ctx bounds the whole import).
func ImportThread(ctx context.Context, store recorder.Store, to ImportTarget, doc ExportDoc) (int, error) {
	return ImportThreadBounded(ctx, store, to, doc, 0)
}

// Import writes are bounded: one Append carries at most ImportBatchEvents events and about
// ImportBatchBytes bytes, so that a run of a million events is many store calls of a bounded
// size (one Lua call on Redis, one transaction on disk), never one call as large as the run.
const (
	ImportBatchEvents = 4096
	ImportBatchBytes  = 4 << 20
)

// ImportThreadBounded is ImportThread with each store call bounded by callTimeout (0: no
// bound but ctx's): the deadline of an import grows with the document, one store call at a
// time, instead of one fixed deadline for a write whose cost grows with the document (a
// 100,000-run document, or a run of 1,000,000 events, could never finish within
// AGUI_STORE_TIMEOUT on Redis, and a retry could never succeed). A store that does not answer
// one call within callTimeout still fails the import (503 StoreUnavailable), rolled back.
func ImportThreadBounded(ctx context.Context, store recorder.Store, to ImportTarget, doc ExportDoc, callTimeout time.Duration) (int, error) {
	if err := agui.ValidateID("threadId", to.ThreadID); err != nil {
		return 0, err
	}
	// In the namespace of the owner and route: another owner's thread of this id is not seen.
	threadID := to.Key()
	batches, err := validateImport(doc)
	if err != nil {
		return 0, err
	}
	call := func(fn func(ctx context.Context) error) error {
		if callTimeout <= 0 {
			return fn(ctx)
		}
		cctx, cancel := context.WithTimeoutCause(ctx, callTimeout, problem.ErrStoreTimeout)
		defer cancel()
		err := fn(cctx)
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), problem.ErrStoreTimeout) {
			err = fmt.Errorf("%w: %w", problem.ErrStoreUnavailable, problem.ErrStoreTimeout)
		}
		return err
	}
	if err := call(func(ctx context.Context) error { _, err := store.Thread(ctx, threadID); return err }); err == nil {
		return 0, problem.ErrThreadNotEmpty // exists (ours or not: nothing is revealed beyond "not empty")
	} else if !errors.Is(err, recorder.ErrThreadNotFound) {
		return 0, storeErr(err)
	}
	var created []string
	undo := func() {
		// Also when the client left (the import is rolled back whole); each deletion bounded
		// like any call, and given up on once the store stopped answering.
		uctx := context.WithoutCancel(ctx)
		for i := len(created) - 1; i >= 0; i-- {
			dctx, cancel := uctx, context.CancelFunc(func() {})
			if callTimeout > 0 {
				dctx, cancel = context.WithTimeout(uctx, callTimeout)
			}
			err := store.DeleteRun(dctx, threadID, created[i])
			cancel()
			if err != nil && dctx.Err() != nil {
				return
			}
		}
	}
	for _, b := range batches {
		run := b.Run
		run.ThreadID, run.Owner, run.Route, run.Epoch = threadID, to.Owner, to.Route, recorder.NewEpoch()
		run.Title = importedTitle(b.Events) // as the proxy titles a thread: its first user message
		for i := range b.Events {
			b.Events[i].Frame, _ = sse.AppendEvent(nil, sse.Event{
				ID: recorder.Cursor{RunID: run.RunID, Epoch: run.Epoch, Seq: b.Events[i].Seq}.String(), Data: b.Events[i].Frame})
		}
		if err := call(func(ctx context.Context) error {
			_, err := store.CreateRun(ctx, run, recorder.CreateOptions{At: b.Run.CreatedAt})
			return err
		}); err != nil {
			undo()
			if errors.Is(err, recorder.ErrThreadNotFound) || errors.Is(err, recorder.ErrRunAlreadyStarted) || errors.Is(err, recorder.ErrThreadRoomMismatch) {
				return 0, problem.ErrThreadNotEmpty // another writer got there first
			}
			return 0, storeErr(err)
		}
		created = append(created, run.RunID)
		var err error
		for evs := b.Events; len(evs) > 0 && err == nil; {
			n, size := 0, 0
			for n < len(evs) && n < ImportBatchEvents && (n == 0 || size+len(evs[n].Frame) <= ImportBatchBytes) {
				size += len(evs[n].Frame)
				n++
			}
			part := evs[:n]
			evs = evs[n:]
			err = call(func(ctx context.Context) error { return store.Append(ctx, []recorder.Batch{{Run: run, Events: part}}) })
		}
		if err == nil {
			err = call(func(ctx context.Context) error {
				return store.FinishRun(ctx, threadID, run.RunID, b.Run.Status, b.Run.Detail, int64(len(b.Events)))
			})
		}
		if err != nil {
			undo()
			return 0, storeErr(err)
		}
	}
	return len(batches), nil
}

// importedTitle is the title a run gives its thread (recorder.Run.Title), read back from its
// recorded events: the first user message of its RUN_STARTED input, which holds the messages
// the run's request brought (agui.Title), so an imported thread keeps the title it had.
func importedTitle(events []recorder.Event) string {
	for _, e := range events {
		var ev struct {
			Type  string `json:"type"`
			Input struct {
				Messages []json.RawMessage `json:"messages"`
			} `json:"input"`
		}
		if json.Unmarshal(e.Frame, &ev) != nil || ev.Type != agui.RunStarted {
			continue
		}
		return agui.Title(ev.Input.Messages)
	}
	return ""
}

// validateImport checks an export document and turns it into batches whose Frame fields hold
// each event's JSON (framed by the caller).
func validateImport(doc ExportDoc) ([]recorder.Batch, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", problem.ErrInvalidImport, fmt.Sprintf(format, args...))
	}
	if doc.FormatVersion != ExportFormatVersion {
		return nil, bad("formatVersion %d is not %d", doc.FormatVersion, ExportFormatVersion)
	}
	if len(doc.Runs) == 0 {
		return nil, bad("no runs")
	}
	seen := map[string]bool{}
	var batches []recorder.Batch
	for i, er := range doc.Runs {
		if err := agui.ValidateID("runId", er.RunID); err != nil {
			return nil, bad("run %d: %v", i, err)
		}
		if seen[er.RunID] {
			return nil, bad("run %q appears twice", er.RunID)
		}
		if er.ParentRunID != "" && !seen[er.ParentRunID] {
			return nil, bad("run %q: parent %q is not an earlier run of the document", er.RunID, er.ParentRunID)
		}
		seen[er.RunID] = true
		status := recorder.RunStatus(er.Status)
		switch status {
		case recorder.StatusFinished, recorder.StatusError, recorder.StatusInterrupted, recorder.StatusCancelled:
		case recorder.StatusRunning:
			status = recorder.StatusInterrupted // it cannot go on here
		default:
			return nil, bad("run %q: unknown status %q", er.RunID, er.Status)
		}
		b := recorder.Batch{Run: recorder.Run{RunID: er.RunID, ParentRunID: er.ParentRunID, Status: status, Detail: er.Detail,
			CreatedAt: er.CreatedAt, UpdatedAt: er.UpdatedAt}}
		for j, raw := range er.EventList {
			data, t, err := importFrame(raw)
			if err != nil {
				return nil, bad("run %q event %d: %v", er.RunID, j, err)
			}
			b.Events = append(b.Events, recorder.Event{Seq: int64(j + 1), Type: t, Frame: data})
		}
		batches = append(batches, b)
	}
	return batches, nil
}

func compactJSON(raw json.RawMessage) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return raw
	}
	return out.Bytes()
}

// serveStop cancels a running run: POST {prefix}threads/{thread}/runs/{run}/stop. The run ends
// as stopped (by default what was open closed, then RUN_FINISHED outcome cancelled; see
// proxy.StopEnding), recorded and seen by every attached client. A run pumped by
// another replica is stopped through the store (its lease renewal sees the request).
func (h *Handler) serveStop(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	th, run, err := h.accessRun(ctx, r)
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	if err := h.threads.Stop(ctx, run); err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	writeJSONStatus(w, http.StatusAccepted, map[string]any{"threadId": recorder.ThreadIDOf(th.ID), "runId": run.RunID, "stopping": true})
}
