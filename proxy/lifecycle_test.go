package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// Both ways of writing the stream: the pump's own writes to the connection it took over, and
// net/http's (StreamKeepAlive).
func TestSlowClientDoesNotSlowTheRun(t *testing.T) {
	for _, keepAlive := range []bool{false, true} {
		t.Run(fmt.Sprintf("StreamKeepAlive=%v", keepAlive), func(t *testing.T) { testSlowClient(t, keepAlive) })
	}
}

func testSlowClient(t *testing.T, keepAlive bool) {
	agent := runtest.StartAgent(t)
	h, px := startProxy(t, agent.URL, Config{ClientQueueBytes: 64 << 10, MaxBodyBytes: 64 << 10, MaxEventBytes: 64 << 10, StreamKeepAlive: keepAlive})
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

// TestCheckpointBeforeTerminal: a run's checkpoint is stored before its terminal event reaches
// the client, so the client's next run start finds it (one small read) instead of computing
// the branch. The agent keeps its stream open after RUN_FINISHED: the pump has not ended the
// run when the client has read RUN_FINISHED (the client's stream stays open with the agent's,
// which may go on: AfterTerminalKeep), so only a checkpoint written before the terminal event
// can be there. The next run, sending the whole conversation, gets RUN_STARTED.input with
// only its new message.
func TestCheckpointBeforeTerminal(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	agent := turnAgent(t, func(in *agui.RunInput, reply string) []string {
		return []string{
			`{"type":"RUN_STARTED","threadId":"` + in.ThreadID + `","runId":"` + in.RunID + `"}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"` + reply + `","role":"assistant"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"` + reply + `","delta":"hi"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"` + reply + `"}`,
			`{"type":"RUN_FINISHED","threadId":"` + in.ThreadID + `","runId":"` + in.RunID + `"}`,
		}
	}, func(in *agui.RunInput, r *http.Request) {
		if in.RunID == "r1" {
			select { // the stream stays open after RUN_FINISHED
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	h, px := startProxy(t, agent.URL, Config{})
	res := runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t","runId":"r1","messages":[{"id":"u1","role":"user","content":"hello"}]}`, nil)
	for rd := sse.NewReader(res.Body, sse.Limits{}); ; {
		f, err := rd.Next()
		if err != nil {
			t.Fatalf("run r1's stream ended before RUN_FINISHED: %v", err)
		}
		if typ, _ := agui.EventType(f.Data); typ == agui.RunFinished {
			break
		}
	}
	res.Body.Close()
	if _, err := h.Store().Checkpoint(t.Context(), "t", "r1"); err != nil {
		t.Fatalf("checkpoint of r1 when the client read RUN_FINISHED: %v", err)
	}
	res = runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"t","runId":"r2","messages":[{"id":"u1","role":"user","content":"hello"},{"id":"a-r1","role":"assistant","content":"hi"},{"id":"u2","role":"user","content":"again"}]}`, nil)
	frames, err := readFrames(t, res.Body)
	res.Body.Close()
	if err != nil || len(frames) == 0 {
		t.Fatalf("run r2: %v", err)
	}
	var started struct {
		Input struct {
			Messages []struct{ ID string } `json:"messages"`
		} `json:"input"`
	}
	if err := json.Unmarshal(dataFrames(frames)[0].data, &started); err != nil || len(started.Input.Messages) != 1 || started.Input.Messages[0].ID != "u2" {
		t.Fatalf("r2 RUN_STARTED = %s (%v), want input.messages holding only u2", dataFrames(frames)[0].data, err)
	}
}

func mustRead(t testing.TB, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Error(err)
	}
	return b
}
