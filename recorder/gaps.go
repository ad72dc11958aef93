package recorder

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// errBadGaps is returned by parseGaps for a malformed gap list.
var errBadGaps = errors.New("malformed gap list")

// maxGaps bounds the gap list parseGaps accepts, so stored garbage cannot cost unbounded work.
const maxGaps = 1 << 16

// addGap appends the inclusive range [from, to] to gaps, merging it with the last range when
// they touch or overlap. Ranges with from > to are ignored.
func addGap(gaps []Gap, from, to int64) []Gap {
	if from > to {
		return gaps
	}
	if n := len(gaps); n > 0 && from <= gaps[n-1].To+1 && to >= gaps[n-1].From-1 {
		gaps[n-1].From = min(gaps[n-1].From, from)
		gaps[n-1].To = max(gaps[n-1].To, to)
		return gaps
	}
	return append(gaps, Gap{From: from, To: to})
}

// formatGaps encodes gaps as the store keeps them: "from-to" ranges separated by ','.
func formatGaps(gaps []Gap) string {
	var b []byte
	for i, g := range gaps {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, g.From, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, g.To, 10)
	}
	return string(b)
}

// parseGaps decodes a gap list written by formatGaps or by the Lua scripts (which only append,
// so ranges may arrive unsorted or touching). The result is sorted and merged. "" is no gaps.
func parseGaps(s string) ([]Gap, error) {
	if s == "" {
		return nil, nil
	}
	if strings.Count(s, ",") >= maxGaps {
		return nil, fmt.Errorf("%w: more than %d ranges", errBadGaps, maxGaps)
	}
	var gaps []Gap
	for part := range strings.SplitSeq(s, ",") {
		a, b, ok := strings.Cut(part, "-")
		if !ok {
			return nil, fmt.Errorf("%w: %q", errBadGaps, part)
		}
		from, err1 := strconv.ParseInt(a, 10, 64)
		to, err2 := strconv.ParseInt(b, 10, 64)
		if err1 != nil || err2 != nil || from < 1 || to < from {
			return nil, fmt.Errorf("%w: %q", errBadGaps, part)
		}
		gaps = append(gaps, Gap{From: from, To: to})
	}
	slices.SortFunc(gaps, func(x, y Gap) int {
		if x.From != y.From {
			if x.From < y.From {
				return -1
			}
			return 1
		}
		return 0
	})
	merged := gaps[:0]
	for _, g := range gaps {
		merged = addGap(merged, g.From, g.To)
	}
	return merged, nil
}
