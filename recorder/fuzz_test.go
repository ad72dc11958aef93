package recorder

import (
	"errors"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
)

// FuzzKey: any (thread key, run id) pair accepted by keysFor yields keys whose Cluster hash tag
// is exactly the thread key, and two different pairs never share a key (no aliasing through ':'
// in ids or '/' in thread keys).
func FuzzKey(f *testing.F) {
	f.Add("t", "r", "t", "r2")
	f.Add("a:b", "c", "a", "b:c")
	f.Add("x", "run:y", "x", "events:y")
	f.Add("{t}", "r", "t", "r")
	f.Add("t\n", "r*", "t", "r")
	f.Add("t", "s", "t", "")
	f.Add(ThreadKey("alice", "default", "t"), "r", ThreadKey("bob", "default", "t"), "r")
	f.Add(ThreadKey("alice", "default", "t"), "r", "t", "r")
	f.Add("0123456789abcdef0123456789abcdef/t", "r", "0123456789ABCDEF0123456789ABCDEF/t", "r")
	f.Add("#index/0123456789abcdef0123456789abcdef", "r", "a/b/c", "r")
	f.Fuzz(func(t *testing.T, t1, r1, t2, r2 string) {
		k1, err1 := keysFor(DefaultPrefix, t1, r1)
		k2, err2 := keysFor(DefaultPrefix, t2, r2)
		for _, c := range []struct {
			th, run string
			k       runKeys
			err     error
		}{{t1, r1, k1, err1}, {t2, r2, k2, err2}} {
			valid := validateThreadKey(c.th) == nil && agui.ValidateID("", c.run) == nil
			if valid != (c.err == nil) {
				t.Fatalf("keysFor(%q, %q) error = %v, want valid=%v", c.th, c.run, c.err, valid)
			}
			if c.err != nil {
				if !errors.Is(c.err, agui.ErrInvalidID) {
					t.Fatalf("keysFor(%q, %q) = %v, want agui.ErrInvalidID", c.th, c.run, c.err)
				}
				continue
			}
			for _, k := range []string{c.k.thread, c.k.runs, c.k.run, c.k.events, c.k.checkpoint, c.k.packed} {
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
		for _, k := range []string{k1.run, k1.events, k1.checkpoint, k1.packed, k2.run, k2.events, k2.checkpoint, k2.packed} {
			if seen[k] {
				t.Fatalf("key %q built twice from (%q, %q) and (%q, %q)", k, t1, r1, t2, r2)
			}
			seen[k] = true
		}
	})
}

// FuzzThreadKey: ThreadKey gives every (owner, route) its own key for an id, a key that
// validates, hashes (Cluster) on itself alone and gives the id back; validateThreadKey accepts
// exactly the keys of that form.
func FuzzThreadKey(f *testing.F) {
	f.Add("alice", "default", "t", "bob", "default", "t")
	f.Add("", "default", "t", "", "other", "t")
	f.Add("", "default", "t", "", "", "t")
	f.Add("a}{b", "/r", "x:y", "a}{b", "/r", "x")
	f.Add("\x00\xff", "default", "t/u", "", "default", "t")
	f.Fuzz(func(t *testing.T, o1, r1, id1, o2, r2, id2 string) {
		if err := validateThreadKey(id1); err == nil && strings.IndexByte(id1, '/') >= 0 {
			if len(id1) <= nsTagLen || id1[nsTagLen] != '/' || agui.ValidateID("", id1[nsTagLen+1:]) != nil {
				t.Fatalf("validateThreadKey accepted %q", id1)
			}
		}
		if agui.ValidateID("", id1) != nil || agui.ValidateID("", id2) != nil {
			return
		}
		k1, k2 := ThreadKey(o1, r1, id1), ThreadKey(o2, r2, id2)
		for _, c := range []struct{ o, r, id, k string }{{o1, r1, id1, k1}, {o2, r2, id2, k2}} {
			if err := validateThreadKey(c.k); err != nil {
				t.Fatalf("ThreadKey(%q, %q, %q) = %q does not validate: %v", c.o, c.r, c.id, c.k, err)
			}
			if ThreadIDOf(c.k) != c.id {
				t.Fatalf("ThreadIDOf(%q) = %q, want %q", c.k, ThreadIDOf(c.k), c.id)
			}
			if tk := threadBase(DefaultPrefix, c.k); hashTag(tk) != c.k {
				t.Fatalf("key %q hashes on %q, want %q", tk, hashTag(tk), c.k)
			}
			if (c.o == "" && c.r == DefaultRoute) != (c.k == c.id) {
				t.Fatalf("ThreadKey(%q, %q, %q) = %q: only the single-tenant default route keeps the bare id", c.o, c.r, c.id, c.k)
			}
		}
		if same := o1 == o2 && r1 == r2 && id1 == id2; same != (k1 == k2) {
			t.Fatalf("ThreadKey(%q, %q, %q) = %q and ThreadKey(%q, %q, %q) = %q", o1, r1, id1, k1, o2, r2, id2, k2)
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
