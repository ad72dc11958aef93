package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
)

// startTanStack starts tanstack/server.mjs (the real @tanstack/ai 0.58.0 RunAgentInput server
// with a scripted model adapter, gated) on a free port and returns its URL. It fails, never
// skips, when node or the pinned package is missing.
func startTanStack(t *testing.T) string {
	t.Helper()
	requireOfficialClient(t)
	if _, err := os.Stat(filepath.Join("tanstack", "node_modules", "@tanstack", "ai", "package.json")); err != nil {
		t.Fatalf("e2e/tanstack/node_modules lacks @tanstack/ai (%v): run `cd e2e/tanstack && npm ci`", err)
	}
	cmd := exec.CommandContext(t.Context(), "node", "server.mjs", "--port", "0", "--gated")
	cmd.Dir = "tanstack"
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("server.mjs said %q (%v), want \"listening <port>\"", line, err)
	}
	return "http://127.0.0.1:" + port
}

// tanStackEvents reads the data of every event of r.
func tanStackEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	rd := sse.NewReader(r, sse.Limits{})
	for {
		f, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		if f.HasData {
			out = append(out, string(f.Data))
		}
	}
}

func typeOf(data string) string { t, _ := agui.EventType([]byte(data)); return t }

func typeList(evs []string) string {
	var ts []string
	for _, e := range evs {
		ts = append(ts, typeOf(e))
	}
	return strings.Join(ts, " ")
}

// TestTanStackContinuationThroughProxy: the real TanStack AI server answers a turn with a
// server tool as RUN_STARTED, the first model call, RUN_FINISHED, then the tool's result, the
// second model call and a second RUN_FINISHED. Behind the proxy the client gets all of it as
// the server sent it (same types, same bytes: only RUN_STARTED gains input); a client cut in
// the second model call re-POSTs with its last event id and gets the rest live; the store
// holds the response as sent and the run attach replays it. On memory, disk and Redis.
func TestTanStackContinuationThroughProxy(t *testing.T) {
	agent := startTanStack(t)
	release := func(run, what string) {
		res, err := http.Post(agent+"/release?run="+run+"&"+what+"=1", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	body := func(thread, run string) string {
		return `{"threadId":"` + thread + `","runId":"` + run + `","state":{},"messages":[{"id":"u1","role":"user","content":"weather in Oslo?"}],"tools":[],"context":[],"forwardedProps":{}}`
	}
	// Every request is bounded: a stream that lacks an expected event fails the test instead
	// of waiting for the gated server forever.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	post := func(url, b string, hdr http.Header) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		for k, v := range hdr {
			req.Header[k] = v
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The server's own answer, for reference.
	release("ref", "tool")
	release("ref", "answer")
	res := post(agent+"/", body("ref", "ref"), nil)
	direct := tanStackEvents(t, res.Body)
	res.Body.Close()
	want := "RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED " +
		"TOOL_CALL_RESULT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED"
	if got := typeList(direct); got != want {
		t.Fatalf("the TanStack server answered %s\nwant %s (has @tanstack/ai changed?)", got, want)
	}

	stores := map[string]func(t *testing.T) recorder.Store{
		"memory": func(t *testing.T) recorder.Store { return nil },
		"disk": func(t *testing.T) recorder.Store {
			s, err := recorder.OpenDiskStore(t.Context(), recorder.DiskConfig{Dir: t.TempDir(), NoSync: true})
			if err != nil {
				t.Fatalf("OpenDiskStore: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"redis": func(t *testing.T) recorder.Store {
			s, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{URL: redistest.Start(t).URL(), Prefix: "e2e", FollowBlock: 100 * time.Millisecond})
			if err != nil {
				t.Fatalf("NewRedisStore: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for _, name := range []string{"memory", "disk", "redis"} {
		t.Run(name, func(t *testing.T) {
			front := startProxy(t, agent+"/", stores[name](t))
			thread, run := "ts-"+name, "ts-"+name+"-r1"
			res := post(front, body(thread, run), nil)
			rd := sse.NewReader(res.Body, sse.Limits{})
			var first, firstIDs []string
			var last string
			for len(first) < 11 { // through the answer's first delta: inside the tool's part
				f, err := rd.Next()
				if err != nil {
					t.Fatalf("the proxied stream ended after %s: %v", typeList(first), err)
				}
				if !f.HasData {
					continue
				}
				first, last, firstIDs = append(first, string(f.Data)), f.ID, append(firstIDs, f.ID)
				if len(first) == 7 {
					// TanStack holds a tool-calling model call's RUN_FINISHED until its tools ran.
					release(run, "tool")
				}
			}
			res.Body.Close() // cut
			if got := typeList(first); got != strings.Join(strings.Fields(want)[:11], " ") {
				t.Fatalf("before the cut the client read %s", got)
			}
			// The resume stream restates the thread (no ids), then sends recorded and live
			// events with their ids; a client that skips the ids it already has (as
			// @agui-proxy/client does) ends up with the whole response once, in order.
			resumed := post(front, body(thread, run), http.Header{"Last-Event-Id": {last}})
			seen := map[string]bool{}
			for _, id := range firstIDs {
				seen[id] = true
			}
			merged := append([]string(nil), first...)
			rrd := sse.NewReader(resumed.Body, sse.Limits{})
			restated, released := 0, false
			for {
				f, err := rrd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("the resume stream broke after %s: %v", typeList(merged), err)
				}
				switch {
				case !f.HasData:
				case f.ID == "":
					restated++
				case !seen[f.ID]:
					seen[f.ID] = true
					merged = append(merged, string(f.Data))
				}
				if !released && restated > 0 && f.ID != "" {
					release(run, "answer") // the model goes on once the client is back
					released = true
				}
			}
			resumed.Body.Close()
			if restated == 0 || !released {
				t.Errorf("the resume stream restated %d events before its live part", restated)
			}
			if got := typeList(merged); got != want {
				t.Errorf("the client's events with the resume's = %s\nwant %s", got, want)
			}
			if !strings.Contains(merged[len(merged)-3], `"delta":"in Oslo."`) {
				t.Errorf("the answer's last delta = %s", merged[len(merged)-3])
			}
			// The run attach replays the response as the server sent it.
			deadline := time.Now().Add(20 * time.Second)
			var replay []string
			for {
				res, err := http.Get(strings.TrimSuffix(front, "/") + "/agui/threads/" + thread + "/runs/" + run + "/events")
				if err != nil {
					t.Fatal(err)
				}
				replay = tanStackEvents(t, res.Body)
				res.Body.Close()
				if typeList(replay) == want || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond) // (the run ends once the resumed stream did; this is only a bound)
			}
			if got := typeList(replay); got != want {
				t.Fatalf("run attach = %s\nwant %s", got, want)
			}
			for i := 1; i < 11; i++ { // the proxy's bytes are the agent's (RUN_STARTED gains input)
				if replay[i] != first[i] {
					t.Errorf("replayed event %d = %s, the client read %s", i+1, replay[i], first[i])
				}
			}
			var d, p map[string]any
			json.Unmarshal([]byte(direct[8]), &d)
			json.Unmarshal([]byte(replay[8]), &p)
			delete(d, "timestamp")
			delete(p, "timestamp")
			if db, pb := must(json.Marshal(d)), must(json.Marshal(p)); !bytes.Equal(db, pb) {
				t.Errorf("TOOL_CALL_RESULT through the proxy = %s, the server's own = %s", pb, db)
			}
		})
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
