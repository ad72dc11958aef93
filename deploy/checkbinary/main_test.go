package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// build compiles testdata/hello with env and flags into a temporary file and returns its path.
func build(t *testing.T, env []string, flags ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "hello")
	args := append(append([]string{"build"}, flags...), "-o", out, "./testdata/hello")
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Env = append(os.Environ(), env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %q: %v\n%s", args, err, msg)
	}
	return out
}

// TestRun: only a static, cgo-free, trimmed, stripped Go binary built with the expected
// -ldflags passes; every other kind of file fails with a message naming the problem.
func TestRun(t *testing.T) {
	static := []string{"CGO_ENABLED=0", "GOFLAGS=-buildvcs=false"}
	good := build(t, static, "-trimpath", "-ldflags", "-s -w")
	text := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		want     int
		contains []string // in stdout for 0, in stderr otherwise
	}{
		{"image flags", []string{good}, 0, []string{"hello: static ELF", "CGO_ENABLED=0 -trimpath, no symbols or DWARF"}},
		{"no trimpath", []string{build(t, static, "-ldflags", "-s -w")}, 1, []string{`-trimpath="", want "true"`}},
		{"not stripped", []string{build(t, static, "-trimpath", "-ldflags", "-w")}, 1, []string{".symtab"}},
		{"no ldflags", []string{build(t, static, "-trimpath")}, 1, []string{".symtab", "DWARF"}},
		{"not ELF", []string{text}, 1, []string{"not an ELF file"}},
		{"missing", []string{filepath.Join(t.TempDir(), "nope")}, 1, []string{"not an ELF file"}},
		{"one bad of two", []string{good, text}, 1, []string{"script: not an ELF file"}},
		{"no files", nil, 2, []string{"Usage"}},
	}
	// A dynamically linked C program: Debian's /bin/ls is one on every machine this runs on.
	if _, err := os.Stat("/bin/ls"); err == nil {
		tests = append(tests, struct {
			name     string
			args     []string
			want     int
			contains []string
		}{"dynamic C binary", []string{"/bin/ls"}, 1, []string{"dynamically linked", "needs shared libraries", "no Go build information"}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			got := run(tt.args, &stdout, &stderr)
			if got != tt.want {
				t.Errorf("run(%q) = %d, want %d; stdout %q, stderr %q", tt.args, got, tt.want, stdout.String(), stderr.String())
			}
			where := stderr.String()
			if tt.want == 0 {
				where = stdout.String()
			}
			for _, s := range tt.contains {
				if !strings.Contains(where, s) {
					t.Errorf("run(%q) output %q, want it to contain %q", tt.args, where, s)
				}
			}
		})
	}
}
