package main

import (
	"bufio"
	"strings"
	"testing"
)

// FuzzParseInfoStats feeds arbitrary replies to the INFO parser: it must never panic, and a
// reply it accepts holds the total_commands_processed it returns. Seeds in
// testdata/fuzz/FuzzParseInfoStats.
func FuzzParseInfoStats(f *testing.F) {
	f.Add("$59\r\ntotal_commands_processed:7\r\ntotal_net_input_bytes:10\r\nx:1\r\n\r\n")
	f.Add("-ERR unknown command\r\n")
	f.Fuzz(func(t *testing.T, reply string) {
		st, err := parseInfoStats(bufio.NewReader(strings.NewReader(reply)))
		if err != nil {
			return
		}
		if !strings.Contains(reply, "total_commands_processed:") {
			t.Fatalf("accepted %q without total_commands_processed (got %+v)", reply, st)
		}
	})
}
