package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/hydrate"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// said posts a run and returns the text the agent streamed (the echo scenario says what it
// received), or fails on a non-200 answer.
func said(t *testing.T, url, body string) string {
	t.Helper()
	res := runtest.PostRun(t, t.Context(), url, body, nil)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("POST %s: %d %s", body, res.StatusCode, b)
	}
	frames, err := readFrames(t, res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, f := range dataFrames(frames) {
		var ev struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		json.Unmarshal(f.data, &ev)
		if ev.Type == "TEXT_MESSAGE_CONTENT" {
			text.WriteString(ev.Delta)
		}
	}
	return text.String()
}

func echoBody(thread, run, state string, messages ...string) string {
	return fmt.Sprintf(`{"threadId":%q,"runId":%q,"state":%s,"messages":[%s],"tools":[],"context":[],"forwardedProps":{"scenario":"echo"}}`,
		thread, run, state, strings.Join(messages, ","))
}

func user(id string) string {
	return fmt.Sprintf(`{"id":%q,"role":"user","content":"question %s"}`, id, id)
}

// testHydrationStores runs f on the memory store and on a private redis-server.
func testHydrationStores(t *testing.T, f func(t *testing.T, store recorder.Store)) {
	t.Run("memory", func(t *testing.T) {
		s := recorder.NewMemoryStore(recorder.MemoryConfig{})
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
	t.Run("redis", func(t *testing.T) { f(t, newRedisStore(t, redistest.Start(t))) })
}

func TestHydrateMissingMessages(t *testing.T) {
	testHydrationStores(t, func(t *testing.T, store recorder.Store) {
		agent := runtest.StartAgent(t)
		_, px := startProxy(t, agent.URL, Config{Store: store})
		if got, want := said(t, px.URL, echoBody("t1", "r1", `{}`, user("u1"))), "received 1 messages [u1]; state {}"; got != want {
			t.Fatalf("first run: agent said %q, want %q", got, want)
		}
		// A reloaded client sends only its new message: the agent gets the whole branch.
		want := "received 3 messages [u1 msg-r1-1 u2]; state {}"
		if got := said(t, px.URL, echoBody("t1", "r2", `{}`, user("u2"))); got != want {
			t.Errorf("after a reload: agent said %q, want %q", got, want)
		}
		// A client that sends everything is forwarded untouched.
		full := echoBody("t1", "r3", `{}`, user("u1"), `{"id":"msg-r1-1","role":"assistant","content":"x"}`, user("u2"),
			`{"id":"msg-r2-1","role":"assistant","content":"y"}`, user("u3"))
		if got, want := said(t, px.URL, full), "received 5 messages [u1 msg-r1-1 u2 msg-r2-1 u3]; state {}"; got != want {
			t.Errorf("full history: agent said %q, want %q", got, want)
		}
		// Branching from r1: the branch through r1 only.
		branch := strings.Replace(echoBody("t1", "r4", `{}`, user("u4")), `"runId":"r4"`, `"runId":"r4","parentRunId":"r1"`, 1)
		if got, want := said(t, px.URL, branch), "received 3 messages [u1 msg-r1-1 u4]; state {}"; got != want {
			t.Errorf("branch from r1: agent said %q, want %q", got, want)
		}
	})
}

func TestHydrateState(t *testing.T) {
	agent := runtest.StartAgent(t)
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	_, px := startProxy(t, agent.URL, Config{Store: store})
	res := runtest.PostRun(t, t.Context(), px.URL, runtest.RunBody("t1", "r1", "state"), nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	got := said(t, px.URL, echoBody("t1", "r2", `{}`, user("u2")))
	if !strings.HasPrefix(got, "received 3 messages [u-r1 ") || !strings.Contains(got, `"counter":`) {
		t.Errorf("agent said %q, want the branch's messages and its state (with a counter)", got)
	}
	// The client's own state wins in the default mode.
	got = said(t, px.URL, echoBody("t1", "r3", `{"mine":true}`, user("u3")))
	if !strings.HasSuffix(got, `state {"mine":true}`) {
		t.Errorf("agent said %q, want the client's state", got)
	}
}

func TestHydrateModes(t *testing.T) {
	agent := runtest.StartAgent(t)
	for _, tc := range []struct {
		mode hydrate.Mode
		want string
	}{
		{hydrate.ModeOff, "received 1 messages [u2]; state null"},
		{hydrate.ModeAlways, "received 3 messages [u1 msg-r1-1 u2]; state null"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			_, px := startProxy(t, agent.URL, Config{Store: recorder.NewMemoryStore(recorder.MemoryConfig{}), Hydrate: tc.mode})
			said(t, px.URL, echoBody("t1", "r1", `null`, user("u1")))
			if got := said(t, px.URL, echoBody("t1", "r2", `null`, user("u2"))); got != tc.want {
				t.Errorf("agent said %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := New(Config{Hydrate: "sometimes"}); err == nil || !strings.Contains(err.Error(), "off, missing or always") {
		t.Errorf("New with Hydrate \"sometimes\" = %v, want an error naming the modes", err)
	}
}

// TestHydrateRefusesAGap: a branch with events missing in the store is never sent shortened;
// the run is refused with HistoryIncomplete and its id stays free.
func TestHydrateRefusesAGap(t *testing.T) {
	testHydrationStores(t, func(t *testing.T, store recorder.Store) {
		agent := runtest.StartAgent(t)
		_, px := startProxy(t, agent.URL, Config{Store: store})
		said(t, px.URL, echoBody("t1", "r1", `{}`, user("u1")))
		r1 := runtest.WaitRunEnded(t, store, "t1", "r1")
		// The store lost events: a gap after the run's last event.
		if err := store.Append(t.Context(), []recorder.Batch{{Run: r1, Events: []recorder.Event{
			{Seq: r1.LastSeq + 3, Type: "CUSTOM", Frame: []byte("data: {\"type\":\"CUSTOM\",\"name\":\"x\",\"value\":1}\n\n")}}}}); err != nil {
			t.Fatal(err)
		}
		res := runtest.PostRun(t, t.Context(), px.URL, echoBody("t1", "r2", `{}`, user("u2")), nil)
		p := runtest.DecodeProblem(t, res)
		if res.StatusCode != http.StatusConflict || p.Code != "HistoryIncomplete" {
			t.Fatalf("run on a branch with a gap = %d %s, want 409 HistoryIncomplete", res.StatusCode, p.Code)
		}
		// With the whole conversation the client needs no hydration: the same run id works.
		full := echoBody("t1", "r2", `{}`, user("u1"), `{"id":"msg-r1-1","role":"assistant","content":"x"}`, user("u2"))
		if got := said(t, px.URL, full); !strings.HasPrefix(got, "received 3 messages") {
			t.Errorf("agent said %q, want the client's 3 messages", got)
		}
	})
}
