package attach

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// ThreadSummaryView is one thread of GET {prefix}threads.
type ThreadSummaryView struct {
	ThreadID string `json:"threadId"`
	// Title is the first user message of the thread's first run, cut (recorder.MaxTitleBytes).
	Title     string    `json:"title,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// ActiveAt is the start of the latest run: the list's order.
	ActiveAt time.Time `json:"activeAt"`
	// UpdatedAt is the latest run's last write (an event or its end).
	UpdatedAt    time.Time `json:"updatedAt"`
	RunCount     int       `json:"runCount"`
	LatestRunID  string    `json:"latestRunId"`
	LatestStatus string    `json:"latestStatus"`
}

// ThreadListView is the JSON answer of GET {prefix}threads: one page of the caller's threads
// on this route, most recently active first.
type ThreadListView struct {
	Threads []ThreadSummaryView `json:"threads"`
	// NextCursor, passed as ?cursor=, continues after the page's last thread; absent at the end.
	NextCursor string `json:"nextCursor,omitempty"`
}

func summaryView(t recorder.ThreadSummary) ThreadSummaryView {
	return ThreadSummaryView{ThreadID: recorder.ThreadIDOf(t.ID), Title: t.Title, CreatedAt: t.CreatedAt, ActiveAt: t.ActiveAt,
		UpdatedAt: t.UpdatedAt, RunCount: t.RunCount, LatestRunID: t.LatestRunID, LatestStatus: string(t.LatestStatus)}
}

// threadQuery reads ?limit=&cursor=&since=&until= (times in RFC 3339).
func threadQuery(r *http.Request) (recorder.ThreadQuery, error) {
	v := r.URL.Query()
	q := recorder.ThreadQuery{Cursor: v.Get("cursor")}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > recorder.MaxThreadPage {
			return q, fmt.Errorf("%w: limit %.20q: want an integer from 1 to %d", problem.ErrInvalidQuery, s, recorder.MaxThreadPage)
		}
		q.Limit = n
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, fmt.Errorf("%w: %s %.40q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", problem.ErrInvalidQuery, p.name, s)
		}
		*p.dst = t
	}
	return q, nil
}

// listRequest reads the caller and the listing query of a thread list or bulk export.
func (h *Handler) listRequest(r *http.Request) (string, recorder.ThreadQuery, error) {
	q, err := threadQuery(r)
	if err != nil {
		return "", q, err
	}
	owner, err := h.threads.Owner(r)
	return owner, q, err
}

// serveList answers one page of the caller's threads.
func (h *Handler) serveList(w http.ResponseWriter, r *http.Request) {
	owner, q, err := h.listRequest(r)
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	page, err := h.threads.Threads(r.Context(), owner, q)
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	h.cfg.Metrics.ThreadsListed(len(page.Threads))
	v := ThreadListView{Threads: make([]ThreadSummaryView, len(page.Threads)), NextCursor: page.NextCursor}
	for i, t := range page.Threads {
		v.Threads[i] = summaryView(t)
	}
	writeJSON(w, v)
}

// serveDelete removes the caller's thread: 204, 404 for an unknown or foreign thread, 409
// ThreadBusy while a run is running (stop it first).
func (h *Handler) serveDelete(w http.ResponseWriter, r *http.Request) {
	owner, err := h.threads.Owner(r)
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	if err := h.threads.Delete(r.Context(), owner, r.PathValue("thread")); err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	h.cfg.Metrics.ThreadDeleted()
	w.WriteHeader(http.StatusNoContent)
}

// exportPage is how many threads the bulk export reads per index page.
const exportPage = 100

// serveBulkExport streams the caller's threads as NDJSON: one export document (the
// per-thread format, formatVersion 1) per line, most recently active first, each with a
// "cursor" member that continues the export after it (?cursor=). Memory stays bounded by one
// index page and one thread, whatever the number of threads. An error after the first line
// cannot change the status any more: the stream then ends early, and the client continues
// from the last cursor it received.
func (h *Handler) serveBulkExport(w http.ResponseWriter, r *http.Request) {
	owner, q, err := h.listRequest(r)
	if err != nil {
		writeErr(w, r, h.log, err)
		return
	}
	ctx := r.Context()
	rc := http.NewResponseController(w)
	q.Limit = exportPage
	started := false
	exported := 0
	// bounded bounds one store wait (StoreTimeout), not the stream.
	bounded := func() (context.Context, context.CancelFunc) {
		if h.cfg.StoreTimeout <= 0 {
			return context.WithCancel(ctx)
		}
		return context.WithTimeoutCause(ctx, h.cfg.StoreTimeout, problem.ErrStoreTimeout)
	}
	for {
		pctx, cancel := bounded()
		page, err := h.threads.Threads(pctx, owner, q)
		cancel()
		if err != nil {
			if !started {
				writeErr(w, r, h.log, err)
			} else {
				h.log.Warn("bulk export ended early", "err", err)
			}
			return
		}
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		h.cfg.Metrics.ThreadsListed(len(page.Threads))
		for _, t := range page.Threads {
			tctx, cancel := bounded()
			doc, err := ExportThread(tctx, h.store, t.ID)
			cancel()
			if err != nil {
				h.log.Warn("bulk export ended early", "thread_id", t.ID, "err", err)
				return
			}
			doc.Cursor = recorder.CursorAfter(t)
			rc.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout)) // a client that stops reading is dropped
			if _, err := w.Write(AppendExportLine(nil, doc)); err != nil {
				return // the client is gone
			}
			rc.Flush()
		}
		exported += len(page.Threads)
		if page.NextCursor == "" {
			// The end line: an export without it was cut (the cursor of its last line continues
			// it).
			rc.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
			w.Write(AppendExportEnd(nil, exported))
			rc.Flush()
			return
		}
		q.Cursor = page.NextCursor
	}
}

// ExportEndKey is the only member of the bulk export's last line: {"agui-proxy.exportEnd":
// {"threads":N}}, N the export documents before it. A bulk export (GET {prefix}export,
// agui-proxy export) that lacks it was cut; importers skip it (ParseExportEnd).
const ExportEndKey = "agui-proxy.exportEnd"

// AppendExportEnd appends the bulk export's end line for threads documents.
func AppendExportEnd(dst []byte, threads int) []byte {
	return fmt.Appendf(dst, "{%q:{\"threads\":%d}}\n", ExportEndKey, threads)
}

// ParseExportEnd reports whether line (without its newline) is a bulk export's end line, and
// the number of documents it says came before it.
func ParseExportEnd(line []byte) (threads int, ok bool) {
	if !bytes.Contains(line, []byte(ExportEndKey)) || !agui.Valid(line) || agui.CheckMembers(line, nil) != nil {
		return 0, false
	}
	var end map[string]struct {
		Threads *int `json:"threads"`
	}
	if json.Unmarshal(line, &end) != nil || len(end) != 1 {
		return 0, false
	}
	v, found := end[ExportEndKey]
	if !found || v.Threads == nil || *v.Threads < 0 {
		return 0, false
	}
	return *v.Threads, true
}

// AppendExportLine appends doc as one line of the bulk export (NDJSON: the JSON document,
// with any invalid UTF-8 of recorded frames replaced so that it re-imports, then '\n').
func AppendExportLine(dst []byte, doc ExportDoc) []byte {
	line, _ := json.Marshal(doc)
	return append(append(dst, validUTF8(line)...), '\n')
}
