package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
)

// demoAgentChildEnv makes TestDemoAgentChild serve the demo agent as cmd/demo-agent does.
const demoAgentChildEnv = "AGUIPROXY_TEST_DEMO_AGENT_CHILD"

// TestDemoAgentChild is the demo-agent command TestDemoScript gives scripts/demo.sh: the demo
// agent on DEMO_LISTEN, logging "demo agent listening" as cmd/demo-agent does, until SIGINT.
func TestDemoAgentChild(t *testing.T) {
	if os.Getenv(demoAgentChildEnv) == "" {
		t.Skip("run by TestDemoScript")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", os.Getenv("DEMO_LISTEN"))
	if err != nil {
		slog.Error("demo agent cannot listen", "err", err)
		os.Exit(1)
	}
	slog.Info("demo agent listening", "addr", ln.Addr().String())
	srv := &http.Server{Handler: demoagent.New(demoagent.Config{})}
	go func() { <-ctx.Done(); srv.Close() }()
	srv.Serve(ln)
	os.Exit(0)
}

// TestDemoScript runs scripts/demo.sh as make demo does (its binaries are this test binary,
// see TestCLIChild and TestDemoAgentChild): the proxy starts with the inspector on and logs
// its URL, which serves the page, and Ctrl-C (SIGINT to the process group, as a terminal
// sends it) stops both with exit status 0, so make reports no error.
func TestDemoScript(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for name, script := range map[string]string{
		"agui-proxy": cliChildEnv + "=1 exec '" + self + "' -test.run='^TestCLIChild$' -- \"$@\"",
		"demo-agent": demoAgentChildEnv + "=1 exec '" + self + "' -test.run='^TestDemoAgentChild$'",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../../scripts/demo.sh")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DEMO_BIN=" + bin,
		"DEMO_LISTEN=127.0.0.1:" + freePort(t), "AGUI_LISTEN=127.0.0.1:" + freePort(t)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	urlRe := regexp.MustCompile(`msg="inspector: open it in a browser" url=(\S+)`)
	sc := bufio.NewScanner(stderr)
	var inspector string
	for inspector == "" && sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if m := urlRe.FindStringSubmatch(sc.Text()); m != nil {
			inspector = m[1]
		}
	}
	if inspector == "" {
		cmd.Wait()
		t.Fatalf("the demo logged no inspector URL:\n%s", log.String())
	}
	rest := make(chan struct{})
	go func() {
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
		}
		close(rest)
	}()
	res, err := http.Get(inspector + "?thread=t1")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), "<html") {
		t.Errorf("GET %s = %d:\n%.300s", inspector, res.StatusCode, page)
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	<-rest
	if err := cmd.Wait(); err != nil {
		code := -1
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		}
		t.Errorf("after Ctrl-C the demo exited with %v (make would say Error %d):\n%s", err, code, log.String())
	}
	if !strings.Contains(log.String(), `msg="agui-proxy stopped"`) {
		t.Errorf("the proxy did not stop cleanly:\n%s", log.String())
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
