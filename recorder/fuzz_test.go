package recorder

import (
	"errors"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
)

// FuzzKey: any id pair accepted by keysFor yields keys whose Cluster hash tag is exactly the
// thread id, and two different pairs never share a key (no aliasing through ':' in ids).
func FuzzKey(f *testing.F) {
	f.Add("t", "r", "t", "r2")
	f.Add("a:b", "c", "a", "b:c")
	f.Add("x", "run:y", "x", "events:y")
	f.Add("{t}", "r", "t", "r")
	f.Add("t\n", "r*", "t", "r")
	f.Add("t", "s", "t", "")
	f.Fuzz(func(t *testing.T, t1, r1, t2, r2 string) {
		k1, err1 := keysFor(DefaultPrefix, t1, r1)
		k2, err2 := keysFor(DefaultPrefix, t2, r2)
		for _, c := range []struct {
			th, run string
			k       runKeys
			err     error
		}{{t1, r1, k1, err1}, {t2, r2, k2, err2}} {
			valid := agui.ValidateID("", c.th) == nil && agui.ValidateID("", c.run) == nil
			if valid != (c.err == nil) {
				t.Fatalf("keysFor(%q, %q) error = %v, want valid=%v", c.th, c.run, c.err, valid)
			}
			if c.err != nil {
				if !errors.Is(c.err, agui.ErrInvalidID) {
					t.Fatalf("keysFor(%q, %q) = %v, want agui.ErrInvalidID", c.th, c.run, c.err)
				}
				continue
			}
			for _, k := range []string{c.k.thread, c.k.runs, c.k.run, c.k.events, c.k.checkpoint} {
				if hashTag(k) != c.th || !strings.HasPrefix(k, c.k.base) {
					t.Fatalf("key %q of (%q, %q) hashes on %q, want the thread id", k, c.th, c.run, hashTag(k))
				}
			}
		}
		if err1 != nil || err2 != nil || (t1 == t2 && r1 == r2) {
			return
		}
		seen := map[string]bool{k1.thread: true, k1.runs: true}
		if k2.thread != k1.thread {
			seen[k2.thread], seen[k2.runs] = true, true
		}
		for _, k := range []string{k1.run, k1.events, k1.checkpoint, k2.run, k2.events, k2.checkpoint} {
			if seen[k] {
				t.Fatalf("key %q built twice from (%q, %q) and (%q, %q)", k, t1, r1, t2, r2)
			}
			seen[k] = true
		}
	})
}

// FuzzParseGaps: parseGaps never panics, accepts what formatGaps writes, and returns sorted,
// disjoint, non-touching ranges that format back to an equivalent list.
func FuzzParseGaps(f *testing.F) {
	f.Add("")
	f.Add("1-4")
	f.Add("1-4,5-9,20-20")
	f.Add("7-9,1-2,3-3")
	f.Add("1-")
	f.Add("-1-2")
	f.Add("9223372036854775807-9223372036854775807,1-1")
	f.Fuzz(func(t *testing.T, s string) {
		gaps, err := parseGaps(s)
		if err != nil {
			if !errors.Is(err, errBadGaps) {
				t.Fatalf("parseGaps(%q) = %v, want errBadGaps", s, err)
			}
			return
		}
		for i, g := range gaps {
			if g.From < 1 || g.To < g.From {
				t.Fatalf("parseGaps(%q)[%d] = %+v, not a valid range", s, i, g)
			}
			if i > 0 && g.From <= gaps[i-1].To+1 && gaps[i-1].To+1 > gaps[i-1].To {
				t.Fatalf("parseGaps(%q) = %v, ranges %d and %d touch or overlap", s, gaps, i-1, i)
			}
		}
		again, err := parseGaps(formatGaps(gaps))
		if err != nil || formatGaps(again) != formatGaps(gaps) {
			t.Fatalf("parseGaps(formatGaps(%v)) = %v, %v, want the same", gaps, again, err)
		}
	})
}
