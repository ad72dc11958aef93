package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Default limits used when a field of Limits is zero.
const (
	// DefaultMaxLineBytes bounds one line, line ending excluded (10 MiB,
	// the buffer limit of the official AG-UI client).
	DefaultMaxLineBytes = 10 << 20
	// DefaultMaxFrameBytes bounds one frame (10 MiB).
	DefaultMaxFrameBytes = 10 << 20
)

const (
	// inlineBufferSize is the size of the buffer a Reader holds in itself, used whenever the
	// bytes it has not handed out yet fit (a proxy holds one Reader per open stream, most of
	// them idle between small events).
	inlineBufferSize = 512
	// initialBufferSize is the size of the first heap buffer, for a frame that does not fit
	// the inline one. These come from a pool shared by every Reader and go back to it as soon
	// as the Reader has handed out everything it holds (see release): an idle Reader holds
	// none. A larger frame grows the buffer further; such a buffer is kept until shrinkAfter
	// smaller frames went by.
	initialBufferSize = 4 << 10
	// shrinkAfter is how many frames in a row of at most initialBufferSize/2 bytes a buffer
	// grown past initialBufferSize waits for before it is given back: a stream of large events
	// keeps its buffer.
	shrinkAfter = 64
	// bufferSlack is room beyond MaxFrameBytes for the bytes a frame may hold
	// that do not count against the limit (a BOM or a carried-over LF, the
	// blank line ending) and one byte of look-ahead.
	bufferSlack = 8
	// maxEmptyReads is how many (0, nil) reads in a row Next tolerates before
	// it gives up with io.ErrNoProgress.
	maxEmptyReads = 100
)

// Names of the limits, as reported in LimitError.Limit.
const (
	LimitLine  = "MaxLineBytes"
	LimitFrame = "MaxFrameBytes"
)

var (
	// ErrLineTooLong is matched (errors.Is) by the LimitError of a line
	// longer than Limits.MaxLineBytes.
	ErrLineTooLong = errors.New("sse: line too long")
	// ErrFrameTooLarge is matched (errors.Is) by the LimitError of a frame
	// larger than Limits.MaxFrameBytes.
	ErrFrameTooLarge = errors.New("sse: frame too large")
)

// bom is the UTF-8 encoding of U+FEFF, skipped once at the start of a stream.
var bom = []byte("\xEF\xBB\xBF")

// Limits bounds what a Reader buffers. Zero (or negative) fields mean the
// defaults.
type Limits struct {
	// MaxLineBytes is the largest line, its line ending not counted.
	// Zero means DefaultMaxLineBytes.
	MaxLineBytes int
	// MaxFrameBytes is the largest frame: the bytes of all its lines with
	// their line endings, not counting the line ending of the blank line that
	// terminates it nor a stream-leading BOM or a carried-over LF (see
	// Frame.Raw). Raw may therefore be up to 3 bytes longer. A Reader never
	// buffers more than MaxFrameBytes plus a few bytes. Zero means
	// DefaultMaxFrameBytes.
	MaxFrameBytes int
}

// LimitError reports input that exceeds one of the Limits. It matches
// ErrLineTooLong or ErrFrameTooLarge with errors.Is.
type LimitError struct {
	// Limit is LimitLine or LimitFrame.
	Limit string
	// Max is the value of the limit that was exceeded.
	Max int
	// Offset is the stream offset of the first byte of the offending line
	// (LimitLine) or of the frame's first line (LimitFrame).
	Offset int64
}

// Error implements error.
func (e *LimitError) Error() string {
	what := "line"
	if e.Limit == LimitFrame {
		what = "frame"
	}
	return fmt.Sprintf("sse: %s at offset %d exceeds %s (%d bytes)", what, e.Offset, e.Limit, e.Max)
}

// Unwrap returns ErrLineTooLong or ErrFrameTooLarge according to Limit.
func (e *LimitError) Unwrap() error {
	if e.Limit == LimitFrame {
		return ErrFrameTooLarge
	}
	return ErrLineTooLong
}

// Frame is one block of the stream: every line up to and including the blank
// line that ends it.
type Frame struct {
	// Raw is the exact input bytes of this frame, including the terminating
	// blank line if any. The first frame also holds the stream's leading BOM.
	// When a frame ended with a CR that was the last byte available from the
	// underlying reader, the frame is returned at once and an LF that follows
	// (the second half of that CRLF) is carried over as the first byte of the
	// next frame's Raw; parsing treats it as part of the earlier line ending.
	// The concatenation of every Raw equals the input.
	Raw []byte
	// Data holds the values of all data fields joined with "\n"; it is nil
	// when the frame has no data field.
	Data []byte
	// HasData reports at least one data field (even empty): per WHATWG the
	// frame dispatches an event.
	HasData bool
	// Event is the value of the last event field ("" if none).
	Event string
	// ID is the value of the last id field; HasID reports whether there was
	// one. An id field whose value contains NUL is ignored, as in WHATWG.
	ID    string
	HasID bool
	// Retry is the value of the last retry field made only of ASCII digits;
	// HasRetry reports whether there was one. A value that does not fit in
	// an int64 is ignored.
	Retry    int64
	HasRetry bool
	// Terminated is false only for a final frame cut by EOF before its blank
	// line (which includes a final frame holding nothing but a carried-over
	// LF, and a stream holding nothing but a BOM).
	Terminated bool
	// Foreign counts the frame's lines that are not SSE: neither a comment
	// nor a field of the four the format defines (data, event, id, retry).
	// WHATWG parsing ignores them; a JSON body or compressed bytes sent as an
	// event stream are made of them.
	Foreign int
}

// Reader decodes an event stream into frames, incrementally and with bounded
// memory. A Reader is not safe for concurrent use.
type Reader struct {
	rd       io.Reader
	maxLine  int
	maxFrame int
	maxBuf   int

	buf  []byte
	base int64 // stream offset of buf[0]
	fs   int   // start of the current frame's Raw in buf
	cs   int   // start of the current frame's first line in buf
	pos  int   // start of the next line to parse
	scan int   // buf[pos:scan] is known to hold no CR or LF
	w    int   // end of the buffered bytes

	started bool  // the leading BOM has been looked for
	skipLF  bool  // the last frame ended with a CR at the end of the buffer
	eof     bool  // the underlying reader returned io.EOF
	rerr    error // a read error, returned once the buffer is used up
	err     error // sticky result of Next

	// State of the current frame; offsets are relative to fs, so they stay
	// valid when the buffer slides.
	dataLines          int
	dataStart, dataEnd int
	data               []byte // scratch for data spread over several lines
	hasEvent           bool
	evStart, evEnd     int
	hasID              bool
	idStart, idEnd     int
	hasRetry           bool
	retry              int64
	foreign            int // lines that are not SSE (Frame.Foreign)

	event, id string // last strings handed out, reused when equal
	frame     Frame
	small     int // frames in a row of at most initialBufferSize/2 bytes (see release)

	inline [inlineBufferSize]byte // buf when what is buffered fits (see release)
}

// pooled holds initialBufferSize buffers for every Reader (see release).
var pooled = sync.Pool{New: func() any { return new([initialBufferSize]byte) }}

// NewReader returns a Reader that decodes r within the limits lim.
func NewReader(r io.Reader, lim Limits) *Reader {
	rd := &Reader{rd: r, maxLine: lim.MaxLineBytes, maxFrame: lim.MaxFrameBytes}
	if rd.maxLine <= 0 {
		rd.maxLine = DefaultMaxLineBytes
	}
	if rd.maxFrame <= 0 {
		rd.maxFrame = DefaultMaxFrameBytes
	}
	rd.maxBuf = rd.maxFrame + bufferSlack
	return rd
}

// FrameBuffered reports whether the bytes buffered after the last frame hold a blank line,
// so the next call to Next returns a frame without reading (unless it is too large): a
// caller that forwards frames may hold the one it has and write both at once.
func (r *Reader) FrameBuffered() bool {
	b := r.buf[r.pos:r.w]
	return bytes.Contains(b, blankLF) || bytes.Contains(b, blankCRLF) || bytes.Contains(b, blankCR)
}

// The line endings around a blank line: LF LF, LF CR LF (CRLF CRLF and LF CRLF), CR CR.
var (
	blankLF   = []byte("\n\n")
	blankCRLF = []byte("\n\r\n")
	blankCR   = []byte("\r\r")
)

// Reset makes r read a new stream from rd with the same limits, keeping its
// buffers, and forgets any error.
func (r *Reader) Reset(rd io.Reader) {
	buf, data := r.buf, r.data
	*r = Reader{rd: rd, maxLine: r.maxLine, maxFrame: r.maxFrame, maxBuf: r.maxBuf, buf: buf, data: data[:0], event: r.event, id: r.id}
	r.release()
}

// Next returns the next frame. The Frame and its slices are valid until the
// next call; Raw and Data have their capacity capped, so appending to them
// never overwrites the Reader's buffer.
//
// Next returns a frame as soon as its terminating blank line has been read; it
// never waits for further input to do so. It returns io.EOF after the last
// frame. A final frame cut by EOF before its blank line is still returned,
// with Terminated false, whenever it holds at least one byte (so that the
// concatenation of every Raw is the input); a browser would discard it, the
// official AG-UI client dispatches it.
//
// Errors: a *LimitError (errors.Is with ErrLineTooLong or ErrFrameTooLarge) as
// soon as the buffered input proves a limit exceeded, without buffering the
// rest of the line; a read error of the underlying reader wrapped as
// "reading stream: %w" (a partial frame read before it is dropped). After an
// error, including io.EOF, Next keeps returning it.
func (r *Reader) Next() (*Frame, error) {
	if r.err != nil {
		return nil, r.err
	}
	r.release()
	f, err := r.next()
	if err != nil {
		r.err = err
		return nil, err
	}
	if len(f.Raw) <= initialBufferSize/2 {
		r.small++
	} else {
		r.small = 0
	}
	return f, nil
}

// release gives back a heap buffer the Reader no longer needs: an initialBufferSize one (to
// the pool) as soon as everything it holds was handed out, a larger one (grown for large
// frames) once shrinkAfter small frames went by, its unread bytes moving to the inline buffer
// or a pooled one. A paced stream thus reads each frame into the inline buffer and an idle
// Reader holds no heap buffer. The frame handed out last is no longer valid: it may alias the
// buffer given back.
func (r *Reader) release() {
	if cap(r.data) > initialBufferSize && r.small >= shrinkAfter {
		r.data = nil
	}
	unread := r.w - r.pos
	var nb []byte
	switch {
	case len(r.buf) <= inlineBufferSize:
		return // inline already (or none yet)
	case len(r.buf) == initialBufferSize && unread == 0:
		nb = r.inline[:]
	case len(r.buf) <= initialBufferSize || r.small < shrinkAfter:
		return // a burst still buffered, or large frames came lately
	case unread <= inlineBufferSize:
		nb = r.inline[:]
	case unread <= initialBufferSize/2:
		nb = pooled.Get().(*[initialBufferSize]byte)[:]
	default:
		return
	}
	old := r.buf
	n := copy(nb, old[r.pos:r.w])
	r.base += int64(r.pos)
	r.buf, r.w, r.pos = nb, n, 0
	if len(old) == initialBufferSize {
		pooled.Put((*[initialBufferSize]byte)(old))
	}
}

func (r *Reader) next() (*Frame, error) {
	r.fs, r.cs, r.scan = r.pos, r.pos, r.pos
	r.dataLines, r.hasEvent, r.hasID, r.hasRetry, r.foreign = 0, false, false, false, 0

	if !r.started {
		if err := r.skipBOM(); err != nil {
			return nil, err
		}
	}
	if r.skipLF {
		if r.pos == r.w {
			if err := r.more(); err != nil {
				return nil, err
			}
		}
		r.skipLF = false
		if r.buf[r.pos] == '\n' {
			r.pos++
			r.cs, r.scan = r.pos, r.pos
		}
	}

	for {
		ls := r.pos
		if r.scan < ls {
			r.scan = ls
		}
		seg := r.buf[r.scan:r.w]
		i := bytes.IndexByte(seg, '\n')
		if i >= 0 {
			if j := bytes.IndexByte(seg[:i], '\r'); j >= 0 {
				i = j
			}
		} else {
			i = bytes.IndexByte(seg, '\r')
		}

		if i < 0 {
			// The line is not complete yet.
			r.scan = r.w
			if err := r.checkLimits(ls, r.w, r.w); err != nil {
				return nil, err
			}
			if err := r.more(); err != nil {
				if err != io.EOF {
					return nil, err
				}
				ls = r.pos // more may have slid the buffer
				if r.w > ls {
					r.field(ls, r.w)
					r.pos = r.w
				}
				if r.pos == r.fs {
					return nil, io.EOF
				}
				return r.finish(false), nil
			}
			continue
		}

		e := r.scan + i
		el := 1
		if r.buf[e] == '\r' {
			switch {
			case e+1 < r.w:
				if r.buf[e+1] == '\n' {
					el = 2
				}
			case e == ls:
				// A blank line ending in CR ends the frame now; an LF read
				// later is carried over (see Frame.Raw).
				r.skipLF = !r.eof
			case !r.eof:
				// A CR ending a field line: look at the next byte to see
				// whether it is a CRLF, then scan again.
				if err := r.checkLimits(ls, e, e+1); err != nil {
					return nil, err
				}
				r.scan = e
				if err := r.more(); err != nil && err != io.EOF {
					return nil, err
				}
				continue
			}
		}

		if e == ls {
			r.pos = e + el
			return r.finish(true), nil
		}
		if err := r.checkLimits(ls, e, e+el); err != nil {
			return nil, err
		}
		r.field(ls, e)
		r.pos = e + el
	}
}

// skipBOM reads until it knows whether the stream starts with a BOM, and
// skips it.
func (r *Reader) skipBOM() error {
	for r.w-r.pos < len(bom) && bytes.HasPrefix(bom, r.buf[r.pos:r.w]) {
		if err := r.more(); err != nil {
			if err == io.EOF {
				break
			}
			return err
		}
	}
	r.started = true
	if bytes.HasPrefix(r.buf[r.pos:r.w], bom) {
		r.pos += len(bom)
		r.cs, r.scan = r.pos, r.pos
	}
	return nil
}

// checkLimits reports a LimitError when the line starting at ls, known to
// extend at least to lineEnd (line ending excluded), or the frame content,
// known to extend at least to contentEnd, is over its limit. When both are,
// the one whose limit is crossed at the earlier byte wins, so the result does
// not depend on how the input was split into reads.
func (r *Reader) checkLimits(ls, lineEnd, contentEnd int) error {
	lineAt, frameAt := -1, -1
	if lineEnd-ls > r.maxLine {
		lineAt = ls + r.maxLine
	}
	if contentEnd-r.cs > r.maxFrame {
		frameAt = r.cs + r.maxFrame
	}
	switch {
	case lineAt >= 0 && (frameAt < 0 || lineAt <= frameAt):
		return &LimitError{Limit: LimitLine, Max: r.maxLine, Offset: r.base + int64(ls)}
	case frameAt >= 0:
		return &LimitError{Limit: LimitFrame, Max: r.maxFrame, Offset: r.base + int64(r.cs)}
	}
	return nil
}

// field interprets the line buf[ls:e], which is not blank.
func (r *Reader) field(ls, e int) {
	line := r.buf[ls:e]
	if line[0] == ':' {
		return
	}
	name, vs := line, len(line)
	if c := bytes.IndexByte(line, ':'); c >= 0 {
		name, vs = line[:c], c+1
		if vs < len(line) && line[vs] == ' ' {
			vs++
		}
	}
	value := line[vs:]
	start, end := ls+vs-r.fs, e-r.fs
	switch string(name) {
	case "data":
		r.dataLines++
		switch r.dataLines {
		case 1:
			r.dataStart, r.dataEnd = start, end
			return
		case 2:
			r.data = append(r.data[:0], r.buf[r.fs+r.dataStart:r.fs+r.dataEnd]...)
		}
		r.data = append(r.data, '\n')
		r.data = append(r.data, value...)
	case "event":
		r.hasEvent, r.evStart, r.evEnd = true, start, end
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.hasID, r.idStart, r.idEnd = true, start, end
		}
	case "retry":
		if n, ok := parseRetry(value); ok {
			r.hasRetry, r.retry = true, n
		}
	default:
		r.foreign++
	}
}

// parseRetry parses a non-empty string of ASCII digits that fits in an int64.
func parseRetry(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// finish builds the frame buf[fs:pos] from the parse state.
func (r *Reader) finish(terminated bool) *Frame {
	f := &r.frame
	*f = Frame{
		Raw:        r.buf[r.fs:r.pos:r.pos],
		HasData:    r.dataLines > 0,
		Terminated: terminated,
		HasID:      r.hasID,
		Retry:      r.retry,
		HasRetry:   r.hasRetry,
		Foreign:    r.foreign,
	}
	switch {
	case r.dataLines == 1:
		a, b := r.fs+r.dataStart, r.fs+r.dataEnd
		f.Data = r.buf[a:b:b]
	case r.dataLines > 1:
		f.Data = r.data[:len(r.data):len(r.data)]
	}
	if !r.hasRetry {
		f.Retry = 0
	}
	if r.hasEvent {
		f.Event = r.intern(&r.event, r.evStart, r.evEnd)
	}
	if r.hasID {
		f.ID = r.intern(&r.id, r.idStart, r.idEnd)
	}
	return f
}

// intern returns buf[fs+start:fs+end] as a string, reusing *last when it is
// equal, so repeated event names or ids do not allocate.
func (r *Reader) intern(last *string, start, end int) string {
	b := r.buf[r.fs+start : r.fs+end]
	if string(b) != *last {
		*last = string(b)
	}
	return *last
}

// more reads at least one byte into the buffer, making room first. It
// returns io.EOF at the end of the stream and a wrapped error when the
// underlying reader fails. Bytes returned together with an error are kept and
// the error is reported by the next call.
func (r *Reader) more() error {
	if r.eof {
		return io.EOF
	}
	if r.rerr != nil {
		return r.rerr
	}
	if r.w == len(r.buf) {
		r.makeRoom()
	}
	for range maxEmptyReads {
		n, err := r.rd.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			r.rerr = fmt.Errorf("reading stream: invalid count %d from Read", n)
			return r.rerr
		}
		r.w += n
		if err != nil {
			if err == io.EOF {
				r.eof = true
			} else {
				r.rerr = fmt.Errorf("reading stream: %w", err)
			}
			if n > 0 {
				return nil
			}
			if r.eof {
				return io.EOF
			}
			return r.rerr
		}
		if n > 0 {
			return nil
		}
	}
	r.rerr = fmt.Errorf("reading stream: %w", io.ErrNoProgress)
	return r.rerr
}

// makeRoom frees space at the end of a full buffer: it slides the current frame to the
// front, and grows the buffer (up to maxBuf) only when the frame fills it. A full inline
// buffer always moves to a pooled initialBufferSize one: a read that filled it means more is
// coming at once (a burst), and larger reads then cost fewer calls (release moves back once
// the burst is read). The limit checks guarantee a frame never needs more than maxBuf.
func (r *Reader) makeRoom() {
	burst := len(r.buf) == inlineBufferSize && r.maxBuf > inlineBufferSize
	if r.fs > 0 && !burst {
		n := copy(r.buf, r.buf[r.fs:r.w])
		r.slid(n)
		if r.w < len(r.buf) {
			return
		}
	}
	size := 2 * len(r.buf)
	switch {
	case len(r.buf) == 0:
		size = inlineBufferSize
	case len(r.buf) <= inlineBufferSize:
		size = initialBufferSize
	}
	size = min(size, r.maxBuf)
	if size <= len(r.buf) {
		panic("sse: internal error: frame outgrew its buffer")
	}
	var nb []byte
	switch {
	case len(r.buf) == 0:
		nb = r.inline[:size:size]
	case size == initialBufferSize:
		nb = pooled.Get().(*[initialBufferSize]byte)[:]
	default:
		nb = make([]byte, size)
	}
	old := r.buf
	r.buf = nb
	r.slid(copy(nb, old[r.fs:r.w]))
	if len(old) == initialBufferSize {
		pooled.Put((*[initialBufferSize]byte)(old))
	}
}

// slid moves the offsets after the bytes from fs on were copied to the start of buf (n bytes).
func (r *Reader) slid(n int) {
	r.base += int64(r.fs)
	r.cs -= r.fs
	r.pos -= r.fs
	r.scan -= r.fs
	r.w = n
	r.fs = 0
}
