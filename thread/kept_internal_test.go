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

// TestSharedPrefixSuffix: the word-at-a-time comparisons agree with a byte-at-a-time count,
// for every split of differing bytes around an equal middle.
func TestSharedPrefixSuffix(t *testing.T) {
	slow := func(a, b []byte, suffix bool) int {
		n := 0
		for n < len(a) && n < len(b) {
			x, y := a[n], b[n]
			if suffix {
				x, y = a[len(a)-1-n], b[len(b)-1-n]
			}
			if x != y {
				break
			}
			n++
		}
		return n
	}
	base := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"0123456789abcdef"}`)
	for i := 0; i <= len(base); i++ {
		for j := 0; j <= len(base); j += 3 {
			a := append([]byte(nil), base[:i]...)
			b := append([]byte(nil), base...)
			if j < len(b) {
				b[j] ^= 0x20
			}
			if got, want := sharedPrefix(a, b), slow(a, b, false); got != want {
				t.Fatalf("sharedPrefix(%q, %q) = %d, want %d", a, b, got, want)
			}
			a = append([]byte(nil), base[len(base)-i:]...)
			if got, want := sharedSuffix(a, b), slow(a, b, true); got != want {
				t.Fatalf("sharedSuffix(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}
