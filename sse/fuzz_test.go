package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// refParse is a reference model of WHATWG "event stream interpretation",
// written for clarity rather than speed, extended the way Reader documents:
// every blank line ends a frame (even one without fields), each CRLF stays
// whole in the frame it ends, and bytes left at EOF form a final frame with
// Terminated false.
func refParse(in []byte) []Frame {
	var frames []Frame
	cur := Frame{}
	var data []string
	start, i := 0, 0
	if bytes.HasPrefix(in, bom) {
		i = len(bom)
	}
	emit := func(end int, terminated bool) {
		cur.Raw = in[start:end]
		cur.Terminated = terminated
		if data != nil {
			cur.HasData = true
			cur.Data = []byte(strings.Join(data, "\n"))
		}
		frames = append(frames, cur)
		cur, data, start = Frame{}, nil, end
	}
	for i < len(in) {
		// Find the end of the line.
		j := i
		for j < len(in) && in[j] != '\r' && in[j] != '\n' {
			j++
		}
		line := string(in[i:j])
		next := j
		if j < len(in) {
			next = j + 1
			if in[j] == '\r' && j+1 < len(in) && in[j+1] == '\n' {
				next = j + 2
			}
		}
		i = next
		switch {
		case line == "" && j < len(in):
			emit(next, true)
			continue
		case strings.HasPrefix(line, ":"):
			continue
		}
		name, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			data = append(data, value)
		case "event":
			cur.Event = value
		case "id":
			if !strings.Contains(value, "\x00") {
				cur.ID, cur.HasID = value, true
			}
		case "retry":
			if n, ok := parseRetry([]byte(value)); ok {
				cur.Retry, cur.HasRetry = n, true
			}
		default:
			cur.Foreign++
		}
	}
	if start < len(in) {
		emit(len(in), false)
	}
	return frames
}

// fuzzLimits maps two fuzz bytes to limits: 0 means the default, anything
// else a small limit so that the limit paths are explored.
func fuzzLimits(line, frame uint8) Limits {
	var lim Limits
	if line != 0 {
		lim.MaxLineBytes = int(line)
	}
	if frame != 0 {
		lim.MaxFrameBytes = int(frame)
	}
	return lim
}

// chunkSizes turns fuzz bytes into read sizes 1..16 (all of the input at
// once when empty).
func chunkSizes(split []byte) []int {
	if len(split) == 0 {
		return []int{1 << 30}
	}
	sizes := make([]int, len(split))
	for i, b := range split {
		sizes[i] = 1 + int(b%16)
	}
	return sizes
}

// framesAgree compares a whole read with a chunked one. When both stop on an
// error, the last frame of the whole read may own one LF that the chunked read
// would have carried over to the frame it never returned.
func framesAgree(whole, chunked []Frame, stopped bool) bool {
	whole, chunked = normalize(whole), normalize(chunked)
	if len(whole) != len(chunked) {
		return false
	}
	for i := range whole {
		a, b := whole[i], chunked[i]
		if stopped && i == len(whole)-1 && bytes.Equal(a.Raw, append(bytes.Clone(b.Raw), '\n')) {
			a.Raw = b.Raw
		}
		if !eqFrame(a, b) {
			return false
		}
	}
	return true
}

// foreignCounts lists Frame.Foreign of every frame.
func foreignCounts(frames []Frame) []int {
	out := make([]int, len(frames))
	for i, f := range frames {
		out[i] = f.Foreign
	}
	return out
}

func FuzzReader(f *testing.F) {
	for _, tc := range readerCases {
		f.Add([]byte(tc.input), []byte{0, 3, 1}, uint8(0), uint8(0))
	}
	f.Add([]byte("data: a\r\n\r\ndata: b\r\n\r\n"), []byte{9, 1}, uint8(0), uint8(0))
	f.Add([]byte("data: 0123456789\r\n\r\n"), []byte{2}, uint8(8), uint8(12))
	f.Add([]byte("\xef\xbb\xbfid: 1\rretry: 12\revent: e\rdata\r\r"), []byte{}, uint8(5), uint8(0))
	f.Add([]byte("[1,2,3]\r\rjunk: x\ndata: {}\n\nx\x9c\xcbH"), []byte{3, 1}, uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, input, split []byte, lineMax, frameMax uint8) {
		lim := fuzzLimits(lineMax, frameMax)
		r := NewReader(bytes.NewReader(input), lim)
		var whole []Frame
		var werr error
		for {
			fr, err := r.Next()
			if err != nil {
				if err != io.EOF {
					werr = err
				}
				break
			}
			whole = append(whole, cloneFrame(fr))
			if cap(r.buf) > r.maxBuf {
				t.Fatalf("buffer %d bytes, over the bound %d", cap(r.buf), r.maxBuf)
			}
		}
		var le *LimitError
		if werr != nil && !errors.As(werr, &le) {
			t.Fatalf("Next error %v, want only LimitError", werr)
		}

		chunked, cerr := readAll(&chunkReader{data: input, sizes: chunkSizes(split)}, lim)
		if (werr == nil) != (cerr == nil) || (werr != nil && werr.Error() != cerr.Error()) {
			t.Fatalf("chunked error %v, whole error %v", cerr, werr)
		}
		if !framesAgree(whole, chunked, werr != nil) {
			t.Fatalf("chunked read =\n%s\nwhole read =\n%s", dump(chunked, cerr), dump(whole, werr))
		}
		if werr != nil {
			return
		}

		var cat []byte
		for _, fr := range chunked {
			cat = append(cat, fr.Raw...)
		}
		if !bytes.Equal(cat, input) {
			t.Fatalf("concatenated Raw = %q, want %q", cat, input)
		}
		if ref := refParse(input); !eqFrames(normalize(whole), ref) {
			t.Fatalf("Reader =\n%s\nreference model =\n%s", dump(whole, nil), dump(ref, nil))
		} else if !foreignAgree(normalize(whole), ref) || !foreignAgree(normalize(whole), normalize(chunked)) {
			t.Fatalf("lines that are not SSE: Reader %v, chunked %v, reference model %v", foreignCounts(whole), foreignCounts(chunked), foreignCounts(ref))
		}

		for i, fr := range whole {
			if !fr.HasData {
				continue
			}
			ev := Event{Data: fr.Data, Retry: fr.Retry}
			if !strings.Contains(fr.Event, "\x00") {
				ev.Event = fr.Event
			}
			enc, err := AppendEvent(nil, ev)
			if err != nil {
				t.Fatalf("AppendEvent(%+v) error %v", ev, err)
			}
			back, err := readAll(bytes.NewReader(enc), Limits{})
			if err != nil || len(back) != 1 || !bytes.Equal(back[0].Data, fr.Data) || back[0].Event != ev.Event || back[0].Retry != fr.Retry {
				t.Fatalf("AppendEvent(%+v) = %q reads back as %s", ev, enc, dump(back, err))
			}

			// Parse a later frame after a blank line, so that bytes of a BOM
			// starting its Raw are not taken for the stream's leading BOM.
			var out []byte
			if i > 0 {
				out = []byte("\n")
			}
			out = fr.AppendWithID(out, "proxy-7")
			back, err = readAll(bytes.NewReader(out), Limits{})
			if err != nil || len(back) == 0 {
				t.Fatalf("AppendWithID output %q reads back as %s", out, dump(back, err))
			}
			last := back[len(back)-1]
			for _, b := range back[:len(back)-1] {
				if b.HasData || b.HasID || b.HasRetry || b.Event != "" {
					t.Fatalf("AppendWithID output %q has fields before the frame: %s", out, dump(back, nil))
				}
			}
			if !last.Terminated || !bytes.Equal(last.Data, fr.Data) || last.Event != fr.Event ||
				last.ID != "proxy-7" || !last.HasID || last.Retry != fr.Retry || last.HasRetry != fr.HasRetry {
				t.Fatalf("AppendWithID output %q reads back as\n%s\nwant the fields of\n%s", out, dump(back, nil), dump([]Frame{fr}, nil))
			}
		}
	})
}

func FuzzWriter(f *testing.F) {
	f.Add([]byte(`{"type":"RUN_STARTED"}`), "1", "", int64(0))
	f.Add([]byte("a\nb\n\n"), "id with space", "agui", int64(3000))
	f.Add([]byte(""), "", " lead", int64(1))
	f.Add([]byte("x\r\ny"), "a\nb", "e", int64(0))
	f.Add([]byte("\u2028\x00"), "\u2029", "\x00", int64(-5))
	f.Fuzz(func(t *testing.T, data []byte, id, event string, retry int64) {
		ev := Event{ID: id, Event: event, Data: data, Retry: retry}
		enc, err := AppendEvent(nil, ev)
		invalid := strings.ContainsAny(id, "\r\n\x00") || strings.ContainsAny(event, "\r\n\x00") || retry < 0
		if invalid {
			if !errors.Is(err, ErrInvalidField) || len(enc) != 0 {
				t.Fatalf("AppendEvent(%+v) = %q, %v; want ErrInvalidField", ev, enc, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("AppendEvent(%+v) error %v", ev, err)
		}
		if bytes.Contains(enc, []byte("\r")) {
			t.Fatalf("AppendEvent(%+v) = %q holds a CR", ev, enc)
		}
		if !bytes.HasSuffix(enc, []byte("\n\n")) || bytes.Count(enc, []byte("\n\n")) != 1 {
			t.Fatalf("AppendEvent(%+v) = %q, want exactly one \\n\\n, at the end", ev, enc)
		}
		frames, err := readAll(bytes.NewReader(enc), Limits{})
		if err != nil || len(frames) != 1 {
			t.Fatalf("AppendEvent(%+v) = %q reads back as %s", ev, enc, dump(frames, err))
		}
		got := frames[0]
		wantData := bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
		if !got.HasData || !bytes.Equal(got.Data, wantData) || got.ID != id || got.HasID != (id != "") ||
			got.Event != event || got.Retry != retry || got.HasRetry != (retry != 0) || !got.Terminated {
			t.Fatalf("AppendEvent(%+v) = %q reads back as %s", ev, enc, dump(frames, nil))
		}

		c := AppendComment(nil, event+string(data))
		frames, err = readAll(bytes.NewReader(c), Limits{})
		if err != nil || len(frames) != 1 || frames[0].HasData || frames[0].HasID || frames[0].HasRetry || frames[0].Event != "" {
			t.Fatalf("AppendComment(%q) = %q reads back as %s", event+string(data), c, dump(frames, err))
		}
	})
}

// FuzzDropRetry: a frame without its retry lines reads back as the same frame with no retry
// (data, event, id and termination unchanged), every other byte kept in order.
func FuzzDropRetry(f *testing.F) {
	for _, s := range []string{"retry: 0\ndata: {}\n\n", "data: a\r\nretry:5\r\nevent: x\r\n\r\n", "retry\rdata\r\r",
		"\xef\xbb\xbfretry: 1\ndata: b\n\n", "data: retry: 1\n: retry\nretryx: 1\n\n", "retry: 1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		frames, err := readAll(bytes.NewReader(input), Limits{})
		if err != nil {
			return
		}
		for i, fr := range frames {
			out, ok := DropRetry(fr.Raw)
			if !ok {
				if !bytes.Equal(out, fr.Raw) {
					t.Fatalf("DropRetry(%q) changed a frame without retry lines: %q", fr.Raw, out)
				}
				continue
			}
			// As the frame's own stream: after a blank line when it was not the first (a BOM
			// starting a later frame's Raw is not the stream's).
			in := out
			if i > 0 {
				in = append([]byte("\n"), out...)
			}
			back, err := readAll(bytes.NewReader(in), Limits{})
			if err != nil {
				t.Fatalf("DropRetry(%q) = %q reads back as %v", fr.Raw, out, err)
			}
			var got Frame
			for _, b := range back {
				if b.HasData || b.HasID || b.HasRetry || b.Event != "" || b.Terminated == fr.Terminated {
					got = b
				}
			}
			if got.HasRetry || bytes.Contains(out, []byte("\nretry:")) && !bytes.Contains(fr.Raw, []byte("\nretry:")) ||
				!bytes.Equal(got.Data, fr.Data) || got.HasData != fr.HasData || got.Event != fr.Event || got.ID != fr.ID || got.HasID != fr.HasID {
				t.Fatalf("DropRetry(%q) = %q reads back as\n%s\nwant the fields of\n%s without retry", fr.Raw, out, dump(back, nil), dump([]Frame{fr}, nil))
			}
			if len(out) >= len(fr.Raw) {
				t.Fatalf("DropRetry(%q) = %q dropped nothing but says it did", fr.Raw, out)
			}
		}
	})
}
