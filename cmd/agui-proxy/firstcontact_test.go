package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// runCLI runs agui-proxy (this test binary as the command, see TestCLIChild) in a process of
// its own with only env (and PATH, HOME), as a newcomer's shell would: its exit status,
// stdout and stderr.
func runCLI(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), self, append([]string{"-test.run=^TestCLIChild$", "--"}, args...)...)
	cmd.Env = append([]string{cliChildEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	cmd.Dir = t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// TestConfigErrorsNameValueAndForm: every configuration error names the variable, the value it
// has and the form expected, without Go's parser internals.
func TestConfigErrorsNameValueAndForm(t *testing.T) {
	for _, tt := range []struct{ name, value, want string }{
		{"AGUI_MAX_BODY_BYTES", "10MB", "whole number of bytes such as 10485760"},
		{"AGUI_RECORD", "yes", "want true or false"},
		{"AGUI_MAX_RUN_DURATION", "60", "duration such as 500ms, 30s, 5m or 1h"},
		{"AGUI_RECORDER_LANES", "two", "whole number such as 16"},
		{"AGUI_LISTEN", "8080", `did you mean "127.0.0.1:8080"`},
		{"AGUI_LISTEN", "http://localhost:9000", `did you mean "localhost:9000"?`},
		{"AGUI_PPROF_LISTEN", "6060", `did you mean "127.0.0.1:6060"`},
		{"AGUI_UPSTREAM", "localhost:8000", `did you mean "http://localhost:8000"?`},
		{"AGUI_ROUTES", "/a=a:8000", `did you mean "http://a:8000"?`},
		{"AGUI_REDIS_URL", "localhost:6379", `did you mean "redis://localhost:6379/0"?`},
		{"AGUI_DURABILITY", "fast", "async or sync"},
		{"AGUI_TRUSTED_PROXIES", "lan", "want a CIDR such as 10.0.0.0/8"},
		{"AGUI_MEMORY_MAX_BYTES", "-1", "want 0 (no bound) or more bytes"},
	} {
		_, err := loadConfig(map[string]string{tt.name: tt.value})
		if err == nil {
			t.Errorf("%s=%s accepted", tt.name, tt.value)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.name) || !strings.Contains(msg, tt.value) || !strings.Contains(msg, tt.want) {
			t.Errorf("%s=%s: error %q, want the variable, the value and %q", tt.name, tt.value, msg, tt.want)
		}
		for _, internal := range []string{"strconv", "Parse", "invalid syntax", "time: "} {
			if strings.Contains(msg, internal) {
				t.Errorf("%s=%s: error %q shows Go internals (%q)", tt.name, tt.value, msg, internal)
			}
		}
	}
	for _, ok := range []string{":8080", "127.0.0.1:0", "[::1]:8080", "localhost:8080"} {
		if _, err := loadConfig(map[string]string{"AGUI_LISTEN": ok}); err != nil {
			t.Errorf("AGUI_LISTEN=%s refused: %v", ok, err)
		}
	}
}

// TestUnknownVariableHints: an unknown AGUI_* variable is answered with what does what its
// name says (AGUI_PORT is part of AGUI_LISTEN, with the value written as AGUI_LISTEN takes
// it), a close spelling, or where the settings are listed; never a far-fetched name.
func TestUnknownVariableHints(t *testing.T) {
	for k, tt := range map[string]struct{ v, want string }{
		"AGUI_PORT":      {"9000", "set AGUI_LISTEN=127.0.0.1:9000, or :9000"},
		"AGUI_HOST":      {"0.0.0.0", "AGUI_LISTEN=host:port"},
		"AGUI_AGENT_URL": {"localhost:8000", "AGUI_UPSTREAM=http://localhost:8000"},
		"AGUI_REDIS":     {"redis://r:6379", "did you mean AGUI_REDIS_URL?"},
		"AGUI_INSPECTR":  {"true", "did you mean AGUI_INSPECTOR?"},
		"AGUI_XYZZY":     {"1", "agui-proxy -h lists the settings"},
	} {
		got := unknownVars(map[string]string{k: tt.v})
		if len(got) != 1 || !strings.Contains(got[0], k+" is not a setting") || !strings.Contains(got[0], tt.want) {
			t.Errorf("%s=%s: warnings %q, want one saying %q", k, tt.v, got, tt.want)
		}
		if strings.Contains(got[0], "AGUI_ROUTE?") {
			t.Errorf("%s: %q suggests AGUI_ROUTE", k, got[0])
		}
	}
}

// TestCommands: version prints the version, help the usage (exit 0); a word that is not a
// command (a typo, a stray argument) is refused with exit 2 naming it, instead of starting a
// proxy.
func TestCommands(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		code, out, errs := runCLI(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "agui-proxy ") || !strings.Contains(out, " go1.") || errs != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	code, out, errs := runCLI(t, nil, "help")
	if code != 0 || !strings.Contains(out, "AGUI_UPSTREAM=") {
		t.Errorf("help: exit %d, stdout %.80q, stderr %q", code, out, errs)
	}
	for args, want := range map[string]string{
		"exprot":     `unknown command "exprot" (did you mean export?)`,
		"serve":      `unknown command "serve"; the commands are compact, export, import, version, help`,
		"-port=8080": "agui-proxy takes no flags but -h and -version",
		"-- extra":   `unexpected argument "extra"`,
	} {
		code, out, errs := runCLI(t, []string{"AGUI_LISTEN=127.0.0.1:0"}, strings.Fields(args)...)
		if code != 2 || !strings.Contains(errs, want) || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", args, code, out, errs, want)
		}
	}
}

// TestStartupFailures: a listen address in use (the proxy's, pprof's), a disk store another
// process holds and an unreachable Redis each stop the start with one line naming the variable
// and the fix (no log records, no go-redis pool lines), and a disk store is not created for a
// proxy that cannot listen or whose configuration is wrong.
func TestStartupFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := filepath.Join(t.TempDir(), "history")
	code, _, errs := runCLI(t, []string{"AGUI_LISTEN=" + ln.Addr().String(), "AGUI_STORE_PATH=" + dir})
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "AGUI_LISTEN="+ln.Addr().String()+": the address is already in use") ||
		!strings.Contains(errs, "set AGUI_LISTEN to a free host:port") {
		t.Errorf("listen address in use: exit %d, stderr:\n%s", code, errs)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the disk store was created for a proxy that could not listen (%v)", err)
	}
	code, _, errs = runCLI(t, []string{"AGUI_LISTEN=127.0.0.1:0", "AGUI_PPROF_LISTEN=" + ln.Addr().String(), "AGUI_STORE_PATH=" + dir})
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "AGUI_PPROF_LISTEN="+ln.Addr().String()+": the address is already in use") {
		t.Errorf("pprof address in use: exit %d, stderr:\n%s", code, errs)
	}
	code, _, errs = runCLI(t, []string{"AGUI_LISTEN=8080", "AGUI_STORE_PATH=" + dir})
	if code != 2 || !strings.Contains(errs, `AGUI_LISTEN="8080"`) {
		t.Errorf("AGUI_LISTEN=8080: exit %d, stderr:\n%s", code, errs)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the disk store was created for a configuration that is refused (%v)", err)
	}

	held := t.TempDir() // a disk store another process has open
	other, err := recorder.OpenDiskStore(t.Context(), recorder.DiskConfig{Dir: held})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	code, _, errs = runCLI(t, []string{"AGUI_LISTEN=127.0.0.1:0", "AGUI_STORE_PATH=" + held})
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "AGUI_STORE_PATH="+held+": ") ||
		!strings.Contains(errs, "in use by another process") || !strings.Contains(errs, "stop the other agui-proxy") {
		t.Errorf("disk store in use: exit %d, stderr:\n%s", code, errs)
	}

	closed, err := net.Listen("tcp", "127.0.0.1:0") // a port nobody listens on once closed
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	code, _, errs = runCLI(t, []string{"AGUI_LISTEN=127.0.0.1:0", "AGUI_REDIS_URL=redis://" + addr + "/0"})
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "AGUI_REDIS_URL=redis://"+addr+"/0: the Redis store did not answer") ||
		strings.Contains(errs, "pool.go") {
		t.Errorf("unreachable Redis: exit %d, stderr:\n%s", code, errs)
	}
}

// TestVersionLine: a version set at build time (make build: -X main.version=<git describe>)
// is what agui-proxy version prints first, with the Go version and platform after it.
func TestVersionLine(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "v1.2.3-4-gabcdef0"
	if got := versionLine(); !strings.HasPrefix(got, "agui-proxy v1.2.3-4-gabcdef0 ") || !strings.Contains(got, " go1.") {
		t.Errorf("versionLine() = %q", got)
	}
}

// TestCommandHelp: each command's -h is on stdout with exit 0 (agui-proxy export -h | less
// shows it); a bad flag's usage goes to stderr with exit 2.
func TestCommandHelp(t *testing.T) {
	for _, cmd := range []string{"compact", "export", "import"} {
		var out, errb bytes.Buffer
		if code := run([]string{cmd, "-h"}, strings.NewReader(""), &out, &errb); code != 0 || errb.Len() != 0 ||
			!strings.Contains(out.String(), "usage: agui-proxy "+cmd) {
			t.Errorf("%s -h: exit %d, stdout %q, stderr %q", cmd, code, out.String(), errb.String())
		}
		out.Reset()
		errb.Reset()
		if code := run([]string{cmd, "-nonsense"}, strings.NewReader(""), &out, &errb); code != 2 || out.Len() != 0 ||
			!strings.Contains(errb.String(), "-nonsense") || !strings.Contains(errb.String(), "usage: agui-proxy "+cmd) {
			t.Errorf("%s -nonsense: exit %d, stdout %q, stderr %q", cmd, code, out.String(), errb.String())
		}
	}
}
