package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// lockedBuffer is a bytes.Buffer a logger may write to from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunRecognisedHoweverLabelled: a run body is recognised by what it is, not by its
// Content-Type: curl -d labels it application/x-www-form-urlencoded, fetch with a string
// text/plain, some clients send none, and none of them need to ask for an event stream. Each
// such run is recorded and streamed with ids; a POST answered with an event stream that is
// not a run is passed through and logged as not recorded.
func TestRunRecognisedHoweverLabelled(t *testing.T) {
	_, upstream := countingUpstream(t)
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	var logs lockedBuffer
	_, px := startProxy(t, upstream, Config{Store: store, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for i, ct := range []string{"application/x-www-form-urlencoded", "text/plain;charset=UTF-8", "", "application/vnd.agui+json"} {
		t.Run(ct, func(t *testing.T) {
			thread := "label-" + string(rune('a'+i))
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, px.URL+"/",
				strings.NewReader(`{"threadId":"`+thread+`","runId":"r1","messages":[]}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Del("Content-Type")
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if !bytes.Contains(body, []byte("\nid: r1:")) {
				t.Fatalf("Content-Type %q: the stream has no id lines (not recognised as a run):\n%s", ct, body)
			}
			run, err := store.Run(context.Background(), recorder.ThreadKey("", "default", thread), "r1")
			if err != nil {
				t.Fatalf("Content-Type %q: the run was not recorded: %v", ct, err)
			}
			if run.RunID != "r1" {
				t.Errorf("recorded run = %+v", run)
			}
		})
	}
	// Not a run (no runId), answered with an event stream: passed through, and the log says so.
	res, err := http.Post(px.URL+"/", "application/json", strings.NewReader(`{"threadId":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !bytes.Contains(body, []byte("RUN_FINISHED")) || bytes.Contains(body, []byte("\nid: ")) {
		t.Errorf("a POST that is not a run was not passed through untouched:\n%s", body)
	}
	if !strings.Contains(logs.String(), "is not a run") || !strings.Contains(logs.String(), "not recorded") {
		t.Errorf("no warning that the stream was not recorded; logs:\n%s", logs.String())
	}
	// A multipart upload is not read.
	res, err = http.Post(px.URL+"/upload", "multipart/form-data; boundary=x", strings.NewReader(`{"threadId":"m","runId":"r1"}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if _, err := store.Run(context.Background(), recorder.ThreadKey("", "default", "m"), "r1"); err == nil {
		t.Error("a multipart POST was taken for a run")
	}
}

// TestNotRunBodiesGoUnread: a POST labelled as a form, text or nothing whose body does not
// start as a JSON object is no run: it reaches the agent whole and unread, even above
// MaxBodyBytes; one that starts as an object is read like a JSON body (413 above the limit).
func TestNotRunBodiesGoUnread(t *testing.T) {
	echo := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %d", r.Header.Get("Content-Type"), n)
	}))
	_, px := startProxy(t, echo.URL, Config{Store: recorder.NewMemoryStore(recorder.MemoryConfig{}), MaxBodyBytes: 1 << 10})
	big := strings.Repeat("x", 64<<10)
	for _, tt := range []struct{ ct, body, want string }{
		{"text/plain", big, fmt.Sprintf("text/plain %d", len(big))},
		{"application/x-www-form-urlencoded", "a=1&b=" + big, fmt.Sprintf("application/x-www-form-urlencoded %d", len(big)+6)},
		{"", "  \n" + big, fmt.Sprintf(" %d", len(big)+3)},
		{"text/plain", "", "text/plain 0"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, px.URL+"/upload", strings.NewReader(tt.body))
		req.Header.Del("Content-Type")
		if tt.ct != "" {
			req.Header.Set("Content-Type", tt.ct)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || string(got) != tt.want {
			t.Errorf("POST %q of %d bytes = %d %q, want 200 %q", tt.ct, len(tt.body), res.StatusCode, got, tt.want)
		}
	}
	res, err := http.Post(px.URL+"/", "text/plain", strings.NewReader(`{"threadId":"t","runId":"r","state":"`+big+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if p := runtest.DecodeProblem(t, res); p.Code != CodeBodyTooLarge {
		t.Errorf("an object body above the limit = %+v, want 413 BodyTooLarge", p)
	}
}

// TestProblemsSayWhatToDo: the problems a newcomer meets first name what to change: the
// identity header to send, the parentRunId that is not a run of the thread, the variable
// that turns the inspector on; and ?after= with no id is refused rather than replaying from
// the start.
func TestProblemsSayWhatToDo(t *testing.T) {
	_, upstream := countingUpstream(t)
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	_, px := startProxy(t, upstream, Config{Store: store})
	get := func(path string) problem.Problem {
		t.Helper()
		res, err := http.Get(px.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		return runtest.DecodeProblem(t, res)
	}

	_, mt := startProxy(t, upstream, Config{Store: store, IdentityHeader: "X-Agui-User"})
	p := runtest.DecodeProblem(t, runtest.PostRun(t, t.Context(), mt.URL, `{"threadId":"t","runId":"r","messages":[]}`, nil))
	if p.Code != CodeIdentityRequired || !strings.Contains(p.Detail, "X-Agui-User header") {
		t.Errorf("run without an identity: %+v, want IdentityRequired naming the X-Agui-User header", p)
	}
	res, err := http.Get(mt.URL + "/agui/threads")
	if err != nil {
		t.Fatal(err)
	}
	if p := runtest.DecodeProblem(t, res); p.Code != CodeIdentityRequired || !strings.Contains(p.Detail, "X-Agui-User header") {
		t.Errorf("thread list without an identity: %+v", p)
	}

	res = runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"pt","runId":"r1","messages":[]}`, nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	p = runtest.DecodeProblem(t, runtest.PostRun(t, t.Context(), px.URL, `{"threadId":"pt","runId":"r2","parentRunId":"nope","messages":[]}`, nil))
	if p.Code != CodeRunNotFound || !strings.Contains(p.Detail, `parentRunId "nope" is not a run of thread "pt"`) || !strings.Contains(p.Detail, "/agui/threads/pt/runs") {
		t.Errorf("unknown parentRunId: %+v", p)
	}

	if p := get("/agui/ui/"); p.Status != http.StatusNotFound || !strings.Contains(p.Detail, "AGUI_INSPECTOR=true") {
		t.Errorf("/agui/ui/ with the inspector off: %+v, want a 404 saying AGUI_INSPECTOR=true", p)
	}
	if p := get("/agui/threads/pt/events?after="); p.Status != http.StatusBadRequest || p.Code != problem.CodeInvalidQuery || !strings.Contains(p.Detail, "after is empty") {
		t.Errorf("?after= with no id: %+v, want 400 InvalidQuery", p)
	}
	if p := get("/agui/threads/pt/runs/r1/events?after="); p.Status != http.StatusBadRequest {
		t.Errorf("run attach ?after= with no id: %+v, want 400", p)
	}
}
