package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README configuration table")

const (
	tableStart = "<!-- config-table:start (generated from cmd/agui-proxy/config.go: go test ./cmd/agui-proxy -update) -->"
	tableEnd   = "<!-- config-table:end -->"
)

// configTable renders the README table of every environment variable.
func configTable() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Meaning |\n|---|---|---|\n")
	for _, v := range configVars() {
		def := "`" + v.Default + "`"
		if v.Default == "" {
			def = "(empty)"
		}
		b.WriteString("| `" + v.Name + "` | " + def + " | " + strings.ReplaceAll(v.Desc, "|", `\|`) + " |\n")
	}
	return b.String()
}

// TestREADMEConfigTable fails when the README's table of variables and the config struct
// disagree; run with -update to regenerate it.
func TestREADMEConfigTable(t *testing.T) {
	const path = "../../README.md"
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i, j := strings.Index(s, tableStart), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the config table markers %q ... %q", tableStart, tableEnd)
	}
	got := s[i+len(tableStart)+1 : j]
	want := configTable()
	if got == want {
		return
	}
	if *update {
		s = s[:i+len(tableStart)+1] + want + s[j:]
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md config table is stale; run go test ./cmd/agui-proxy -update\n got:\n%s\nwant:\n%s", got, want)
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
