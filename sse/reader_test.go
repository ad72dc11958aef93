package sse

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

var update = flag.Bool("update", false, "rewrite the expected part of testdata/*.txt golden files")

// readAll reads every frame of in through a Reader, copying each frame.
func readAll(in io.Reader, lim Limits) ([]Frame, error) {
	r := NewReader(in, lim)
	var frames []Frame
	for {
		f, err := r.Next()
		if err == io.EOF {
			return frames, nil
		}
		if err != nil {
			return frames, err
		}
		frames = append(frames, cloneFrame(f))
	}
}

func cloneFrame(f *Frame) Frame {
	c := *f
	c.Raw = bytes.Clone(f.Raw)
	if f.Data != nil {
		c.Data = append([]byte{}, f.Data...)
	}
	return c
}

// normalize moves an LF carried over to the next frame (see Frame.Raw) back
// to the frame whose CR it completes, giving the split a single large read
// would give. A frame left empty is dropped.
func normalize(frames []Frame) []Frame {
	out := make([]Frame, 0, len(frames))
	for _, f := range frames {
		f.Raw = bytes.Clone(f.Raw)
		if n := len(out); n > 0 && len(f.Raw) > 0 && f.Raw[0] == '\n' {
			prev := &out[n-1]
			if prev.Terminated && bytes.HasSuffix(prev.Raw, []byte("\r")) {
				prev.Raw = append(prev.Raw, '\n')
				f.Raw = f.Raw[1:]
				if len(f.Raw) == 0 {
					continue
				}
			}
		}
		out = append(out, f)
	}
	return out
}

// chunkReader returns the input in reads of the given sizes, cycling.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := c.sizes[c.i%len(c.sizes)]
	c.i++
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// readers returns named ways to feed input to a Reader: whole, one byte at a
// time, half reads, data together with EOF, and seeded random small chunks.
func readers(input []byte) map[string]func() io.Reader {
	m := map[string]func() io.Reader{
		"whole":   func() io.Reader { return bytes.NewReader(input) },
		"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(input)) },
		"half":    func() io.Reader { return iotest.HalfReader(bytes.NewReader(input)) },
		"dataerr": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(input)) },
	}
	for seed := range uint64(3) {
		m["random"+strconv.FormatUint(seed, 10)] = func() io.Reader {
			rng := rand.New(rand.NewPCG(seed, 42))
			sizes := make([]int, 64)
			for i := range sizes {
				sizes[i] = 1 + rng.IntN(7)
			}
			return &chunkReader{data: input, sizes: sizes}
		}
	}
	return m
}

// dump renders frames and the final error for golden files and messages.
func dump(frames []Frame, err error) string {
	var b strings.Builder
	for i, f := range frames {
		state := "terminated"
		if !f.Terminated {
			state = "unterminated"
		}
		fmt.Fprintf(&b, "frame %d %s\n", i+1, state)
		fmt.Fprintf(&b, "  raw   %q\n", f.Raw)
		if f.HasData {
			fmt.Fprintf(&b, "  data  %q\n", f.Data)
		}
		if f.Event != "" {
			fmt.Fprintf(&b, "  event %q\n", f.Event)
		}
		if f.HasID {
			fmt.Fprintf(&b, "  id    %q\n", f.ID)
		}
		if f.HasRetry {
			fmt.Fprintf(&b, "  retry %d\n", f.Retry)
		}
	}
	if err == nil {
		b.WriteString("end EOF\n")
	} else {
		fmt.Fprintf(&b, "end error %v\n", err)
	}
	return b.String()
}

func sp(s string) *string { return &s }

// wantFrame is the expected parse of one frame; data nil means no data field.
type wantFrame struct {
	raw          string
	data         *string
	event        string
	id           *string
	retry        int64
	unterminated bool
}

func (w wantFrame) frame() Frame {
	f := Frame{Raw: []byte(w.raw), Event: w.event, Terminated: !w.unterminated}
	if w.data != nil {
		f.Data, f.HasData = []byte(*w.data), true
	}
	if w.id != nil {
		f.ID, f.HasID = *w.id, true
	}
	if w.retry >= 0 {
		f.Retry, f.HasRetry = w.retry, true
	}
	return f
}

// f is shorthand for a terminated frame with no retry.
func f(raw string, data *string) wantFrame { return wantFrame{raw: raw, data: data, retry: -1} }

// readerCases follow the rules of WHATWG HTML "event stream interpretation";
// the names starting with "format-" are those of the web-platform-tests
// eventsource tests that check the same rule (inputs written from the spec).
var readerCases = []struct {
	name  string
	input string
	want  []wantFrame
}{
	{"empty", "", nil},
	{"format-bom", "\uFEFFdata: 1\n\ndata: 2\n\n", []wantFrame{
		f("\uFEFFdata: 1\n\n", sp("1")), f("data: 2\n\n", sp("2"))}},
	{"format-bom-2", "\uFEFF\uFEFFdata: 1\n\ndata: 2\n\n", []wantFrame{
		f("\uFEFF\uFEFFdata: 1\n\n", nil), f("data: 2\n\n", sp("2"))}},
	{"bom-not-at-start", "data: 1\n\n\uFEFFdata: 2\n\n", []wantFrame{
		f("data: 1\n\n", sp("1")), f("\uFEFFdata: 2\n\n", nil)}},
	{"bom-only", "\uFEFF", []wantFrame{{raw: "\uFEFF", retry: -1, unterminated: true}}},
	{"bom-then-blank", "\uFEFF\n", []wantFrame{f("\uFEFF\n", nil)}},
	{"partial-bom", "\xEF\xBBdata: 1\n\n", []wantFrame{f("\xEF\xBBdata: 1\n\n", nil)}},
	{"format-comments", ":\n: hello\ndata:1\n:data: 2\ndata:3\n:\r\n\n: only a comment\n\n", []wantFrame{
		f(":\n: hello\ndata:1\n:data: 2\ndata:3\n:\r\n\n", sp("1\n3")), f(": only a comment\n\n", nil)}},
	{"format-data-before-final-empty-line", "retry:1000\ndata:test1\n\nid:test\ndata:test2", []wantFrame{
		{raw: "retry:1000\ndata:test1\n\n", data: sp("test1"), retry: 1000},
		{raw: "id:test\ndata:test2", data: sp("test2"), id: sp("test"), retry: -1, unterminated: true}}},
	{"unterminated-after-line-end", "data: x\n", []wantFrame{
		{raw: "data: x\n", data: sp("x"), retry: -1, unterminated: true}}},
	{"unterminated-cr", "data: x\r", []wantFrame{
		{raw: "data: x\r", data: sp("x"), retry: -1, unterminated: true}}},
	{"unterminated-comment", ": ping", []wantFrame{{raw: ": ping", retry: -1, unterminated: true}}},
	{"format-field-data", "data:\n\ndata\ndata\n\ndata:test\n\n", []wantFrame{
		f("data:\n\n", sp("")), f("data\ndata\n\n", sp("\n")), f("data:test\n\n", sp("test"))}},
	{"format-field-event", "event:test\ndata:x\n\ndata:x\n\n", []wantFrame{
		{raw: "event:test\ndata:x\n\n", data: sp("x"), event: "test", retry: -1}, f("data:x\n\n", sp("x"))}},
	{"format-field-event-empty", "event: \ndata:data\n\n", []wantFrame{f("event: \ndata:data\n\n", sp("data"))}},
	{"event-last-wins", "event: a\nevent: b\ndata\n\n", []wantFrame{
		{raw: "event: a\nevent: b\ndata\n\n", data: sp(""), event: "b", retry: -1}}},
	{"format-field-id", "id: 1\ndata: x\n\nid\ndata: y\n\nid: 2\nid: 3\n\n", []wantFrame{
		{raw: "id: 1\ndata: x\n\n", data: sp("x"), id: sp("1"), retry: -1},
		{raw: "id\ndata: y\n\n", data: sp("y"), id: sp(""), retry: -1},
		{raw: "id: 2\nid: 3\n\n", id: sp("3"), retry: -1}}},
	{"format-field-id-null", "id: a\x00b\ndata: x\n\nid: 1\nid: \x00\ndata: y\n\n", []wantFrame{
		f("id: a\x00b\ndata: x\n\n", sp("x")),
		{raw: "id: 1\nid: \x00\ndata: y\n\n", data: sp("y"), id: sp("1"), retry: -1}}},
	{"format-field-retry", "retry:03000\ndata:x\n\nretry: 10\nretry: 20\n\n", []wantFrame{
		{raw: "retry:03000\ndata:x\n\n", data: sp("x"), retry: 3000},
		{raw: "retry: 10\nretry: 20\n\n", retry: 20}}},
	{"format-field-retry-bogus", "retry:3000 \nretry: 1e3\nretry:-1\nretry:+1\nretry:\u0663\nretry:  5\ndata:x\n\n", []wantFrame{
		f("retry:3000 \nretry: 1e3\nretry:-1\nretry:+1\nretry:\u0663\nretry:  5\ndata:x\n\n", sp("x"))}},
	{"format-field-retry-empty", "retry\ndata:x\n\nretry:\n\n", []wantFrame{
		f("retry\ndata:x\n\n", sp("x")), f("retry:\n\n", nil)}},
	{"retry-overflow", "retry: 9223372036854775807\n\nretry: 9223372036854775808\n\n", []wantFrame{
		{raw: "retry: 9223372036854775807\n\n", retry: 1<<63 - 1}, f("retry: 9223372036854775808\n\n", nil)}},
	{"retry-invalid-keeps-previous", "retry: 7\nretry: x\n\n", []wantFrame{{raw: "retry: 7\nretry: x\n\n", retry: 7}}},
	{"format-field-unknown", "data:test\n data\ndata\nfoobar:xxx\njustsometext\n:thisisacommentyay\ndata:test\n\n", []wantFrame{
		f("data:test\n data\ndata\nfoobar:xxx\njustsometext\n:thisisacommentyay\ndata:test\n\n", sp("test\n\ntest"))}},
	{"field-names-case-sensitive", "Data: x\nDATA: y\nEvent: e\n\n", []wantFrame{f("Data: x\nDATA: y\nEvent: e\n\n", nil)}},
	{"format-leading-space", "data:\u0020\u0020test\n\ndata:\ttest\n\ndata: \n\n", []wantFrame{
		f("data:  test\n\n", sp(" test")), f("data:\ttest\n\n", sp("\ttest")), f("data: \n\n", sp(""))}},
	{"colon-in-value", "data: a:b: c\n\n", []wantFrame{f("data: a:b: c\n\n", sp("a:b: c"))}},
	{"format-newlines", "data:test\r\ndata\ndata:test\r\n\r\n", []wantFrame{
		f("data:test\r\ndata\ndata:test\r\n\r\n", sp("test\n\ntest"))}},
	{"cr-only", "data:a\rdata:b\r\rdata:c\r\r", []wantFrame{
		f("data:a\rdata:b\r\r", sp("a\nb")), f("data:c\r\r", sp("c"))}},
	{"cr-then-crlf", "data:a\r\r\n", []wantFrame{f("data:a\r\r\n", sp("a"))}},
	{"lf-cr-mix", "data:a\n\rdata:b\r\n\n", []wantFrame{f("data:a\n\r", sp("a")), f("data:b\r\n\n", sp("b"))}},
	{"lf-then-cr-is-two-endings", "data:a\n\r\n", []wantFrame{f("data:a\n\r\n", sp("a"))}},
	{"extra-blank-lines", "\n\r\n\rdata: x\n\n\n", []wantFrame{
		f("\n", nil), f("\r\n", nil), f("\r", nil), f("data: x\n\n", sp("x")), f("\n", nil)}},
	{"format-null-character", "data:\x00\n\n", []wantFrame{f("data:\x00\n\n", sp("\x00"))}},
	{"format-utf-8", "data:ok\u2026\n\nevent:\u00e9\ndata\n\n", []wantFrame{
		f("data:ok\u2026\n\n", sp("ok\u2026")), {raw: "event:\u00e9\ndata\n\n", data: sp(""), event: "\u00e9", retry: -1}}},
	{"invalid-utf-8-kept", "data:\xff\xe2\x80\n\n", []wantFrame{f("data:\xff\xe2\x80\n\n", sp("\xff\xe2\x80"))}},
	{"line-separator-is-not-newline", "data:a\u2028b\u0085c\n\n", []wantFrame{f("data:a\u2028b\u0085c\n\n", sp("a\u2028b\u0085c"))}},
	{"no-colon-field-name-with-space", "data \n\n", []wantFrame{f("data \n\n", nil)}},
	{"agui-frames", "data: {\"type\":\"RUN_STARTED\"}\n\ndata: {\"type\":\"RUN_FINISHED\"}\n\n", []wantFrame{
		f("data: {\"type\":\"RUN_STARTED\"}\n\n", sp(`{"type":"RUN_STARTED"}`)),
		f("data: {\"type\":\"RUN_FINISHED\"}\n\n", sp(`{"type":"RUN_FINISHED"}`))}},
}

// eqFrame reports whether two frames are equal in every field.
func eqFrame(a, b Frame) bool {
	return bytes.Equal(a.Raw, b.Raw) && a.HasData == b.HasData && bytes.Equal(a.Data, b.Data) &&
		(a.Data == nil) == (b.Data == nil) && a.Event == b.Event && a.ID == b.ID && a.HasID == b.HasID &&
		a.Retry == b.Retry && a.HasRetry == b.HasRetry && a.Terminated == b.Terminated
}

// foreignAgree reports whether a and b count the same lines that are not SSE, frame by frame
// (eqFrame leaves Foreign out, so that the table of cases need not spell it).
func foreignAgree(a, b []Frame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Foreign != b[i].Foreign {
			return false
		}
	}
	return true
}

func eqFrames(a, b []Frame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !eqFrame(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestReaderCases checks each WHATWG rule through every way of splitting the
// input into reads, and that the frames' Raw concatenate to the input.
func TestReaderCases(t *testing.T) {
	for _, tc := range readerCases {
		want := make([]Frame, len(tc.want))
		for i, w := range tc.want {
			want[i] = w.frame()
		}
		for rname, mk := range readers([]byte(tc.input)) {
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				got, err := readAll(mk(), Limits{})
				if err != nil {
					t.Fatalf("readAll(%q) error %v", tc.input, err)
				}
				if !eqFrames(normalize(got), want) {
					t.Errorf("readAll(%q) =\n%s\nwant\n%s", tc.input, dump(got, nil), dump(want, nil))
				}
				var cat []byte
				for _, f := range got {
					cat = append(cat, f.Raw...)
				}
				if string(cat) != tc.input {
					t.Errorf("concatenated Raw = %q, want %q", cat, tc.input)
				}
			})
		}
	}
}

// TestReaderCarriedLF pins the one place where read boundaries show: a CR
// ending a frame at the end of a read is not waited on.
func TestReaderCarriedLF(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []string // Raw of each frame
	}{
		{"crlf-split", []string{"data: a\r\n\r", "\ndata: b\r\n\r\n"}, []string{"data: a\r\n\r", "\ndata: b\r\n\r\n"}},
		{"crlf-split-at-eof", []string{"data: a\r\n\r", "\n"}, []string{"data: a\r\n\r", "\n"}},
		{"cr-then-cr", []string{"data: a\r\r", "\rdata: b\r\r"}, []string{"data: a\r\r", "\r", "data: b\r\r"}},
		{"whole", []string{"data: a\r\n\r\ndata: b\r\n\r\n"}, []string{"data: a\r\n\r\n", "data: b\r\n\r\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr := &pieceReader{pieces: tc.chunks}
			got, err := readAll(pr, Limits{})
			if err != nil {
				t.Fatalf("readAll error %v", err)
			}
			var raws []string
			for _, f := range got {
				raws = append(raws, string(f.Raw))
			}
			if fmt.Sprintf("%q", raws) != fmt.Sprintf("%q", tc.want) {
				t.Errorf("readAll(%q) Raw = %q, want %q", tc.chunks, raws, tc.want)
			}
			if last := got[len(got)-1]; len(last.Raw) == 1 && last.Terminated {
				t.Errorf("carried-over LF frame Terminated = true, want false")
			}
		})
	}
}

// pieceReader returns one piece per Read.
type pieceReader struct{ pieces []string }

func (p *pieceReader) Read(b []byte) (int, error) {
	if len(p.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.pieces[0])
	p.pieces[0] = p.pieces[0][n:]
	if p.pieces[0] == "" {
		p.pieces = p.pieces[1:]
	}
	return n, nil
}

// blockingReader hands out pieces and then fails the test if read again: it
// proves Next returns a complete frame without reading further.
type blockingReader struct {
	t      *testing.T
	pieces []string
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if len(b.pieces) == 0 {
		b.t.Fatal("Next read past a complete frame")
	}
	n := copy(p, b.pieces[0])
	b.pieces = b.pieces[1:]
	return n, nil
}

// TestReaderDoesNotWaitAfterFrame checks that a complete frame is returned
// without another Read, whatever its line ending (the proxy flushes per event).
func TestReaderDoesNotWaitAfterFrame(t *testing.T) {
	for _, in := range []string{"data: a\n\n", "data: a\r\n\r\n", "data: a\r\r", "data: a\n\r", "\r", "\uFEFF\n"} {
		r := NewReader(&blockingReader{t: t, pieces: []string{in}}, Limits{})
		f, err := r.Next()
		if err != nil || string(f.Raw) != in {
			t.Errorf("Next() on %q = %v, %v; want the frame", in, f, err)
		}
	}
}

// TestReaderLimits checks which limit is reported, where, and after which
// frames, independently of read sizes.
func TestReaderLimits(t *testing.T) {
	tests := []struct {
		name     string
		input    string
		lim      Limits
		frames   int // frames returned before the error
		limit    string
		offset   int64
		sentinel error
	}{
		{"line-too-long", "data: 0123456789\n\n", Limits{MaxLineBytes: 10}, 0, LimitLine, 0, ErrLineTooLong},
		{"line-at-limit", "data: 0123\n\ndata: 01234\n\n", Limits{MaxLineBytes: 10}, 1, LimitLine, 12, ErrLineTooLong},
		{"line-limit-excludes-ending", "data: 0123\r\n\r\n", Limits{MaxLineBytes: 10}, 1, "", 0, nil},
		{"frame-too-large", "data: 1\ndata: 2\ndata: 3\n\n", Limits{MaxFrameBytes: 20}, 0, LimitFrame, 0, ErrFrameTooLarge},
		{"frame-at-limit", "data: 1\ndata: 2\n\ndata: 1\ndata: 2\nx\n\n", Limits{MaxFrameBytes: 16}, 1, LimitFrame, 17, ErrFrameTooLarge},
		{"frame-limit-excludes-blank-line-and-bom", "\uFEFFdata: 1\r\ndata: 2\r\n\r\n", Limits{MaxFrameBytes: 18}, 1, "", 0, nil},
		{"earlier-crossing-wins-line", "data: 0123456789", Limits{MaxLineBytes: 8, MaxFrameBytes: 9}, 0, LimitLine, 0, ErrLineTooLong},
		{"earlier-crossing-wins-frame", "a\ndata: 0123456789", Limits{MaxLineBytes: 8, MaxFrameBytes: 9}, 0, LimitFrame, 0, ErrFrameTooLarge},
		{"unterminated-line-too-long", "data: 0123456789", Limits{MaxLineBytes: 10}, 0, LimitLine, 0, ErrLineTooLong},
	}
	for _, tc := range tests {
		for rname, mk := range readers([]byte(tc.input)) {
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				frames, err := readAll(mk(), tc.lim)
				if tc.sentinel == nil {
					if err != nil {
						t.Fatalf("readAll(%q) error %v, want none", tc.input, err)
					}
					return
				}
				if len(frames) != tc.frames {
					t.Errorf("readAll(%q) returned %d frames before the error, want %d", tc.input, len(frames), tc.frames)
				}
				var le *LimitError
				if !errors.As(err, &le) || !errors.Is(err, tc.sentinel) {
					t.Fatalf("readAll(%q) error = %v, want a LimitError matching %v", tc.input, err, tc.sentinel)
				}
				if le.Limit != tc.limit || le.Offset != tc.offset {
					t.Errorf("LimitError = %+v, want Limit %s Offset %d", le, tc.limit, tc.offset)
				}
				if errors.Is(err, io.EOF) {
					t.Errorf("LimitError matches io.EOF")
				}
			})
		}
	}
}

// endlessReader returns an endless line of 'a' with no line ending.
type endlessReader struct{ n int64 }

func (e *endlessReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.n += int64(len(p))
	return len(p), nil
}

// TestReaderMemoryBounded checks that an endless line is refused after reading
// about the limit, and that the buffer never outgrows MaxFrameBytes.
func TestReaderMemoryBounded(t *testing.T) {
	for _, lim := range []Limits{{MaxLineBytes: 1 << 20}, {MaxFrameBytes: 1 << 20}} {
		src := &endlessReader{}
		r := NewReader(src, lim)
		_, err := r.Next()
		if !errors.Is(err, ErrLineTooLong) && !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("Next() on an endless line with %+v = %v, want a LimitError", lim, err)
		}
		if max := 2<<20 + bufferSlack; cap(r.buf) > max || src.n > int64(max) {
			t.Errorf("with %+v: buffer %d bytes, read %d bytes; want at most %d", lim, cap(r.buf), src.n, max)
		}
	}
	// Many frames of 1 MiB through a 1 MiB frame limit keep one buffer.
	frame := "data: " + strings.Repeat("x", 1<<20-8) + "\n\n"
	r := NewReader(strings.NewReader(strings.Repeat(frame, 8)), Limits{MaxFrameBytes: 1 << 20})
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next() = %v", err)
		}
	}
	if cap(r.buf) > 1<<20+bufferSlack {
		t.Errorf("buffer grew to %d bytes, want at most %d", cap(r.buf), 1<<20+bufferSlack)
	}
}

type errReader struct {
	data string
	err  error
}

func (e *errReader) Read(p []byte) (int, error) {
	n := copy(p, e.data)
	e.data = e.data[n:]
	if e.data == "" {
		return n, e.err
	}
	return n, nil
}

// TestReaderErrors checks read errors (wrapped, sticky, after the complete
// frames), io.ErrNoProgress, and sticky io.EOF and LimitError.
func TestReaderErrors(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(&errReader{data: "data: 1\n\ndata: 2", err: boom}, Limits{})
	f, err := r.Next()
	if err != nil || string(f.Data) != "1" {
		t.Fatalf("Next() = %v, %v; want the complete frame first", f, err)
	}
	for range 2 {
		_, err = r.Next()
		if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "reading stream: ") {
			t.Errorf("Next() error = %v, want reading stream: boom (sticky)", err)
		}
	}

	r = NewReader(iotest.ErrReader(nil), Limits{})
	if _, err := r.Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("Next() on a reader returning (0, nil) = %v, want io.ErrNoProgress", err)
	}

	r = NewReader(strings.NewReader("data: 1\n\n"), Limits{})
	r.Next()
	for range 2 {
		if _, err := r.Next(); err != io.EOF {
			t.Errorf("Next() after the last frame = %v, want io.EOF", err)
		}
	}

	r = NewReader(strings.NewReader(strings.Repeat("x", 100)), Limits{MaxLineBytes: 10})
	_, err1 := r.Next()
	_, err2 := r.Next()
	if err1 == nil || err1 != err2 {
		t.Errorf("Next() errors = %v, %v; want the same LimitError twice", err1, err2)
	}
}

// TestReaderAliasing checks that appending to a returned slice does not
// clobber the frames that follow.
func TestReaderAliasing(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: b\n\n"), Limits{})
	f, _ := r.Next()
	_ = append(f.Data, "XXXXXXXXXX"...)
	_ = append(f.Raw, "XXXXXXXXXX"...)
	f, err := r.Next()
	if err != nil || string(f.Raw) != "data: b\n\n" || string(f.Data) != "b" {
		t.Errorf("second frame after appending to the first = %q %q %v, want data: b", f.Raw, f.Data, err)
	}
}

// TestReaderAllocs checks the steady state costs no allocation per frame.
func TestReaderAllocs(t *testing.T) {
	frame := "event: message\nid: 7\ndata: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"delta\":\"hello\"}\n\n"
	stream := []byte(strings.Repeat(frame, 1000))
	br := bytes.NewReader(stream)
	r := NewReader(br, Limits{})
	allocs := testing.AllocsPerRun(10, func() {
		br.Reset(stream)
		r.Reset(br)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	})
	if per := allocs / 1000; per > 0.01 {
		t.Errorf("allocations per frame = %.3f, want ~0", per)
	}
}

const goldenSep = "-- want --"

// TestGolden runs every testdata/*.txt file: an escaped input (lines starting
// with # are comments; each other line is unquoted as the body of a Go string
// literal, double quotes needing no backslash, and the
// results are concatenated), the separator line, and the expected dump. The
// input is also read in small chunks and must give the same frames.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			content, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			head, want, ok := strings.Cut(string(content), goldenSep+"\n")
			if !ok {
				t.Fatalf("%s: no %q line", file, goldenSep)
			}
			var input []byte
			for line := range strings.Lines(head) {
				line = strings.TrimSuffix(line, "\n")
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				s, err := strconv.Unquote(`"` + strings.ReplaceAll(line, `"`, `\"`) + `"`)
				if err != nil {
					t.Fatalf("%s: input line %q: %v", file, line, err)
				}
				input = append(input, s...)
			}
			lim := Limits{}
			if strings.Contains(head, "# limits: small") {
				lim = Limits{MaxLineBytes: 64, MaxFrameBytes: 128}
			}
			frames, rerr := readAll(bytes.NewReader(input), lim)
			got := dump(frames, rerr)
			if *update {
				if err := os.WriteFile(file, []byte(head+goldenSep+"\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Errorf("%s: parse =\n%s\nwant\n%s", file, got, want)
			}
			for rname, mk := range readers(input) {
				cf, cerr := readAll(mk(), lim)
				if g := dump(normalize(cf), cerr); g != got {
					t.Errorf("%s read %s =\n%s\nwant\n%s", file, rname, g, got)
				}
			}
		})
	}
}

// TestReaderRandomStreams reads large generated streams, mixing every line
// ending, field kind and frame size, in random chunks, and compares them with
// the reference model of fuzz_test.go. It covers what fuzzing rarely reaches:
// frames larger than the initial buffer, sliding and growth of the buffer.
func TestReaderRandomStreams(t *testing.T) {
	eols := []string{"\n", "\r\n", "\r"}
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var b strings.Builder
		if seed%2 == 0 {
			b.WriteString("\uFEFF")
		}
		for b.Len() < 1<<20 {
			eol := eols[rng.IntN(len(eols))]
			for range rng.IntN(6) {
				switch rng.IntN(6) {
				case 0:
					b.WriteString(": comment" + eol)
				case 1:
					b.WriteString("id: " + strconv.Itoa(rng.IntN(1000)) + eol)
				case 2:
					b.WriteString("event:e" + strconv.Itoa(rng.IntN(3)) + eol)
				case 3:
					b.WriteString("retry: " + strconv.Itoa(rng.IntN(5000)) + eol)
				default:
					b.WriteString("data: " + strings.Repeat("d", rng.IntN(1<<rng.IntN(17))) + eol)
				}
			}
			b.WriteString(eol)
		}
		input := []byte(b.String())
		want := refParse(input)
		sizes := make([]int, 97)
		for i := range sizes {
			sizes[i] = 1 + rng.IntN(1<<rng.IntN(16))
		}
		got, err := readAll(&chunkReader{data: input, sizes: sizes}, Limits{MaxFrameBytes: 1 << 19})
		if err != nil {
			t.Fatalf("seed %d: readAll error %v", seed, err)
		}
		if g := normalize(got); !eqFrames(g, want) {
			for i := range min(len(g), len(want)) {
				if !eqFrame(g[i], want[i]) {
					t.Fatalf("seed %d: frame %d =\n%s\nwant\n%s", seed, i, dump(g[i:i+1], nil), dump(want[i:i+1], nil))
				}
			}
			t.Fatalf("seed %d: %d frames, want %d", seed, len(g), len(want))
		}
	}
}

// TestReaderBufferGrowsAndShrinks: the buffer starts small, grows for a large frame, stays
// grown while large frames keep coming, and is given back after shrinkAfter small frames (the
// Reader is back on its inline buffer); the frames read are intact throughout.
func TestReaderBufferGrowsAndShrinks(t *testing.T) {
	big := "data: " + strings.Repeat("x", 20<<10) + "\n\n"
	small := "data: {\"type\":\"TEXT_MESSAGE_CONTENT\"}\n\n"
	var in chunks // one frame per Read, as a paced stream arrives
	for range 3 {
		in = append(in, big)
	}
	for range shrinkAfter + 2 {
		in = append(in, small)
	}
	in = append(in, big)
	r := NewReader(&in, Limits{})
	for i := range 3 {
		f, err := r.Next()
		if err != nil || len(f.Raw) != len(big) {
			t.Fatalf("big frame %d: %d bytes, %v", i, len(f.Raw), err)
		}
		if len(r.buf) <= initialBufferSize {
			t.Fatalf("after big frame %d the buffer is %d bytes, want grown", i, len(r.buf))
		}
	}
	for i := range shrinkAfter + 2 {
		f, err := r.Next()
		if err != nil || string(f.Raw) != small {
			t.Fatalf("small frame %d = %q, %v", i, f.Raw, err)
		}
	}
	if len(r.buf) > inlineBufferSize {
		t.Errorf("after %d small frames the buffer is %d bytes, want at most %d", shrinkAfter+2, len(r.buf), inlineBufferSize)
	}
	if f, err := r.Next(); err != nil || len(f.Raw) != len(big) {
		t.Fatalf("big frame after shrinking: %d bytes, %v", len(f.Raw), err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("Next at the end = %v, want io.EOF", err)
	}
}

// chunks is a reader returning one element per Read (as much of it as fits).
type chunks []string

func (c *chunks) Read(p []byte) (int, error) {
	if len(*c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*c)[0])
	if n == len((*c)[0]) {
		*c = (*c)[1:]
	} else {
		(*c)[0] = (*c)[0][n:]
	}
	return n, nil
}

// TestReaderIdleHoldsNoHeapBuffer: a paced stream (one frame per Read) reads a frame larger
// than the inline buffer into a pooled one, and gives it back at the next call: a Reader
// waiting for its next frame holds only its inline buffer. A burst (many frames per Read)
// moves to a pooled buffer and back once it is read.
func TestReaderIdleHoldsNoHeapBuffer(t *testing.T) {
	mid := "data: " + strings.Repeat("m", 1500) + "\n\n"
	small := "data: {\"type\":\"TEXT_MESSAGE_CONTENT\"}\n\n"
	in := chunks{mid, small, strings.Repeat(small, 40), small}
	r := NewReader(&in, Limits{})
	inline := func() bool { return len(r.buf) > 0 && &r.buf[0] == &r.inline[0] }
	if f, err := r.Next(); err != nil || string(f.Raw) != mid {
		t.Fatalf("first frame: %d bytes, %v", len(f.Raw), err)
	}
	if inline() || len(r.buf) != initialBufferSize {
		t.Fatalf("after a %d-byte frame the buffer is %d bytes (inline %v), want a pooled %d", len(mid), len(r.buf), inline(), initialBufferSize)
	}
	if f, err := r.Next(); err != nil || string(f.Raw) != small {
		t.Fatalf("second frame = %q, %v", f.Raw, err)
	}
	if !inline() {
		t.Fatalf("after a small frame read on its own the buffer is %d bytes, want the inline one", len(r.buf))
	}
	for i := range 41 {
		if f, err := r.Next(); err != nil || string(f.Raw) != small {
			t.Fatalf("burst frame %d = %q, %v", i, f.Raw, err)
		}
		if i == 20 && inline() {
			t.Errorf("inside a burst of %d bytes the buffer is the inline one", 40*len(small))
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at the end = %v, want io.EOF", err)
	}
	if !inline() {
		t.Errorf("after the burst the buffer is %d bytes, want the inline one", len(r.buf))
	}
}

// TestFrameBuffered: whenever FrameBuffered says so, the next Next returns a frame without
// reading (random frames with LF, CRLF and CR endings, comments and blank lines, read in random
// pieces); and a stream buffered whole reports a frame buffered before each frame but the
// last, so a caller holding frames while it does writes them all at once.
func TestFrameBuffered(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	endings := []string{"\n", "\r\n", "\r"}
	for trial := range 500 {
		var in strings.Builder
		frames := 1 + rng.IntN(8)
		for range frames {
			eol := endings[rng.IntN(len(endings))]
			switch rng.IntN(4) {
			case 0:
				in.WriteString(": comment" + eol + eol)
			default:
				fmt.Fprintf(&in, "id: %d%sdata: {\"n\":%d}%s%s", rng.IntN(100), eol, rng.IntN(1000), eol, eol)
			}
		}
		var sizes []int
		for range 64 {
			sizes = append(sizes, 1+rng.IntN(40))
		}
		cr := &chunkReader{data: []byte(in.String()), sizes: sizes} // (cr.i counts its reads)
		r := NewReader(cr, Limits{})
		for {
			buffered := r.FrameBuffered()
			before := cr.i
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
			if buffered && cr.i != before {
				t.Fatalf("trial %d (%q): FrameBuffered was true, yet Next read", trial, in.String())
			}
		}
	}
	whole := "data: 1\n\n: c\r\n\r\ndata: 2\r\rdata: 3\n\n"
	r := NewReader(strings.NewReader(whole), Limits{})
	var got []bool
	for {
		if _, err := r.Next(); err != nil {
			break
		}
		got = append(got, r.FrameBuffered())
	}
	if want := []bool{true, true, true, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("FrameBuffered after each frame of a stream read whole = %v, want %v", got, want)
	}
}
