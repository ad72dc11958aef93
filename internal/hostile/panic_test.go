package hostile

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/hydrate"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/panics"
	"github.com/agui-proxy/agui-proxy/proxy"
)

// panicCase forces a panic in one family of the proxy's work (panics.SetHook), on the work of
// one thread, and checks what that work ends with.
type panicCase struct {
	where panics.Where
	// times bounds how many probes of the poisoned thread panic (0: every one).
	times int
	cfg   func(*proxy.Config)
	// poison does the poisoned thread's work and checks how it ended.
	poison func(t *testing.T, e *env, thread string)
}

var panicCases = []panicCase{
	{where: panics.Pump, poison: func(t *testing.T, e *env, thread string) {
		run := e.id("r")
		r := e.run(t, thread, run, frames(fStarted, fMsgStart, fMsgText, fMsgEnd, fFinished))
		evs := events(t, r.body)
		if lastType(evs) != "RUN_ERROR" || !strings.Contains(string(evs[len(evs)-1].raw), `"code":"INTERNAL"`) {
			t.Fatalf("poisoned run's live stream: %v, want it to end with RUN_ERROR INTERNAL (%s)", types(evs), evs[len(evs)-1].raw)
		}
		v := e.waitEnded(t, thread)
		if len(v.Runs) != 1 || v.Runs[0].Status != "error" {
			t.Fatalf("poisoned run recorded as %+v, want status error", v.Runs)
		}
		sameReplay(t, e, thread, run, r)
		e.readable(t, thread)
	}},
	{where: panics.Checkpoint, poison: func(t *testing.T, e *env, thread string) {
		r := e.run(t, thread, e.id("r"), nil)
		if got := lastType(events(t, r.body)); got != "RUN_FINISHED" {
			t.Fatalf("poisoned run's live stream ends with %q, want RUN_FINISHED", got)
		}
		e.readable(t, thread) // built from the run's events: it has no checkpoint
	}},
	{where: panics.Compact, poison: func(t *testing.T, e *env, thread string) {
		r := e.run(t, thread, e.id("r"), nil)
		if got := lastType(events(t, r.body)); got != "RUN_FINISHED" {
			t.Fatalf("poisoned run's live stream ends with %q, want RUN_FINISHED", got)
		}
		e.readable(t, thread) // served raw
		msgs, _ := e.history(t, thread)
		if len(msgs) < 2 {
			t.Fatalf("history of the poisoned thread (served raw) has %d messages, want the user's and the agent's", len(msgs))
		}
	}},
	{where: panics.Hydrate, cfg: func(c *proxy.Config) { c.Hydrate = hydrate.ModeAlways }, poison: func(t *testing.T, e *env, thread string) {
		first := e.id("r")
		e.run(t, thread, first, nil)
		e.waitEnded(t, thread)
		next := e.id("r")
		body := fmt.Sprintf(`{"threadId":%q,"runId":%q,"parentRunId":%q,"state":{},"messages":[{"id":"u2","role":"user","content":"again"}],"tools":[],"context":[],"forwardedProps":{}}`,
			thread, next, first)
		problemOf(t, e.postRun(t, body), http.StatusInternalServerError, "Internal")
		if e.up.contacted(next) {
			t.Fatalf("the agent was called for run %q, whose hydration panicked", next)
		}
	}},
	{where: panics.Attach, poison: func(t *testing.T, e *env, thread string) {
		e.run(t, thread, e.id("r"), nil)
		e.waitEnded(t, thread)
		problemOf(t, e.get(t, "/agui/threads/"+thread+"/events"), http.StatusInternalServerError, "Internal")
	}},
	// The first two attempts at a batch holding the thread's events panic, then the two at
	// the run alone: its events in that batch are lost, and the run is marked with a gap.
	{where: panics.Writer, times: 4, poison: func(t *testing.T, e *env, thread string) {
		run := e.id("r")
		r := e.run(t, thread, run, frames(fStarted, fMsgStart, fMsgText, fMsgEnd, fFinished))
		if got := lastType(events(t, r.body)); got != "RUN_FINISHED" {
			t.Fatalf("poisoned run's live stream ends with %q, want RUN_FINISHED", got)
		}
		e.waitEnded(t, thread)
		got, err := e.store.Run(context.Background(), thread, run)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(got.Gaps) == 0 || got.Status != "finished" {
			t.Fatalf("poisoned run recorded as status %q with gaps %v, want finished with a gap", got.Status, got.Gaps)
		}
	}},
	// One panic: the batch is written again and nothing is lost.
	{where: panics.Writer, times: 1, poison: func(t *testing.T, e *env, thread string) {
		run := e.id("r")
		r := e.run(t, thread, run, frames(fStarted, fMsgStart, fMsgText, fMsgEnd, fFinished))
		sameReplay(t, e, thread, run, r)
		got, err := e.store.Run(context.Background(), thread, run)
		if err != nil || len(got.Gaps) != 0 {
			t.Fatalf("Run = %+v, %v; want no gap", got, err)
		}
	}},
}

// TestHostilePanicContained forces a panic in each family of the proxy's work, on one
// thread, while a run of another thread streams through the same replica: the poisoned work
// ends as its family promises (panics package), the panic is counted, the other run completes
// and is recorded byte for byte as it was streamed, and the replica goes on answering.
func TestHostilePanicContained(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range []string{"memory", "disk", "redis"} {
		for _, c := range panicCases {
			t.Run(fmt.Sprintf("%s/%s-%d", kind, c.where, c.times), func(t *testing.T) {
				e := newEnv(t, kind, srv, c.cfg)
				poisoned := e.id("poisoned")
				var fired atomic.Int64
				defer panics.SetHook(func(where panics.Where, key string) {
					if where == c.where && strings.Contains(key, poisoned) {
						if n := fired.Add(1); c.times == 0 || n <= int64(c.times) {
							panic(fmt.Sprintf("hostile: a forced panic in %s", where))
						}
					}
				})()
				before := panics.Count(c.where)

				// The bystander streams before, while and after the poisoned work panics.
				other, otherRun := e.id("t"), e.id("r")
				release := make(chan struct{})
				chunks := []string{fStarted, fMsgStart}
				for range 20 {
					chunks = append(chunks, fMsgText)
				}
				e.up.scripts.Store(otherRun, gated(release, 10, frames(append(chunks, fMsgEnd, fFinished)...)))
				var once sync.Once
				open := func() { once.Do(func() { close(release) }) }
				defer open()
				done := make(chan reply, 1)
				go func() { done <- e.postRunNoFatal(runBody(other, otherRun, "chat")) }()

				c.poison(t, e, poisoned)
				open()
				r := <-done
				if r.status != http.StatusOK {
					t.Fatalf("the other run: %d %q", r.status, trunc(r.body))
				}
				if got := lastType(events(t, r.body)); got != "RUN_FINISHED" {
					t.Fatalf("the other run ends with %q: %v", got, types(events(t, r.body)))
				}
				sameReplay(t, e, other, otherRun, r)
				e.readable(t, other)
				if fired.Load() == 0 {
					t.Fatalf("the hook never fired in %s: the case tests nothing", c.where)
				}
				if got := panics.Count(c.where); got <= before {
					t.Fatalf("panics counted in %s: %d, want more than %d", c.where, got, before)
				}
				// The replica still starts and finishes runs.
				if got := lastType(events(t, e.run(t, e.id("t"), e.id("r"), nil).body)); got != "RUN_FINISHED" {
					t.Fatalf("a new run after the panic ends with %q", got)
				}
			})
		}
	}
}

// gated is s whose first `after` writes go at once and the rest only once release is closed:
// the run is mid-stream while the test does something else.
func gated(release <-chan struct{}, after int, s script) script {
	return func(w http.ResponseWriter, r *http.Request, thread, run string) {
		s(&gatedWriter{ResponseWriter: w, release: release, after: after}, r, thread, run)
	}
}

type gatedWriter struct {
	http.ResponseWriter
	release <-chan struct{}
	after   int
	n       int
}

func (g *gatedWriter) Write(b []byte) (int, error) {
	if g.n++; g.n > g.after {
		select {
		case <-g.release:
		case <-time.After(30 * time.Second):
		}
	}
	return g.ResponseWriter.Write(b)
}

func (g *gatedWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// postRunNoFatal is postRun for a goroutine other than the test's: a failure is a reply with
// status 0 and the error as its body.
func (e *env) postRunNoFatal(body string) reply {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/", strings.NewReader(body))
	if err != nil {
		return reply{body: []byte(err.Error())}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{body: []byte(err.Error())}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return reply{body: []byte(err.Error())}
	}
	return reply{res.StatusCode, res.Header, b}
}
