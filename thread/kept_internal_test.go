package thread

import (
	"testing"
	"unsafe"

	"github.com/agui-proxy/agui-proxy/compact"
)

// TestUnalias: events whose bytes are in the kept events' buffer get bytes of their own, the
// same bytes; events elsewhere are left as they are.
func TestUnalias(t *testing.T) {
	var k KeptEvents
	k.Add("STEP_STARTED", []byte(`{"type":"STEP_STARTED","stepName":"a"}`))
	k.Add("STEP_FINISHED", []byte(`{"type":"STEP_FINISHED","stepName":"a"}`))
	evs, buf := k.events()
	if len(evs) != 2 {
		t.Fatalf("events = %d, want 2", len(evs))
	}
	other := compact.Event{Type: "CUSTOM", Raw: []byte(`{"type":"CUSTOM","name":"x","value":1}`)}
	out := []compact.Event{evs[1], other, {Type: "RAW"}}
	unalias(out, buf)
	in := func(b []byte) bool {
		p, lo := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
		return p >= lo && p < lo+uintptr(cap(buf))
	}
	if in(out[0].Raw) || string(out[0].Raw) != string(evs[1].Raw) {
		t.Fatalf("an event in the buffer: %q, still in it: %v", out[0].Raw, in(out[0].Raw))
	}
	if unsafe.SliceData(out[1].Raw) != unsafe.SliceData(other.Raw) || out[2].Raw != nil {
		t.Fatal("events outside the buffer were changed")
	}
	unalias(out, nil) // nothing kept: nothing to do
}
