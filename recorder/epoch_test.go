package recorder

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/sse"
)

// TestFrameEpoch reads the epoch of frames as the proxy records them: the pump's (the agent's
// bytes with the id line appended, whatever their line endings), the ones it writes itself
// (sse.AppendEvent), run ids holding colons, and frames with no id of the proxy's.
func TestFrameEpoch(t *testing.T) {
	pumped := func(raw string, id string) []byte {
		f, err := sse.NewReader(strings.NewReader(raw), sse.Limits{}).Next()
		if err != nil {
			t.Fatal(err)
		}
		return f.AppendWithID(nil, id)
	}
	written, _ := sse.AppendEvent(nil, sse.Event{ID: "r1:abcdefgh:3", Data: []byte(`{"type":"RUN_FINISHED"}`)})
	for _, tc := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"lf", pumped("data: {}\n\n", "r1:abcdefgh:1"), "abcdefgh"},
		{"crlf", pumped("data: {}\r\n\r\n", "r1:234567aa:2"), "234567aa"},
		{"cr", pumped("data: {}\r\r", "r1:zzzzzzzz:2"), "zzzzzzzz"},
		{"own id replaced", pumped("id: agent-7\ndata: {}\n\n", "r1:abcdefgh:9"), "abcdefgh"},
		{"written", written, "abcdefgh"},
		{"run id with colons", pumped("data: {}\n\n", "a:b:c:qqqqqqqq:10"), "qqqqqqqq"},
		{"id only", []byte("id: r:abcdefgh:1\n\n"), "abcdefgh"},
		{"no id", []byte("data: {}\n\n"), ""},
		{"agent id, not ours", []byte("data: {}\nid: 42\n\n"), ""},
		{"bad epoch", []byte("data: {}\nid: r:ABCDEFGH:1\n\n"), ""},
		{"short", []byte("id: :a:1\n\n"), ""},
		{"unterminated", []byte("data: {}\nid: r:abcdefgh:1\n"), ""},
		{"empty", nil, ""},
	} {
		if got := FrameEpoch(tc.frame); got != tc.want {
			t.Errorf("%s: FrameEpoch(%q) = %q, want %q", tc.name, tc.frame, got, tc.want)
		}
		other := tc.want != "" && tc.want != "abcdefgh"
		if got := OtherEpoch(tc.frame, "abcdefgh"); got != other {
			t.Errorf("%s: OtherEpoch(%q, abcdefgh) = %v, want %v", tc.name, tc.frame, got, other)
		}
	}
	if n := testing.AllocsPerRun(100, func() { OtherEpoch(written, "zzzzzzzz") }); n != 0 {
		t.Errorf("OtherEpoch allocates %v times", n)
	}
}

// FuzzFrameEpoch checks that FrameEpoch never panics, returns "" or a valid epoch that the
// frame's last line holds, and reads back the epoch of any frame the proxy writes with an id.
func FuzzFrameEpoch(f *testing.F) {
	for _, s := range []string{"data: {}\nid: r:abcdefgh:1\n\n", "id: r:abcdefgh:1\n\n", "data: {}\n\n", "id::abcdefgh:\n\n",
		"id: r:abcdefgh:1\r\n\r\n", "\n\n", "id: a:b:abcdefgh:0\n\n", ":abcdefgh:\n\n"} {
		f.Add([]byte(s), "run-1", int64(3))
	}
	f.Fuzz(func(t *testing.T, frame []byte, runID string, seq int64) {
		e := FrameEpoch(frame)
		if e != "" {
			last := frame[:len(frame)-2]
			last = last[bytes.LastIndexByte(last, '\n')+1:]
			if !ValidEpoch(e) || !bytes.HasPrefix(last, []byte("id:")) || !bytes.Contains(last, []byte(":"+e+":")) {
				t.Fatalf("FrameEpoch(%q) = %q", frame, e)
			}
		}
		if strings.ContainsAny(runID, "\r\n\x00") || seq < 0 {
			return
		}
		epoch := NewEpoch()
		out, err := sse.AppendEvent(nil, sse.Event{ID: Cursor{RunID: runID, Epoch: epoch, Seq: seq}.String(), Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		if got := FrameEpoch(out); got != epoch {
			t.Fatalf("FrameEpoch(%q) = %q, want %q", out, got, epoch)
		}
	})
}
