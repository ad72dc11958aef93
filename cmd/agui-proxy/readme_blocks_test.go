package main

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
)

// readmeShellBlocks returns the ```sh blocks of README.md in order.
func readmeShellBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in := false
	for line := range strings.SplitSeq(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```sh":
			in, cur = true, nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, strings.TrimPrefix(line, strings.Repeat(" ", len(line)-len(strings.TrimLeft(line, " ")))))
		}
	}
	return blocks
}

// startsProcess reports whether a README block starts the proxy, the demo or the tests
// itself (those are what this test stands in for) rather than talking to the demo: a line
// that runs make, go run, scripts/demo.sh or a binary of bin/ without arguments (a server).
// A block running a command of the CLI (./bin/agui-proxy export) is run.
func startsProcess(block string) bool {
	server := regexp.MustCompile(`(^|\s)\./bin/(agui-proxy|demo-agent)\s*(&\s*)?$`)
	for line := range strings.SplitSeq(block, "\n") {
		l := strings.TrimSpace(line)
		if i := strings.Index(l, " #"); i >= 0 {
			l = strings.TrimSpace(l[:i])
		}
		if strings.HasPrefix(l, "make ") || l == "make" || strings.Contains(l, "go run") || strings.Contains(l, "scripts/demo.sh") || server.MatchString(l) {
			return true
		}
	}
	return false
}

// cleanPath is the PATH of the shell the blocks run in: the test's, without any directory
// that holds an agui-proxy or demo-agent (an installed copy would hide a block that forgets
// ./bin/), as on a fresh machine.
func cleanPath() string {
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "agui-proxy")); err == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "demo-agent")); err == nil {
			continue
		}
		keep = append(keep, d)
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// TestREADMEShellBlocks pastes the README's shell examples, in order, into one bash against
// what `make demo` runs (the demo agent and the proxy with scripts/demo.sh's configuration,
// here on free ports), as a newcomer would on a fresh clone: a clean environment, no help on
// PATH (the blocks run bin/agui-proxy as ./bin/agui-proxy, from the directory make build
// fills; here it holds this test binary as the command), and curl as installed, so a block
// that prints a progress meter or names a command that is not there fails. Every command must
// succeed, no answer may be a problem, and the examples must show what the README says they
// show.
func TestREADMEShellBlocks(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README examples (scripts/test.sh installs it)")
	}
	demo, err := os.ReadFile("../../scripts/demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(demo), "AGUI_INSPECTOR=${AGUI_INSPECTOR:-true}") {
		t.Fatal("scripts/demo.sh no longer turns the inspector on: update the configuration below to match it")
	}
	agent := httptest.NewServer(demoagent.New(demoagent.Config{}))
	defer agent.Close()
	cfg, err := loadConfig(map[string]string{"AGUI_UPSTREAM": agent.URL, "AGUI_LISTEN": "127.0.0.1:0", "AGUI_DRAIN_TIMEOUT": "1s",
		"AGUI_INSPECTOR": "true"}) // what scripts/demo.sh sets
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	defer func() {
		cancel()
		<-done
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}

	// The backup examples run ./bin/agui-proxy export and import (this test binary, see
	// TestCLIChild) against a private Redis in place of the README's.
	redisSrv := redistest.Start(t)
	clone := t.TempDir() // where the newcomer pastes: bin/ as make build leaves it
	cliInBin(t, clone)

	var script strings.Builder
	script.WriteString("set -eu\n")
	ran := 0
	for _, b := range readmeShellBlocks(t) {
		if startsProcess(b) {
			continue
		}
		if !strings.Contains(b, "127.0.0.1:8080") {
			t.Errorf("README block talks to neither the demo nor a process it starts:\n%s", b)
		}
		script.WriteString("echo '>>> block'\n")
		script.WriteString(strings.NewReplacer("127.0.0.1:8080", addr, readmeRedisURL, redisSrv.URL()).Replace(b))
		script.WriteString("\n")
		ran++
	}
	script.WriteString("wait\n")
	if ran < 5 {
		t.Fatalf("only %d runnable README blocks", ran)
	}
	tctx, tcancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer tcancel()
	cmd := exec.CommandContext(tctx, "bash", "-c", script.String())
	cmd.Dir = clone
	cmd.Env = []string{"PATH=" + cleanPath(), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("README blocks failed: %v\nstderr:\n%s\nstdout:\n%s", err, errb.String(), tail(out.String()))
	}
	got := out.String()
	for _, bad := range []string{"% Total", "command not found", "No such file"} {
		if strings.Contains(errb.String(), bad) {
			t.Errorf("the README blocks printed %q (a progress meter needs curl -sS, a command ./bin/):\n%s", bad, errb.String())
		}
	}
	// The backup examples moved the demo's threads into a disk store, then into Redis, and
	// exported them again.
	backup, _ := os.ReadFile(filepath.Join(cmd.Dir, "backup.ndjson"))
	recent, _ := os.ReadFile(filepath.Join(cmd.Dir, "recent.ndjson"))
	if n := bytes.Count(backup, []byte("\n")); n < 3 || bytes.Count(recent, []byte("\n")) != n {
		t.Errorf("the backup examples exported %d threads from disk and %d from Redis, want the same, at least 3",
			n, bytes.Count(recent, []byte("\n")))
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^id: r1:[0-9a-z]+:1$`),                                                  // the first run's ids
		regexp.MustCompile(`(?m)^r2:[0-9a-z]+:3$`),                                                      // echo "$LAST"
		regexp.MustCompile(`agui-proxy\.replay_complete`),                                               // the thread attach
		regexp.MustCompile(`"threadId":"t1","runId":"r1","status":"finished"`),                          // ?run=r1
		regexp.MustCompile(`"type":"RUN_STARTED","threadId":"t1","runId":"r5"[^\n]*"parentRunId":"r1"`), // the branch
		regexp.MustCompile(`"runId":"r5","parentRunId":"r1"`),                                           // ... in the runs tree
		regexp.MustCompile(`"threadId":"t1","runId":"r3","status":"finished"`),                          // ?run=r3, the other branch
		regexp.MustCompile(`\{"runs":\d,"threadId":"t1-copy"\}`),                                        // the import
		regexp.MustCompile(`"runId":"r4","stopping":true`),                                              // the stop answer
		regexp.MustCompile(`(?m)^line 1: thread "[^"]+": would import \d+ runs?`),                       // the import dry run
		regexp.MustCompile(`(?m)^200 text/html`),                                                        // the inspector
	} {
		if !want.MatchString(got) {
			t.Errorf("README output lacks %s\nstdout:\n%s", want, tail(got))
		}
	}
	if strings.Contains(got, "application/problem+json") || strings.Contains(got, `"code":"`) {
		t.Errorf("a README example got a problem:\n%s", tail(got))
	}
}

// readmeRedisURL is the Redis the README's backup examples name; the test gives them its own.
const readmeRedisURL = "redis://127.0.0.1:6379/0"

// cliChildEnv makes TestCLIChild run agui-proxy with the arguments after "--".
const cliChildEnv = "AGUIPROXY_TEST_CLI_CHILD"

// TestCLIChild is the agui-proxy command the README examples run (through cliInBin): it runs
// the command line after "--" and exits with its status.
func TestCLIChild(t *testing.T) {
	if os.Getenv(cliChildEnv) == "" {
		t.Skip("run by TestREADMEShellBlocks")
	}
	os.Exit(run(flag.Args(), os.Stdin, os.Stdout, os.Stderr))
}

// cliInBin writes dir/bin/agui-proxy, where make build puts the binary: a script that runs
// this test binary as the command (TestCLIChild).
func cliInBin(t *testing.T, dir string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\n" + cliChildEnv + "=1 exec '" + self + "' -test.run='^TestCLIChild$' -- \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "agui-proxy"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func tail(s string) string {
	if len(s) > 6000 {
		return "..." + s[len(s)-6000:]
	}
	return s
}
