package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// seedThreads records real runs through two proxies (routes "default" and "/b", identity
// header X-User) in front of the demo agent into store: alice's t1 (two runs, the second a
// child of the first) and t2 on "default", bob's t3 on "/b" (a run whose agent fails, so it
// ends with RUN_ERROR). It returns the thread ids.
func seedThreads(t *testing.T, store recorder.Store) []string {
	t.Helper()
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer agent.Close()
	u, _ := url.Parse(agent.URL)
	post := func(route, user, thread, run, scenario string) {
		h, err := proxy.New(proxy.Config{Upstream: u, Store: store, Route: route, IdentityHeader: "X-User"})
		if err != nil {
			t.Fatal(err)
		}
		px := httptest.NewServer(h)
		defer func() { px.Close(); h.Shutdown(context.Background()) }()
		res := runtest.PostRun(t, t.Context(), px.URL+"/", runtest.RunBody(thread, run, scenario), http.Header{"X-User": {user}})
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		runtest.WaitRunEnded(t, store, recorder.ThreadKey(user, route, thread), run)
	}
	post("default", "alice", "t1", "r1", "chat")
	post("default", "alice", "t1", "r2", "chat")
	post("default", "alice", "t2", "r1", "chat")
	post("/b", "bob", "t3", "r1", "error")
	return []string{"t1", "t2", "t3"}
}

// cli runs one export or import with env and returns its exit code, stdout and stderr.
func cli(t *testing.T, env map[string]string, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := storeArgs{env: env, ctx: t.Context(), stderr: &errb}
	var code int
	switch args[0] {
	case "export":
		code = runExport(a, args[1:], &out)
	case "import":
		code = runImport(a, args[1:], stdin, &out)
	default:
		t.Fatalf("unknown command %q", args[0])
	}
	return code, out.String(), errb.String()
}

// mustExport exports the store of env and fails the test unless it succeeds.
func mustExport(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	code, out, errs := cli(t, env, nil, append([]string{"export"}, args...)...)
	if code != exitOK {
		t.Fatalf("export %v = exit %d\nstderr: %s", args, code, errs)
	}
	// The last line is the end line, counting the documents before it; the documents are
	// returned without it.
	body := strings.TrimSuffix(out, "\n")
	i := strings.LastIndexByte(body, '\n') + 1
	n, ok := attach.ParseExportEnd([]byte(body[i:]))
	if docs := strings.Count(body[:i], "\n"); !ok || n != docs {
		t.Fatalf("export %v ends with %q, want the end line of its %d documents", args, body[i:], docs)
	}
	return body[:i]
}

// mustImport imports data into the store of env and fails the test unless every line is
// imported or already present.
func mustImport(t *testing.T, env map[string]string, data string, args ...string) string {
	t.Helper()
	code, _, errs := cli(t, env, strings.NewReader(data), append([]string{"import"}, args...)...)
	if code != exitOK {
		t.Fatalf("import %v = exit %d\nstderr: %s", args, code, errs)
	}
	return errs
}

// normalized returns the export's lines without exportedAt and the runs' updatedAt, sorted by
// thread id: the export order is the store's, exportedAt is the time of the export, and an
// import finishes its runs at the time of the import (their createdAt is kept).
func normalized(t *testing.T, export string) []string {
	t.Helper()
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(export), "\n") {
		if line == "" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("export line %q: %v", line, err)
		}
		delete(m, "exportedAt")
		var runs []map[string]json.RawMessage
		if err := json.Unmarshal(m["runs"], &runs); err != nil {
			t.Fatalf("export line %q: runs: %v", line, err)
		}
		for _, r := range runs {
			delete(r, "updatedAt")
		}
		m["runs"], _ = json.Marshal(runs)
		b, _ := json.Marshal(m)
		out = append(out, string(b))
	}
	// In thread id order: sorting the lines themselves would order them by their first run's
	// createdAt text, which RFC 3339 writes without trailing zeros (".5Z" sorts after ".535Z").
	threadID := func(line string) string {
		var d struct{ ThreadID string }
		json.Unmarshal([]byte(line), &d)
		return d.ThreadID
	}
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(strings.Compare(threadID(a), threadID(b)), strings.Compare(a, b))
	})
	return out
}

func redisEnv(srv *redistest.Server) map[string]string {
	return map[string]string{"AGUI_REDIS_URL": srv.URL()}
}

func diskEnv(dir string) map[string]string { return map[string]string{"AGUI_STORE_PATH": dir} }

func openRedis(t *testing.T, srv *redistest.Server) recorder.Store {
	t.Helper()
	s, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestExportImportRoundTrip: threads recorded in Redis, exported, imported into a second
// Redis, into a disk store and from the disk store back into a third Redis, export to the
// same documents each time (owner, route, runs, statuses, times and every frame); importing
// the same file again changes nothing and succeeds.
func TestExportImportRoundTrip(t *testing.T) {
	srcSrv := redistest.Start(t)
	src := openRedis(t, srcSrv)
	ids := seedThreads(t, src)
	src.Close()

	first := mustExport(t, redisEnv(srcSrv))
	want := normalized(t, first)
	if len(want) != len(ids) {
		t.Fatalf("export has %d threads, want %d:\n%s", len(want), len(ids), first)
	}
	for i, id := range ids {
		if !strings.Contains(want[i], `"threadId":"`+id+`"`) {
			t.Fatalf("export line %d lacks thread %s: %s", i, id, want[i])
		}
	}
	if !strings.Contains(first, `"origin":{"owner":"bob","route":"/b"}`) || !strings.Contains(first, `"origin":{"owner":"alice","route":"default"}`) {
		t.Fatalf("export lacks the threads' origins:\n%s", first)
	}

	// Redis → Redis.
	dstSrv := redistest.Start(t)
	errs := mustImport(t, redisEnv(dstSrv), first)
	if !strings.Contains(errs, "3 threads (4 runs) imported") {
		t.Errorf("import summary = %q", errs)
	}
	if got := normalized(t, mustExport(t, redisEnv(dstSrv))); !slices.Equal(got, want) {
		t.Fatalf("Redis → Redis: export after import differs\n got: %s\nwant: %s", got, want)
	}
	// The imported threads are the owners' again: alice lists hers on the route.
	dst := openRedis(t, dstSrv)
	page, err := dst.ListThreads(t.Context(), recorder.ThreadQuery{Owner: "alice", Route: "default"})
	dst.Close()
	if err != nil || len(page.Threads) != 2 {
		t.Fatalf("alice's threads after the import = %+v, %v; want t1 and t2", page.Threads, err)
	}

	// The same import again: every thread already present, nothing changed, exit 0.
	errs = mustImport(t, redisEnv(dstSrv), first)
	if !strings.Contains(errs, "0 threads (0 runs) imported") || !strings.Contains(errs, "3 already present, 0 lines refused") {
		t.Errorf("second import summary = %q", errs)
	}
	if got := normalized(t, mustExport(t, redisEnv(dstSrv))); !slices.Equal(got, want) {
		t.Fatalf("a second import changed the store\n got: %s\nwant: %s", got, want)
	}

	// Redis → disk → Redis.
	dir := t.TempDir()
	mustImport(t, diskEnv(dir), first)
	fromDisk := mustExport(t, diskEnv(dir))
	if got := normalized(t, fromDisk); !slices.Equal(got, want) {
		t.Fatalf("Redis → disk: export after import differs\n got: %s\nwant: %s", got, want)
	}
	thirdSrv := redistest.Start(t)
	mustImport(t, redisEnv(thirdSrv), fromDisk)
	if got := normalized(t, mustExport(t, redisEnv(thirdSrv))); !slices.Equal(got, want) {
		t.Fatalf("disk → Redis: export after import differs\n got: %s\nwant: %s", got, want)
	}
}

// TestExportFilters: -owner, -route, -since and -until select threads as the thread list does
// (the start of the latest run), and bad values are usage errors.
func TestExportFilters(t *testing.T) {
	srv := redistest.Start(t)
	s := openRedis(t, srv)
	seedThreads(t, s)
	t3, err := s.Run(t.Context(), recorder.ThreadKey("bob", "/b", "t3"), "r1")
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	threads := func(export string) string {
		var ids []string
		for _, l := range normalized(t, export) {
			var d attach.ExportDoc
			json.Unmarshal([]byte(l), &d)
			ids = append(ids, d.ThreadID)
		}
		return strings.Join(ids, " ")
	}
	env := redisEnv(srv)
	at := t3.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "t1 t2 t3"},
		{[]string{"-owner", "alice"}, "t1 t2"},
		{[]string{"-owner", "alice", "-route", "/b"}, ""},
		{[]string{"-route", "/b"}, "t3"},
		{[]string{"-owner", ""}, ""},
		{[]string{"-since", at}, "t3"},
		{[]string{"-until", at}, "t1 t2"},
	} {
		if got := threads(mustExport(t, env, tc.args...)); got != tc.want {
			t.Errorf("export %q = threads %q, want %q", tc.args, got, tc.want)
		}
	}
	for _, args := range [][]string{{"-since", "yesterday"}, {"-until", "2026-13-01T00:00:00Z"}, {"-nope"}, {"extra"}} {
		code, out, errs := cli(t, env, nil, append([]string{"export"}, args...)...)
		if code != exitUsage || out != "" || errs == "" {
			t.Errorf("export %q = exit %d, stdout %q, stderr %q; want exit 2 with a message", args, code, out, errs)
		}
	}
}

// TestImportDryRun: a dry run validates every line, reports what it would import (and what is
// already there), and writes nothing, into Redis and into a disk store; without a store it
// checks the documents alone.
func TestImportDryRun(t *testing.T) {
	srcSrv := redistest.Start(t)
	src := openRedis(t, srcSrv)
	seedThreads(t, src)
	src.Close()
	data := mustExport(t, redisEnv(srcSrv))

	dstSrv := redistest.Start(t)
	code, out, errs := cli(t, redisEnv(dstSrv), strings.NewReader(data), "import", "-dry-run")
	if code != exitOK {
		t.Fatalf("dry run = exit %d: %s", code, errs)
	}
	for _, want := range []string{`line 1: thread "`, `would import 2 runs (owner "alice", route "default")`, `would import 1 run (owner "bob", route "/b")`} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run report lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, "3 threads (4 runs) would be imported") || !strings.Contains(errs, "nothing was written") {
		t.Errorf("dry-run summary = %q", errs)
	}
	if n, err := dstSrv.Client(t).DBSize(t.Context()).Result(); err != nil || n != 0 {
		t.Fatalf("after a dry run Redis holds %d keys (%v), want 0", n, err)
	}
	// After a real import, a dry run reports the threads as already present.
	mustImport(t, redisEnv(dstSrv), data)
	_, out, _ = cli(t, redisEnv(dstSrv), strings.NewReader(data), "import", "-dry-run")
	if strings.Count(out, "already present") != 3 {
		t.Errorf("dry run after the import:\n%s", out)
	}

	dir := filepath.Join(t.TempDir(), "history")
	code, _, errs = cli(t, diskEnv(dir), strings.NewReader(data), "import", "-dry-run")
	if code != exitOK || !strings.Contains(errs, "holds no store yet") || !strings.Contains(errs, "nothing was created") {
		t.Fatalf("disk dry run = exit %d: %s", code, errs)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dry run into a disk store not created yet created %s (%v)", dir, err)
	}
	if got := mustExport(t, diskEnv(dir)); got != "" {
		t.Fatalf("after a dry run the disk store holds:\n%s", got)
	}

	code, out, errs = cli(t, map[string]string{}, strings.NewReader(data+"{oops\n"), "import", "-dry-run")
	if code != exitRefused || strings.Count(out, "would import") != 3 || !strings.Contains(errs, "line 4: ") || !strings.Contains(errs, "no store configured") {
		t.Errorf("dry run without a store = exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

// TestImportKeepsTitles: an imported thread has the title it had (its first user message),
// through agui-proxy export and import and through the HTTP import.
func TestImportKeepsTitles(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	src, err := recorder.OpenDiskStore(t.Context(), recorder.DiskConfig{Dir: srcDir})
	if err != nil {
		t.Fatal(err)
	}
	seedThreads(t, src)
	want := map[string]string{}
	for _, k := range []string{recorder.ThreadKey("alice", "default", "t1"), recorder.ThreadKey("alice", "default", "t2"), recorder.ThreadKey("bob", "/b", "t3")} {
		th, err := src.Thread(t.Context(), k)
		if err != nil || th.Title == "" {
			t.Fatalf("seeded thread %s: title %q, %v", k, th.Title, err)
		}
		want[k] = th.Title
	}
	src.Close()
	mustImport(t, diskEnv(dstDir), mustExport(t, diskEnv(srcDir)))
	dst, err := recorder.OpenDiskStore(t.Context(), recorder.DiskConfig{Dir: dstDir})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	for k, title := range want {
		if th, err := dst.Thread(t.Context(), k); err != nil || th.Title != title {
			t.Errorf("imported thread %s: title %q (%v), want %q", k, th.Title, err, title)
		}
	}
	doc, err := attach.ExportThread(t.Context(), dst, recorder.ThreadKey("alice", "default", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := attach.ImportThread(t.Context(), dst, attach.ImportTarget{ThreadID: "copy", Route: "default"}, doc); err != nil {
		t.Fatal(err)
	}
	if th, err := dst.Thread(t.Context(), "copy"); err != nil || th.Title != want[recorder.ThreadKey("alice", "default", "t1")] {
		t.Errorf("thread imported over HTTP's path: title %q (%v)", th.Title, err)
	}
}

// TestImportBadLines: every bad line is reported with its number and skipped, the good lines
// are imported, and the exit status is 1. A thread that exists with other history is refused
// and left as it was.
func TestImportBadLines(t *testing.T) {
	srcSrv := redistest.Start(t)
	src := openRedis(t, srcSrv)
	seedThreads(t, src)
	src.Close()
	lines := strings.Split(strings.TrimSpace(mustExport(t, redisEnv(srcSrv), "-owner", "alice")), "\n")
	if len(lines) != 2 {
		t.Fatalf("alice's export has %d lines", len(lines))
	}
	if !strings.Contains(lines[0], `"threadId":"t1"`) {
		lines[0], lines[1] = lines[1], lines[0] // t1, with two runs, first
	}
	var doc attach.ExportDoc
	if err := json.Unmarshal([]byte(lines[0]), &doc); err != nil {
		t.Fatal(err)
	}
	reworked := func(edit func(d *attach.ExportDoc)) string {
		d := doc
		d.Runs = slices.Clone(doc.Runs)
		edit(&d)
		b, _ := json.Marshal(d)
		return string(b)
	}
	input := strings.Join([]string{
		lines[0],                         // 1: good
		"",                               // 2: blank, skipped
		`{"formatVersion":1,"threadId":`, // 3: not JSON
		reworked(func(d *attach.ExportDoc) { d.FormatVersion = 2; d.ThreadID = "v2" }),                            // 4
		reworked(func(d *attach.ExportDoc) { d.ThreadID = "bad id" }),                                             // 5
		reworked(func(d *attach.ExportDoc) { d.ThreadID = "dup"; d.Runs[1] = d.Runs[0] }),                         // 6
		reworked(func(d *attach.ExportDoc) { d.ThreadID = "big"; d.Runs[0].Detail = strings.Repeat("x", 40000) }), // 7: too long
		"\xff\xfe", // 8: not UTF-8
		reworked(func(d *attach.ExportDoc) { d.Runs = d.Runs[:1] }), // 9: thread 1 again with other runs: conflict
		lines[1], // 10: good, no trailing newline
	}, "\n")
	env := redisEnv(redistest.Start(t))
	env["AGUI_MAX_IMPORT_BYTES"] = "32768"
	code, _, errs := cli(t, env, strings.NewReader(input), "import")
	if code != exitRefused {
		t.Fatalf("import = exit %d, want 1\n%s", code, errs)
	}
	for _, want := range []string{
		"line 3: invalid import document: unexpected end of JSON input",
		`line 4: thread "v2": invalid import document: formatVersion 2 is not 1`,
		`line 5: `, `"bad id"`,
		`line 6: thread "dup": invalid import document: run "r1" appears twice`,
		"line 7: longer than AGUI_MAX_IMPORT_BYTES (32768 bytes)",
		"line 8: invalid import document: the document is not valid UTF-8",
		fmt.Sprintf(`line 9: thread %q already exists with other history`, doc.ThreadID),
		"2 threads (3 runs) imported", "7 lines refused",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "line 1:") || strings.Contains(errs, "line 2:") || strings.Contains(errs, "line 10:") {
		t.Errorf("a good or blank line was reported:\n%s", errs)
	}
	got := normalized(t, mustExport(t, env))
	if want := normalized(t, lines[0]+"\n"+lines[1]); !slices.Equal(got, want) {
		t.Fatalf("the store after the import\n got: %s\nwant: %s", got, want)
	}
}

// killingReader yields its first line, then kills the Redis server before yielding the rest.
type killingReader struct {
	first, rest string
	srv         *redistest.Server
	state       int
}

func (r *killingReader) Read(p []byte) (int, error) {
	switch r.state {
	case 0:
		r.state = 1
		return copy(p, r.first), nil
	case 1:
		r.state = 2
		r.srv.Kill()
		return copy(p, r.rest), nil
	}
	return 0, io.EOF
}

// TestImportStoreFails: a store that fails part way stops the import with exit 3 and the line
// it stopped at; the lines before it are imported, and the same import run again once the
// store is back finishes the job.
func TestImportStoreFails(t *testing.T) {
	srcSrv := redistest.Start(t)
	src := openRedis(t, srcSrv)
	seedThreads(t, src)
	src.Close()
	data := mustExport(t, redisEnv(srcSrv))
	first, rest, _ := strings.Cut(data, "\n")

	dstSrv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	env := redisEnv(dstSrv)
	env["AGUI_STORE_TIMEOUT"] = "2s"
	code, _, errs := cli(t, env, &killingReader{first: first + "\n", rest: rest, srv: dstSrv}, "import")
	if code != exitStoreErr || !strings.Contains(errs, "stopped at line 2") || !strings.Contains(errs, "1 thread (") {
		t.Fatalf("import against a killed Redis = exit %d, want 3 stopped at line 2\n%s", code, errs)
	}
	dstSrv.Restart()
	errs = mustImport(t, env, data)
	if !strings.Contains(errs, "2 threads") || !strings.Contains(errs, "1 already present") {
		t.Errorf("the import run again: %s", errs)
	}
	if got, want := normalized(t, mustExport(t, env)), normalized(t, data); !slices.Equal(got, want) {
		t.Fatalf("after the second import\n got: %s\nwant: %s", got, want)
	}
}

// TestBackupUsage: -h of the proxy names both commands, each command's -h documents its flags
// and exit codes, and without a Redis or disk store both refuse with exit 2.
func TestBackupUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-h"}, nil, &out, &errb); code != 0 {
		t.Fatalf("-h = exit %d", code)
	}
	for _, want := range []string{"agui-proxy export", "agui-proxy import", "-dry-run"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("agui-proxy -h lacks %q", want)
		}
	}
	for cmd, wants := range map[string][]string{
		"export": {"-owner", "-route", "-since", "-until", "Exit status: 0", "origin"},
		"import": {"-dry-run", "-default-owner", "-default-route", "Exit status: 0", "already present"},
	} {
		code, help, errs := cli(t, map[string]string{}, nil, cmd, "-h")
		if code != exitOK || errs != "" {
			t.Errorf("%s -h = exit %d, stderr %q (the usage belongs on stdout)", cmd, code, errs)
		}
		for _, w := range wants {
			if !strings.Contains(help, w) {
				t.Errorf("%s -h lacks %q:\n%s", cmd, w, help)
			}
		}
		code, _, errs = cli(t, map[string]string{}, strings.NewReader(""), cmd)
		if code != exitUsage || !strings.Contains(errs, "AGUI_STORE_PATH") {
			t.Errorf("%s without a store = exit %d, %q; want 2 naming the stores", cmd, code, errs)
		}
	}
	code, _, errs := cli(t, map[string]string{"AGUI_STORE_PATH": t.TempDir()}, nil, "import", filepath.Join(t.TempDir(), "missing.ndjson"))
	if code != exitUsage || !strings.Contains(errs, "missing.ndjson") {
		t.Errorf("import of a missing file = exit %d, %q", code, errs)
	}
	if _, err := os.Stat("missing.ndjson"); err == nil {
		t.Error("import created its input file")
	}
}

// TestUpgradeToThreadNamespaces is the upgrade step docs/design.md gives for stores written
// before thread namespaces: threads were filed under their bare id whatever their owner and
// route. Exporting such a store and importing it into a fresh key prefix (or directory)
// files each thread in its owner's namespace, where the proxy now looks for it; a
// single-tenant thread of the default route keeps its bare id.
func TestUpgradeToThreadNamespaces(t *testing.T) {
	srv := redistest.Start(t)
	legacy := openRedis(t, srv)
	ctx := t.Context()
	for _, r := range []recorder.Run{
		{ThreadID: "t1", RunID: "r1", Owner: "alice", Route: "default"}, // the old layout: the bare id
		{ThreadID: "t2", RunID: "r1", Owner: "", Route: "/b"},
		{ThreadID: "t3", RunID: "r1", Owner: "", Route: "default"},
	} {
		r.Epoch = recorder.NewEpoch()
		if _, err := legacy.CreateRun(ctx, r, recorder.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		frame := []byte(`{"type":"RUN_STARTED","threadId":"` + r.ThreadID + `","runId":"r1"}`)
		if err := legacy.Append(ctx, []recorder.Batch{{Run: r, Events: []recorder.Event{{Seq: 1, Type: "RUN_STARTED",
			Frame: append(append([]byte("id: "+recorder.Cursor{RunID: "r1", Epoch: r.Epoch, Seq: 1}.String()+"\ndata: "), frame...), "\n\n"...)}}}}); err != nil {
			t.Fatal(err)
		}
		if err := legacy.FinishRun(ctx, r.ThreadID, "r1", recorder.StatusFinished, "", 1); err != nil {
			t.Fatal(err)
		}
	}
	legacy.Close()

	old := redisEnv(srv)
	upgraded := map[string]string{"AGUI_REDIS_URL": srv.URL(), "AGUI_REDIS_PREFIX": "agui-v2"}
	errs := mustImport(t, upgraded, mustExport(t, old))
	if !strings.Contains(errs, "3 threads (3 runs) imported") {
		t.Fatalf("upgrade import: %s", errs)
	}
	s, err := recorder.NewRedisStore(ctx, recorder.RedisConfig{URL: srv.URL(), Prefix: "agui-v2"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct{ owner, route, id string }{{"alice", "default", "t1"}, {"", "/b", "t2"}, {"", "default", "t3"}} {
		th, err := s.Thread(ctx, recorder.ThreadKey(c.owner, c.route, c.id))
		if err != nil || th.Owner != c.owner || th.Route != c.route || th.LatestRunID != "r1" {
			t.Errorf("thread %s of %q on %s after the upgrade: %+v, %v", c.id, c.owner, c.route, th, err)
		}
		evs, err := s.Events(ctx, recorder.ThreadKey(c.owner, c.route, c.id), "r1", 0, 0)
		if err != nil || len(evs) != 1 || !strings.Contains(string(evs[0].Frame), `"threadId":"`+c.id+`"`) {
			t.Errorf("events of %s after the upgrade: %d, %v", c.id, len(evs), err)
		}
	}
	for _, id := range []string{"t1", "t2"} {
		if _, err := s.Thread(ctx, id); !errors.Is(err, recorder.ErrThreadNotFound) {
			t.Errorf("thread %s under its bare id after the upgrade: %v, want ErrThreadNotFound", id, err)
		}
	}
	page, err := s.ListThreads(ctx, recorder.ThreadQuery{Owner: "alice", Route: "default"})
	if err != nil || len(page.Threads) != 1 || recorder.ThreadIDOf(page.Threads[0].ID) != "t1" {
		t.Errorf("alice's thread list after the upgrade: %+v, %v", page.Threads, err)
	}
}

// TestImportEndLine: the end line of a bulk export is skipped and checked; an input without
// one is imported and said to be possibly cut; a line after the end line is refused.
func TestImportEndLine(t *testing.T) {
	doc := func(th string) string {
		return `{"formatVersion":1,"threadId":"` + th + `","runs":[{"runId":"r1","status":"finished","eventList":[{"type":"RUN_STARTED","threadId":"x","runId":"r1"},{"type":"RUN_FINISHED","threadId":"x","runId":"r1"}]}]}` + "\n"
	}
	end := func(n int) string { return string(attach.AppendExportEnd(nil, n)) }
	for _, tc := range []struct {
		name, data string
		code       int
		says       string // in stderr; "" none of the end line's messages
	}{
		{"whole", doc("a") + doc("b") + end(2), exitOK, ""},
		{"cut", doc("a") + doc("b"), exitOK, "no end line"},
		{"miscounted", doc("a") + end(2), exitOK, "the end line counts 2 threads, 1 lines came before it"},
		{"after-the-end", doc("a") + end(1) + doc("b"), exitRefused, "line 3: after the export's end line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := cli(t, diskEnv(t.TempDir()), strings.NewReader(tc.data), "import")
			if code != tc.code || (tc.says != "" && !strings.Contains(errs, tc.says)) || (tc.says == "" && strings.Contains(errs, "end line")) {
				t.Fatalf("import = exit %d, stderr:\n%s\nwant exit %d saying %q", code, errs, tc.code, tc.says)
			}
		})
	}
}
