package hostile

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/proxy"
)

// tcase is one hostile input and the invariant it checks.
type tcase struct {
	class string
	name  string
	multi bool                // run on the multi-tenant environment (IdentityHeader set)
	cfg   func(*proxy.Config) // a proxy of its own with this configuration
	run   func(t *testing.T, e *env)
	// pending names the class of a known bug this case reproduces; it is skipped (saying
	// so) until the bug is fixed and the mark removed.
	pending string
}

// pending marks c as reproducing a known, not yet fixed bug of class.
func pending(class string, c tcase) tcase { c.pending = class; return c }

// TestHostile runs every case on the in-memory store, the disk store and a private
// redis-server.
func TestHostile(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range []string{"memory", "disk", "redis"} {
		t.Run(kind, func(t *testing.T) {
			shared := newEnv(t, kind, srv, nil)
			multi := newEnv(t, kind, srv, func(c *proxy.Config) { c.IdentityHeader = identityHeader })
			for _, c := range cases {
				t.Run(c.class+"/"+c.name, func(t *testing.T) {
					if c.pending != "" {
						t.Skip("pending bug: " + c.pending)
					}
					t.Parallel()
					e := shared
					switch {
					case c.cfg != nil:
						e = newEnv(t, kind, srv, c.cfg)
					case c.multi:
						e = multi
					}
					c.run(t, e)
				})
			}
		})
	}
}

// TestHostileCaseCount keeps the suite at the size its documentation promises.
func TestHostileCaseCount(t *testing.T) {
	if len(cases) < 60 {
		t.Fatalf("%d hostile cases, want at least 60", len(cases))
	}
	t.Logf("%d hostile cases, each on the memory, disk and Redis stores", len(cases))
	seen := map[string]bool{}
	for _, c := range cases {
		k := c.class + "/" + c.name
		if seen[k] {
			t.Fatalf("case %s twice", k)
		}
		seen[k] = true
	}
}

// refused checks that a run POST of body is refused with status and code before the
// upstream hears of run.
func refused(body string, status int, code string, run string) func(t *testing.T, e *env) {
	return func(t *testing.T, e *env) {
		r := e.postRun(t, body)
		problemOf(t, r, status, code)
		if run != "" && e.up.contacted(run) {
			t.Fatalf("the upstream was contacted for refused run %q", run)
		}
	}
}

// badBody is a malformed-body case whose run id is "bad-<n>" (refused as InvalidRunInput).
func badBody(name, body string) tcase {
	return tcase{class: "malformed-body", name: name, run: refused(body, 400, proxy.CodeInvalidRunInput, "")}
}

// clientErrorsAre4xx sends every method to every endpoint of the attach prefix and the
// inspector with hostile path segments and query values (invalid UTF-8, NUL, "..", an
// encoded slash, 5,000 bytes): nothing the client chose may be answered 5xx.
func clientErrorsAre4xx(t *testing.T, e *env) {
	th, run := e.id("t"), e.id("r")
	e.run(t, th, run, nil)
	e.waitEnded(t, th)
	var paths []string
	for _, b := range []string{"%ff", "%00", "%c3", "%ed%a0%80", "a%2fb", "..", ".", "%2e%2e", strings.Repeat("x", 5000)} {
		paths = append(paths, "/agui/ui/"+b, "/agui/ui/"+b+"/x", "/agui/ui/x/"+b, "/agui/"+b,
			"/agui/threads/"+b, "/agui/threads/"+b+"/runs", "/agui/threads/"+b+"/events", "/agui/threads/"+b+"/export",
			"/agui/threads/"+b+"/import", "/agui/threads/"+th+"/runs/"+b+"/events", "/agui/threads/"+th+"/runs/"+b+"/stop",
			"/agui/threads?cursor="+b, "/agui/threads?limit="+b, "/agui/threads?since="+b, "/agui/threads?until="+b,
			"/agui/export?cursor="+b, "/agui/export?limit="+b, "/agui/threads/"+th+"?run="+b,
			"/agui/threads/"+th+"/events?after="+b, "/agui/threads/"+th+"/events?follow="+b)
	}
	for _, p := range paths {
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete} {
			if r := e.do(t, m, p, strings.NewReader("{}")); r.status >= 500 {
				t.Errorf("%s %.120s: %d %q, want a 4xx", m, p, r.status, trunc(r.body))
			}
		}
	}
}

// chainDoc is an export document of a linear chain of n runs (r1 ... rn, each the parent of
// the next), each with its user message u<i> in RUN_STARTED.input and an answer m<i>.
func chainDoc(n int) string {
	var b strings.Builder
	b.WriteString(`{"formatVersion":1,"runs":[`)
	for i := 1; i <= n; i++ {
		parent := ""
		if i > 1 {
			b.WriteString(",")
			parent = fmt.Sprintf(`"parentRunId":"r%d",`, i-1)
		}
		fmt.Fprintf(&b, `{"runId":"r%d",%s"status":"finished","eventList":[`+
			`{"type":"RUN_STARTED","threadId":"x","runId":"r%[1]d","input":{"messages":[{"id":"u%[1]d","role":"user","content":"q%[1]d"}]}},`+
			`{"type":"TEXT_MESSAGE_START","messageId":"m%[1]d","role":"assistant"},{"type":"TEXT_MESSAGE_CONTENT","messageId":"m%[1]d","delta":"answer %[1]d"},`+
			`{"type":"TEXT_MESSAGE_END","messageId":"m%[1]d"},{"type":"RUN_FINISHED","threadId":"x","runId":"r%[1]d"}]}`, i, parent)
	}
	b.WriteString("]}")
	return b.String()
}

// dupImport is an import document with a member twice (or two spellings of one): 400, as a
// run request with one gets.
func dupImport(name, doc string) tcase {
	return tcase{class: "duplicate-member", name: name, run: func(t *testing.T, e *env) {
		p := problemOf(t, e.do(t, http.MethodPost, "/agui/threads/"+e.id("t")+"/import", strings.NewReader(doc)), 400, "")
		if !strings.Contains(p.Detail, "duplicate member") {
			t.Fatalf("problem %+v, want it to name the duplicate member", p)
		}
	}}
}

// badID is a run POST whose thread (or run) id is hostile.
func badID(name, thread, run string) tcase {
	return tcase{class: "hostile-id", name: name, run: func(t *testing.T, e *env) {
		b, _ := json.Marshal(map[string]any{"threadId": thread, "runId": run, "messages": []any{}})
		problemOf(t, e.postRun(t, string(b)), 400, proxy.CodeInvalidRunInput)
		if e.up.contacted(run) {
			t.Fatalf("upstream contacted for run %q", run)
		}
	}}
}

// badPath is a GET of a hostile path under the attach prefix: a 4xx problem, never 5xx.
func badPath(name, path string) tcase {
	return tcase{class: "hostile-id", name: name, run: func(t *testing.T, e *env) {
		r := e.get(t, path)
		if r.status < 400 || r.status >= 500 {
			t.Fatalf("GET %s: %d %q, want a 4xx", path, r.status, trunc(r.body))
		}
	}}
}

// badLastEventID resumes an existing run with a hostile Last-Event-ID: 400, nothing streamed.
func badLastEventID(name, id string) tcase {
	return tcase{class: "hostile-id", name: name, run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		e.run(t, th, run, nil)
		e.waitEnded(t, th)
		for _, path := range []string{"/agui/threads/" + th + "/runs/" + run + "/events", "/agui/threads/" + th + "/events"} {
			r := e.get(t, path, "Last-Event-ID", id)
			problemOf(t, r, 400, "")
		}
	}}
}

// badAfter attaches with a hostile ?after=: 400.
func badAfter(name, after string) tcase {
	return tcase{class: "hostile-id", name: name, run: func(t *testing.T, e *env) {
		th := e.id("t")
		e.run(t, th, e.id("r"), nil)
		e.waitEnded(t, th)
		problemOf(t, e.get(t, "/agui/threads/"+th+"/events?after="+after), 400, "")
	}}
}

// upstreamCase runs script s on a fresh thread and hands the answer to check; the thread
// must stay readable afterwards.
func upstreamCase(class, name string, s script, check func(t *testing.T, e *env, thread, run string, r reply)) tcase {
	return tcase{class: class, name: name, run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		r := e.run(t, th, run, s)
		if check != nil {
			check(t, e, th, run, r)
		}
		e.readable(t, th)
	}}
}

// endsWith checks that the live stream's last event has type want.
func endsWith(want string) func(t *testing.T, e *env, thread, run string, r reply) {
	return func(t *testing.T, e *env, thread, run string, r reply) {
		evs := events(t, r.body)
		if got := lastType(evs); got != want {
			t.Fatalf("live stream ends with %q, want %q: %v", got, want, types(evs))
		}
	}
}

// sameReplay checks that what the live client saw and what a run attach replays are the
// same events (byte for byte, ids included).
func sameReplay(t *testing.T, e *env, thread, run string, r reply) {
	live := events(t, r.body)
	e.waitEnded(t, thread)
	a := e.get(t, "/agui/threads/"+thread+"/runs/"+run+"/events")
	if a.status != 200 {
		t.Fatalf("run attach: %d %q", a.status, trunc(a.body))
	}
	replay := events(t, a.body)
	if len(live) != len(replay) {
		t.Fatalf("live %v, replay %v", types(live), types(replay))
	}
	for i := range live {
		if live[i].id != replay[i].id || !bytes.Equal(live[i].raw, replay[i].raw) {
			t.Fatalf("event %d: live %s %q, replay %s %q", i, live[i].id, live[i].raw, replay[i].id, replay[i].raw)
		}
	}
}

// patchCase sends a state snapshot, then a hostile delta, then a good delta; the history
// stays readable and the hostile delta changes nothing.
func patchCase(name, delta string, wantState string) tcase {
	s := frames(fStarted,
		data(`{"type":"STATE_SNAPSHOT","snapshot":{"a":[1,2,3],"s":"x","n":1}}`),
		data(`{"type":"STATE_DELTA","delta":`+delta+`}`),
		data(`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/ok","value":true}]}`),
		fFinished)
	return upstreamCase("bad-patch", name, s, func(t *testing.T, e *env, thread, run string, r reply) {
		_, state := e.history(t, thread)
		got, _ := json.Marshal(state)
		if string(got) != wantState {
			t.Fatalf("state %s, want %s", got, wantState)
		}
	})
}

const stateAfterGoodDelta = `{"a":[1,2,3],"n":1,"ok":true,"s":"x"}`

var cases = []tcase{
	// Malformed bodies: refused with 400 InvalidRunInput, the agent never called.
	badBody("empty", ``),
	badBody("truncated", `{"threadId":"t","runId":"r"`),
	badBody("array", `[]`),
	badBody("null", `null`),
	badBody("string", `"threadId"`),
	badBody("thread-id-number", `{"threadId":1,"runId":"r","messages":[]}`),
	badBody("run-id-missing", `{"threadId":"t","messages":[]}`),
	badBody("duplicate-thread-id", `{"threadId":"t","threadId":"u","runId":"r","messages":[]}`),
	badBody("case-variant", `{"threadId":"t","THREADID":"u","runId":"r","messages":[]}`),
	badBody("snake-case", `{"thread_id":"t","threadId":"u","runId":"r","messages":[]}`),
	badBody("trailing-garbage", `{"threadId":"t","runId":"r","messages":[]} x`),
	badBody("two-values", `{"threadId":"t","runId":"r","messages":[]}{"threadId":"u","runId":"r"}`),
	badBody("messages-object", `{"threadId":"t","runId":"r","messages":{}}`),
	badBody("deep-nesting", `{"threadId":"t","runId":"r","messages":[],"forwardedProps":`+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+`}`),
	{class: "malformed-body", name: "body-read-timeout", cfg: func(c *proxy.Config) { c.BodyReadTimeout = 200 * time.Millisecond }, run: func(t *testing.T, e *env) {
		// A body that stops arriving: 408 with a problem, not an empty 200.
		r := e.do(t, http.MethodPost, "/", &slowBody{data: []byte(`{"threadId":"t","runId":"r",`), pause: 2 * time.Second},
			"Content-Type", "application/json", "Accept", "text/event-stream")
		problemOf(t, r, http.StatusRequestTimeout, proxy.CodeBodyTimeout)
	}},
	{class: "malformed-body", name: "bad-json-import", run: func(t *testing.T, e *env) {
		r := e.do(t, http.MethodPost, "/agui/threads/"+e.id("t")+"/import", strings.NewReader(`{"formatVersion":1,"runs":[`))
		problemOf(t, r, 400, "")
	}},
	{class: "malformed-body", name: "import-unknown-format", run: func(t *testing.T, e *env) {
		r := e.do(t, http.MethodPost, "/agui/threads/"+e.id("t")+"/import", strings.NewReader(`{"formatVersion":99,"runs":[]}`))
		problemOf(t, r, 400, "")
	}},
	{class: "malformed-body", name: "import-bad-run-id", run: func(t *testing.T, e *env) {
		r := e.do(t, http.MethodPost, "/agui/threads/"+e.id("t")+"/import",
			strings.NewReader(`{"formatVersion":1,"runs":[{"runId":"a b","status":"finished","eventList":[]}]}`))
		problemOf(t, r, 400, "")
	}},

	// Client-caused errors are 4xx on every endpoint (the inspector's included).
	{class: "client-error", name: "no-5xx-for-hostile-paths", cfg: func(c *proxy.Config) { c.Inspector = true }, run: clientErrorsAre4xx},

	// Long run chains: the first read of an imported chain builds one branch, not one per run.
	withCfg(withMetrics, tcase{class: "long-chain", name: "imported-chain-read-once", run: func(t *testing.T, e *env) {
		const n = 400
		th := e.id("t")
		if r := e.do(t, http.MethodPost, "/agui/threads/"+th+"/import", strings.NewReader(chainDoc(n))); r.status != 201 {
			t.Fatalf("import: %d %q", r.status, trunc(r.body))
		}
		before := e.counter(t, "agui_proxy_checkpoint_branches_total")
		msgs, _ := e.history(t, th)
		built := e.counter(t, "agui_proxy_checkpoint_branches_total") - before
		if len(msgs) != 2*n || msgs[0]["id"] != "u1" || msgs[2*n-1]["id"] != fmt.Sprintf("m%d", n) {
			t.Fatalf("history of the %d-run chain: %d messages (first %v, last %v), want %d", n, len(msgs), msgs[0]["id"], msgs[len(msgs)-1]["id"], 2*n)
		}
		if built != 1 {
			t.Fatalf("the first read of a %d-run chain without checkpoints built %v branches, want 1 (one per run is quadratic)", n, built)
		}
		// Time travel into the chain reads from the nearest checkpoint up (none below the head):
		// one more branch, with the messages as of that run.
		r := e.get(t, "/agui/threads/"+th+"?run=r100")
		var v struct {
			Messages []map[string]any `json:"messages"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &v) != nil || len(v.Messages) != 200 || v.Messages[199]["id"] != "m100" {
			t.Fatalf("?run=r100: %d, %d messages", r.status, len(v.Messages))
		}
		msgs2, _ := e.history(t, th)
		if len(msgs2) != 2*n || e.counter(t, "agui_proxy_checkpoint_branches_total")-before != 2 {
			t.Fatalf("a second read: %d messages, %v branches built in all, want %d and 2", len(msgs2), e.counter(t, "agui_proxy_checkpoint_branches_total")-before, 2*n)
		}
	}}),

	// Imports whose store writes take longer in all than AGUI_STORE_TIMEOUT: each call is
	// bounded, not the document (on Redis 3,000 runs are 9,000 round trips).
	{class: "big-import", name: "longer-than-store-timeout", cfg: func(c *proxy.Config) { c.StoreTimeout = 500 * time.Millisecond }, run: func(t *testing.T, e *env) {
		th := e.id("t")
		r := e.do(t, http.MethodPost, "/agui/threads/"+th+"/import", strings.NewReader(chainDoc(3000)))
		if r.status != 201 {
			t.Fatalf("import of 3,000 runs: %d %q", r.status, trunc(r.body))
		}
		if v := e.waitEnded(t, th); len(v.Runs) != 3000 {
			t.Fatalf("%d runs after the import, want 3000", len(v.Runs))
		}
	}},
	{class: "big-import", name: "run-of-many-events", run: func(t *testing.T, e *env) {
		var b strings.Builder
		b.WriteString(`{"formatVersion":1,"runs":[{"runId":"r1","status":"finished","eventList":[{"type":"RUN_STARTED","threadId":"x","runId":"r1"}`)
		for j := range 30000 {
			fmt.Fprintf(&b, `,{"type":"CUSTOM","name":"n","value":%d}`, j)
		}
		b.WriteString(`,{"type":"RUN_FINISHED","threadId":"x","runId":"r1"}]}]}`)
		th := e.id("t")
		if r := e.do(t, http.MethodPost, "/agui/threads/"+th+"/import", strings.NewReader(b.String())); r.status != 201 {
			t.Fatalf("import of a run of 30,002 events: %d %q", r.status, trunc(r.body))
		}
		if v := e.waitEnded(t, th); len(v.Runs) != 1 || v.Runs[0].Events != 30002 {
			t.Fatalf("runs after the import: %+v, want one of 30,002 events", v.Runs)
		}
	}},

	// The bulk export ends with a line a client can check; a cut export lacks it.
	{class: "bulk-export", name: "end-line", multi: true, run: func(t *testing.T, e *env) {
		user := e.id("u")
		for range 3 {
			th := e.id("t")
			e.run(t, th, e.id("r"), nil, e.as(user)...)
			e.waitEnded(t, th, e.as(user)...)
		}
		r := e.get(t, "/agui/export", e.as(user)...)
		lines := strings.Split(strings.TrimSuffix(string(r.body), "\n"), "\n")
		if r.status != 200 || len(lines) != 4 || lines[3] != `{"agui-proxy.exportEnd":{"threads":3}}` {
			t.Fatalf("export: %d, %d lines, last %q; want 3 documents and the end line", r.status, len(lines), lines[len(lines)-1])
		}
		// The end line is not a document: POST .../import refuses it.
		problemOf(t, e.do(t, http.MethodPost, "/agui/threads/"+e.id("t")+"/import", strings.NewReader(lines[3]), e.as(user)...), 400, "")
	}},

	// Duplicate member names: one rule for every document the proxy reads (refused, 400).
	dupImport("run-id-twice", `{"formatVersion":1,"runs":[{"runId":"r1","runId":"r2","status":"finished","eventList":[]}]}`),
	dupImport("runs-twice", `{"formatVersion":1,"runs":[{"runId":"r1","status":"finished","eventList":[]}],"runs":[{"runId":"r2","status":"finished","eventList":[]}]}`),
	dupImport("case-variant", `{"formatVersion":1,"runs":[{"runId":"r1","RUNID":"r2","status":"finished","eventList":[]}]}`),
	dupImport("format-version-twice", `{"formatVersion":99,"formatVersion":1,"runs":[{"runId":"r1","status":"finished","eventList":[]}]}`),
	dupImport("escaped-spelling", `{"formatVersion":1,"runs":[{"runId":"r1","run\u0049d":"r2","status":"finished","eventList":[]}]}`),
	badBody("duplicate-unknown-member", `{"threadId":"t","runId":"r","messages":[],"x":1,"x":2}`),
	badBody("duplicate-message-id", `{"threadId":"t","runId":"r","messages":[{"id":"a","id":"b","role":"user","content":"x"}]}`),
	badBody("message-role-variant", `{"threadId":"t","runId":"r","messages":[{"id":"a","role":"user","ROLE":"system","content":"x"}]}`),
	{class: "duplicate-member", name: "event-keeps-its-members", run: func(t *testing.T, e *env) {
		// An event is kept as recorded (its reader is the client, which takes the last member):
		// a document whose event repeats a member imports, and the history reads the last.
		th := e.id("t")
		doc := `{"formatVersion":1,"runs":[{"runId":"r1","status":"finished","eventList":[{"type":"RUN_STARTED","threadId":"x","runId":"r1"},` +
			`{"type":"STATE_SNAPSHOT","snapshot":{"a":1,"a":2}},{"type":"RUN_FINISHED","threadId":"x","runId":"r1"}]}]}`
		if r := e.do(t, http.MethodPost, "/agui/threads/"+th+"/import", strings.NewReader(doc)); r.status != 201 {
			t.Fatalf("import: %d %q", r.status, trunc(r.body))
		}
		if _, state := e.history(t, th); fmt.Sprint(state) != "map[a:2]" {
			t.Fatalf("state %v, want map[a:2]", state)
		}
	}},
	{class: "duplicate-member", name: "nothing-written-on-refusal", run: func(t *testing.T, e *env) {
		th := e.id("t")
		r := e.do(t, http.MethodPost, "/agui/threads/"+th+"/import", strings.NewReader(`{"formatVersion":1,"runs":[{"runId":"r1","status":"finished","eventList":[]},{"runId":"r2","status":"finished","status":"error","eventList":[]}]}`))
		problemOf(t, r, 400, "")
		if g := e.get(t, "/agui/threads/"+th+"/runs"); g.status != 404 {
			t.Fatalf("after a refused import the thread answers %d, want 404", g.status)
		}
	}},

	// Oversized bodies and events.
	{class: "oversized", name: "body-over-limit", cfg: func(c *proxy.Config) { c.MaxBodyBytes = 64 << 10 }, run: func(t *testing.T, e *env) {
		run := e.id("r")
		body := fmt.Sprintf(`{"threadId":"t","runId":%q,"messages":[{"id":"u","role":"user","content":%q}]}`, run, strings.Repeat("x", 70<<10))
		problemOf(t, e.postRun(t, body), 413, proxy.CodeBodyTooLarge)
		if e.up.contacted(run) {
			t.Fatal("upstream contacted")
		}
	}},
	{class: "oversized", name: "chunked-body-over-limit", cfg: func(c *proxy.Config) { c.MaxBodyBytes = 64 << 10 }, run: func(t *testing.T, e *env) {
		body := `{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`
		// An io.Reader of unknown length is sent chunked, without Content-Length.
		r := e.do(t, http.MethodPost, "/", struct{ *strings.Reader }{strings.NewReader(body)},
			"Content-Type", "application/json", "Accept", "text/event-stream")
		problemOf(t, r, 413, proxy.CodeBodyTooLarge)
	}},
	{class: "limits", name: "first-frame-larger-than-queue", cfg: func(c *proxy.Config) { c.MaxBodyBytes, c.MaxEventBytes, c.ClientQueueBytes = 256<<10, 256<<10, 256<<10 }, run: func(t *testing.T, e *env) {
		// A body just under the limit: its RUN_STARTED (which carries the input, so it is
		// larger than the client queue) still reaches the client whole.
		th, run := e.id("t"), e.id("r")
		body := fmt.Sprintf(`{"threadId":%q,"runId":%q,"messages":[{"id":"u","role":"user","content":%q}],"forwardedProps":{"scenario":"chat"}}`,
			th, run, strings.Repeat("y", 256<<10-200))
		r := e.postRun(t, body)
		if r.status != 200 {
			t.Fatalf("status %d %q", r.status, trunc(r.body))
		}
		evs := events(t, r.body)
		if len(evs) == 0 || evs[0].typ != "RUN_STARTED" || lastType(evs) != "RUN_FINISHED" {
			t.Fatalf("stream %v", types(evs))
		}
	}},
	{class: "oversized", name: "header-over-limit", run: func(t *testing.T, e *env) {
		r := e.get(t, "/agui/threads/x", "X-Big", strings.Repeat("a", 2<<20))
		if r.status != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", r.status)
		}
	}},
	{class: "oversized", name: "last-event-id-60k", run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		e.run(t, th, run, nil)
		problemOf(t, e.get(t, "/agui/threads/"+th+"/runs/"+run+"/events", "Last-Event-ID", strings.Repeat("9", 60000)), 400, "")
	}},
	withCfg(smallEvents, upstreamCase("oversized", "event-over-limit", frames(fStarted, data(`{"type":"CUSTOM","name":"x","value":"`+strings.Repeat("z", 80<<10)+`"}`), fFinished),
		func(t *testing.T, e *env, thread, run string, r reply) {
			evs := events(t, r.body)
			if lastType(evs) != "RUN_ERROR" || !strings.Contains(string(evs[len(evs)-1].raw), "FRAME_TOO_LARGE") {
				t.Fatalf("stream %v, want it to end with RUN_ERROR FRAME_TOO_LARGE", types(evs))
			}
		})),
	withCfg(smallEvents, upstreamCase("oversized", "line-without-end", frames(fStarted, "data: "+strings.Repeat("q", 80<<10)),
		func(t *testing.T, e *env, thread, run string, r reply) {
			evs := events(t, r.body)
			if lastType(evs) != "RUN_ERROR" || !strings.Contains(string(evs[len(evs)-1].raw), "FRAME_TOO_LARGE") {
				t.Fatalf("stream %v, want RUN_ERROR FRAME_TOO_LARGE", types(evs))
			}
		})),
	withCfg(smallRuns, upstreamCase("oversized", "run-over-limit", frames(fStarted, strings.Repeat(data(`{"type":"CUSTOM","name":"x","value":"`+strings.Repeat("z", 8<<10)+`"}`), 12), fFinished),
		func(t *testing.T, e *env, thread, run string, r reply) {
			evs := events(t, r.body)
			if lastType(evs) != "RUN_ERROR" || !strings.Contains(string(evs[len(evs)-1].raw), "RUN_TOO_LARGE") {
				t.Fatalf("stream %v, want it to end with RUN_ERROR RUN_TOO_LARGE", types(evs))
			}
			if n := len(evs) - 2; n < 6 || n > 8 { // RUN_STARTED, the events within 64 KiB, RUN_ERROR
				t.Fatalf("stream %v: %d CUSTOM events, want the 7 within 64 KiB", types(evs), n)
			}
			recs, err := e.store.Events(t.Context(), thread, run, 0, 0)
			if err != nil || len(recs) != len(evs) {
				t.Fatalf("recorded %d events (%v), want the %d streamed", len(recs), err, len(evs))
			}
		})),

	// Invalid JSON from the upstream: forwarded, the thread stays readable.
	upstreamCase("invalid-json", "data-not-json", frames(fStarted, "data: {oops}\n\n", fFinished), endsWith("RUN_FINISHED")),
	upstreamCase("invalid-json", "two-values-in-frame", frames(fStarted, "data: {\"type\":\"CUSTOM\"}\ndata: {\"type\":\"CUSTOM\"}\n\n", fFinished), endsWith("RUN_FINISHED")),
	upstreamCase("invalid-json", "json-not-object", frames(fStarted, "data: [1,2]\n\n", "data: \"s\"\n\n", "data: null\n\n", fFinished), endsWith("RUN_FINISHED")),
	upstreamCase("invalid-json", "no-type", frames(fStarted, data(`{"delta":"x"}`), fFinished), endsWith("RUN_FINISHED")),
	upstreamCase("invalid-json", "type-not-string", frames(fStarted, data(`{"type":7}`), fFinished), endsWith("RUN_FINISHED")),
	upstreamCase("invalid-json", "unknown-type", frames(fStarted, data(`{"type":"FUTURE_EVENT","x":1}`), fFinished), sameReplay),

	// Invalid UTF-8: refused in request bodies (a body is JSON, and JSON is UTF-8).
	{class: "invalid-utf8", name: "run-body-content", run: func(t *testing.T, e *env) {
		run := e.id("r")
		body := `{"threadId":"` + e.id("t") + `","runId":"` + run + `","messages":[{"id":"u","role":"user","content":"a` + "\xff\xfe" + `b"}]}`
		problemOf(t, e.postRun(t, body), 400, proxy.CodeInvalidRunInput)
		if e.up.contacted(run) {
			t.Fatal("upstream contacted")
		}
	}},
	{class: "invalid-utf8", name: "run-body-key", run: func(t *testing.T, e *env) {
		body := `{"threadId":"` + e.id("t") + `","runId":"r","forwardedProps":{"k` + "\xc3" + `":1},"messages":[]}`
		problemOf(t, e.postRun(t, body), 400, proxy.CodeInvalidRunInput)
	}},
	{class: "invalid-utf8", name: "thread-id", run: refused(`{"threadId":"t`+"\xe2\x82"+`","runId":"r","messages":[]}`, 400, proxy.CodeInvalidRunInput, "")},
	{class: "invalid-utf8", name: "import-doc", run: func(t *testing.T, e *env) {
		doc := `{"formatVersion":1,"runs":[{"runId":"r1","status":"finished","eventList":[{"type":"RUN_STARTED","threadId":"x","runId":"r1"},{"type":"CUSTOM","name":"n","value":"` + "\xff" + `"},{"type":"RUN_FINISHED","threadId":"x","runId":"r1"}]}]}`
		problemOf(t, e.do(t, http.MethodPost, "/agui/threads/"+e.id("t")+"/import", strings.NewReader(doc)), 400, "")
	}},
	{class: "invalid-utf8", name: "lone-surrogate-escape", run: func(t *testing.T, e *env) {
		// Valid JSON (an escaped lone surrogate) is accepted; history stays valid UTF-8.
		th, run := e.id("t"), e.id("r")
		body := `{"threadId":"` + th + `","runId":"` + run + `","messages":[{"id":"u","role":"user","content":"a\ud800b"}],"forwardedProps":{"scenario":"chat"}}`
		if r := e.postRun(t, body); r.status != 200 {
			t.Fatalf("status %d %q", r.status, trunc(r.body))
		}
		e.readable(t, th)
	}},
	upstreamCase("invalid-utf8", "upstream-event", frames(fStarted, fMsgStart, data(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"`+"\xff\xfe"+`"}`), fMsgEnd, fFinished),
		func(t *testing.T, e *env, thread, run string, r reply) {
			ex := e.get(t, "/agui/threads/"+thread+"/export")
			if ex.status != 200 || !utf8.Valid(ex.body) {
				t.Fatalf("export: %d, valid UTF-8 %v", ex.status, utf8.Valid(ex.body))
			}
		}),

	// Hostile ids: never reach a storage key, never alias.
	badID("braces", "a{b}", "r"),
	badID("too-long", strings.Repeat("t", 129), "r"),
	badID("space", "a b", "r"),
	badID("newline", "a\nb", "r"),
	badID("nul", "a\x00b", "r"),
	badID("star", "a*", "r"),
	badID("slash", "a/b", "r"),
	badID("run-braces", "t", "r}"),
	badID("empty", "", "r"),
	badPath("path-dotdot", "/agui/threads/..%2F..%2Fx"),
	badPath("path-nul", "/agui/threads/a%00b"),
	badPath("path-brace", "/agui/threads/%7Bx%7D/runs"),
	badPath("path-run-brace", "/agui/threads/x/runs/%7Br%7D/events"),
	badLastEventID("lei-dash", "-"),
	badLastEventID("lei-plus", "+"),
	badLastEventID("lei-dollar", "$"),
	badLastEventID("lei-gt", ">"),
	badLastEventID("lei-redis-id", "(5-0"),
	badAfter("after-newline", "r1:e:1%0Adata:%20%7B%22type%22:%22RUN_FINISHED%22%7D"),
	badAfter("after-garbage", "%FF%FE"),
	{class: "hostile-id", name: "colon-ids-do-not-alias", run: func(t *testing.T, e *env) {
		// Ids may hold ':'; thread "a:b" run "c" and thread "a" run "b:c" are distinct.
		p := e.id("p")
		e.run(t, p+":x", "y", nil)
		e.run(t, p, "x:y", frames(fStarted, data(`{"type":"CUSTOM","name":"marker","value":1}`), fFinished))
		e.waitEnded(t, p+":x")
		a := e.get(t, "/agui/threads/"+p+":x/runs/y/events")
		if a.status != 200 || strings.Contains(string(a.body), "marker") {
			t.Fatalf("run y of %s:x: %d %q", p, a.status, trunc(a.body))
		}
		e.readable(t, p)
		e.readable(t, p+":x")
	}},
	{class: "hostile-id", name: "last-event-id-of-other-run", run: func(t *testing.T, e *env) {
		th, r1, r2 := e.id("t"), e.id("r"), e.id("r")
		live := events(t, e.run(t, th, r1, nil).body)
		e.waitEnded(t, th)
		e.run(t, th, r2, nil)
		e.waitEnded(t, th)
		r := e.get(t, "/agui/threads/"+th+"/runs/"+r2+"/events", "Last-Event-ID", live[1].id)
		if r.status != 404 && r.status != 410 && r.status != 400 {
			t.Fatalf("status %d %q", r.status, trunc(r.body))
		}
	}},

	// Foreign identities: every answer to another identity is what an unused id gets.
	{class: "foreign-identity", name: "anonymous-run", multi: true, run: func(t *testing.T, e *env) {
		problemOf(t, e.postRun(t, runBody(e.id("t"), e.id("r"), "chat")), 401, proxy.CodeIdentityRequired)
	}},
	{class: "foreign-identity", name: "header-twice", multi: true, run: func(t *testing.T, e *env) {
		problemOf(t, e.postRun(t, runBody(e.id("t"), e.id("r"), "chat"), identityHeader, "a", identityHeader, "b"), 400, proxy.CodeInvalidIdentity)
	}},
	{class: "foreign-identity", name: "look-alike-header", multi: true, run: func(t *testing.T, e *env) {
		problemOf(t, e.postRun(t, runBody(e.id("t"), e.id("r"), "chat"), "X_Agui_User", "alice"), 401, proxy.CodeIdentityRequired)
	}},
	{class: "foreign-identity", name: "reads-like-unknown", multi: true, run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		e.run(t, th, run, nil, e.as("alice")...)
		e.waitEnded(t, th, e.as("alice")...)
		unused := e.id("t")
		for _, p := range []string{"", "/runs", "/export", "/events", "/runs/" + run + "/events"} {
			foreign := e.get(t, "/agui/threads/"+th+p, e.as("mallory")...)
			fresh := e.get(t, "/agui/threads/"+unused+p, e.as("mallory")...)
			if foreign.status != fresh.status || foreign.status != 404 {
				t.Fatalf("GET %s: foreign %d, unused %d", p, foreign.status, fresh.status)
			}
			if strings.Contains(string(foreign.body), th) && !strings.Contains(string(fresh.body), unused) {
				t.Fatalf("GET %s: the foreign answer names the thread: %q", p, foreign.body)
			}
		}
	}},
	{class: "foreign-identity", name: "stop-like-unknown", multi: true, run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		e.run(t, th, run, nil, e.as("alice")...)
		r := e.do(t, http.MethodPost, "/agui/threads/"+th+"/runs/"+run+"/stop", nil, e.as("mallory")...)
		problemOf(t, r, 404, "")
	}},
	{class: "foreign-identity", name: "resume-like-unknown", multi: true, run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		live := events(t, e.run(t, th, run, nil, e.as("alice")...).body)
		e.waitEnded(t, th, e.as("alice")...)
		r := e.get(t, "/agui/threads/"+th+"/events", append(e.as("mallory"), "Last-Event-ID", live[1].id)...)
		problemOf(t, r, 404, "")
	}},
	{class: "foreign-identity", name: "run-post-like-unused", multi: true, run: func(t *testing.T, e *env) {
		// Another identity starting a run on alice's thread id gets what an unused id gets (a
		// run of its own), and alice's thread is untouched.
		th := e.id("t")
		e.run(t, th, e.id("r"), nil, e.as("alice")...)
		e.waitEnded(t, th, e.as("alice")...)
		r := e.postRun(t, runBody(th, e.id("r"), "chat"), e.as("mallory")...)
		if r.status != 200 {
			t.Fatalf("foreign run POST: %d %q, an unused id gets 200", r.status, trunc(r.body))
		}
		v := e.waitEnded(t, th, e.as("alice")...)
		if len(v.Runs) != 1 {
			t.Fatalf("alice's thread has %d runs, want 1", len(v.Runs))
		}
	}},
	{class: "foreign-identity", name: "import-like-unused", multi: true, run: func(t *testing.T, e *env) {
		th := e.id("t")
		e.run(t, th, e.id("r"), nil, e.as("alice")...)
		e.waitEnded(t, th, e.as("alice")...)
		ex := e.get(t, "/agui/threads/"+th+"/export", e.as("alice")...)
		r := e.do(t, http.MethodPost, "/agui/threads/"+th+"/import", bytes.NewReader(ex.body), e.as("mallory")...)
		if r.status != 201 {
			t.Fatalf("foreign import: %d %q, an unused id gets 201", r.status, trunc(r.body))
		}
	}},
	{class: "foreign-identity", name: "non-run-post-needs-identity", multi: true, run: func(t *testing.T, e *env) {
		path := "/" + e.id("tool")
		r := e.do(t, http.MethodPost, path, strings.NewReader("x=1"), "Content-Type", "application/x-www-form-urlencoded")
		problemOf(t, r, 401, proxy.CodeIdentityRequired)
		if _, ok := e.up.paths.Load(path); ok {
			t.Fatal("an anonymous POST reached the agent")
		}
	}},
	{class: "foreign-identity", name: "anonymous-get-not-forwarded", multi: true, run: func(t *testing.T, e *env) {
		path := "/" + e.id("page")
		problemOf(t, e.get(t, path, "X_Agui_User", "alice"), 401, proxy.CodeIdentityRequired)
		if _, ok := e.up.paths.Load(path); ok {
			t.Fatal("an anonymous GET reached the agent")
		}
	}},
	{class: "foreign-identity", name: "anonymous-passthrough-when-allowed", cfg: func(c *proxy.Config) {
		c.IdentityHeader, c.AnonymousPassthrough = identityHeader, true
	}, run: func(t *testing.T, e *env) {
		path := "/" + e.id("tool")
		r := e.do(t, http.MethodPost, path, strings.NewReader("x=1"), "Content-Type", "application/x-www-form-urlencoded")
		if _, ok := e.up.paths.Load(path); !ok || r.status == 401 {
			t.Fatalf("a non-run POST was not forwarded with AnonymousPassthrough: %d", r.status)
		}
		// Runs still need an identity.
		problemOf(t, e.postRun(t, runBody(e.id("t"), e.id("r"), "chat")), 401, proxy.CodeIdentityRequired)
	}},
	{class: "foreign-identity", name: "identity-forwarded-is-ours", multi: true, run: func(t *testing.T, e *env) {
		path := "/" + e.id("get")
		e.get(t, path, identityHeader, "alice", "Connection", identityHeader)
		v, ok := e.up.paths.Load(path)
		if !ok || v.(string) != "alice" {
			t.Fatalf("the agent got identity %q (reached %v)", v, ok)
		}
	}},

	// Bad patches: the whole delta is skipped, the thread stays readable.
	patchCase("negative-index", `[{"op":"remove","path":"/a/-1"}]`, stateAfterGoodDelta),
	patchCase("leading-zero", `[{"op":"replace","path":"/a/01","value":9}]`, stateAfterGoodDelta),
	patchCase("proto", `[{"op":"add","path":"/__proto__/x","value":1}]`, stateAfterGoodDelta),
	patchCase("not-array", `{"op":"add","path":"/x","value":1}`, stateAfterGoodDelta),
	patchCase("unknown-op", `[{"op":"frobnicate","path":"/x"}]`, stateAfterGoodDelta),
	patchCase("half-applies", `[{"op":"add","path":"/b","value":1},{"op":"remove","path":"/nope"}]`, stateAfterGoodDelta),
	patchCase("missing-value", `[{"op":"add","path":"/x"}]`, stateAfterGoodDelta),
	patchCase("copy-bomb", `[`+strings.TrimSuffix(strings.Repeat(`{"op":"copy","from":"/s","path":"/s2"},{"op":"add","path":"/s","value":"`+strings.Repeat("b", 1000)+`"},`, 50), ",")+`,{"op":"test","path":"/nope","value":1}]`, stateAfterGoodDelta),
	upstreamCase("bad-patch", "snapshot-duplicate-keys", frames(fStarted, data(`{"type":"STATE_SNAPSHOT","snapshot":{"a":1,"a":2}}`), fFinished),
		func(t *testing.T, e *env, thread, run string, r reply) {
			_, state := e.history(t, thread)
			if got, _ := json.Marshal(state); string(got) != `{"a":2}` {
				t.Fatalf("state %s", got)
			}
		}),
	// A MESSAGES_SNAPSHOT with one invalid message: the official client rejects the whole
	// event, so history, prelude and hydration leave it out, and each says so.
	upstreamCase("bad-snapshot", "one-invalid-message", frames(fStarted, data(`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"user","content":"x"},{"id":"b"}]}`), fFinished),
		func(t *testing.T, e *env, thread, run string, r reply) {
			sameReplay(t, e, thread, run, r) // forwarded and recorded as sent
			h := e.get(t, "/agui/threads/"+thread)
			var v struct {
				Messages      []map[string]any `json:"messages"`
				EventsOmitted *struct {
					Omitted int    `json:"omitted"`
					Reason  string `json:"reason"`
				} `json:"eventsOmitted"`
			}
			if h.status != 200 || json.Unmarshal(h.body, &v) != nil || v.EventsOmitted == nil || v.EventsOmitted.Omitted != 1 ||
				!strings.Contains(v.EventsOmitted.Reason, "MESSAGES_SNAPSHOT") {
				t.Fatalf("history %q: want eventsOmitted naming the snapshot", trunc(h.body))
			}
			for _, m := range v.Messages {
				if m["id"] == "a" || m["id"] == "b" {
					t.Fatalf("history holds message %v of the rejected snapshot", m["id"])
				}
			}
			if a := e.get(t, "/agui/threads/"+thread+"/events"); !bytes.Contains(a.body, []byte(`"agui-proxy.events_omitted"`)) {
				t.Fatalf("the prelude does not say it left the snapshot out: %q", trunc(a.body))
			}
		}),
	upstreamCase("bad-patch", "huge-number", frames(fStarted, data(`{"type":"STATE_SNAPSHOT","snapshot":{"n":1e400}}`), fFinished), nil),

	// Events after the terminal event: the live stream and every replay agree (after
	// RUN_FINISHED they are kept, proxy.AfterTerminalKeep; after RUN_ERROR refused), and the
	// runs tree has the status of the stream's last terminal event.
	upstreamCase("after-terminal", "content-after-finished", frames(fStarted, fFinished, fMsgStart, fMsgText, fMsgEnd), sameReplay),
	upstreamCase("after-terminal", "second-run-started", frames(fStarted, fFinished, fStarted, fFinished), sameReplay),
	upstreamCase("after-terminal", "after-run-error", frames(fStarted, data(`{"type":"RUN_ERROR","message":"x"}`), data(`{"type":"CUSTOM","name":"late","value":1}`)), sameReplay),
	upstreamCase("after-terminal", "status-agrees", frames(fStarted, fFinished, data(`{"type":"CUSTOM","name":"late","value":1}`)),
		func(t *testing.T, e *env, thread, run string, r reply) {
			live := events(t, r.body)
			v := e.waitEnded(t, thread)
			last := ""
			for _, ev := range live {
				if ev.typ == "RUN_FINISHED" || ev.typ == "RUN_ERROR" {
					last = ev.typ
				}
			}
			want := map[string]string{"RUN_FINISHED": "finished", "RUN_ERROR": "error"}[last]
			if len(v.Runs) != 1 || v.Runs[0].Status != want {
				t.Fatalf("live stream ends %v, runs tree %+v", types(live), v.Runs)
			}
		}),

	// Orphan events: forwarded; the thread stays readable and its prelude starts with
	// RUN_STARTED.
	upstreamCase("orphan", "content-without-start", frames(fStarted, fMsgText, fFinished), endsWith("RUN_FINISHED")),
	upstreamCase("orphan", "end-without-start", frames(fStarted, fMsgEnd, fFinished), endsWith("RUN_FINISHED")),
	upstreamCase("orphan", "tool-args-without-start", frames(fStarted, data(`{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{}"}`), fFinished), endsWith("RUN_FINISHED")),
	upstreamCase("orphan", "no-run-started", frames(fMsgStart, fMsgText, fMsgEnd, fFinished), func(t *testing.T, e *env, thread, run string, r reply) {
		if evs := events(t, r.body); evs[0].typ != "RUN_STARTED" {
			t.Fatalf("live stream starts %v", types(evs))
		}
	}),
	{class: "orphan", name: "later-clean-run-readable", run: func(t *testing.T, e *env) {
		// A bad run does not make later, clean runs unreadable (?run= of them included).
		th, bad, good := e.id("t"), e.id("r"), e.id("r")
		e.run(t, th, bad, frames(fStarted, fMsgText, fFinished))
		e.waitEnded(t, th)
		e.run(t, th, good, nil)
		e.readable(t, th)
		if r := e.get(t, "/agui/threads/"+th+"?run="+good); r.status != 200 {
			t.Fatalf("?run=%s: %d %q", good, r.status, trunc(r.body))
		}
	}},

	// CR-only and CRLF framing from the upstream.
	upstreamCase("cr-framing", "cr-only", frames(strings.ReplaceAll(fStarted+fMsgStart+fMsgText+fMsgEnd+fFinished, "\n", "\r")), crCheck),
	upstreamCase("cr-framing", "crlf", frames(strings.ReplaceAll(fStarted+fMsgStart+fMsgText+fMsgEnd+fFinished, "\n", "\r\n")), crCheck),
	upstreamCase("cr-framing", "mixed", frames(fStarted, strings.ReplaceAll(fMsgStart, "\n", "\r"), strings.ReplaceAll(fMsgText, "\n", "\r\n"), fMsgEnd, fFinished), crCheck),
	upstreamCase("cr-framing", "cr-split-across-writes", frames(strings.ReplaceAll(fStarted, "\n\n", "\r"), "\r", strings.ReplaceAll(fFinished, "\n", "\r")), crCheck),
	upstreamCase("cr-framing", "bom", frames("\ufeff"+fStarted, fFinished), endsWith("RUN_FINISHED")),

	// Hostile upstreams.
	upstreamCase("hostile-upstream", "cut-mid-frame", frames(fStarted, `data: {"type":"TEXT_MESS`), endsWith("RUN_ERROR")),
	upstreamCase("hostile-upstream", "empty-stream", frames(), func(t *testing.T, e *env, thread, run string, r reply) {
		evs := events(t, r.body)
		if len(evs) != 2 || evs[0].typ != "RUN_STARTED" || evs[1].typ != "RUN_ERROR" {
			t.Fatalf("stream %v", types(evs))
		}
	}),
	upstreamCase("hostile-upstream", "junk-id-retry-event", frames("id: \x00x\nretry: 1x\nevent: y\n"+fStarted, fFinished), func(t *testing.T, e *env, thread, run string, r reply) {
		for _, ev := range events(t, r.body) {
			if !strings.HasPrefix(ev.id, run+":") {
				t.Fatalf("event id %q is not ours", ev.id)
			}
		}
	}),
	// Bytes that are not SSE: forwarded in frames of their own, never glued to ours.
	nonSSE("json-array-unterminated", `[{"type":"RUN_STARTED"},{"type":"RUN_FINISHED"}]`),
	nonSSE("json-array-then-events", "[1,2,3]\n\n", fStarted, fFinished),
	nonSSE("deflate-body", deflated(fStarted+fMsgStart+fMsgText+fMsgEnd+fFinished)),
	nonSSE("junk-lone-cr-blank-line", "abc\r\r", fStarted, fMsgStart, fMsgText, fMsgEnd, fFinished),
	nonSSE("junk-cr-split-across-writes", "abc\r", "\r", fStarted, fFinished),
	nonSSE("junk-before-each-event", "x1\n"+fStarted, "x2\n"+fFinished),
	// The agent's retry: and event: fields: retry is dropped (the client reconnects to the
	// proxy, on its terms), event is kept (a part of the agent's event).
	upstreamCase("agent-fields", "retry-dropped", frames("retry: 0\n"+fStarted, fMsgStart, "retry: 0\n\n", "retry: 7\r\n"+fMsgText, fMsgEnd, fFinished),
		func(t *testing.T, e *env, thread, run string, r reply) {
			if bytes.Contains(r.body, []byte("retry: 0")) || bytes.Contains(r.body, []byte("retry: 7")) {
				t.Fatalf("the agent's retry reached the live client: %q", trunc(r.body))
			}
			e.waitEnded(t, thread)
			for _, p := range []string{"/runs/" + run + "/events", "/events"} {
				a := e.get(t, "/agui/threads/"+thread+p)
				if bytes.Contains(a.body, []byte("retry: 0")) || bytes.Contains(a.body, []byte("retry: 7")) || !bytes.HasPrefix(a.body, []byte("retry: 2000\n")) {
					t.Fatalf("%s: %q, want the proxy's retry only", p, trunc(a.body))
				}
			}
			sameReplay(t, e, thread, run, r)
			if got := officialTypes(t, r.body); fmt.Sprint(got) != "[RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED]" {
				t.Fatalf("the official client reads %v", got)
			}
		}),
	upstreamCase("agent-fields", "event-kept", frames("event: x\n"+fStarted, "event: custom\n"+data(`{"type":"CUSTOM","name":"n","value":1}`), fFinished),
		func(t *testing.T, e *env, thread, run string, r reply) {
			if !bytes.Contains(r.body, []byte("event: custom\ndata: ")) {
				t.Fatalf("the agent's event field did not reach the client: %q", trunc(r.body))
			}
			sameReplay(t, e, thread, run, r)
		}),
	upstreamCase("hostile-upstream", "foreign-ids-in-run-started", frames(data(`{"type":"RUN_STARTED","threadId":"other","runId":"other"}`), fFinished),
		func(t *testing.T, e *env, thread, run string, r reply) {
			e.waitEnded(t, thread)
			if r := e.get(t, "/agui/threads/other/runs"); r.status != 404 {
				t.Fatalf("the upstream's thread id became a thread: %d", r.status)
			}
		}),
	upstreamCase("hostile-upstream", "heartbeats-only-then-end", frames(":ping\n\n", ":ping\n\n", fStarted, ":x\n\n", fFinished), sameReplay),
	{class: "hostile-upstream", name: "error-status-releases-run", run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		e.up.scripts.Store(run, script(func(w http.ResponseWriter, r *http.Request, _, _ string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			w.Write([]byte(`{"error":"boom"}`))
		}))
		r := e.postRun(t, runBody(th, run, "chat"))
		if r.status != 500 || string(r.body) != `{"error":"boom"}` {
			t.Fatalf("status %d %q", r.status, r.body)
		}
		e.up.scripts.Delete(run)
		e.run(t, th, run, nil) // the retry is not RunAlreadyStarted
	}},
	{class: "hostile-upstream", name: "json-200-passes-through", run: func(t *testing.T, e *env) {
		run := e.id("r")
		e.up.scripts.Store(run, script(func(w http.ResponseWriter, r *http.Request, _, _ string) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"ok":true}`))
		}))
		if r := e.postRun(t, runBody(e.id("t"), run, "chat")); r.status != 200 || string(r.body) != `{"ok":true}` {
			t.Fatalf("status %d %q", r.status, r.body)
		}
	}},
	{class: "hostile-upstream", name: "no-headers", cfg: func(c *proxy.Config) { c.UpstreamHeaderTimeout = 300 * time.Millisecond }, run: func(t *testing.T, e *env) {
		run := e.id("r")
		e.up.scripts.Store(run, script(func(w http.ResponseWriter, r *http.Request, _, _ string) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}))
		problemOf(t, e.postRun(t, runBody(e.id("t"), run, "chat")), 504, proxy.CodeUpstreamTimeout)
	}},
	{class: "hostile-upstream", name: "silent", cfg: func(c *proxy.Config) { c.UpstreamIdleTimeout = 300 * time.Millisecond }, run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		r := e.run(t, th, run, func(w http.ResponseWriter, r *http.Request, thread, run string) {
			frames(fStarted)(w, r, thread, run)
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		})
		evs := events(t, r.body)
		if lastType(evs) != "RUN_ERROR" || !strings.Contains(string(evs[len(evs)-1].raw), "UPSTREAM_IDLE") {
			t.Fatalf("stream %v", types(evs))
		}
		e.readable(t, th)
	}},
	{class: "hostile-upstream", name: "unreachable", cfg: func(c *proxy.Config) { c.Upstream.Host = "127.0.0.1:1" }, run: func(t *testing.T, e *env) {
		th, run := e.id("t"), e.id("r")
		problemOf(t, e.postRun(t, runBody(th, run, "chat")), 502, proxy.CodeUpstreamUnavailable)
	}},
}

// nonSSE is a case of class non-sse: the agent answers chunks that hold bytes that are not
// SSE. The live stream, read as the official client reads it, holds the events a replay holds
// (the proxy's RUN_STARTED is never glued onto the agent's last bytes), and the proxy counts
// the frames that were not SSE.
func nonSSE(name string, chunks ...string) tcase {
	return withCfg(withMetrics, upstreamCase("non-sse", name, frames(chunks...), func(t *testing.T, e *env, thread, run string, r reply) {
		live := officialTypes(t, r.body)
		if len(live) == 0 || live[0] != "RUN_STARTED" {
			t.Fatalf("the official client reads %v from the live stream %q, want RUN_STARTED first", live, trunc(r.body))
		}
		e.waitEnded(t, thread)
		a := e.get(t, "/agui/threads/"+thread+"/runs/"+run+"/events")
		if replay := officialTypes(t, a.body); fmt.Sprint(replay) != fmt.Sprint(live) {
			t.Fatalf("live %v, replay %v", live, replay)
		}
		if n := e.counter(t, "agui_proxy_upstream_non_sse_frames_total"); n < 1 {
			t.Fatalf("agui_proxy_upstream_non_sse_frames_total = %v, want the frames that were not SSE counted", n)
		}
	}))
}

// deflated is s compressed with deflate, as an agent that compresses its stream sends it.
func deflated(s string) string {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestCompression)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

// crCheck: our id line never follows a lone CR, and the run attach replays LF-only frames
// that carry the same events.
func crCheck(t *testing.T, e *env, thread, run string, r reply) {
	t.Helper()
	if i := bytes.Index(r.body, []byte("\rid: ")); i >= 0 {
		t.Fatalf("an id line follows a lone CR: %q", r.body[max(0, i-40):min(len(r.body), i+40)])
	}
	live := events(t, r.body)
	if lastType(live) != "RUN_FINISHED" {
		t.Fatalf("live %v", types(live))
	}
	e.waitEnded(t, thread)
	a := e.get(t, "/agui/threads/"+thread+"/runs/"+run+"/events")
	if bytes.IndexByte(a.body, '\r') >= 0 {
		t.Fatalf("replay holds a CR: %q", trunc(a.body))
	}
	if got := types(events(t, a.body)); fmt.Sprint(got) != fmt.Sprint(types(live)) {
		t.Fatalf("replay %v, live %v", got, types(live))
	}
}

// slowBody sends data, then stalls for pause before EOF.
type slowBody struct {
	data  []byte
	pause time.Duration
	sent  bool
}

func (b *slowBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, b.data), nil
	}
	time.Sleep(b.pause)
	return 0, io.EOF
}

// withCfg gives c a proxy of its own configured by cfg.
func withCfg(cfg func(*proxy.Config), c tcase) tcase { c.cfg = cfg; return c }

func smallEvents(c *proxy.Config) { c.MaxEventBytes = 64 << 10 }

func smallRuns(c *proxy.Config) { c.MaxRunBytes = 64 << 10 }
