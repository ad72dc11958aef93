package recorder

import (
	"errors"
	"strings"
	"testing"
)

func TestCursorRoundTrip(t *testing.T) {
	for _, c := range []Cursor{
		{RunID: "r1", Epoch: NewEpoch(), Seq: 1},
		{RunID: "run:with:colons", Epoch: "abcdefgh", Seq: 0},
		{RunID: "550e8400-e29b-41d4-a716-446655440000", Epoch: "234567ab", Seq: 1 << 40},
	} {
		got, err := ParseCursor(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCursor(%q) = %+v, %v, want %+v", c.String(), got, err, c)
		}
		if s := string(AppendCursor(nil, c.RunID, c.Epoch, c.Seq)); s != c.String() {
			t.Errorf("AppendCursor = %q, want %q", s, c.String())
		}
	}
}

func TestParseCursorRefuses(t *testing.T) {
	for _, s := range []string{
		"", "-", "+", "0", "$", ">", "(5-0", "r:abcdefgh:", "r:abcdefgh:-1", "r:abcdefgh:+1",
		"r:abcdefgh:01", "r:ABCDEFGH:1", "r:abc:1", ":abcdefgh:1", "r\n:abcdefgh:1",
		"r{x}:abcdefgh:1", "1\ndata: {\"type\":\"RUN_FINISHED\"}", strings.Repeat("a", 60000),
		"r:abcdefgh:99999999999999999999",
	} {
		if c, err := ParseCursor(s); !errors.Is(err, ErrInvalidCursor) {
			t.Errorf("ParseCursor(%.40q) = %+v, %v, want ErrInvalidCursor", s, c, err)
		}
	}
}

func TestNewEpoch(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		e := NewEpoch()
		if !ValidEpoch(e) {
			t.Fatalf("NewEpoch() = %q, not a valid epoch", e)
		}
		seen[e] = true
	}
	if len(seen) < 95 {
		t.Errorf("NewEpoch gave only %d distinct values in 100 calls", len(seen))
	}
}

func TestRunComplete(t *testing.T) {
	tests := []struct {
		name  string
		run   Run
		after int64
		want  bool
	}{
		{"all stored", Run{FirstSeq: 1, LastSeq: 10}, 0, true},
		{"cursor at end", Run{FirstSeq: 1, LastSeq: 10}, 10, true},
		{"trimmed below cursor", Run{FirstSeq: 5, LastSeq: 10}, 4, true},
		{"trimmed above cursor", Run{FirstSeq: 5, LastSeq: 10}, 2, false},
		{"gap after cursor", Run{FirstSeq: 1, LastSeq: 10, Gaps: []Gap{{4, 6}}}, 3, false},
		{"gap before cursor", Run{FirstSeq: 1, LastSeq: 10, Gaps: []Gap{{4, 6}}}, 6, true},
		{"empty run", Run{}, 0, true},
	}
	for _, tt := range tests {
		if got := tt.run.Complete(tt.after); got != tt.want {
			t.Errorf("%s: Run%+v.Complete(%d) = %v, want %v", tt.name, tt.run, tt.after, got, tt.want)
		}
	}
}
