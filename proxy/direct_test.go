package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/sse"
)

// TestRunEveryScenarioKeepAlive is TestRunEveryScenario with the streams written by net/http.
func TestRunEveryScenarioKeepAlive(t *testing.T) {
	testEveryScenario(t, Config{StreamKeepAlive: true})
}

// TestStreamConnection: by default a run's HTTP/1.1 stream is written on the connection the
// proxy took over: chunked, and when the server has a keepalive.Listener the connection goes
// back to the server at the stream's end and carries the client's next run; without one,
// Connection: close, and the next run opens a new connection. With StreamKeepAlive the
// stream goes through net/http and the connection carries the next run.
func TestStreamConnection(t *testing.T) {
	agent := runtest.StartAgent(t)
	for _, mode := range []struct {
		name      string
		start     func(testing.TB, string, Config) (*Handler, *httptest.Server)
		cfg       Config
		keepAlive bool
	}{
		{"taken-over", startProxy, Config{}, false},
		{"taken-over-returned", startProxyKeepAlive, Config{}, true},
		{"StreamKeepAlive", startProxy, Config{StreamKeepAlive: true}, true},
	} {
		keepAlive := mode.keepAlive
		t.Run(mode.name, func(t *testing.T) {
			_, px := mode.start(t, agent.URL, mode.cfg)
			parent := ""
			for i := range 3 {
				reused := false
				ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { reused = c.Reused }})
				body := fmt.Sprintf(`{"threadId":"conn-%s","runId":"r%d","parentRunId":%q,"messages":[],"forwardedProps":{"scenario":"chat"}}`, mode.name, i, parent)
				if parent == "" {
					body = fmt.Sprintf(`{"threadId":"conn-%s","runId":"r%d","messages":[],"forwardedProps":{"scenario":"chat"}}`, mode.name, i)
				}
				res := runtest.PostRun(t, ctx, px.URL, body, nil)
				frames, err := readFrames(t, res.Body)
				res.Body.Close()
				if err != nil {
					t.Fatalf("run %d: reading the stream: %v", i, err)
				}
				got := dataFrames(frames)
				if len(got) < 2 || got[len(got)-1].eventType() != agui.RunFinished {
					t.Fatalf("run %d: %d events, the last not RUN_FINISHED", i, len(got))
				}
				if len(res.TransferEncoding) != 1 || res.TransferEncoding[0] != "chunked" {
					t.Errorf("run %d: Transfer-Encoding %v, want chunked", i, res.TransferEncoding)
				}
				if res.Close == keepAlive {
					t.Errorf("run %d: Connection: close is %v, want %v", i, res.Close, !keepAlive)
				}
				if i > 0 && reused != keepAlive {
					t.Errorf("run %d reused the connection: %v, want %v", i, reused, keepAlive)
				}
				parent = fmt.Sprintf("r%d", i)
			}
		})
	}
}

// TestShutdownWaitsForDirectStreams: Shutdown returns once the streams it took over were
// written to their end (their runs ended first).
func TestShutdownWaitsForDirectStreams(t *testing.T) {
	agent := runtest.StartAgent(t)
	h, px := startProxy(t, agent.URL, Config{})
	res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("shut", "shut-1", "bench", `,"events":50,"intervalMs":2`), nil)
	defer res.Body.Close()
	done := make(chan error, 1)
	go func() { done <- h.Shutdown(context.Background()) }()
	frames, err := readFrames(t, res.Body)
	if err != nil {
		t.Fatalf("reading the stream during shutdown: %v", err)
	}
	got := dataFrames(frames)
	if last := got[len(got)-1]; last.eventType() != agui.RunFinished {
		t.Errorf("the stream ended with %s, want RUN_FINISHED (the run drains)", last.eventType())
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestAttachTakeOver: a ?follow=1 thread attach over HTTP/1.1 takes its connection over
// (Connection: close), streams the thread's next run, and, once its client closed the
// connection, ends at its next heartbeat (the Handler's own goroutine for it returns). With
// StreamKeepAlive it stays with net/http.
func TestAttachTakeOver(t *testing.T) {
	agent := runtest.StartAgent(t)
	for _, keepAlive := range []bool{false, true} {
		t.Run(fmt.Sprintf("StreamKeepAlive=%v", keepAlive), func(t *testing.T) {
			h, px := startProxy(t, agent.URL, Config{StreamKeepAlive: keepAlive, HeartbeatInterval: 50 * time.Millisecond, AttachFollowPoll: 20 * time.Millisecond})
			res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("t-take", "r1", "chat"), nil)
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			runtest.WaitRunEnded(t, h.Store(), "t-take", "r1")

			conn, err := net.Dial("tcp", px.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "GET /agui/threads/t-take/events?follow=1 HTTP/1.1\r\nHost: x\r\n\r\n")
			br := bufio.NewReader(conn)
			att, err := http.ReadResponse(br, nil)
			if err != nil || att.StatusCode != http.StatusOK {
				t.Fatalf("follow attach: %v %v", att, err)
			}
			if att.Close == keepAlive {
				t.Errorf("Connection: close is %v, want %v", att.Close, !keepAlive)
			}
			rd := sse.NewReader(att.Body, sse.Limits{})
			next := func() string {
				for {
					f, err := rd.Next()
					if err != nil {
						t.Fatalf("reading the follow stream: %v", err)
					}
					if f.HasData && strings.HasPrefix(f.ID, "r2:") {
						typ, _ := agui.EventType(f.Data)
						return typ
					}
				}
			}
			redistest.WaitFor(t, 30*time.Second, "the follower's watch", func() bool { return h.threads.Live().Watches() == 1 })
			res = runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("t-take", "r2", "chat"), nil)
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			for typ := next(); !agui.IsTerminal(typ); typ = next() {
			}
			conn.Close() // the tab is closed while the stream follows the thread
			redistest.WaitFor(t, 30*time.Second, "the follower gone", func() bool { return h.threads.Live().Watches() == 0 })
			if !keepAlive {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				if err := h.attach.Wait(ctx); err != nil {
					t.Errorf("the taken-over stream's goroutine did not end: %v", err)
				}
			}
		})
	}
}

// TestAttachTakeOverReturnsConnection: an attach stream whose connection the proxy took over
// (a thread's events, which end with its last run) hands the connection back at its end
// when the server has a keepalive.Listener: the headers do not say Connection: close and
// the client's next requests (another attach, then a run) travel on the same connection.
func TestAttachTakeOverReturnsConnection(t *testing.T) {
	agent := runtest.StartAgent(t)
	h, px := startProxyKeepAlive(t, agent.URL, Config{HeartbeatInterval: time.Minute})
	res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("t-back", "r1", "chat"), nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	runtest.WaitRunEnded(t, h.Store(), "t-back", "r1")

	conn, err := net.Dial("tcp", px.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	for i := range 2 {
		fmt.Fprintf(conn, "GET /agui/threads/t-back/events HTTP/1.1\r\nHost: x\r\n\r\n")
		att, err := http.ReadResponse(br, nil)
		if err != nil || att.StatusCode != http.StatusOK {
			t.Fatalf("attach %d: %v %v", i, att, err)
		}
		if att.Close {
			t.Errorf("attach %d: Connection: close, want the connection kept", i)
		}
		frames, err := readFrames(t, att.Body)
		if err != nil {
			t.Fatalf("attach %d: reading the stream: %v", i, err)
		}
		if got := dataFrames(frames); len(got) == 0 || got[len(got)-1].eventType() != agui.RunFinished {
			t.Fatalf("attach %d: the stream did not end with RUN_FINISHED", i)
		}
	}
	body := runtest.RunBody("t-back", "r2", "chat")
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	run, err := http.ReadResponse(br, nil)
	if err != nil || run.StatusCode != http.StatusOK {
		t.Fatalf("run on the same connection: %v %v", run, err)
	}
	frames, err := readFrames(t, run.Body)
	if err != nil {
		t.Fatalf("run on the same connection: reading the stream: %v", err)
	}
	if got := dataFrames(frames); got[len(got)-1].eventType() != agui.RunFinished {
		t.Errorf("run on the same connection: ended with %s", got[len(got)-1].eventType())
	}
}
