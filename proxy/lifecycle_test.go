package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// TestShutdownInterruptsAtDeadline starts a long run, shuts down with a short deadline, and
// checks that the run is ended with a recorded RUN_ERROR INTERRUPTED that the client receives,
// that new runs are refused while draining, and that Ready reports it.
func TestShutdownInterruptsAtDeadline(t *testing.T) {
	agent := runtest.StartAgent(t)
	h, px := startProxy(t, agent.URL, Config{})
	res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("sd", "sd-1", "bench", `,"events":100000,"intervalMs":5`), nil)
	defer res.Body.Close()
	rd := sse.NewReader(res.Body, sse.Limits{})
	runtest.SkipEvents(t, rd, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- h.Shutdown(ctx) }()
	for !h.draining.Load() {
		time.Sleep(time.Millisecond)
	}
	if err := h.Ready(context.Background()); !errors.Is(err, ErrShuttingDown) {
		t.Errorf("Ready while draining = %v", err)
	}
	r2 := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("sd2", "sd-2", "chat"), nil)
	if p := runtest.DecodeProblem(t, r2); r2.StatusCode != 503 || p.Code != CodeShuttingDown {
		t.Errorf("new run while draining = %d %s", r2.StatusCode, p.Code)
	}
	frames, _ := readFrames(t, res.Body)
	got := dataFrames(frames)
	if last := got[len(got)-1]; last.eventType() != agui.RunError || !bytes.Contains(last.data, []byte(CodeInterrupted)) {
		t.Errorf("client stream ended with %s", last.data)
	}
	if err := <-shut; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want the deadline error", err)
	}
	r, err := h.Store().Run(context.Background(), "sd", "sd-1")
	if err == nil && r.Status != recorder.StatusInterrupted {
		t.Errorf("run status %s, want interrupted", r.Status)
	}
}

// TestSlowClientDoesNotSlowTheRun has a client that stops reading: it is dropped at its queue
// limit while the run streams to its end at full speed and is recorded whole (docs/design.md F20).
func TestSlowClientDoesNotSlowTheRun(t *testing.T) {
	agent := runtest.StartAgent(t)
	h, px := startProxy(t, agent.URL, Config{ClientQueueBytes: 64 << 10, MaxBodyBytes: 64 << 10, MaxEventBytes: 64 << 10})
	conn, err := net.Dial("tcp", px.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	body := runtest.RunBody("slow", "slow-1", "bench", `,"events":20000,"intervalMs":0`)
	req, _ := http.NewRequest(http.MethodPost, px.URL+"/", bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	// Never read: the client's socket buffers fill, then its queue.
	rep := agent.WaitReport(t, "slow-1")
	if !rep.Completed {
		t.Fatalf("agent report %+v: the stalled client stopped the run", rep)
	}
	run := runtest.WaitRunEnded(t, h.Store(), "slow", "slow-1")
	if run.Status != recorder.StatusFinished || run.LastSeq != int64(rep.EventsSent) {
		t.Errorf("run %+v, want finished with %d events", run, rep.EventsSent)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _ := io.Copy(io.Discard, conn)
	if n >= int64(rep.EventsSent*200) {
		t.Errorf("the stalled client received %d bytes: it was not dropped", n)
	}
}

// TestUpstreamIdleWatchdog checks both sides of AGUI_UPSTREAM_IDLE_TIMEOUT: a stream whose
// frames keep coming well inside the window is never cut (the watchdog re-arms from the last
// frame), and one that goes silent ends with RUN_ERROR UPSTREAM_IDLE (docs/design.md F7).
func TestUpstreamIdleWatchdog(t *testing.T) {
	const idle = 300 * time.Millisecond
	up := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		io.WriteString(w, "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n")
		rc.Flush()
		for range 20 { // 1 s of activity, a frame every 50 ms
			time.Sleep(50 * time.Millisecond)
			io.WriteString(w, ": busy\n\n")
			rc.Flush()
		}
		if r.URL.Query().Get("stall") == "" {
			io.WriteString(w, "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n")
			return
		}
		<-r.Context().Done() // silent until the proxy gives up
	}))
	for _, tt := range []struct {
		query, want string
	}{{"", agui.RunFinished}, {"?stall=1", agui.RunError}} {
		h, px := startProxy(t, up.URL+tt.query, Config{UpstreamIdleTimeout: idle})
		res := runtest.PostRun(t, t.Context(), px.URL+"/", `{"threadId":"t","runId":"r","messages":[]}`, nil)
		frames, _ := readFrames(t, res.Body)
		res.Body.Close()
		got := dataFrames(frames)
		last := got[len(got)-1]
		if last.eventType() != tt.want || (tt.want == agui.RunError && !bytes.Contains(last.data, []byte(CodeUpstreamIdle))) {
			t.Errorf("upstream %q: stream ended with %s, want %s", tt.query, last.data, tt.want)
		}
		runtest.WaitRunEnded(t, h.Store(), "t", "r")
	}
}
