package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// errEventTooLarge is returned when one event's data exceeds the reader's limit.
var errEventTooLarge = errors.New("event too large")

// eventReader is a small text/event-stream decoder for the bench: it returns the data of each
// event (several data lines joined with "\n"), ignores comments and other fields, accepts LF
// and CRLF line ends, and, like the official AG-UI client, still returns an unterminated last
// event at EOF. It is not a full WHATWG parser (a lone CR is not a line end).
type eventReader struct {
	br    *bufio.Reader
	max   int
	data  []byte
	lines int // data lines in the current event
}

func newEventReader(r io.Reader, maxEvent int) *eventReader {
	return &eventReader{br: bufio.NewReaderSize(r, 64<<10), max: maxEvent}
}

// next returns the data of the next event. The slice is valid until the next call. At the
// end of the stream it returns io.EOF.
func (r *eventReader) next() ([]byte, error) {
	r.data, r.lines = r.data[:0], 0
	for {
		line, err := r.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole, within the limit.
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(buf) > r.max+len("data: ") {
					return nil, fmt.Errorf("%w: over %d bytes", errEventTooLarge, r.max)
				}
				line, err = r.br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		atEOF := err != nil
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte{'\n'}), []byte{'\r'})
		if len(line) == 0 {
			if r.lines > 0 {
				return r.data, nil
			}
			if atEOF {
				return nil, io.EOF
			}
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte{' '})
			if r.lines > 0 {
				r.data = append(r.data, '\n')
			}
			if len(r.data)+len(v) > r.max {
				return nil, fmt.Errorf("%w: over %d bytes", errEventTooLarge, r.max)
			}
			r.data = append(r.data, v...)
			r.lines++
		}
		if atEOF {
			if r.lines > 0 {
				return r.data, nil // unterminated last event, applied like the official client
			}
			return nil, io.EOF
		}
	}
}

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

// eventType returns the value of the "type" member when the event starts with it, as every
// official encoder writes it, else nil. The result aliases ev.
func eventType(ev []byte) []byte {
	rest, ok := bytes.CutPrefix(ev, []byte(`{"type":"`))
	if !ok {
		return nil
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return nil
	}
	return rest[:end]
}
