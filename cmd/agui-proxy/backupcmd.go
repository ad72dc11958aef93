package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// Exit codes of agui-proxy export and import.
const (
	exitOK       = 0 // every thread exported; every line imported or already present
	exitRefused  = 1 // import: some lines were refused (bad or conflicting); the others were imported
	exitUsage    = 2 // bad flags, configuration, input file, or a store that cannot be opened
	exitStoreErr = 3 // the store failed part way: the output or the import is incomplete
)

// backupUsage is the part of agui-proxy -h about export and import.
const backupUsage = `  agui-proxy export       write every thread of the store (Redis or AGUI_STORE_PATH, from the
                          environment) to stdout as NDJSON, one export document per line
                          (agui-proxy export -h for its filters)
  agui-proxy import       read such NDJSON (a file or stdin) into the store; -dry-run checks every
                          line and writes nothing (agui-proxy import -h)
`

// storeArgs holds what export and import share: the environment (nil: the process's) and
// the context that Ctrl-C cancels.
type storeArgs struct {
	env    map[string]string
	ctx    context.Context
	stderr io.Writer
}

// openBackupStore opens the store the environment configures, or explains why a command that
// reads or writes a store directly cannot use it: the memory store belongs to one proxy
// process and has nothing to open. quiet reports no store as (nil, nil) instead.
func openBackupStore(a storeArgs, cmd string, quiet bool) (recorder.Store, string, error) {
	cfg, err := loadConfig(a.env)
	if err != nil {
		return nil, "", fmt.Errorf("configuration: %w", err)
	}
	name := storeName(cfg)
	if name == "memory" {
		if quiet {
			return nil, name, nil
		}
		return nil, name, fmt.Errorf("%s works on a Redis store (AGUI_REDIS_URL, AGUI_REDIS_CLUSTER_ADDRS or AGUI_REDIS_SENTINEL_ADDRS) or a disk store (AGUI_STORE_PATH); none is set, and the memory store lives only inside a running proxy (use GET <prefix>export there)", cmd)
	}
	if quiet && name == "disk" {
		// A dry run creates nothing: a directory without a store file holds no thread yet.
		if _, err := os.Stat(filepath.Join(cfg.StorePath, recorder.DiskFileName)); errors.Is(err, fs.ErrNotExist) {
			return nil, diskAbsent, nil
		}
	}
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	s, err := openStore(a.ctx, cfg, log)
	if err != nil {
		return nil, name, err
	}
	return s, name, nil
}

// diskAbsent is openBackupStore's name for a disk store a dry run found not created yet.
const diskAbsent = "disk (not created yet)"

// plural is n and word, with an s unless n is 1: "1 run", "2 runs".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// runExport implements "agui-proxy export".
func runExport(a storeArgs, args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("agui-proxy export", flag.ContinueOnError)
	uw := helpOut(args, stdout, a.stderr)
	fs.SetOutput(uw)
	var owner, route *string
	fs.Func("owner", "only the threads of this identity (the identity header's value; \"\" for single-tenant threads)",
		func(s string) error { owner = &s; return nil })
	fs.Func("route", "only the threads of this route (AGUI_ROUTE's value, or an AGUI_ROUTES prefix)",
		func(s string) error { route = &s; return nil })
	since := fs.String("since", "", "only threads whose latest run started at or after this RFC 3339 time")
	until := fs.String("until", "", "only threads whose latest run started before this RFC 3339 time")
	fs.Usage = func() {
		fmt.Fprint(uw, `usage: agui-proxy export [-owner ID] [-route NAME] [-since TIME] [-until TIME] > threads.ndjson

Writes every thread of the store configured by the environment (AGUI_REDIS_URL, Cluster or
Sentinel, or AGUI_STORE_PATH; stop the proxy first for a disk store, which one process opens at
a time) to stdout: one export document per line (formatVersion 1, as GET <prefix>export), each
with an "origin" member holding the thread's owner and route, in no particular order. A summary
goes to stderr. Exit status: 0 done, 2 bad flags or configuration, 3 the store failed part way
(the output is incomplete).

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(a.stderr, "agui-proxy export: "+format+"\n", args...)
		return code
	}
	if fs.NArg() > 0 {
		return fail(exitUsage, "unexpected argument %q (the export goes to stdout)", fs.Arg(0))
	}
	from, err := parseTimeFlag("since", *since)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	to, err := parseTimeFlag("until", *until)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	store, name, err := openBackupStore(a, "export", false)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	defer store.Close()
	sc, ok := store.(recorder.ThreadScanner)
	if !ok {
		return fail(exitUsage, "the %s store cannot list all of its threads", name)
	}
	start := time.Now()
	w := bufio.NewWriterSize(stdout, 64<<10)
	var exported, runs, skipped, vanished int
	var line []byte
	err = sc.ScanThreads(a.ctx, func(id string) error {
		th, err := store.Thread(a.ctx, id)
		if errors.Is(err, recorder.ErrThreadNotFound) {
			vanished++ // expired or deleted since the scan saw it
			return nil
		}
		if err != nil {
			return fmt.Errorf("thread %q: %w", id, err)
		}
		if (owner != nil && th.Owner != *owner) || (route != nil && th.Route != *route) {
			skipped++
			return nil
		}
		if !from.IsZero() || !to.IsZero() {
			latest, err := store.Run(a.ctx, id, th.LatestRunID)
			if errors.Is(err, recorder.ErrThreadNotFound) || errors.Is(err, recorder.ErrRunNotFound) {
				vanished++
				return nil
			}
			if err != nil {
				return fmt.Errorf("thread %q: %w", id, err)
			}
			ms := latest.CreatedAt.UnixMilli()
			if (!from.IsZero() && ms < from.UnixMilli()) || (!to.IsZero() && ms >= to.UnixMilli()) {
				skipped++
				return nil
			}
		}
		doc, err := attach.ExportThread(a.ctx, store, id)
		if errors.Is(err, recorder.ErrThreadNotFound) {
			vanished++
			return nil
		}
		if err != nil {
			return fmt.Errorf("thread %q: %w", id, err)
		}
		doc.Origin = &attach.ExportOrigin{Owner: th.Owner, Route: th.Route}
		line = attach.AppendExportLine(line[:0], doc)
		if _, err := w.Write(line); err != nil {
			return fmt.Errorf("writing: %w", err)
		}
		exported++
		runs += len(doc.Runs)
		return nil
	})
	if err == nil {
		_, err = w.Write(attach.AppendExportEnd(nil, exported)) // the end line: without it, the output was cut
	}
	if err == nil {
		err = w.Flush()
	}
	summary := fmt.Sprintf("%s (%s) exported from the %s store in %s; %d not matching the filters, %d gone during the export",
		plural(exported, "thread"), plural(runs, "run"), name, time.Since(start).Round(time.Millisecond), skipped, vanished)
	if err != nil {
		return fail(exitStoreErr, "stopped: %v\nagui-proxy export: %s (the output is incomplete)", err, summary)
	}
	fmt.Fprintf(a.stderr, "agui-proxy export: %s\n", summary)
	return exitOK
}

// parseTimeFlag reads an RFC 3339 time; "" is the zero time.
func parseTimeFlag(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return t, fmt.Errorf("-%s %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", name, v)
	}
	return t, nil
}

// runImport implements "agui-proxy import".
func runImport(a storeArgs, args []string, stdin io.Reader, stdout io.Writer) int {
	cfg, cfgErr := loadConfig(a.env)
	fs := flag.NewFlagSet("agui-proxy import", flag.ContinueOnError)
	uw := helpOut(args, stdout, a.stderr)
	fs.SetOutput(uw)
	dryRun := fs.Bool("dry-run", false, "check every line and report what would be imported (to stdout); write nothing")
	defOwner := fs.String("default-owner", "", "owner of documents without an \"origin\" (from GET <prefix>export); \"\" is single-tenant")
	defRoute := fs.String("default-route", cfg.Route, "route of documents without an \"origin\" (from GET <prefix>export); the default is AGUI_ROUTE's value")
	fs.Usage = func() {
		fmt.Fprint(uw, `usage: agui-proxy import [-dry-run] [-default-owner ID] [-default-route NAME] [FILE]

Reads NDJSON export documents (from agui-proxy export or GET <prefix>export; FILE, or stdin when
absent or "-") into the store configured by the environment, one thread per line, each under
its own thread id, owner and route (its "origin"; the -default flags for documents without one).
Every line is validated whole before its thread is written, through the same code as
POST <prefix>threads/{thread}/import. A thread that already exists is never changed: when it
holds the same runs under the same owner and route it counts as already present (so running the
same import again is harmless), otherwise the line is refused as a conflict. Bad lines are
reported with their line number and skipped. A summary goes to stderr.
Exit status: 0 every line imported or already present, 1 some lines refused (the others were
imported), 2 bad flags, configuration or input file, 3 the store failed part way (run the same
import again to finish it).

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(a.stderr, "agui-proxy import: "+format+"\n", args...)
		return code
	}
	if cfgErr != nil {
		return fail(exitUsage, "configuration: %v", cfgErr)
	}
	if fs.NArg() > 1 {
		return fail(exitUsage, "one input file at most, got %d", fs.NArg())
	}
	in, inName := stdin, "stdin"
	if p := fs.Arg(0); p != "" && p != "-" {
		f, err := os.Open(p)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		defer f.Close()
		in, inName = f, p
	}
	store, name, err := openBackupStore(a, "import", *dryRun)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	if store != nil {
		defer store.Close()
	}
	im := importer{ctx: a.ctx, store: store, dryRun: *dryRun, def: attach.ExportOrigin{Owner: *defOwner, Route: *defRoute},
		out: stdout, errs: a.stderr}
	start := time.Now()
	storeErr := im.readLines(in, cfg.MaxImportBytes)
	verb, into := "imported", "into the "+name+" store"
	switch {
	case *dryRun && name == diskAbsent:
		verb, into = "would be imported", "(dry run: AGUI_STORE_PATH holds no store yet, so every thread is new; nothing was created)"
	case *dryRun && store == nil:
		verb, into = "would be imported", "(dry run: no store configured, the documents alone were checked; nothing was written)"
	case *dryRun:
		verb, into = "would be imported", "into the "+name+" store (dry run: nothing was written)"
	}
	summary := fmt.Sprintf("%s (%s) %s from %s %s in %s; %d already present, %s refused",
		plural(im.imported, "thread"), plural(im.runs, "run"), verb, inName, into, time.Since(start).Round(time.Millisecond), im.present, plural(im.refused, "line"))
	if storeErr != nil {
		return fail(exitStoreErr, "stopped at line %d: %v\nagui-proxy import: %s (the lines before were imported; run the same import again to finish)",
			im.line, storeErr, summary)
	}
	fmt.Fprintf(a.stderr, "agui-proxy import: %s\n", summary)
	if !im.ended && im.line > im.blank {
		// Not refused: a hand-made file or an older export has none. What the lines hold was
		// imported; an export that was cut goes on from the cursor of its last line.
		fmt.Fprintf(a.stderr, "agui-proxy import: the input has no end line (%s): if it is a bulk export, it was cut after line %d\n", attach.ExportEndKey, im.line)
	}
	if im.refused > 0 {
		return exitRefused
	}
	return exitOK
}

// importer imports NDJSON lines one at a time.
type importer struct {
	ctx    context.Context
	store  recorder.Store // nil: dry run without a store
	dryRun bool
	def    attach.ExportOrigin
	out    io.Writer // dry-run report
	errs   io.Writer // refused lines

	line                             int // the current line number (1-based)
	imported, runs, present, refused int
	blank                            int  // blank lines seen
	ended                            bool // the export's end line was read (attach.ParseExportEnd)
}

// readLines reads and imports every line of in. A line longer than maxLine is refused without
// being held whole. It returns what stops the import (a store or input error), nil otherwise.
func (im *importer) readLines(in io.Reader, maxLine int64) error {
	r := bufio.NewReaderSize(in, 64<<10)
	var buf []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if int64(len(buf)+len(chunk)) > maxLine+1 { // +1: the newline
				tooLong, buf = true, buf[:0]
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the line goes on
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("reading the input: %w", err)
		}
		if err == nil || len(buf) > 0 || tooLong { // a line, possibly the last one without '\n'
			im.line++
			if tooLong {
				im.refuse("longer than AGUI_MAX_IMPORT_BYTES (%d bytes)", maxLine)
			} else if serr := im.importLine(bytes.TrimSpace(buf)); serr != nil {
				return serr
			}
		}
		if err == io.EOF {
			return nil
		}
		buf, tooLong = buf[:0], false
	}
}

// refuse reports the current line as refused.
func (im *importer) refuse(format string, args ...any) {
	im.refused++
	fmt.Fprintf(im.errs, "agui-proxy import: line %d: %s\n", im.line, fmt.Sprintf(format, args...))
}

// importLine imports one line; blank lines are skipped. It returns only store errors.
func (im *importer) importLine(line []byte) error {
	if len(line) == 0 {
		im.blank++
		return nil
	}
	if n, ok := attach.ParseExportEnd(line); ok {
		// The export's end line: what came before it is the whole export.
		im.ended = true
		if docs := im.line - 1 - im.blank; n != docs {
			fmt.Fprintf(im.errs, "agui-proxy import: line %d: the end line counts %d threads, %d lines came before it\n", im.line, n, docs)
		}
		return nil
	}
	if im.ended {
		im.refuse("after the export's end line")
		return nil
	}
	doc, err := attach.DecodeExport(line)
	if err != nil {
		im.refuse("%v", err)
		return nil
	}
	if err := agui.ValidateID("threadId", doc.ThreadID); err != nil {
		im.refuse("%v", err)
		return nil
	}
	origin := im.def
	if doc.Origin != nil {
		origin = *doc.Origin
	}
	to := attach.ImportTarget{ThreadID: doc.ThreadID, Owner: origin.Owner, Route: origin.Route}
	if im.dryRun {
		if err := attach.ValidateExport(doc); err != nil {
			im.refuse("thread %q: %v", doc.ThreadID, err)
			return nil
		}
		if im.store != nil {
			if _, err := im.store.Thread(im.ctx, to.Key()); err == nil {
				return im.existing(to, doc)
			} else if !errors.Is(err, recorder.ErrThreadNotFound) {
				return err
			}
		}
		im.imported++
		im.runs += len(doc.Runs)
		fmt.Fprintf(im.out, "line %d: thread %q: would import %s (owner %q, route %q)\n", im.line, to.ThreadID, plural(len(doc.Runs), "run"), to.Owner, to.Route)
		return nil
	}
	n, err := attach.ImportThread(im.ctx, im.store, to, doc)
	switch {
	case err == nil:
		im.imported++
		im.runs += n
		return nil
	case errors.Is(err, problem.ErrThreadNotEmpty):
		return im.existing(to, doc)
	case errors.Is(err, problem.ErrInvalidImport), errors.Is(err, agui.ErrInvalidID):
		im.refuse("thread %q: %v", doc.ThreadID, err)
		return nil
	}
	return fmt.Errorf("thread %q: %w", doc.ThreadID, err)
}

// existing classifies a line whose thread exists in the store: already present (the same
// owner, route and run ids in the same order: an earlier import of the same line) or a
// conflict (refused; nothing is changed).
func (im *importer) existing(to attach.ImportTarget, doc attach.ExportDoc) error {
	th, err := im.store.Thread(im.ctx, to.Key())
	var runs []recorder.Run
	if err == nil {
		runs, err = im.store.Runs(im.ctx, to.Key())
	}
	if errors.Is(err, recorder.ErrThreadNotFound) {
		// Deleted or expired since: a new import attempt would succeed.
		im.refuse("thread %q disappeared from the store during the import; run the import again", to.ThreadID)
		return nil
	}
	if err != nil {
		return err
	}
	have := make([]string, len(runs))
	for i, r := range runs {
		have[i] = r.RunID
	}
	want := make([]string, len(doc.Runs))
	for i, r := range doc.Runs {
		want[i] = r.RunID
	}
	if th.Owner == to.Owner && th.Route == to.Route && slices.Equal(have, want) {
		im.present++
		if im.dryRun {
			fmt.Fprintf(im.out, "line %d: thread %q: already present (the same %s), would be left as it is\n", im.line, to.ThreadID, plural(len(runs), "run"))
		}
		return nil
	}
	im.refuse("thread %q already exists with other history (owner %q route %q, %s; the document: owner %q route %q, %s): not imported",
		to.ThreadID, th.Owner, th.Route, plural(len(have), "run"), to.Owner, to.Route, plural(len(want), "run"))
	return nil
}
