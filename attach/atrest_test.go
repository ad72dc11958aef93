package attach_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
	"github.com/agui-proxy/agui-proxy/thread"
)

// compactingStore is a memory store that compacts a run at rest (thread.Service.CompactRun,
// what AGUI_COMPACT_AFTER's sweeper does) when a reader first asks for the run's events or
// follows it after arm: the compaction then falls between a reader's read of the run's
// metadata and of its events, where a sweeper's can fall at any time.
type compactingStore struct {
	*recorder.MemoryStore
	svc *thread.Service // on the memory store itself: its reads do not trigger

	// before, when set, runs just before the compaction (under the store's test lock).
	before func()

	mu     sync.Mutex
	target recorder.RunRef
	result thread.RestResult
	err    error
	fired  bool
}

func newCompactingStore(t *testing.T) *compactingStore {
	mem := recorder.NewMemoryStore(recorder.MemoryConfig{})
	svc, err := thread.New(thread.Config{Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	return &compactingStore{MemoryStore: mem, svc: svc}
}

// arm makes the next Events or Follow of the run compact it first.
func (c *compactingStore) arm(threadID, runID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.target, c.fired = recorder.RunRef{ThreadID: threadID, RunID: runID}, false
}

// compacted fails t unless the armed compaction ran and replaced the run's events.
func (c *compactingStore) compacted(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fired || c.err != nil || c.result != thread.RestCompacted {
		t.Fatalf("the run was not compacted at rest while read (fired %v, result %v, err %v): the test proves nothing", c.fired, c.result, c.err)
	}
}

func (c *compactingStore) trigger(ctx context.Context, threadID, runID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fired || c.target != (recorder.RunRef{ThreadID: threadID, RunID: runID}) {
		return
	}
	c.fired = true
	if c.before != nil {
		c.before()
	}
	c.result, c.err = c.svc.CompactRun(context.WithoutCancel(ctx), threadID, runID)
}

func (c *compactingStore) Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]recorder.Event, error) {
	c.trigger(ctx, threadID, runID)
	return c.MemoryStore.Events(ctx, threadID, runID, after, limit)
}

func (c *compactingStore) Follow(ctx context.Context, threadID, runID string, after int64) (recorder.Subscription, error) {
	c.trigger(ctx, threadID, runID)
	return c.MemoryStore.Follow(ctx, threadID, runID, after)
}

// TestResumeMeetsCompactionAtRest resumes from an event id in the middle of an ended run whose
// events are replaced by their merged form (compaction at rest) between the resume's read of
// the run and of its events. Every way in must still end with the uninterrupted run's
// messages and state: the POST resume and the thread attach answer the full history
// (resume_failed: the id's epoch is gone), the run attach refuses the id (410). Before, the
// answer was built from the merged events as if they were the raw ones: the assistant message
// stopped at the cut (CI, e2e TestResumeOfficialClientCompactAtRest, scenario crlf, K=15).
func TestResumeMeetsCompactionAtRest(t *testing.T) {
	store := newCompactingStore(t)
	e := newEnv(t, proxy.Config{Store: store})
	for i, via := range []string{"post", "thread", "run"} {
		t.Run(via, func(t *testing.T) {
			threadID, runID := "rest-"+via, "rest-run-"+itoa(i)
			body := runtest.RunBody(threadID, runID, "tools", "")
			res := e.post(t, t.Context(), body, nil)
			all := readEvents(t, res.Body)
			res.Body.Close()
			runtest.WaitRunEnded(t, store, threadID, runID)
			wm, ws := replay(t, all)
			cut := all[len(all)/2].id

			store.arm(threadID, runID)
			switch via {
			case "post":
				res = e.post(t, t.Context(), body, http.Header{"Last-Event-ID": {cut}})
			case "thread":
				res = e.get(t, "/agui/threads/"+threadID+"/events", http.Header{"Last-Event-ID": {cut}})
			case "run":
				res = e.get(t, "/agui/threads/"+threadID+"/runs/"+runID+"/events", http.Header{"Last-Event-ID": {cut}})
			}
			defer res.Body.Close()
			store.compacted(t)
			if via == "run" {
				if res.StatusCode != http.StatusGone {
					t.Fatalf("run attach from an id the compaction replaced = %d, want 410", res.StatusCode)
				}
				return
			}
			if res.StatusCode != 200 || res.Header.Get(attach.ResumeHeader) != "full-history" {
				t.Fatalf("resume = %d %q, want 200 full-history", res.StatusCode, res.Header.Get(attach.ResumeHeader))
			}
			got := readEvents(t, res.Body)
			if len(got) == 0 || !agui.IsTerminal(got[len(got)-1].typ) {
				t.Fatalf("resume stream of %d events does not end with the run's end", len(got))
			}
			gm, gs := replay(t, got)
			if !jsonEqual(gm, wm) || !jsonEqual(gs, ws) {
				t.Errorf("resumed stream replays to\n%s %s\nwant\n%s %s", gm, gs, wm, ws)
			}
		})
	}
}

// TestAttachTailsRunCompactedBeforeItsTail: a thread attach from an id in the thread's first run
// tails the second from its start; that run is compacted at rest as the tail follows it. The
// tail goes on in the run's new epoch (nothing of it was written yet) and the stream ends with
// the thread's messages and state.
func TestAttachTailsRunCompactedBeforeItsTail(t *testing.T) {
	store := newCompactingStore(t)
	e := newEnv(t, proxy.Config{Store: store})
	var runs [][]event
	for _, runID := range []string{"a", "b"} {
		res := e.post(t, t.Context(), runtest.RunBody("rest-tail", runID, "tools", ""), nil)
		runs = append(runs, readEvents(t, res.Body))
		res.Body.Close()
		runtest.WaitRunEnded(t, store, "rest-tail", runID)
	}
	full := e.get(t, "/agui/threads/rest-tail/events", nil)
	wm, ws := replay(t, readEvents(t, full.Body))
	full.Body.Close()

	store.arm("rest-tail", "b")
	cut := len(runs[0]) - 3
	res := e.get(t, "/agui/threads/rest-tail/events", http.Header{"Last-Event-ID": {runs[0][cut].id}})
	defer res.Body.Close()
	got := readEvents(t, res.Body)
	store.compacted(t)
	if res.Header.Get(attach.ResumeHeader) != "exact" {
		t.Fatalf("resume from run a's event = %q, want exact", res.Header.Get(attach.ResumeHeader))
	}
	if len(got) <= 2 || got[len(got)-1].typ != agui.RunFinished {
		t.Fatalf("attach stream of %d events does not end with run b's end", len(got))
	}
	b, err := store.Run(t.Context(), "rest-tail", "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range got[2:] {
		if c, err := recorder.ParseCursor(ev.id); err != nil || c.RunID != "b" || c.Epoch != b.Epoch {
			t.Fatalf("run b's event id %q: not of its new epoch %s", ev.id, b.Epoch)
		}
	}
	gm, gs := replay(t, append(append([]event(nil), runs[0][:cut+1]...), got...))
	if !jsonEqual(gm, wm) || !jsonEqual(gs, ws) {
		t.Errorf("the stream continues run a's first events to\n%s %s\nwant\n%s %s", gm, gs, wm, ws)
	}
}

// TestAttachBreaksOffWhenTailedRunIsCompacted: a thread attach from an id inside a running run
// pumped elsewhere (here: written to the store directly) tails it from the store; the run ends
// and is compacted at rest before the tail reads on. The merged events, numbered anew, cannot
// continue what the client has: the stream is broken off (no clean end) so the client resumes,
// and its id, of the old epoch, then gets the full history. Through net/http and with the
// connection taken over.
func TestAttachBreaksOffWhenTailedRunIsCompacted(t *testing.T) {
	for _, keepAlive := range []bool{false, true} {
		name := "take-over"
		if keepAlive {
			name = "net/http"
		}
		t.Run(name, func(t *testing.T) {
			cs := newCompactingStore(t)
			run := recorder.Run{ThreadID: "brk", RunID: "brk-1", Epoch: recorder.NewEpoch(), Route: recorder.DefaultRoute}
			frame := func(seq int64, data string) recorder.Event {
				f, err := sse.AppendEvent(nil, sse.Event{ID: recorder.Cursor{RunID: run.RunID, Epoch: run.Epoch, Seq: seq}.String(), Data: []byte(data)})
				if err != nil {
					t.Fatal(err)
				}
				typ, _ := agui.EventType([]byte(data))
				return recorder.Event{Seq: seq, Type: typ, Frame: f}
			}
			evs := []recorder.Event{frame(1, `{"type":"RUN_STARTED","threadId":"brk","runId":"brk-1"}`),
				frame(2, `{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`)}
			for seq := int64(3); seq <= 12; seq++ {
				evs = append(evs, frame(seq, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"word `+itoa(int(seq))+` "}`))
			}
			ctx := t.Context()
			if _, err := cs.CreateRun(ctx, run, recorder.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := cs.Append(ctx, []recorder.Batch{{Run: run, Events: evs}}); err != nil {
				t.Fatal(err)
			}
			// Before the tail's Follow reads on, the run gets its last events and its end, then
			// is compacted at rest: the follow meets the merged events.
			cs.before = func() {
				tail := []recorder.Event{frame(13, `{"type":"TEXT_MESSAGE_END","messageId":"m1"}`),
					frame(14, `{"type":"RUN_FINISHED","threadId":"brk","runId":"brk-1"}`)}
				if err := cs.Append(ctx, []recorder.Batch{{Run: run, Events: tail}}); err != nil {
					t.Error(err)
				}
				if err := cs.FinishRun(ctx, run.ThreadID, run.RunID, recorder.StatusFinished, "", 14); err != nil {
					t.Error(err)
				}
			}
			e := newEnv(t, proxy.Config{Store: cs, StreamKeepAlive: keepAlive})
			cut := recorder.Cursor{RunID: run.RunID, Epoch: run.Epoch, Seq: 2}.String()
			cs.arm(run.ThreadID, run.RunID)
			res := e.get(t, "/agui/threads/brk/events", http.Header{"Last-Event-ID": {cut}})
			defer res.Body.Close()
			if res.Header.Get(attach.ResumeHeader) != "exact" {
				t.Fatalf("resume from a running run = %q, want exact", res.Header.Get(attach.ResumeHeader))
			}
			_, err := io.ReadAll(res.Body)
			cs.compacted(t)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("the stream ended with %v, want a broken stream (io.ErrUnexpectedEOF)", err)
			}
			// The client resumes from its id: the full history, with the whole message.
			again := e.get(t, "/agui/threads/brk/events", http.Header{"Last-Event-ID": {cut}})
			defer again.Body.Close()
			got := readEvents(t, again.Body)
			if again.Header.Get(attach.ResumeHeader) != "full-history" {
				t.Fatalf("resume after the break = %q, want full-history", again.Header.Get(attach.ResumeHeader))
			}
			m, _ := replay(t, got)
			if !strings.Contains(m, "word 3 word 4") || !strings.Contains(m, "word 12 ") {
				t.Errorf("the full history holds %s, want the whole message", m)
			}
		})
	}
}

// TestEndedRunReadInPages: an ended run longer than a store page (storedPage) is written from
// the store page by page; run attach, thread attach from an id and the POST resume each get
// every event after their start once, in order, through the run's end.
func TestEndedRunReadInPages(t *testing.T) {
	e := newEnv(t, proxy.Config{})
	body := runtest.RunBody("pages", "pages-1", "bench", `,"events":4500,"intervalMs":0`)
	res := e.post(t, t.Context(), body, nil)
	all := readEvents(t, res.Body)
	res.Body.Close()
	runtest.WaitRunEnded(t, e.h.Store(), "pages", "pages-1")
	if len(all) < 4500 {
		t.Fatalf("the run has %d events", len(all))
	}
	from := 10
	for _, via := range []string{"run", "run-after", "thread", "post"} {
		t.Run(via, func(t *testing.T) {
			var res *http.Response
			want := all[from:]
			switch via {
			case "run":
				res, want = e.get(t, "/agui/threads/pages/runs/pages-1/events", nil), all
			case "run-after":
				res = e.get(t, "/agui/threads/pages/runs/pages-1/events", http.Header{"Last-Event-ID": {all[from-1].id}})
			case "thread":
				res = e.get(t, "/agui/threads/pages/events", http.Header{"Last-Event-ID": {all[from-1].id}})
			case "post":
				res = e.post(t, t.Context(), body, http.Header{"Last-Event-ID": {all[from-1].id}})
			}
			defer res.Body.Close()
			got := readEvents(t, res.Body)
			if via == "post" { // the prelude (RUN_STARTED, the compacted first events, the marker) first
				for len(got) > 0 && got[0].id != want[0].id {
					got = got[1:]
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d events after the start, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].id != want[i].id || !bytes.Equal(got[i].data, want[i].data) {
					t.Fatalf("event %d = %s, want %s", i, got[i].id, want[i].id)
				}
			}
		})
	}
}

// flakyEvents is a memory store whose Events fails once, after arm, from its skip-th call on
// (a store read failing between two pages of a long ended run).
type flakyEvents struct {
	*recorder.MemoryStore
	mu      sync.Mutex
	skip    int
	armed   bool
	failed  bool
	calls   int
	retries int
}

func (f *flakyEvents) Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]recorder.Event, error) {
	f.mu.Lock()
	fail := false
	if f.armed && !f.failed {
		if f.calls++; f.calls > f.skip {
			fail, f.failed = true, true
		}
	} else if f.failed {
		f.retries++
	}
	f.mu.Unlock()
	if fail {
		return nil, errors.New("injected: store read failed")
	}
	return f.MemoryStore.Events(ctx, threadID, runID, after, limit)
}

// TestEndedRunPagesSurviveStoreError: a read of a long ended run's second page fails once; the
// stream started, so the read is retried (as the catch-up's) and the attacher still gets every
// event once, in order, through the run's end.
func TestEndedRunPagesSurviveStoreError(t *testing.T) {
	store := &flakyEvents{MemoryStore: recorder.NewMemoryStore(recorder.MemoryConfig{}), skip: 1}
	e := newEnv(t, proxy.Config{Store: store})
	res := e.post(t, t.Context(), runtest.RunBody("flaky", "flaky-1", "bench", `,"events":4500,"intervalMs":0`), nil)
	all := readEvents(t, res.Body)
	res.Body.Close()
	runtest.WaitRunEnded(t, store, "flaky", "flaky-1")
	store.mu.Lock()
	store.armed = true
	store.mu.Unlock()
	res = e.get(t, "/agui/threads/flaky/runs/flaky-1/events", nil)
	defer res.Body.Close()
	got := readEvents(t, res.Body)
	store.mu.Lock()
	failed, retries := store.failed, store.retries
	store.mu.Unlock()
	if !failed || retries == 0 {
		t.Fatalf("failed %v, retries %d: the second page's read did not fail and retry (the test proves nothing)", failed, retries)
	}
	if len(got) != len(all) {
		t.Fatalf("%d events, want the run's %d", len(got), len(all))
	}
	for i := range all {
		if got[i].id != all[i].id {
			t.Fatalf("event %d = %s, want %s", i, got[i].id, all[i].id)
		}
	}
}
