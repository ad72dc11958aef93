package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/agui-proxy/agui-proxy/compact"
)

// runCompact implements "agui-proxy compact": AG-UI events on stdin (a JSON array, or NDJSON
// with one event per line; detected from the first non-space byte) are compacted and written
// to stdout. It returns the process exit code: 0 on success, 1 on bad input, 2 on bad flags.
func runCompact(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agui-proxy compact", flag.ContinueOnError)
	uw := helpOut(args, stdout, stderr)
	fs.SetOutput(uw)
	format := fs.String("format", "ndjson", "output format: json (one array) or ndjson (one event per line)")
	concat := fs.Bool("concat", false, "use the official TypeScript compactEvents behaviour (delta concatenation only)")
	keepThinking := fs.Bool("keep-thinking", false, "keep legacy THINKING_* events instead of dropping them")
	fs.Usage = func() {
		fmt.Fprintln(uw, "usage: agui-proxy compact [-format json|ndjson] [-concat] [-keep-thinking] < events")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *format != "json" && *format != "ndjson" {
		fmt.Fprintf(stderr, "agui-proxy compact: unknown -format %q (want json or ndjson)\n", *format)
		return 2
	}
	events, err := readEvents(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "agui-proxy compact: %v\n", err)
		return 1
	}
	var out []compact.Event
	if *concat {
		out, err = compact.Concat(events)
	} else {
		opts := compact.Options{}
		if *keepThinking {
			opts.Ephemeral = func(string) bool { return false }
		}
		out, err = compact.Compact(events, opts)
	}
	if err != nil {
		fmt.Fprintf(stderr, "agui-proxy compact: %v\n", err)
		return 1
	}
	w := bufio.NewWriter(stdout)
	if *format == "json" {
		w.WriteByte('[')
		for i, e := range out {
			if i > 0 {
				w.WriteByte(',')
			}
			w.Write(e.Raw)
		}
		w.WriteString("]\n")
	} else {
		for _, e := range out {
			w.Write(e.Raw)
			w.WriteByte('\n')
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "agui-proxy compact: writing: %v\n", err)
		return 1
	}
	return 0
}

// readEvents reads a JSON array of events or NDJSON (blank lines ignored).
func readEvents(r io.Reader) ([]compact.Event, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading input: %w", err)
	}
	trimmed := bytes.TrimSpace(data)
	var events []compact.Event
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			return nil, fmt.Errorf("input is not a JSON array of events: %w", err)
		}
		for i, raw := range raws {
			e, err := compact.ParseEvent(raw)
			if err != nil {
				return nil, fmt.Errorf("event %d: %w", i, err)
			}
			events = append(events, e)
		}
		return events, nil
	}
	for i, line := range strings.Split(string(trimmed), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		e, err := compact.ParseEvent([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		events = append(events, e)
	}
	return events, nil
}
