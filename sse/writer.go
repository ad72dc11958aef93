package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrInvalidField is returned, wrapped with the field name, by AppendEvent and
// Writer.WriteEvent when an id or event value contains CR, LF or NUL (which
// would inject fields or events into the stream, or be ignored by readers),
// or when Retry is negative.
var ErrInvalidField = errors.New("sse: invalid field value")

// maxRetainedBuffer is the largest encoding buffer a Writer keeps between
// events; a larger one is dropped after use.
const maxRetainedBuffer = 1 << 20

// Event is what AppendEvent and Writer encode.
type Event struct {
	// ID is written as an id field; "" means none.
	ID string
	// Event is written as an event field; "" means none.
	Event string
	// Data is written as one data field per line; nil or empty Data is one
	// empty data field, so every Event dispatches.
	Data []byte
	// Retry is written as a retry field; 0 means none.
	Retry int64
}

// AppendEvent appends the encoding of ev to dst, with LF line endings only,
// in this order: "event: <Event>" (if any), one "data: <line>" per line of
// Data, "retry: <Retry>" (if any), "id: <ID>" (if any), then the blank line
// "\n". Data is split on LF, CRLF and lone CR, so no value can break the
// framing (an empty line is written "data:"). Each value is preceded by one
// space, so a value that itself starts with a space survives a reader.
//
// It returns an error wrapping ErrInvalidField, and dst unchanged, when ID or
// Event contains CR, LF or NUL, or when Retry is negative.
func AppendEvent(dst []byte, ev Event) ([]byte, error) {
	if i := strings.IndexAny(ev.ID, "\r\n\x00"); i >= 0 {
		return dst, fmt.Errorf("encoding id %q: %w", ev.ID, ErrInvalidField)
	}
	if i := strings.IndexAny(ev.Event, "\r\n\x00"); i >= 0 {
		return dst, fmt.Errorf("encoding event %q: %w", ev.Event, ErrInvalidField)
	}
	if ev.Retry < 0 {
		return dst, fmt.Errorf("encoding retry %d: %w", ev.Retry, ErrInvalidField)
	}
	if ev.Event != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, ev.Event...)
		dst = append(dst, '\n')
	}
	// Splitting Data on every CR and LF is the guard against SSE injection
	// (CWE-93): no byte of a value can end its line, so none can start a
	// field or end the frame.
	data := ev.Data
	for {
		i := lineEnd(data)
		if i < 0 {
			dst = appendDataLine(dst, data)
			break
		}
		dst = appendDataLine(dst, data[:i])
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	if ev.Retry > 0 {
		dst = append(dst, "retry: "...)
		dst = strconv.AppendInt(dst, ev.Retry, 10)
		dst = append(dst, '\n')
	}
	if ev.ID != "" {
		dst = append(dst, "id: "...)
		dst = append(dst, ev.ID...)
		dst = append(dst, '\n')
	}
	return append(dst, '\n'), nil
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i >= 0 {
		if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
			return j
		}
		return i
	}
	return bytes.IndexByte(b, '\r')
}

func appendDataLine(dst, line []byte) []byte {
	if len(line) == 0 {
		return append(dst, "data:\n"...)
	}
	dst = append(dst, "data: "...)
	dst = append(dst, line...)
	return append(dst, '\n')
}

// AppendComment appends a comment frame to dst: ": <text>\n" then the blank
// line "\n". Text is split on LF, CRLF and lone CR into one comment line per
// line (an empty line is written ":"), so it cannot inject fields. A comment
// frame dispatches nothing; it is the usual keep-alive.
func AppendComment(dst []byte, text string) []byte {
	for {
		i := strings.IndexAny(text, "\r\n")
		line := text
		if i >= 0 {
			line = text[:i]
		}
		if line == "" {
			dst = append(dst, ":\n"...)
		} else {
			dst = append(dst, ": "...)
			dst = append(dst, line...)
			dst = append(dst, '\n')
		}
		if i < 0 {
			break
		}
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
	return append(dst, '\n')
}

// AppendWithID appends to dst the frame's bytes with "id: <id>\n" as its last
// field line and "\n" as its terminating blank line. The bytes of f.Raw are
// kept verbatim except the line ending of the terminating blank line (LF, CR
// or CRLF), which is replaced; a frame cut by EOF in the middle of a line gets
// "\n" first, and one cut after a complete line gets just the id line and the
// blank line. When the kept bytes end with a lone CR (CR-only framing), an LF
// follows it, so the id line always starts after an LF. Because the last id field wins in WHATWG parsing, the appended
// id overrides any id the frame already had; data, event and retry fields are
// unchanged. The caller guarantees id has no CR, LF or NUL.
//
// AppendWithID depends only on f.Raw and f.Terminated.
func (f *Frame) AppendWithID(dst []byte, id string) []byte {
	raw := f.Raw
	if f.Terminated {
		switch {
		case bytes.HasSuffix(raw, []byte("\r\n")):
			raw = raw[:len(raw)-2]
		case len(raw) > 0:
			raw = raw[:len(raw)-1]
		}
	}
	dst = append(dst, raw...)
	if n := len(raw); n > 0 && raw[n-1] != '\n' {
		// An open line gets its end; a lone CR becomes CRLF, so that our id line never
		// follows a lone CR (the official client splits lines on LF only).
		dst = append(dst, '\n')
	}
	dst = append(dst, "id: "...)
	dst = append(dst, id...)
	return append(dst, "\n\n"...)
}

// Writer writes events and comments to an io.Writer, one Write call per frame.
// It does not flush: over HTTP the caller flushes (for example with
// http.ResponseController) after each frame it wants delivered at once. A
// Writer is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// WriteEvent encodes ev with AppendEvent and writes it in one Write call. It
// returns the error of AppendEvent (nothing is written) or the write error
// wrapped as "writing event: %w".
func (w *Writer) WriteEvent(ev Event) error {
	b, err := AppendEvent(w.buf[:0], ev)
	if err != nil {
		return err
	}
	return w.write(b, "event")
}

// WriteComment encodes text with AppendComment and writes it in one Write
// call, returning the write error wrapped as "writing comment: %w".
func (w *Writer) WriteComment(text string) error {
	return w.write(AppendComment(w.buf[:0], text), "comment")
}

func (w *Writer) write(b []byte, what string) error {
	w.buf = b
	if cap(w.buf) > maxRetainedBuffer {
		w.buf = nil
	}
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("writing %s: %w", what, err)
	}
	return nil
}

// DropRetry returns raw, the bytes of one frame, without its retry field lines (a line
// "retry" or "retry:..." ended by LF, CR or CRLF): every other line keeps its bytes and its
// line ending, the frame's blank line included. ok is false when raw has no such line (raw is
// returned as it is). A leading BOM is kept before the first line, which is looked at after
// it, as a Reader does for the stream's first frame.
func DropRetry(raw []byte) (out []byte, ok bool) {
	var dst []byte
	start := 0
	if bytes.HasPrefix(raw, []byte("\xef\xbb\xbf")) {
		start = 3
	}
	kept := 0 // raw[:kept] is in dst or will be copied at the next drop
	for i := start; i < len(raw); {
		end := i
		for end < len(raw) && raw[end] != '\n' && raw[end] != '\r' {
			end++
		}
		next := end
		if next < len(raw) {
			next++
			if raw[end] == '\r' && next < len(raw) && raw[next] == '\n' {
				next++
			}
		}
		line := raw[i:end]
		if name, _, _ := bytes.Cut(line, []byte(":")); string(name) == "retry" {
			if dst == nil {
				dst = make([]byte, 0, len(raw))
			}
			dst = append(dst, raw[kept:i]...)
			kept = next
		}
		i = next
	}
	if dst == nil {
		return raw, false
	}
	return append(dst, raw[kept:]...), true
}
