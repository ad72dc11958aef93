package main

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run checks every file named in args and returns the exit code: 0 all good, 1 a check
// failed, 2 bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("checkbinary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "Usage: checkbinary FILE...")
		return 2
	}
	code := 0
	for _, path := range fs.Args() {
		summary, err := check(path)
		if err != nil {
			fmt.Fprintf(stderr, "checkbinary: %s: %v\n", path, err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: %s\n", filepath.Base(path), summary)
	}
	return code
}

// check opens one file and returns a one-line summary, or every reason it is not a static,
// cgo-free, trimmed Go binary stripped of symbols and DWARF. With -trimpath the build
// information does not record -ldflags, so "-s -w" is checked on the sections they remove.
func check(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("not an ELF file: %w", err)
	}
	defer f.Close()
	var errs []error
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			errs = append(errs, errors.New("dynamically linked: has a program interpreter (PT_INTERP)"))
		}
	}
	// ImportedLibraries fails on files without a dynamic section: that is the static case.
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		errs = append(errs, fmt.Errorf("needs shared libraries %q", libs))
	}
	if f.Section(".symtab") != nil {
		errs = append(errs, errors.New("not stripped: has a .symtab section (-ldflags -s missing)"))
	}
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			errs = append(errs, fmt.Errorf("has DWARF section %s (-ldflags -w missing)", s.Name))
			break
		}
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		errs = append(errs, fmt.Errorf("no Go build information: %w", err))
		return "", errors.Join(errs...)
	}
	settings := make(map[string]string)
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	want := map[string]string{"CGO_ENABLED": "0", "-trimpath": "true"}
	for _, k := range []string{"CGO_ENABLED", "-trimpath"} {
		if got, ok := settings[k]; !ok || got != want[k] {
			errs = append(errs, fmt.Errorf("built with %s=%q, want %q", k, got, want[k]))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("static ELF %s/%s, %s, %s, CGO_ENABLED=0 -trimpath, no symbols or DWARF, %.1f MiB",
		settings["GOOS"], settings["GOARCH"], info.GoVersion, info.Path, float64(st.Size())/(1<<20)), nil
}
