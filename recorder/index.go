package recorder

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agui-proxy/agui-proxy/agui"
)

// Thread index: every store keeps, per owner and route, the threads ordered by their last
// activity, so a caller can list its own threads (Store.ListThreads) without knowing their
// ids. "Activity" is the start of a run: the index is written by CreateRun, and a thread moves
// to the top each time a run starts on it. A thread's other timestamps (its latest run's last
// write) are read when the page is built.

// Page size bounds of ListThreads.
const (
	// DefaultThreadPage is the page size when ThreadQuery.Limit is zero or negative.
	DefaultThreadPage = 50
	// MaxThreadPage is the largest page ListThreads returns; a larger Limit is cut to it.
	MaxThreadPage = 500
	// MaxTitleBytes bounds a thread title (Run.Title), cut at a rune boundary.
	MaxTitleBytes = 200
)

// ErrInvalidPageCursor is returned by ListThreads for a cursor it did not make.
var ErrInvalidPageCursor = errors.New("invalid page cursor")

// ThreadQuery selects one page of an owner's threads on one route.
type ThreadQuery struct {
	// Owner and Route name the index: the identity owning the threads ("" in single-tenant
	// mode) and the route they were created through.
	Owner, Route string
	// Limit is the page size (<= 0: DefaultThreadPage; at most MaxThreadPage).
	Limit int
	// Cursor continues after the last thread of a previous page (its NextCursor); "" starts at
	// the most recently active thread.
	Cursor string
	// Since and Until keep threads whose last activity is at or after Since and before Until;
	// zero values do not bound.
	Since, Until time.Time
}

// ThreadSummary is one entry of a ThreadPage.
type ThreadSummary struct {
	Thread
	// ActiveAt is the thread's last activity: the start of its latest run (the index order).
	ActiveAt time.Time
	// UpdatedAt is the latest run's last write (an event or its end).
	UpdatedAt time.Time
	// LatestStatus is the status of the thread's latest run.
	LatestStatus RunStatus
}

// ThreadPage is one page of ListThreads, newest activity first.
type ThreadPage struct {
	Threads []ThreadSummary
	// NextCursor continues the listing after the page's last thread; "" when there is no more.
	NextCursor string
}

// pageLimit applies the page size bounds.
func (q ThreadQuery) pageLimit() int {
	switch {
	case q.Limit <= 0:
		return DefaultThreadPage
	case q.Limit > MaxThreadPage:
		return MaxThreadPage
	}
	return q.Limit
}

// pagePos is a position in an index: threads are ordered by (activity desc, id desc).
type pagePos struct {
	ms int64
	id string
}

// before reports whether an entry at (ms, id) comes after p in the listing order.
func (p pagePos) before(ms int64, id string) bool {
	return ms < p.ms || (ms == p.ms && id < p.id)
}

const cursorVersion = "v1"

// CursorAfter returns the ThreadQuery.Cursor that continues a listing after t (what the last
// thread of a page gives as ThreadPage.NextCursor), so a caller can resume after any thread.
func CursorAfter(t ThreadSummary) string { return encodePageCursor(t.ActiveAt.UnixMilli(), t.ID) }

// encodePageCursor makes the opaque cursor of the position after (ms, id).
func encodePageCursor(ms int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + ":" + strconv.FormatInt(ms, 10) + ":" + id))
}

// decodePageCursor parses a cursor made by encodePageCursor. ok is false for "".
func decodePageCursor(c string) (p pagePos, ok bool, err error) {
	if c == "" {
		return pagePos{}, false, nil
	}
	bad := fmt.Errorf("%w: %q", ErrInvalidPageCursor, truncate(c, 64))
	if len(c) > 2*(agui.MaxIDLength+nsTagLen)+64 {
		return pagePos{}, false, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return pagePos{}, false, bad
	}
	parts := strings.SplitN(string(raw), ":", 3)
	if len(parts) != 3 || parts[0] != cursorVersion {
		return pagePos{}, false, bad
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || ms < 0 || validateThreadKey(parts[2]) != nil {
		return pagePos{}, false, bad
	}
	return pagePos{ms: ms, id: parts[2]}, true, nil
}

// truncate cuts s to at most n bytes at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// cleanTitle bounds a title and makes it valid UTF-8.
func cleanTitle(s string) string {
	return truncate(strings.ToValidUTF8(s, "\uFFFD"), MaxTitleBytes)
}

// indexTag names the index of one owner on one route. Owners are identity header values
// (any bytes), so the key holds a hash of them, never the value itself.
func indexTag(owner, route string) string {
	h := sha256.Sum256([]byte(owner + "\x00" + route))
	return hex.EncodeToString(h[:16])
}

// inWindow reports whether an activity time in ms falls in the query's [Since, Until).
func (q ThreadQuery) inWindow(ms int64) bool {
	if !q.Since.IsZero() && ms < q.Since.UnixMilli() {
		return false
	}
	if !q.Until.IsZero() && ms >= q.Until.UnixMilli() {
		return false
	}
	return true
}

// listed reports whether an index entry at (ms, id) belongs on the page q asks for: inside
// the query's window and, with a cursor, after it.
func (q ThreadQuery) listed(ms int64, id string, after pagePos, hasCursor bool) bool {
	return q.inWindow(ms) && (!hasCursor || after.before(ms, id))
}

// sortThreads puts summaries in listing order: most recent activity first, then by id,
// descending (the order of pagePos).
func sortThreads(ts []ThreadSummary) {
	slices.SortFunc(ts, func(a, b ThreadSummary) int {
		if c := cmp.Compare(b.ActiveAt.UnixMilli(), a.ActiveAt.UnixMilli()); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
}

// cutPage returns the page of the first limit of ts (in listing order), with the cursor after
// its last thread when ts holds more.
func cutPage(ts []ThreadSummary, limit int) ThreadPage {
	if len(ts) <= limit {
		return ThreadPage{Threads: ts}
	}
	ts = ts[:limit:limit]
	return ThreadPage{Threads: ts, NextCursor: CursorAfter(ts[limit-1])}
}
