package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/sse"
)

// sseEvents parses an SSE stream into its event ids and AG-UI events.
func sseEvents(t *testing.T, stream []byte) ([]string, []compact.Event) {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(stream), sse.Limits{})
	var ids []string
	var evs []compact.Event
	for {
		f, err := rd.Next()
		if err != nil {
			return ids, evs
		}
		if !f.HasData {
			continue
		}
		ev, err := compact.ParseEvent(bytes.Clone(f.Data)) // the frame's bytes are the reader's until its next Next
		if err != nil {
			t.Fatalf("stream event %q: %v", f.Data, err)
		}
		ids, evs = append(ids, f.ID), append(evs, ev)
	}
}

// TestServeCompactAtRest: a proxy on the disk store with AGUI_COMPACT_AFTER compacts the
// thread's ended runs (metric), and afterwards the history, the history as of a run (?run=),
// the thread attach's prelude and the export give what the raw streams gave; a resume from an
// event id inside a compacted run answers the full history with resume_failed.
func TestServeCompactAtRest(t *testing.T) {
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer agent.Close()
	cfg, err := loadConfig(map[string]string{"AGUI_UPSTREAM": agent.URL, "AGUI_LISTEN": "127.0.0.1:0",
		"AGUI_STORE_PATH": t.TempDir(), "AGUI_COMPACT_AFTER": "1ms"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	base := "http://" + <-ready
	get := func(path string, header ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}

	var raw [][]compact.Event
	var rawIDs [][]string
	for i := 1; i <= 3; i++ {
		res := runtest.PostRun(t, ctx, base+"/", runtest.RunBody("t", fmt.Sprintf("r%d", i), "chat"), nil)
		stream, _ := io.ReadAll(res.Body)
		res.Body.Close()
		ids, evs := sseEvents(t, stream)
		if len(evs) < 10 || evs[len(evs)-1].Type != "RUN_FINISHED" {
			t.Fatalf("run r%d streamed %d events: %.300s", i, len(evs), stream)
		}
		raw, rawIDs = append(raw, evs), append(rawIDs, ids)
	}
	replayOf := func(runs ...[]compact.Event) (string, string) {
		var all []compact.Event
		for _, r := range runs {
			all = append(all, r...)
		}
		m, s, err := compact.Replay(all)
		if err != nil {
			t.Fatal(err)
		}
		return string(m), string(s)
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		_, metrics := get("/metrics")
		if strings.Contains(string(metrics), `agui_proxy_store_compactions_total{result="compacted"} 3`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runs were never all compacted:\n%s", metrics)
		}
		time.Sleep(50 * time.Millisecond)
	}

	for _, tc := range []struct {
		path string
		runs [][]compact.Event
	}{{"/agui/threads/t", raw}, {"/agui/threads/t?run=r2", raw[:2]}, {"/agui/threads/t?run=r1", raw[:1]}} {
		res, body := get(tc.path)
		var v attach.ThreadView
		if err := json.Unmarshal(body, &v); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %.300s", tc.path, res.StatusCode, body)
		}
		wm, ws := replayOf(tc.runs...)
		if !jsonSame(v.Messages, wm) || !jsonSame(v.State, ws) {
			t.Errorf("GET %s after compaction = %s %s, want what the raw streams replay to: %s %s", tc.path, v.Messages, v.State, wm, ws)
		}
	}
	wm, ws := replayOf(raw...)
	_, prelude := get("/agui/threads/t/events")
	_, evs := sseEvents(t, prelude)
	if m, s, err := compact.Replay(evs); err != nil || !jsonSame(m, wm) || !jsonSame(s, ws) {
		t.Errorf("the prelude after compaction replays to %s %s (%v), want %s %s", m, s, err, wm, ws)
	}
	res, resumed := get("/agui/threads/t/events", "Last-Event-ID", rawIDs[1][4])
	_, evs = sseEvents(t, resumed)
	m, _, _ := compact.Replay(evs)
	if res.Header.Get(attach.ResumeHeader) != "full-history" || !bytes.Contains(resumed, []byte(attach.EventResumeFailed)) || !jsonSame(m, wm) {
		t.Errorf("resume from %s inside a compacted run: %s %q, messages %s; want full-history, resume_failed and the whole history",
			rawIDs[1][4], attach.ResumeHeader, res.Header.Get(attach.ResumeHeader), m)
	}
	_, export := get("/agui/threads/t/export")
	var doc attach.ExportDoc
	if err := json.Unmarshal(export, &doc); err != nil || len(doc.Runs) != 3 {
		t.Fatalf("export = %.300s (%v)", export, err)
	}
	var exported []compact.Event
	for i, r := range doc.Runs {
		if len(r.EventList) >= len(raw[i]) {
			t.Errorf("exported run %s holds %d events, want fewer than the %d streamed", r.RunID, len(r.EventList), len(raw[i]))
		}
		for _, e := range r.EventList {
			ev, err := compact.ParseEvent(e)
			if err != nil {
				t.Fatal(err)
			}
			exported = append(exported, ev)
		}
	}
	if m, s, err := compact.Replay(exported); err != nil || !jsonSame(m, wm) || !jsonSame(s, ws) {
		t.Errorf("the export replays to %s %s (%v), want %s %s", m, s, err, wm, ws)
	}

	cancel()
	waitServed(t, done, " (the sweeper not stopped?)")
}

// jsonSame reports whether a and b are the same JSON value.
func jsonSame(a []byte, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	da, _ := json.Marshal(x)
	db, _ := json.Marshal(y)
	return bytes.Equal(da, db)
}
