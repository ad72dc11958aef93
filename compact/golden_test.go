package compact

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden expectations")

const goldenSep = "-- compacted --"

// TestGolden runs every testdata/golden/*.txt case: input events (one JSON per line, '#'
// comments), the separator line, and the expected Compact output (or "error: <text>").
// go test ./compact -run TestGolden -update rewrites the expectations.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.txt"))
	if len(files) == 0 {
		t.Fatal("no golden cases")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			in, _, _ := strings.Cut(string(b), goldenSep+"\n")
			var events []Event
			for _, line := range strings.Split(in, "\n") {
				if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
					continue
				}
				e, err := ParseEvent([]byte(line))
				if err != nil {
					t.Fatalf("ParseEvent(%s) = %v", line, err)
				}
				events = append(events, e)
			}
			var got bytes.Buffer
			out, err := Compact(events, Options{})
			if err != nil {
				got.WriteString("error: " + err.Error() + "\n")
			} else {
				checkProperties(t, events)
				for _, e := range out {
					got.Write(e.Raw)
					got.WriteByte('\n')
				}
			}
			want := in + goldenSep + "\n" + got.String()
			if *update {
				if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if string(b) != want {
				t.Fatalf("Compact(%s) =\n%s\nwant\n%s", file, got.String(), strings.SplitN(string(b), goldenSep+"\n", 2)[1])
			}
		})
	}
}
