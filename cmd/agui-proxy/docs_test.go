package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDeployChecklist: deploy/README.md starts with the production checklist, one page that
// names only settings and metrics that exist and links only files that exist; the per-commit
// benchmark log is not there, and docs/benchmarks.md, where the latest figures went, is short
// and says how to reproduce them.
func TestDeployChecklist(t *testing.T) {
	b, err := os.ReadFile("../../deploy/README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	lines := strings.Split(doc, "\n")
	if len(lines) < 3 || lines[0] != "# Deploying agui-proxy" || lines[2] != "## Production checklist" {
		t.Fatalf("deploy/README.md does not start with its title and the production checklist:\n%s", strings.Join(lines[:min(4, len(lines))], "\n"))
	}
	end := strings.Index(doc[len(lines[0])+len(lines[2])+2:], "\n## ")
	if end < 0 {
		t.Fatal("the checklist is the whole file")
	}
	checklist := doc[:len(lines[0])+len(lines[2])+2+end]
	if n := strings.Count(checklist, "\n"); n > 60 {
		t.Errorf("the production checklist is %d lines, more than a page (60)", n)
	}
	known := map[string]bool{}
	for _, v := range configVars() {
		known[v.Name] = true
	}
	for _, name := range regexp.MustCompile(`AGUI_[A-Z0-9_]+`).FindAllString(checklist, -1) {
		if !known[name] {
			t.Errorf("the checklist names %s, which is not a setting", name)
		}
	}
	var source strings.Builder
	filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			b, _ := os.ReadFile(p)
			source.Write(b)
		}
		return nil
	})
	for _, m := range regexp.MustCompile(`agui_proxy_([a-z_]+)`).FindAllStringSubmatch(checklist, -1) {
		if !strings.Contains(source.String(), `"`+m[1]+`"`) {
			t.Errorf("the checklist names the metric %s, which no source file defines", m[0])
		}
	}
	for _, f := range []string{"deploy/README.md", "docs/benchmarks.md"} {
		b, err := os.ReadFile("../../" + f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join("../..", filepath.Dir(f), m[1])); err != nil {
				t.Errorf("%s links %s, which does not exist", f, m[1])
			}
		}
	}
	if regexp.MustCompile(`(?m)^### At [0-9a-f]{7}`).MatchString(doc) {
		t.Error("deploy/README.md still holds the per-commit benchmark log (it belongs in git history; the latest figures in docs/benchmarks.md)")
	}
	bench, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(bench), "\n"); n > 150 {
		t.Errorf("docs/benchmarks.md is %d lines; keep it to the latest figures and how to reproduce them", n)
	}
	for _, want := range []string{"## Reproduce", "scripts/loadtest.sh", "## Latest figures", "| agui-proxy, Redis |"} {
		if !strings.Contains(string(bench), want) {
			t.Errorf("docs/benchmarks.md lacks %q", want)
		}
	}
}
