package demoagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// startAgent serves New(cfg) on a real socket; reports collects every OnRunDone.
func startAgent(t testing.TB, cfg Config) (url string, reports <-chan RunReport) {
	t.Helper()
	ch := make(chan RunReport, 64)
	cfg.OnRunDone = func(r RunReport) { ch <- r }
	srv := httptest.NewServer(New(cfg))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

func runBody(scenario, props string) string {
	if props == "" {
		props = "{}"
	}
	fp := props
	if scenario != "" {
		fp = fmt.Sprintf(`{"scenario":%q,%s`, scenario, strings.TrimPrefix(props, "{"))
		fp = strings.Replace(fp, ",}", "}", 1)
	}
	return `{"threadId":"thread-1","runId":"run-1","state":{},"tools":[],"context":[],` +
		`"messages":[{"id":"u1","role":"user","content":"hello"}],"forwardedProps":` + fp + `}`
}

func post(t testing.TB, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func waitReport(t testing.TB, reports <-chan RunReport) RunReport {
	t.Helper()
	select {
	case r := <-reports:
		return r
	case <-t.Context().Done():
		t.Fatal("no RunReport before the test ended")
		return RunReport{}
	}
}

// TestHandlerStreamsEvents: over HTTP every scenario sends exactly Events' bytes, each framed
// as the scenario says, and reports a completed run.
func TestHandlerStreamsEvents(t *testing.T) {
	url, reports := startAgent(t, Config{})
	for _, name := range Scenarios() {
		if name == "bench" || name == "slow" {
			continue // time-stamped or paced: covered below
		}
		t.Run(name, func(t *testing.T) {
			res := post(t, t.Context(), url, runBody(name, ""))
			defer res.Body.Close()
			if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || ct != "text/event-stream" {
				t.Fatalf("POST %s = %d %q, want 200 text/event-stream", name, res.StatusCode, ct)
			}
			got, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			var in Input
			var want bytes.Buffer
			in, _ = decodeRequest([]byte(runBody(name, "")))
			events, err := Events(name, in)
			if err != nil {
				t.Fatal(err)
			}
			sep := "\n\n"
			if name == "crlf" {
				sep = "\r\n\r\n"
			}
			for i, ev := range events {
				want.WriteString("data: ")
				want.Write(ev)
				if name == "unterminated" && i == len(events)-1 {
					want.WriteString("\n")
				} else {
					want.WriteString(sep)
				}
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("POST %s body =\n%s\nwant\n%s", name, got, want.Bytes())
			}
			rep := waitReport(t, reports)
			if !rep.Completed || rep.Err != nil || rep.EventsSent != len(events) || rep.Scenario != name || rep.RunID != "run-1" {
				t.Errorf("RunReport = %+v, want completed %s with %d events", rep, name, len(events))
			}
		})
	}
}

// TestHandlerBenchStamps: live bench events carry the send time, not zero.
func TestHandlerBenchStamps(t *testing.T) {
	url, reports := startAgent(t, Config{})
	before := time.Now().UnixNano()
	res := post(t, t.Context(), url, runBody("bench", `{"events":20}`))
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	stamped := 0
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type      string `json:"type"`
			Timestamp int64  `json:"timestamp"`
			RawEvent  struct {
				SentNs int64 `json:"sentNs"`
			} `json:"rawEvent"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != typeTextContent {
			continue
		}
		stamped++
		if ev.RawEvent.SentNs < before || ev.Timestamp != ev.RawEvent.SentNs/1e6 {
			t.Errorf("bench event = %s, want sentNs >= %d and timestamp = sentNs in ms", line, before)
		}
	}
	if stamped != 20 {
		t.Errorf("bench sent %d content events, want 20", stamped)
	}
	if rep := waitReport(t, reports); !rep.Completed || rep.EventsSent != 24 {
		t.Errorf("RunReport = %+v, want completed with 24 events", rep)
	}
}

// TestHandlerPacing: intervalMs pauses between events. Only a lower bound is checked; timers
// never fire early, so this cannot fail on a slow machine.
func TestHandlerPacing(t *testing.T) {
	url, reports := startAgent(t, Config{Delay: time.Hour}) // intervalMs overrides Delay
	start := time.Now()
	res := post(t, t.Context(), url, runBody("slow", `{"events":3,"intervalMs":10}`))
	_, err := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	rep := waitReport(t, reports)
	if elapsed := time.Since(start); elapsed < time.Duration(rep.EventsSent-1)*10*time.Millisecond {
		t.Errorf("run of %d events with intervalMs 10 took %v, want at least %v", rep.EventsSent, elapsed,
			time.Duration(rep.EventsSent-1)*10*time.Millisecond)
	}
}

// TestHandlerStopsOnClientCancel is the property proxy tests rely on: when the client goes
// away the agent stops (it is not a fire-and-forget producer), and OnRunDone says so.
func TestHandlerStopsOnClientCancel(t *testing.T) {
	url, reports := startAgent(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res := post(t, ctx, url, runBody("slow", `{"events":1000,"intervalMs":5}`))
	br := bufio.NewReader(res.Body)
	for frames := 0; frames < 3; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\n" {
			frames++
		}
	}
	cancel()
	res.Body.Close()
	rep := waitReport(t, reports)
	if rep.Completed || rep.EventsSent < 3 || rep.EventsSent >= 1003 || rep.Err == nil {
		t.Errorf("RunReport after cancel = %+v, want not completed, 3..1002 events, an error", rep)
	}
}

func TestHandlerRejects(t *testing.T) {
	url, _ := startAgent(t, Config{})
	tests := []struct {
		name, method, body string
		want               int
	}{
		{"GET", http.MethodGet, "", http.StatusMethodNotAllowed},
		{"not JSON", http.MethodPost, "{oops", http.StatusBadRequest},
		{"no runId", http.MethodPost, `{"threadId":"t"}`, http.StatusBadRequest},
		{"unknown scenario", http.MethodPost, runBody("nope", ""), http.StatusBadRequest},
		{"bad param", http.MethodPost, runBody("chat", `{"events":-2}`), http.StatusBadRequest},
		{"message not object", http.MethodPost, `{"threadId":"t","runId":"r","messages":[1]}`, http.StatusBadRequest},
		{"too large", http.MethodPost, `{"threadId":"t","runId":"r","x":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, url, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tt.want {
				t.Errorf("%s %s = %d, want %d", tt.method, tt.name, res.StatusCode, tt.want)
			}
		})
	}
}

// TestRunStopsOnWriteError: a failing ResponseWriter stops the run at the first event.
func TestRunStopsOnWriteError(t *testing.T) {
	var got RunReport
	a := New(Config{OnRunDone: func(r RunReport) { got = r }})
	w := &failWriter{ResponseRecorder: httptest.NewRecorder()}
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(runBody("chat", "")))
	a.ServeHTTP(w, r)
	if got.Completed || got.EventsSent != 0 || !errors.Is(got.Err, errWrite) {
		t.Errorf("RunReport = %+v, want 0 events and the write error", got)
	}
}

var errWrite = errors.New("client gone")

type failWriter struct{ *httptest.ResponseRecorder }

func (f *failWriter) Write([]byte) (int, error) { return 0, errWrite }
