package attach_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// TestThreadAttachEveryScenario attaches to a thread of two runs for every demo scenario and
// checks the prelude: it starts with RUN_STARTED, marks its end before the last terminal event,
// carries the last cursor, and replays to the same messages and state as the raw runs.
func TestThreadAttachEveryScenario(t *testing.T) {
	e := newEnv(t, proxy.Config{})
	store := e.h.Store()
	for _, sc := range []string{"chat", "tools", "parallel", "state", "reasoning", "steps", "activity", "snapshot", "fidelity", "chunks", "custom", "unicode", "error", "thinking"} {
		t.Run(sc, func(t *testing.T) {
			thread := "th-" + sc
			var raw []event
			for i, s := range []string{"chat", sc} {
				run := thread + "-r" + string(rune('1'+i))
				res := e.post(t, t.Context(), runtest.RunBody(thread, run, s, `,"intervalMs":0`), nil)
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				runtest.WaitRunEnded(t, store, thread, run)
				raw = append(raw, rawRun(t, store, thread, run)...)
			}
			res := e.get(t, "/agui/threads/"+thread+"/events", nil)
			defer res.Body.Close()
			if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("attach = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
			}
			got := readEvents(t, res.Body)
			if len(got) == 0 || got[0].typ != agui.RunStarted {
				t.Fatalf("prelude does not start with RUN_STARTED")
			}
			last := got[len(got)-1]
			if !agui.IsTerminal(last.typ) || got[len(got)-2].typ != agui.Custom || !bytes.Contains(got[len(got)-2].data, []byte(attach.EventReplayComplete)) {
				t.Errorf("prelude does not end with replay_complete then the terminal event")
			}
			if c, err := recorder.ParseCursor(last.id); err != nil || c.RunID != thread+"-r2" {
				t.Errorf("last prelude id %q: %+v %v", last.id, c, err)
			}
			if len(got) >= len(raw) && sc != "custom" && sc != "steps" {
				t.Errorf("prelude has %d events, raw %d: nothing compacted", len(got), len(raw))
			}
			gm, gs := replay(t, got)
			wm, ws := replay(t, raw)
			if !jsonEqual(gm, wm) || !jsonEqual(gs, ws) {
				t.Errorf("prelude replays to\n%s\n%s\nwant\n%s\n%s", gm, gs, wm, ws)
			}
		})
	}
}

// TestAttachToLiveRun attaches while a run streams: the prelude plus the live tail replay to the
// same end as the uninterrupted run, and event ids after the prelude increase strictly (no gap,
// no duplicate at the seam).
func TestAttachToLiveRun(t *testing.T) {
	e := newEnv(t, proxy.Config{})
	body := runtest.RunBody("live", "live-1", "state", `,"intervalMs":5`)
	res := e.post(t, t.Context(), body, nil)
	defer res.Body.Close()
	rd := sse.NewReader(res.Body, sse.Limits{})
	runtest.SkipEvents(t, rd, 10)
	const attachers = 50
	streams := make([][]event, attachers)
	var wg sync.WaitGroup
	for i := range attachers {
		wg.Go(func() {
			res := e.get(t, "/agui/threads/live/events", nil)
			defer res.Body.Close()
			streams[i] = readEvents(t, res.Body)
		})
	}
	io.Copy(io.Discard, res.Body)
	wg.Wait()
	runtest.WaitRunEnded(t, e.h.Store(), "live", "live-1")
	raw := rawRun(t, e.h.Store(), "live", "live-1")
	wm, ws := replay(t, raw)
	for i, got := range streams {
		gm, gs := replay(t, got)
		if !jsonEqual(gm, wm) || !jsonEqual(gs, ws) {
			t.Fatalf("attacher %d replays to %s %s, want %s %s", i, gm, gs, wm, ws)
		}
		var lastSeq int64
		for _, ev := range got {
			if ev.id == "" {
				continue
			}
			c, err := recorder.ParseCursor(ev.id)
			if err != nil {
				t.Fatalf("attacher %d: id %q: %v", i, ev.id, err)
			}
			if c.Seq <= lastSeq {
				t.Fatalf("attacher %d: seq %d after %d (duplicate at the seam)", i, c.Seq, lastSeq)
			}
			lastSeq = c.Seq
		}
		if lastSeq != int64(len(raw)) {
			t.Errorf("attacher %d ended at seq %d, run has %d", i, lastSeq, len(raw))
		}
	}
}

// TestResumePOST cuts the POST client after K events and re-POSTs the same input with
// Last-Event-ID: the answer alone replays to the uninterrupted run, and the agent is not called
// again.
func TestResumePOST(t *testing.T) {
	for _, k := range []int{1, 3, 8, 14, 18} {
		t.Run("k"+itoa(k), func(t *testing.T) {
			e := newEnv(t, proxy.Config{})
			thread, run := "resume-"+itoa(k), "run-"+itoa(k)
			body := runtest.RunBody(thread, run, "tools", `,"intervalMs":2`)
			ctx, cancel := context.WithCancel(t.Context())
			res := e.post(t, ctx, body, nil)
			rd := sse.NewReader(res.Body, sse.Limits{})
			var lastID string
			for n := 0; n < k; {
				f, err := rd.Next()
				if err != nil {
					t.Fatal(err)
				}
				if f.HasData {
					n++
					lastID = f.ID
				}
			}
			cancel()
			res.Body.Close()

			res = e.post(t, t.Context(), body, http.Header{"Last-Event-ID": {lastID}})
			defer res.Body.Close()
			if res.StatusCode != 200 || res.Header.Get(attach.ResumeHeader) != "exact" {
				b, _ := io.ReadAll(res.Body)
				t.Fatalf("resume = %d %s %s", res.StatusCode, res.Header.Get(attach.ResumeHeader), b)
			}
			got := readEvents(t, res.Body)
			if got[0].typ != agui.RunStarted || !bytes.Contains(got[0].data, []byte(`"runId":"`+run+`"`)) {
				t.Errorf("resume starts with %s", got[0].data)
			}
			runtest.WaitRunEnded(t, e.h.Store(), thread, run)
			raw := rawRun(t, e.h.Store(), thread, run)
			gm, gs := replay(t, got)
			wm, ws := replay(t, raw)
			if !jsonEqual(gm, wm) || !jsonEqual(gs, ws) {
				t.Errorf("resumed stream replays to\n%s %s\nwant\n%s %s", gm, gs, wm, ws)
			}
			runs, _ := e.h.Store().Runs(context.Background(), thread)
			if len(runs) != 1 {
				t.Errorf("%d runs recorded, want 1", len(runs))
			}
		})
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// TestLastEventIDAttach resumes a thread attach from an event id: the raw events strictly
// after it, nothing else.
func TestLastEventIDAttach(t *testing.T) {
	e := newEnv(t, proxy.Config{})
	res := e.post(t, t.Context(), runtest.RunBody("le", "le-1", "chat", ""), nil)
	all := readEvents(t, res.Body)
	res.Body.Close()
	runtest.WaitRunEnded(t, e.h.Store(), "le", "le-1")
	for _, via := range []string{"header", "query"} {
		t.Run(via, func(t *testing.T) {
			cut := all[4].id
			var res *http.Response
			if via == "header" {
				res = e.get(t, "/agui/threads/le/events", http.Header{"Last-Event-ID": {cut}})
			} else {
				res = e.get(t, "/agui/threads/le/events?after="+cut, nil)
			}
			defer res.Body.Close()
			got := readEvents(t, res.Body)
			if len(got) != len(all)-5 {
				t.Fatalf("got %d events after %s, want %d", len(got), cut, len(all)-5)
			}
			for i, ev := range got {
				if ev.id != all[5+i].id || !bytes.Equal(ev.data, all[5+i].data) {
					t.Fatalf("event %d = %s %s, want %s", i, ev.id, ev.data, all[5+i].id)
				}
			}
		})
	}
	t.Run("run attach", func(t *testing.T) {
		res := e.get(t, "/agui/threads/le/runs/le-1/events?after="+all[len(all)-2].id, nil)
		defer res.Body.Close()
		if got := readEvents(t, res.Body); len(got) != 1 || got[0].typ != agui.RunFinished {
			t.Errorf("run attach after the next-to-last event = %d events", len(got))
		}
	})
}

// TestLastEventIDEarlierRun: a cursor in an earlier run of the branch resumes exactly across
// the later runs; a cursor in a run of another branch (a fork) answers the full history with
// resume_failed.
func TestLastEventIDEarlierRun(t *testing.T) {
	e := newEnv(t, proxy.Config{})
	var runs [][]event
	for _, body := range []string{
		runtest.RunBody("ler", "a", "chat", ""),
		runtest.RunBody("ler", "b", "chat", ""),
		strings.Replace(runtest.RunBody("ler", "fork", "chat", ""), `"threadId"`, `"parentRunId":"a","threadId"`, 1),
		strings.Replace(runtest.RunBody("ler", "c", "chat", ""), `"threadId"`, `"parentRunId":"b","threadId"`, 1),
	} {
		res := e.post(t, t.Context(), body, nil)
		runs = append(runs, readEvents(t, res.Body))
		res.Body.Close()
	}
	runtest.WaitRunEnded(t, e.h.Store(), "ler", "c")
	res := e.get(t, "/agui/threads/ler/events", http.Header{"Last-Event-ID": {runs[1][3].id}})
	got := readEvents(t, res.Body)
	res.Body.Close()
	want := append(slices.Clone(runs[1][4:]), runs[3]...)
	if res.Header.Get(attach.ResumeHeader) != "exact" || len(got) != len(want) {
		t.Fatalf("resume from run b's 4th event: %s, %d events, want exact, %d", res.Header.Get(attach.ResumeHeader), len(got), len(want))
	}
	for i := range want {
		if got[i].id != want[i].id || !bytes.Equal(got[i].data, want[i].data) {
			t.Fatalf("event %d = %s, want %s", i, got[i].id, want[i].id)
		}
	}
	res = e.get(t, "/agui/threads/ler/events", http.Header{"Last-Event-ID": {runs[2][3].id}})
	got = readEvents(t, res.Body)
	res.Body.Close()
	if res.Header.Get(attach.ResumeHeader) != "full-history" || len(got) < 2 || !bytes.Contains(got[1].data, []byte(attach.EventResumeFailed)) {
		t.Errorf("resume from the fork's event: %s, %d events; want full-history with resume_failed", res.Header.Get(attach.ResumeHeader), len(got))
	}
}

// TestAttachErrors checks the clear 4xx answers for unknown, foreign and malformed ids, and the
// explicit signal when a cursor cannot be honoured exactly.
func TestAttachErrors(t *testing.T) {
	e := newEnv(t, proxy.Config{IdentityHeader: "X-User"})
	alice := http.Header{"X-User": {"alice"}}
	res := e.post(t, t.Context(), runtest.RunBody("own", "own-1", "chat", ""), alice)
	all := readEvents(t, res.Body)
	res.Body.Close()
	runtest.WaitRunEnded(t, e.h.Store(), recorder.ThreadKey("alice", recorder.DefaultRoute, "own"), "own-1")
	c, _ := recorder.ParseCursor(all[3].id)
	wrongEpoch := recorder.Cursor{RunID: c.RunID, Epoch: "aaaaaaaa", Seq: c.Seq}.String()
	tests := []struct {
		name, path string
		hdr        http.Header
		status     int
		code       string
	}{
		{"unknown thread", "/agui/threads/nope/events", alice, 404, "ThreadNotFound"},
		{"foreign thread", "/agui/threads/own/events", http.Header{"X-User": {"bob"}}, 404, "ThreadNotFound"},
		{"anonymous", "/agui/threads/own/events", nil, 401, "IdentityRequired"},
		{"hostile thread id", "/agui/threads/a%7Bb%7D/events", alice, 400, "InvalidId"},
		{"redis id syntax", "/agui/threads/own/events?after=%24", alice, 400, attach.CodeInvalidEventID},
		{"dash", "/agui/threads/own/events?after=-", alice, 400, attach.CodeInvalidEventID},
		{"newline injection", "/agui/threads/own/events?after=1%0Adata:%20%7B%7D", alice, 400, attach.CodeInvalidEventID},
		{"unknown run in cursor", "/agui/threads/own/events?after=zz:aaaaaaaa:3", alice, 404, "RunNotFound"},
		{"unknown run", "/agui/threads/own/runs/zz/events", alice, 404, "RunNotFound"},
		{"run attach, wrong epoch", "/agui/threads/own/runs/own-1/events?after=" + wrongEpoch, alice, 410, attach.CodeUnrecoverablePosition},
		{"run attach, foreign cursor", "/agui/threads/own/runs/own-1/events?after=other:aaaaaaaa:1", alice, 400, attach.CodeInvalidEventID},
		{"unknown endpoint", "/agui/nothing", alice, 404, "NotFound"},
		{"history of foreign thread", "/agui/threads/own", http.Header{"X-User": {"bob"}}, 404, "ThreadNotFound"},
		{"export of foreign thread", "/agui/threads/own/export", http.Header{"X-User": {"bob"}}, 404, "ThreadNotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.get(t, tt.path, tt.hdr)
			defer res.Body.Close()
			var p struct{ Code string }
			body, _ := io.ReadAll(res.Body)
			jsonUnmarshal(body, &p)
			if res.StatusCode != tt.status || p.Code != tt.code {
				t.Errorf("GET %s = %d %s, want %d %s", tt.path, res.StatusCode, body, tt.status, tt.code)
			}
		})
	}
	t.Run("thread attach, wrong epoch", func(t *testing.T) {
		res := e.get(t, "/agui/threads/own/events?after="+wrongEpoch, alice)
		defer res.Body.Close()
		got := readEvents(t, res.Body)
		if res.Header.Get(attach.ResumeHeader) != "full-history" || len(got) < 2 || got[0].typ != agui.RunStarted ||
			!bytes.Contains(got[1].data, []byte(attach.EventResumeFailed)) {
			t.Fatalf("= %s, %d events; want full history with the resume_failed signal", res.Header.Get(attach.ResumeHeader), len(got))
		}
	})
}

// TestStopRun stops a running run: every client sees it end with its open message closed and
// RUN_FINISHED outcome cancelled; the run is recorded as cancelled.
func TestStopRun(t *testing.T) {
	e := newEnv(t, proxy.Config{})
	res := e.post(t, t.Context(), runtest.RunBody("stop", "stop-1", "bench", `,"events":2000,"intervalMs":5`), nil)
	defer res.Body.Close()
	rd := sse.NewReader(res.Body, sse.Limits{})
	for n := 0; n < 3; {
		f, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if f.HasData {
			n++
		}
	}
	sres, err := http.Post(e.px.URL+"/agui/threads/stop/runs/stop-1/stop", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	sres.Body.Close()
	if sres.StatusCode != http.StatusAccepted {
		t.Fatalf("stop = %d", sres.StatusCode)
	}
	rest := readEvents(t, res.Body)
	last := rest[len(rest)-1]
	if last.typ != agui.RunFinished || !bytes.Contains(last.data, []byte(`"outcome":{"type":"cancelled"}`)) ||
		rest[len(rest)-2].typ != agui.TextMessageEnd {
		t.Errorf("stream ended with %s then %s, want TEXT_MESSAGE_END then RUN_FINISHED outcome cancelled", rest[len(rest)-2].data, last.data)
	}
	r := runtest.WaitRunEnded(t, e.h.Store(), "stop", "stop-1")
	if r.Status != recorder.StatusCancelled || r.Detail != "" {
		t.Errorf("run = %+v", r)
	}
	sres, _ = http.Post(e.px.URL+"/agui/threads/stop/runs/stop-1/stop", "application/json", nil)
	sres.Body.Close()
	if sres.StatusCode != http.StatusConflict {
		t.Errorf("second stop = %d, want 409", sres.StatusCode)
	}
}

// TestOrphanedRunIsInterrupted simulates a replica that died while pumping a run: attachers
// do not hang, they get RUN_ERROR INTERRUPTED once the lease expired.
func TestOrphanedRunIsInterrupted(t *testing.T) {
	e := newEnv(t, proxy.Config{})
	store := e.h.Store()
	ctx := context.Background()
	run := recorder.Run{ThreadID: "orphan", RunID: "o-1", Epoch: recorder.NewEpoch(), Status: recorder.StatusRunning,
		Route: proxy.DefaultRoute, CreatedAt: time.Now(), Node: "dead-node", LeaseUntil: time.Now().Add(-time.Minute)}
	if _, err := store.CreateRun(ctx, run, recorder.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	frame, _ := sse.AppendEvent(nil, sse.Event{ID: recorder.Cursor{RunID: "o-1", Epoch: run.Epoch, Seq: 1}.String(),
		Data: []byte(`{"type":"RUN_STARTED","threadId":"orphan","runId":"o-1"}`)})
	if err := store.Append(ctx, []recorder.Batch{{Run: run, Events: []recorder.Event{{Seq: 1, Type: agui.RunStarted, Frame: frame}}}}); err != nil {
		t.Fatal(err)
	}
	res := e.get(t, "/agui/threads/orphan/events", nil)
	defer res.Body.Close()
	got := readEvents(t, res.Body)
	if last := got[len(got)-1]; last.typ != agui.RunError || !bytes.Contains(last.data, []byte("INTERRUPTED")) {
		t.Fatalf("attach ended with %s, want RUN_ERROR INTERRUPTED", last.data)
	}
	if r, _ := store.Run(ctx, "orphan", "o-1"); r.Status != recorder.StatusInterrupted {
		t.Errorf("run status %s, want interrupted", r.Status)
	}
}

// TestFollowHeartbeats: a ?follow=1 thread attach sends heartbeats while the thread is idle,
// before its next run and again after it, and streams the next run in between.
func TestFollowHeartbeats(t *testing.T) {
	e := newEnv(t, proxy.Config{}) // heartbeats every 50 ms
	res := e.post(t, t.Context(), runtest.RunBody("hb", "hb-1", "state"), nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	runtest.WaitRunEnded(t, e.h.Store(), "hb", "hb-1")
	fol := e.get(t, "/agui/threads/hb/events?follow=1", nil)
	defer fol.Body.Close()
	rd := bufio.NewReader(fol.Body)
	// waitFor reads lines until one holds want, counting the heartbeats on the way.
	waitFor := func(want string) (beats int) {
		t.Helper()
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("follow stream ended waiting for %q: %v", want, err)
			}
			if line == ": ping\n" {
				beats++
			}
			if strings.Contains(line, want) {
				return beats
			}
		}
	}
	waitFor(attach.EventReplayComplete)
	for range 3 {
		waitFor(": ping") // idle before the next run
	}
	res = e.post(t, t.Context(), runtest.RunBody("hb", "hb-2", "state"), nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	waitFor(`"runId":"hb-2"`)
	waitFor(agui.RunFinished)
	for range 3 {
		waitFor(": ping") // idle after it
	}
}
