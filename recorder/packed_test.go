package recorder

import (
	"bytes"
	"fmt"
	"testing"
)

func packedSample(n int) []Event {
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = Event{Seq: int64(i + 1), Type: "TEXT_MESSAGE_CHUNK",
			Frame: fmt.Appendf(nil, "id: r/e/%d\ndata: {\"type\":\"TEXT_MESSAGE_CHUNK\",\"messageId\":\"m\",\"delta\":\"word %d\"}\n\n", i+1, i)}
	}
	return evs
}

func sameEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || !bytes.Equal(got[i].Frame, want[i].Frame) {
			t.Fatalf("event %d = %d %q %q, want %d %q %q", i, got[i].Seq, got[i].Type, got[i].Frame, want[i].Seq, want[i].Type, want[i].Frame)
		}
	}
}

// TestPackedEvents: packed events read back as stored (seq 1..n, from any seq, at most a
// limit), in fewer bytes than their frames; a damaged byte never reads as other events, and
// every cut is an error.
func TestPackedEvents(t *testing.T) {
	evs := packedSample(200)
	b := packEvents(evs)
	frames := 0
	for _, e := range evs {
		frames += len(e.Frame)
	}
	if len(b)*3 > frames {
		t.Errorf("packed %d bytes of frames in %d bytes, want less than a third", frames, len(b))
	}
	got, err := unpackEvents(nil, b, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, evs)
	got, err = unpackEvents(nil, b, 150, 10)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, evs[150:160])
	if got, err := unpackEvents(nil, packEvents(nil), 0, 0); err != nil || len(got) != 0 {
		t.Errorf("no events packed read back as %d events, %v", len(got), err)
	}
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 0x20
		// An error, or (a bit DEFLATE does not read, after its last block) the same events.
		if got, err := unpackEvents(nil, bad, 0, 0); err == nil {
			sameEvents(t, got, evs)
		}
	}
	for n := range len(b) {
		if got, err := unpackEvents(nil, b[:n], 0, 0); err == nil {
			t.Fatalf("cut at %d of %d bytes: read %d events, want an error", n, len(b), len(got))
		}
	}
	if _, err := unpackEvents(nil, append(bytes.Clone(b), 0), 0, 0); err == nil {
		t.Fatal("a byte appended: read the events, want an error")
	}
}

// FuzzUnpackEvents: any value either fails to unpack or unpacks to events 1..n that pack and
// unpack again to the same events; packed events always read back as they were.
func FuzzUnpackEvents(f *testing.F) {
	f.Add(packEvents(packedSample(3)))
	f.Add(packEvents(nil))
	f.Add([]byte{packVersion, 1, 2, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := unpackEvents(nil, b, 0, 0)
		if err == nil {
			for i, e := range evs {
				if e.Seq != int64(i+1) {
					t.Fatalf("event %d has seq %d", i, e.Seq)
				}
			}
			again, err := unpackEvents(nil, packEvents(evs), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			sameEvents(t, again, evs)
		}
		// The input as one event's frame.
		in := []Event{{Seq: 1, Type: "CUSTOM", Frame: b}, {Seq: 2, Type: string(b), Frame: nil}}
		out, err := unpackEvents(nil, packEvents(in), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 2 || !bytes.Equal(out[0].Frame, b) || out[1].Type != string(b) || len(out[1].Frame) != 0 {
			t.Fatalf("packed %q read back as %+v", b, out)
		}
	})
}
