package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAppendEvent checks the encoding, including that CR, LF and CRLF in
// Data always start a new data line (no injected fields or events).
func TestAppendEvent(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"data-only", Event{Data: []byte(`{"type":"RUN_STARTED"}`)}, "data: {\"type\":\"RUN_STARTED\"}\n\n"},
		{"nil-data", Event{}, "data:\n\n"},
		{"empty-data", Event{Data: []byte{}}, "data:\n\n"},
		{"all-fields", Event{ID: "7", Event: "agui", Data: []byte("x"), Retry: 1500}, "event: agui\ndata: x\nretry: 1500\nid: 7\n\n"},
		{"leading-space-kept", Event{ID: " i", Event: " e", Data: []byte(" d")}, "event:  e\ndata:  d\nid:  i\n\n"},
		{"lf-split", Event{Data: []byte("a\nb")}, "data: a\ndata: b\n\n"},
		{"crlf-split", Event{Data: []byte("a\r\nb")}, "data: a\ndata: b\n\n"},
		{"cr-split", Event{Data: []byte("a\rb")}, "data: a\ndata: b\n\n"},
		{"cr-cr", Event{Data: []byte("a\r\rb")}, "data: a\ndata:\ndata: b\n\n"},
		{"lf-cr", Event{Data: []byte("a\n\rb")}, "data: a\ndata:\ndata: b\n\n"},
		{"trailing-lf", Event{Data: []byte("a\n")}, "data: a\ndata:\n\n"},
		{"only-crlf", Event{Data: []byte("\r\n")}, "data:\ndata:\n\n"},
		{"frame-injection", Event{Data: []byte("x\n\ndata: evil\n\nid: 9")}, "data: x\ndata:\ndata: data: evil\ndata:\ndata: id: 9\n\n"},
		{"u2028-verbatim", Event{Data: []byte("a\u2028b\u2029c\u0085d")}, "data: a\u2028b\u2029c\u0085d\n\n"},
		{"nul-in-data", Event{Data: []byte("a\x00b")}, "data: a\x00b\n\n"},
		{"u2028-in-id-and-event", Event{ID: "a\u2028", Event: "b\u2028", Data: []byte("x")}, "event: b\u2028\ndata: x\nid: a\u2028\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendEvent([]byte("prefix|"), tc.ev)
			if err != nil || string(got) != "prefix|"+tc.want {
				t.Errorf("AppendEvent(%+v) = %q, %v; want %q", tc.ev, got, err, "prefix|"+tc.want)
			}
		})
	}
}

// TestAppendEventInvalid checks that id and event values that would inject
// fields or be ignored by readers are refused, leaving dst unchanged.
func TestAppendEventInvalid(t *testing.T) {
	tests := []struct {
		name  string
		ev    Event
		field string
	}{
		{"id-lf", Event{ID: "a\nb"}, "id"},
		{"id-cr", Event{ID: "a\rb"}, "id"},
		{"id-crlf", Event{ID: "a\r\ndata: x"}, "id"},
		{"id-nul", Event{ID: "a\x00"}, "id"},
		{"event-lf", Event{Event: "a\n"}, "event"},
		{"event-cr", Event{Event: "\ra"}, "event"},
		{"event-crlf", Event{Event: "a\r\n\r\n"}, "event"},
		{"event-nul", Event{Event: "\x00"}, "event"},
		{"retry-negative", Event{Retry: -1}, "retry"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := AppendEvent(dst, tc.ev)
			if !errors.Is(err, ErrInvalidField) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("AppendEvent(%+v) error = %v, want ErrInvalidField naming %s", tc.ev, err, tc.field)
			}
			if string(got) != "keep" {
				t.Errorf("AppendEvent(%+v) = %q, want dst unchanged", tc.ev, got)
			}
		})
	}
}

// TestAppendComment checks that comment text cannot inject fields.
func TestAppendComment(t *testing.T) {
	tests := []struct{ text, want string }{
		{"ping", ": ping\n\n"},
		{"", ":\n\n"},
		{"a\nb", ": a\n: b\n\n"},
		{"a\r\nb", ": a\n: b\n\n"},
		{"a\rb", ": a\n: b\n\n"},
		{"a\n\ndata: evil\n", ": a\n:\n: data: evil\n:\n\n"},
		{"\u2028", ": \u2028\n\n"},
	}
	for _, tc := range tests {
		got := AppendComment(nil, tc.text)
		if string(got) != tc.want {
			t.Errorf("AppendComment(nil, %q) = %q, want %q", tc.text, got, tc.want)
		}
		frames, err := readAll(bytes.NewReader(got), Limits{})
		if err != nil || len(frames) != 1 || frames[0].HasData || frames[0].HasID || frames[0].Event != "" {
			t.Errorf("reading AppendComment(nil, %q) = %s, want one frame with no fields", tc.text, dump(frames, err))
		}
	}
}

// TestAppendEventRoundTrip checks that what AppendEvent writes reads back as
// exactly one frame with the same fields (CR in Data normalized to LF).
func TestAppendEventRoundTrip(t *testing.T) {
	evs := []Event{
		{Data: []byte("a\r\nb\rc\nd")},
		{ID: "run-1:42", Event: "agui", Data: []byte("{}"), Retry: 10},
		{ID: "\u00e9", Event: "\u2028", Data: []byte("\n")},
		{Data: []byte("\xef\xbb\xbfdata")},
	}
	for _, ev := range evs {
		b, err := AppendEvent(nil, ev)
		if err != nil {
			t.Fatal(err)
		}
		frames, err := readAll(bytes.NewReader(b), Limits{})
		if err != nil || len(frames) != 1 {
			t.Fatalf("reading AppendEvent(%+v) = %s", ev, dump(frames, err))
		}
		got := frames[0]
		wantData := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(ev.Data))
		if string(got.Data) != wantData || got.ID != ev.ID || got.HasID != (ev.ID != "") ||
			got.Event != ev.Event || got.Retry != ev.Retry || !got.Terminated {
			t.Errorf("read back AppendEvent(%+v) = %s", ev, dump(frames, nil))
		}
	}
}

// TestAppendWithID checks the bytes AppendWithID writes for each kind of
// frame ending, and that a reader sees the same fields with our id.
func TestAppendWithID(t *testing.T) {
	tests := []struct {
		name  string
		input string // a stream holding one frame
		want  string
	}{
		{"lf", "data: x\n\n", "data: x\nid: 42\n\n"},
		{"crlf", "data: x\r\n\r\n", "data: x\r\nid: 42\n\n"},
		{"cr", "data: x\r\r", "data: x\r\nid: 42\n\n"},
		{"cr-lines", "event: e\rdata: x\r\r", "event: e\rdata: x\r\nid: 42\n\n"},
		{"mixed", "data: x\r\n\n", "data: x\r\nid: 42\n\n"},
		{"unterminated-open-line", "data: x", "data: x\nid: 42\n\n"},
		{"unterminated-after-lf", "data: x\n", "data: x\nid: 42\n\n"},
		{"unterminated-after-cr", "data: x\r", "data: x\r\nid: 42\n\n"},
		{"upstream-id", "id: up\ndata: x\nid: up2\n\n", "id: up\ndata: x\nid: up2\nid: 42\n\n"},
		{"with-bom", "\uFEFFdata: x\n\n", "\uFEFFdata: x\nid: 42\n\n"},
		{"comment-only", ": ping\n\n", ": ping\nid: 42\n\n"},
		{"blank", "\n", "id: 42\n\n"},
		{"all-fields", "event: e\nretry: 5\ndata: a\ndata: b\n\n", "event: e\nretry: 5\ndata: a\ndata: b\nid: 42\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tc.input), Limits{})
			f, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			orig := cloneFrame(f)
			got := string(f.AppendWithID([]byte("prefix|"), "42"))
			if got != "prefix|"+tc.want {
				t.Errorf("AppendWithID(%q, 42) = %q, want %q", tc.input, got, "prefix|"+tc.want)
			}
			frames, err := readAll(strings.NewReader(tc.want), Limits{})
			if err != nil || len(frames) != 1 {
				t.Fatalf("reading %q = %s, want one frame", tc.want, dump(frames, err))
			}
			back := frames[0]
			if back.ID != "42" || !back.HasID || !back.Terminated || !bytes.Equal(back.Data, orig.Data) ||
				back.HasData != orig.HasData || back.Event != orig.Event || back.Retry != orig.Retry {
				t.Errorf("reading AppendWithID(%q) = %s, want the fields of %s with id 42", tc.input, dump(frames, nil), dump([]Frame{orig}, nil))
			}
		})
	}
}

// TestAppendWithIDCarriedLF checks a frame whose Raw starts with an LF carried
// over from the previous frame (see Frame.Raw).
func TestAppendWithIDCarriedLF(t *testing.T) {
	r := NewReader(&pieceReader{pieces: []string{"data: a\r\n\r", "\ndata: b\r\n\r\n"}}, Limits{})
	f1, _ := r.Next()
	out := f1.AppendWithID(nil, "1")
	f2, err := r.Next()
	if err != nil || f2.Raw[0] != '\n' {
		t.Fatalf("second frame = %q, %v; want a carried LF", f2.Raw, err)
	}
	out = f2.AppendWithID(out, "2")
	frames, err := readAll(bytes.NewReader(out), Limits{})
	var ids, data []string
	for _, f := range frames {
		if f.HasData {
			ids, data = append(ids, f.ID), append(data, string(f.Data))
		}
	}
	if err != nil || strings.Join(ids, ",") != "1,2" || strings.Join(data, ",") != "a,b" {
		t.Errorf("reading %q = %s, want data a,b with ids 1,2", out, dump(frames, err))
	}
}

// TestWriter streams through a real HTTP server and reads the response back.
func TestWriter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sw := NewWriter(w)
		rc := http.NewResponseController(w)
		if err := sw.WriteComment("hello"); err != nil {
			t.Error(err)
		}
		for i, d := range []string{`{"type":"RUN_STARTED"}`, "two\nlines", ""} {
			if err := sw.WriteEvent(Event{ID: string(rune('1' + i)), Data: []byte(d)}); err != nil {
				t.Error(err)
			}
			rc.Flush()
		}
		if err := sw.WriteEvent(Event{ID: "bad\n"}); !errors.Is(err, ErrInvalidField) {
			t.Errorf("WriteEvent with a bad id = %v, want ErrInvalidField", err)
		}
	}))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	frames, err := readAll(res.Body, Limits{})
	want := []Frame{
		{Raw: []byte(": hello\n\n"), Terminated: true},
		{Raw: []byte("data: {\"type\":\"RUN_STARTED\"}\nid: 1\n\n"), Data: []byte(`{"type":"RUN_STARTED"}`), HasData: true, ID: "1", HasID: true, Terminated: true},
		{Raw: []byte("data: two\ndata: lines\nid: 2\n\n"), Data: []byte("two\nlines"), HasData: true, ID: "2", HasID: true, Terminated: true},
		{Raw: []byte("data:\nid: 3\n\n"), Data: []byte{}, HasData: true, ID: "3", HasID: true, Terminated: true},
	}
	if err != nil || !eqFrames(frames, want) {
		t.Errorf("reading the Writer's stream = %s\nwant\n%s", dump(frames, err), dump(want, nil))
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// TestWriterErrors checks that write errors are wrapped and invalid events
// write nothing.
func TestWriterErrors(t *testing.T) {
	w := NewWriter(failWriter{})
	if err := w.WriteEvent(Event{Data: []byte("x")}); !errors.Is(err, io.ErrClosedPipe) || !strings.HasPrefix(err.Error(), "writing event: ") {
		t.Errorf("WriteEvent on a failing writer = %v, want writing event: %v", err, io.ErrClosedPipe)
	}
	if err := w.WriteComment("x"); !errors.Is(err, io.ErrClosedPipe) || !strings.HasPrefix(err.Error(), "writing comment: ") {
		t.Errorf("WriteComment on a failing writer = %v, want writing comment: %v", err, io.ErrClosedPipe)
	}
	var buf bytes.Buffer
	w = NewWriter(&buf)
	if err := w.WriteEvent(Event{Event: "a\rb"}); !errors.Is(err, ErrInvalidField) || buf.Len() != 0 {
		t.Errorf("WriteEvent(bad event) = %v and wrote %q, want ErrInvalidField and nothing written", err, buf.Bytes())
	}
}
