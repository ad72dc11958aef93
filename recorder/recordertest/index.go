package recordertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// runIndex runs the thread index and deletion cases (Store.ListThreads, Store.DeleteThread).
func runIndex(t *testing.T, newStore func(t *testing.T) recorder.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s recorder.Store)
	}{
		{"OrderAndActivity", testIndexOrder},
		{"Pages", testIndexPages},
		{"PagesUnderWrites", testIndexPagesUnderWrites},
		{"Isolation", testIndexIsolation},
		{"Window", testIndexWindow},
		{"Title", testIndexTitle},
		{"BadCursor", testIndexBadCursor},
		{"Summary", testIndexSummary},
		{"Delete", testDeleteThread},
		{"DeleteRefusals", testDeleteThreadRefusals},
		{"RacingRuns", testIndexRacingRuns},
		{"Scan", testScanThreads},
		{"CreateAt", testCreateAt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

// list reads every page of alice's threads on /agent with the given page size.
func listAll(t *testing.T, s recorder.Store, q recorder.ThreadQuery) []recorder.ThreadSummary {
	t.Helper()
	var out []recorder.ThreadSummary
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("ListThreads did not end after 1000 pages")
		}
		p, err := s.ListThreads(t.Context(), q)
		if err != nil {
			t.Fatalf("ListThreads(%+v) = %v", q, err)
		}
		if q.Limit > 0 && len(p.Threads) > q.Limit {
			t.Fatalf("ListThreads(limit %d) returned %d threads", q.Limit, len(p.Threads))
		}
		out = append(out, p.Threads...)
		if p.NextCursor == "" {
			return out
		}
		q.Cursor = p.NextCursor
	}
}

func ids(ts []recorder.ThreadSummary) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// checkOrder fails unless ts is ordered by activity, newest first, then id descending, and
// holds no thread twice.
func checkOrder(t *testing.T, ts []recorder.ThreadSummary) {
	t.Helper()
	seen := map[string]bool{}
	for i, th := range ts {
		if seen[th.ID] {
			t.Errorf("thread %s listed twice: %v", th.ID, ids(ts))
		}
		seen[th.ID] = true
		if i == 0 {
			continue
		}
		p := ts[i-1]
		if th.ActiveAt.After(p.ActiveAt) || (th.ActiveAt.Equal(p.ActiveAt) && th.ID > p.ID) {
			t.Errorf("threads out of order at %d: %s (%v) after %s (%v)", i, th.ID, th.ActiveAt, p.ID, p.ActiveAt)
		}
	}
}

// tick waits until the store clock (ms precision) has surely moved, so that the next write
// gets a later activity time than the previous one. It orders writes; it asserts nothing.
func tick() { time.Sleep(3 * time.Millisecond) }

func alice() recorder.ThreadQuery { return recorder.ThreadQuery{Owner: "alice", Route: "/agent"} }

func testIndexOrder(t *testing.T, s recorder.Store) {
	for i := 1; i <= 4; i++ {
		mustCreate(t, s, newRun(fmt.Sprintf("t%d", i), "r1"))
		tick()
	}
	got := listAll(t, s, alice())
	if want := "t4 t3 t2 t1"; strings.Join(ids(got), " ") != want {
		t.Fatalf("ListThreads = %v, want %s", ids(got), want)
	}
	// A run starting on the oldest thread moves it to the top.
	r := newRun("t1", "r2")
	r.ParentRunID = "r1"
	mustCreate(t, s, r)
	got = listAll(t, s, alice())
	if want := "t1 t4 t3 t2"; strings.Join(ids(got), " ") != want {
		t.Fatalf("after a run on t1: ListThreads = %v, want %s", ids(got), want)
	}
	checkOrder(t, got)
}

func testIndexPages(t *testing.T, s recorder.Store) {
	for i := 0; i < 11; i++ {
		mustCreate(t, s, newRun(fmt.Sprintf("t%02d", i), "r1"))
	}
	all := listAll(t, s, alice())
	for _, limit := range []int{1, 3, 10, 11, 12} {
		q := alice()
		q.Limit = limit
		paged := listAll(t, s, q)
		if strings.Join(ids(paged), " ") != strings.Join(ids(all), " ") {
			t.Errorf("pages of %d = %v, want %v", limit, ids(paged), ids(all))
		}
	}
	if len(all) != 11 {
		t.Errorf("ListThreads = %d threads, want 11", len(all))
	}
	checkOrder(t, all)
	// Limits: zero means the default, a huge one is cut.
	for _, limit := range []int{0, -5, recorder.MaxThreadPage * 10} {
		q := alice()
		q.Limit = limit
		p, err := s.ListThreads(t.Context(), q)
		if err != nil || len(p.Threads) != 11 || p.NextCursor != "" {
			t.Errorf("ListThreads(limit %d) = %d threads, cursor %q, %v; want all 11, no cursor", limit, len(p.Threads), p.NextCursor, err)
		}
	}
}

func testIndexPagesUnderWrites(t *testing.T, s recorder.Store) {
	for i := 0; i < 9; i++ {
		mustCreate(t, s, newRun(fmt.Sprintf("t%d", i), "r1"))
		tick()
	}
	q := alice()
	q.Limit = 3
	first, err := s.ListThreads(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	// Meanwhile: a new thread, and a run on a thread the first page already showed. Neither
	// may make a later page repeat or skip one of the unchanged threads.
	tick()
	mustCreate(t, s, newRun("new", "r1"))
	r := newRun("t8", "r2")
	r.ParentRunID = "r1"
	mustCreate(t, s, r)
	q.Cursor = first.NextCursor
	rest := listAll(t, s, q)
	got := append(ids(first.Threads), ids(rest)...)
	if want := "t8 t7 t6 t5 t4 t3 t2 t1 t0"; strings.Join(got, " ") != want {
		t.Errorf("pages across writes = %v, want %s", got, want)
	}
}

func testIndexIsolation(t *testing.T, s recorder.Store) {
	mustCreate(t, s, newRun("a1", "r1"))
	b := newRun("b1", "r1")
	b.Owner = "bob"
	mustCreate(t, s, b)
	o := newRun("o1", "r1")
	o.Route = "/other"
	mustCreate(t, s, o)
	// Refused runs leave no trace in the index of the one who tried.
	m := newRun("a1", "r9")
	m.Owner = "mallory"
	if _, err := s.CreateRun(t.Context(), m, recorder.CreateOptions{}); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Fatalf("CreateRun(a1) by mallory = %v, want ErrThreadNotFound", err)
	}
	m = newRun("o1", "r9")
	if _, err := s.CreateRun(t.Context(), m, recorder.CreateOptions{}); !errors.Is(err, recorder.ErrThreadRoomMismatch) {
		t.Fatalf("CreateRun(o1) via /agent = %v, want ErrThreadRoomMismatch", err)
	}
	p := newRun("ghost", "r1")
	p.ParentRunID = "nope"
	if _, err := s.CreateRun(t.Context(), p, recorder.CreateOptions{}); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Fatalf("CreateRun(ghost, parent nope) = %v, want ErrRunNotFound", err)
	}
	tests := []struct {
		owner, route, want string
	}{
		{"alice", "/agent", "a1"},
		{"bob", "/agent", "b1"},
		{"alice", "/other", "o1"},
		{"mallory", "/agent", ""},
		{"", "/agent", ""},
	}
	for _, tc := range tests {
		got := listAll(t, s, recorder.ThreadQuery{Owner: tc.owner, Route: tc.route})
		if strings.Join(ids(got), " ") != tc.want {
			t.Errorf("ListThreads(%q, %q) = %v, want [%s]", tc.owner, tc.route, ids(got), tc.want)
		}
	}
}

func testIndexWindow(t *testing.T, s recorder.Store) {
	mustCreate(t, s, newRun("old", "r1"))
	tick()
	mid := time.Now()
	tick()
	mustCreate(t, s, newRun("new", "r1"))
	q := alice()
	q.Since = mid
	if got := ids(listAll(t, s, q)); strings.Join(got, " ") != "new" {
		t.Errorf("ListThreads(since mid) = %v, want [new]", got)
	}
	q = alice()
	q.Until = mid
	if got := ids(listAll(t, s, q)); strings.Join(got, " ") != "old" {
		t.Errorf("ListThreads(until mid) = %v, want [old]", got)
	}
	q.Since = mid.Add(time.Hour)
	if got := ids(listAll(t, s, q)); len(got) != 0 {
		t.Errorf("ListThreads(empty window) = %v, want none", got)
	}
}

func testIndexTitle(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	r.Title = "What is the weather in Paris?"
	mustCreate(t, s, r)
	r2 := newRun("t1", "r2")
	r2.Title = "a later question does not rename the thread"
	mustCreate(t, s, r2)
	long := newRun("t2", "r1")
	long.Title = strings.Repeat("é", recorder.MaxTitleBytes) + "\xff"
	mustCreate(t, s, long)
	bad := newRun("t3", "r1")
	bad.Title = "bad \xff\xfe utf-8"
	mustCreate(t, s, bad)
	titles := map[string]string{}
	for _, th := range listAll(t, s, alice()) {
		titles[th.ID] = th.Title
	}
	if titles["t1"] != r.Title {
		t.Errorf("title of t1 = %q, want %q", titles["t1"], r.Title)
	}
	if got := titles["t2"]; len(got) > recorder.MaxTitleBytes || !strings.HasPrefix(got, "éé") || strings.ContainsRune(got, '\uFFFD') && !strings.HasSuffix(got, "\uFFFD") {
		t.Errorf("title of t2 = %q (%d bytes), want the é run cut to at most %d bytes", got, len(got), recorder.MaxTitleBytes)
	}
	if got := titles["t3"]; got != "bad \uFFFD utf-8" && got != "bad \uFFFD\uFFFD utf-8" {
		t.Errorf("title of t3 = %q, want invalid bytes replaced", got)
	}
	if th, err := s.Thread(t.Context(), "t1"); err != nil || th.Title != r.Title {
		t.Errorf("Thread(t1) = %+v, %v; want title %q", th, err, r.Title)
	}
}

func testIndexBadCursor(t *testing.T, s recorder.Store) {
	mustCreate(t, s, newRun("t1", "r1"))
	for _, c := range []string{"x", "!!!", "djE6MTIzOnt9", "djI6MTIzOnQx", "djE6LTE6dDE", strings.Repeat("A", 5000), "djE6YWJjOnQx"} {
		q := alice()
		q.Cursor = c
		if _, err := s.ListThreads(t.Context(), q); !errors.Is(err, recorder.ErrInvalidPageCursor) {
			t.Errorf("ListThreads(cursor %.20q) = %v, want ErrInvalidPageCursor", c, err)
		}
	}
}

func testIndexSummary(t *testing.T, s recorder.Store) {
	r1 := newRun("t1", "r1")
	mustCreate(t, s, r1)
	mustAppend(t, s, recorder.Batch{Run: r1, Events: events(r1, 1, 3)})
	if err := s.FinishRun(t.Context(), "t1", "r1", recorder.StatusFinished, "", 3); err != nil {
		t.Fatal(err)
	}
	r2 := newRun("t1", "r2")
	r2.ParentRunID = "r1"
	mustCreate(t, s, r2)
	got := listAll(t, s, alice())
	if len(got) != 1 {
		t.Fatalf("ListThreads = %v, want [t1]", ids(got))
	}
	th := got[0]
	if th.RunCount != 2 || th.LatestRunID != "r2" || th.LatestStatus != recorder.StatusRunning ||
		th.CreatedAt.IsZero() || th.ActiveAt.Before(th.CreatedAt) || th.UpdatedAt.IsZero() || th.Owner != "alice" || th.Route != "/agent" {
		t.Errorf("ListThreads()[0] = %+v, want 2 runs, latest r2 running, times set", th)
	}
}

func testDeleteThread(t *testing.T, s recorder.Store) {
	r1 := newRun("t1", "r1")
	mustCreate(t, s, r1)
	mustAppend(t, s, recorder.Batch{Run: r1, Events: events(r1, 1, 5)})
	if err := s.PutCheckpoint(t.Context(), "t1", "r1", []byte("cp")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteThread(t.Context(), "t1", "alice", "/agent"); !errors.Is(err, recorder.ErrThreadBusy) {
		t.Fatalf("DeleteThread(t1) with a running run = %v, want ErrThreadBusy", err)
	}
	if got := mustEvents(t, s, "t1", "r1", 0, 0); len(got) != 5 {
		t.Fatalf("a refused delete removed events: %d left", len(got))
	}
	if err := s.FinishRun(t.Context(), "t1", "r1", recorder.StatusFinished, "", 5); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, newRun("t2", "r1"))
	if err := s.DeleteThread(t.Context(), "t1", "alice", "/agent"); err != nil {
		t.Fatalf("DeleteThread(t1) = %v, want nil", err)
	}
	if _, err := s.Thread(t.Context(), "t1"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("Thread(t1) after delete = %v, want ErrThreadNotFound", err)
	}
	if _, err := s.Events(t.Context(), "t1", "r1", 0, 0); !errors.Is(err, recorder.ErrRunNotFound) {
		t.Errorf("Events(t1/r1) after delete = %v, want ErrRunNotFound", err)
	}
	if _, err := s.Checkpoint(t.Context(), "t1", "r1"); !errors.Is(err, recorder.ErrNotFound) {
		t.Errorf("Checkpoint(t1/r1) after delete = %v, want ErrNotFound", err)
	}
	if got := ids(listAll(t, s, alice())); strings.Join(got, " ") != "t2" {
		t.Errorf("ListThreads after delete = %v, want [t2]", got)
	}
	if err := s.DeleteThread(t.Context(), "t1", "alice", "/agent"); !errors.Is(err, recorder.ErrThreadNotFound) {
		t.Errorf("DeleteThread(t1) twice = %v, want ErrThreadNotFound", err)
	}
	// The id can be used again, by anyone, with a fresh history.
	b := newRun("t1", "r1")
	b.Owner = "bob"
	mustCreate(t, s, b)
	if r := mustRun(t, s, "t1", "r1"); r.LastSeq != 0 || r.Owner != "bob" || r.Epoch != b.Epoch {
		t.Errorf("re-created t1/r1 = %+v, want a new empty run of bob", r)
	}
	if got := ids(listAll(t, s, alice())); strings.Join(got, " ") != "t2" {
		t.Errorf("alice's threads after bob re-used t1 = %v, want [t2]", got)
	}
	if got := ids(listAll(t, s, recorder.ThreadQuery{Owner: "bob", Route: "/agent"})); strings.Join(got, " ") != "t1" {
		t.Errorf("bob's threads = %v, want [t1]", got)
	}
}

func testDeleteThreadRefusals(t *testing.T, s recorder.Store) {
	r := newRun("t1", "r1")
	mustCreate(t, s, r)
	if err := s.FinishRun(t.Context(), "t1", "r1", recorder.StatusFinished, "", 0); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		thread, owner, route string
		want                 error
	}{
		{"t1", "mallory", "/agent", recorder.ErrThreadNotFound},
		{"t1", "", "/agent", recorder.ErrThreadNotFound},
		{"t1", "alice", "/other", recorder.ErrThreadNotFound},
		{"nope", "alice", "/agent", recorder.ErrThreadNotFound},
	}
	for _, tc := range tests {
		if err := s.DeleteThread(t.Context(), tc.thread, tc.owner, tc.route); !errors.Is(err, tc.want) {
			t.Errorf("DeleteThread(%s) by %q via %q = %v, want %v", tc.thread, tc.owner, tc.route, err, tc.want)
		}
	}
	for _, id := range []string{"", "a{b}", "a b", strings.Repeat("x", 1000), "*"} {
		if err := s.DeleteThread(t.Context(), id, "alice", "/agent"); err == nil {
			t.Errorf("DeleteThread(%.20q) = nil, want an invalid id error", id)
		}
	}
	if _, err := s.Thread(t.Context(), "t1"); err != nil {
		t.Errorf("Thread(t1) after refused deletes = %v, want it intact", err)
	}
}

// testIndexRacingRuns starts 200 runs on 50 threads from 20 goroutines while others list, and
// checks that every listing is well ordered and the final one exact.
func testIndexRacingRuns(t *testing.T, s recorder.Store) {
	const threads, runs, workers = 50, 200, 20
	ctx := t.Context()
	var wg sync.WaitGroup
	jobs := make(chan int)
	errs := make(chan error, runs)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				r := newRun(fmt.Sprintf("t%02d", n%threads), fmt.Sprintf("r%03d", n))
				if _, err := s.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	listCtx, stop := context.WithCancel(ctx)
	var lw sync.WaitGroup
	lw.Add(1)
	go func() {
		defer lw.Done()
		for listCtx.Err() == nil {
			q := alice()
			q.Limit = 7
			var got []recorder.ThreadSummary
			for {
				p, err := s.ListThreads(ctx, q)
				if err != nil {
					errs <- err
					return
				}
				got = append(got, p.Threads...)
				if p.NextCursor == "" {
					break
				}
				q.Cursor = p.NextCursor
			}
			seen := map[string]bool{}
			for _, th := range got {
				if seen[th.ID] {
					errs <- fmt.Errorf("a listing during the race repeated %s", th.ID)
				}
				seen[th.ID] = true
			}
		}
	}()
	for n := 0; n < runs; n++ {
		jobs <- n
	}
	close(jobs)
	wg.Wait()
	stop()
	lw.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := listAll(t, s, alice())
	checkOrder(t, got)
	if len(got) != threads {
		t.Fatalf("ListThreads after the race = %d threads, want %d", len(got), threads)
	}
	for _, th := range got {
		if th.RunCount != runs/threads {
			t.Errorf("thread %s: %d runs, want %d", th.ID, th.RunCount, runs/threads)
		}
	}
}

// testScanThreads: ScanThreads visits every thread once, whatever its owner and route (more
// threads than one scan page), and not a deleted one; an error from the callback ends it.
func testScanThreads(t *testing.T, s recorder.Store) {
	sc, ok := s.(recorder.ThreadScanner)
	if !ok {
		t.Fatalf("%T does not implement recorder.ThreadScanner", s)
	}
	want := map[string]bool{}
	for i := range 530 {
		r := newRun(fmt.Sprintf("s%03d", i), "r1")
		r.Owner, r.Route = fmt.Sprintf("owner%d", i%3), fmt.Sprintf("/route%d", i%2)
		mustCreate(t, s, r)
		want[r.ThreadID] = true
	}
	if err := s.FinishRun(t.Context(), "s007", "r1", recorder.StatusFinished, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteThread(t.Context(), "s007", "owner1", "/route1"); err != nil {
		t.Fatal(err)
	}
	delete(want, "s007")
	got := map[string]int{}
	if err := sc.ScanThreads(t.Context(), func(id string) error { got[id]++; return nil }); err != nil {
		t.Fatalf("ScanThreads = %v", err)
	}
	for id := range want {
		if got[id] != 1 {
			t.Errorf("thread %s visited %d times, want 1", id, got[id])
		}
	}
	for id := range got {
		if !want[id] {
			t.Errorf("ScanThreads visited %s, which is not a thread", id)
		}
	}
	stop := errors.New("stop")
	n := 0
	err := sc.ScanThreads(t.Context(), func(string) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("ScanThreads with a failing callback = %v after %d calls, want stop after 1", err, n)
	}
}

// testCreateAt: CreateOptions.At (an import of recorded history) sets the run's times, the
// new thread's creation and its activity, so the index lists it where its history puts it.
func testCreateAt(t *testing.T, s recorder.Store) {
	mustCreate(t, s, newRun("now", "r1"))
	at := time.Now().Add(-48 * time.Hour).Truncate(time.Millisecond)
	for i, run := range []string{"r1", "r2"} {
		r := newRun("old", run)
		if i > 0 {
			r.ParentRunID = "r1"
		}
		if _, err := s.CreateRun(t.Context(), r, recorder.CreateOptions{At: at.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatalf("CreateRun(old/%s, At) = %v", run, err)
		}
	}
	th, err := s.Thread(t.Context(), "old")
	if err != nil || !th.CreatedAt.Equal(at) {
		t.Fatalf("Thread(old) = %+v, %v; want CreatedAt %v", th, err, at)
	}
	runs, err := s.Runs(t.Context(), "old")
	if err != nil || len(runs) != 2 || !runs[0].CreatedAt.Equal(at) || !runs[1].CreatedAt.Equal(at.Add(time.Minute)) || !runs[1].UpdatedAt.Equal(at.Add(time.Minute)) {
		t.Fatalf("Runs(old) = %+v, %v; want created at %v and a minute later", runs, err, at)
	}
	got := listAll(t, s, alice())
	if strings.Join(ids(got), " ") != "now old" || !got[1].ActiveAt.Equal(at.Add(time.Minute)) {
		t.Fatalf("ListThreads = %v (old active %v), want now, then old active at %v", ids(got), got[len(got)-1].ActiveAt, at.Add(time.Minute))
	}
	q := alice()
	q.Until = at.Add(time.Hour)
	if got := listAll(t, s, q); strings.Join(ids(got), " ") != "old" {
		t.Errorf("ListThreads until an hour after At = %v, want old", ids(got))
	}
}
