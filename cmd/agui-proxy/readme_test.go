package main

import (
	"bytes"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from the config struct")

// configurationDoc is the path of the generated reference of every variable.
const configurationDoc = "../../docs/configuration.md"

// configurationMarkdown renders docs/configuration.md: every environment variable by group,
// with its default and its full documentation.
func configurationMarkdown() string {
	var b strings.Builder
	b.WriteString("# Configuration\n\n")
	b.WriteString("<!-- Generated from cmd/agui-proxy/config.go by `go test ./cmd/agui-proxy -run TestConfigurationDoc -update`; do not edit. -->\n\n")
	b.WriteString("agui-proxy is configured by environment variables only. `agui-proxy -h` lists them with one\n")
	b.WriteString("line each; this page has the whole of each. A bad value stops the start with an error naming\n")
	b.WriteString("the variable, its value and the form expected; an `AGUI_*` variable that is not below is\n")
	b.WriteString("ignored with a warning naming the likely one.\n")
	group := ""
	for _, v := range configVars() {
		if v.Group != group {
			group = v.Group
			b.WriteString("\n## " + group + "\n\n| Variable | Default | Meaning |\n|---|---|---|\n")
		}
		def := "`" + v.Default + "`"
		if v.Default == "" {
			def = "(empty)"
		}
		b.WriteString("| `" + v.Name + "` | " + def + " | " + strings.ReplaceAll(v.Doc, "|", `\|`) + " |\n")
	}
	return b.String()
}

// TestConfigurationDoc fails when docs/configuration.md and the config struct disagree; run
// with -update to regenerate it.
func TestConfigurationDoc(t *testing.T) {
	want := configurationMarkdown()
	got, err := os.ReadFile(configurationDoc)
	if string(got) == want {
		return
	}
	if *update {
		if err := os.WriteFile(configurationDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%v; run go test ./cmd/agui-proxy -run TestConfigurationDoc -update", err)
	}
	t.Errorf("docs/configuration.md is stale; run go test ./cmd/agui-proxy -run TestConfigurationDoc -update")
}

// TestConfigTags: every variable has a group, a one-line help that fits agui-proxy -h, and its
// full documentation, which carries no benchmark figures (those belong in docs/benchmarks.md).
func TestConfigTags(t *testing.T) {
	figures := regexp.MustCompile(`\d+ streams|µs|KiB per|p50|p99|-\d+%|\d+% less`)
	for _, v := range configVars() {
		if v.Group == "" || v.Help == "" || v.Doc == "" {
			t.Errorf("%s: group %q, help %q, doc %q: each must be set", v.Name, v.Group, v.Help, v.Doc)
		}
		if len(v.Help) > 50 || strings.Contains(v.Help, "\n") {
			t.Errorf("%s: help %q is longer than one short line (50 characters)", v.Name, v.Help)
		}
		if m := figures.FindString(v.Doc); m != "" {
			t.Errorf("%s: doc carries a benchmark figure (%q); move it to docs/benchmarks.md", v.Name, m)
		}
	}
}

// TestUsage: -h (and help) is on stdout, so that agui-proxy -h | less shows it; it names every
// command and every variable with its default, grouped, one line each, in at most 100 lines
// of at most 100 characters.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		var out, errb bytes.Buffer
		if code := run(args, nil, &out, &errb); code != 0 || errb.Len() != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
		text := out.String()
		lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
		if len(lines) > 100 {
			t.Errorf("%v: %d lines, want at most 100", args, len(lines))
		}
		for _, l := range lines {
			if len(l) > 100 {
				t.Errorf("%v: line of %d characters: %q", args, len(l), l)
			}
		}
		for _, c := range []string{"compact", "export", "import", "version"} {
			if !strings.Contains(text, "agui-proxy "+c) {
				t.Errorf("%v lacks the command %s", args, c)
			}
		}
		for _, v := range configVars() {
			if !strings.Contains(text, "\n  "+v.Name+"="+v.Default+" ") {
				t.Errorf("%v lacks %s=%s", args, v.Name, v.Default)
			}
			if !strings.Contains(text, "\n"+v.Group+":\n") {
				t.Errorf("%v lacks the group %q", args, v.Group)
			}
		}
		if !strings.Contains(text, "docs/configuration.md") {
			t.Errorf("%v does not point to docs/configuration.md", args)
		}
	}
}

// TestConfigDefaults parses an empty environment and checks validation catches bad values.
func TestConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(map[string]string{})
	if err != nil {
		t.Fatalf("loadConfig(empty) error: %v", err)
	}
	if cfg.Listen != "127.0.0.1:8080" || cfg.Durability != "async" || cfg.RedisURL != "" {
		t.Errorf("defaults = %+v", cfg)
	}
	bad := map[string]string{
		"AGUI_UPSTREAM":             "ftp://x",
		"AGUI_DURABILITY":           "maybe",
		"AGUI_TRUSTED_PROXIES":      "10.0.0.0/8,nonsense",
		"AGUI_LOG_FORMAT":           "xml",
		"AGUI_REDIS_PREFIX":         "a{b}",
		"AGUI_GC_PERCENT":           "0",
		"AGUI_RECORDER_BUSY_LINGER": "2s",
	}
	_, err = loadConfig(bad)
	if err == nil {
		t.Fatal("loadConfig(bad) = nil error")
	}
	for k := range bad {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("error %q does not name %s", err, k)
		}
	}
}

// TestGCPercent: the proxy sets AGUI_GC_PERCENT (default 50) as the collector's target, unless
// the operator set GOGC, which the runtime has already applied.
func TestGCPercent(t *testing.T) {
	cfg, err := loadConfig(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	none := func(string) (string, bool) { return "", false }
	if p, ok := gcPercent(cfg, none); !ok || p != 50 {
		t.Errorf("gcPercent(defaults) = %d, %v, want 50, true", p, ok)
	}
	cfg, err = loadConfig(map[string]string{"AGUI_GC_PERCENT": "200"})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := gcPercent(cfg, none); !ok || p != 200 {
		t.Errorf("gcPercent(AGUI_GC_PERCENT=200) = %d, %v, want 200, true", p, ok)
	}
	gogc := func(k string) (string, bool) { return "off", k == "GOGC" }
	if p, ok := gcPercent(cfg, gogc); ok {
		t.Errorf("gcPercent with GOGC set = %d, true, want false", p)
	}
	for _, v := range []string{"0", "-1", "1001"} {
		if _, err := loadConfig(map[string]string{"AGUI_GC_PERCENT": v}); err == nil || !strings.Contains(err.Error(), "AGUI_GC_PERCENT") {
			t.Errorf("AGUI_GC_PERCENT=%s: error %v, want one naming the variable", v, err)
		}
	}
	if def, _ := loadConfig(nil); def.GCHeapFloor != 64<<20 {
		t.Errorf("AGUI_GC_HEAP_FLOOR default = %d, want 64 MiB", def.GCHeapFloor)
	}
	if _, err := loadConfig(map[string]string{"AGUI_GC_HEAP_FLOOR": "-1"}); err == nil || !strings.Contains(err.Error(), "AGUI_GC_HEAP_FLOOR") {
		t.Errorf("AGUI_GC_HEAP_FLOOR=-1: error %v, want one naming the variable", err)
	}
}
