package main

import (
	"bytes"
	"strconv"
)

// sentNs extracts rawEvent.sentNs from a bench event without decoding the whole event: the
// bench must stay cheap next to the process it measures. It reports false when absent.
func sentNs(ev []byte) (int64, bool) {
	_, rest, ok := bytes.Cut(ev, []byte(`"sentNs":`))
	if !ok {
		return 0, false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	n, err := strconv.ParseInt(string(rest[:end]), 10, 64) // the compiler elides this copy
	if err != nil {
		return 0, false
	}
	return n, true
}
