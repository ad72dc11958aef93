package recorder

import (
	"errors"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
)

// FuzzParseCursor checks that ParseCursor never panics, refuses with ErrInvalidCursor only, and
// accepts only ids the proxy could have written: formatting an accepted cursor gives the input
// back, and its run id passes agui.ValidateID (so client input never reaches a storage key
// unchecked).
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"r1:abcdefgh:1", "run:with:colons:234567ab:42", "-", "$", "0-1", "r:abcdefgh:01",
		"r:abcdefgh:-1", "1\ndata: x", "r{x}:abcdefgh:1", strings.Repeat("a", 200) + ":abcdefgh:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidCursor) {
				t.Fatalf("ParseCursor(%q) error %v is not ErrInvalidCursor", s, err)
			}
			return
		}
		if c.String() != s {
			t.Fatalf("ParseCursor(%q) = %+v, formats back as %q", s, c, c.String())
		}
		if agui.ValidateID("runId", c.RunID) != nil || !ValidEpoch(c.Epoch) || c.Seq < 0 {
			t.Fatalf("ParseCursor(%q) accepted %+v", s, c)
		}
	})
}
