package demoagent

import (
	"errors"
	"slices"
	"testing"
)

// FuzzRequest feeds arbitrary RunAgentInput bodies through the request path (decode, params,
// scenario choice). It must never panic; errors wrap ErrInvalidInput or ErrUnknownScenario;
// an accepted request names a listed scenario whose events are a protocol-valid run.
func FuzzRequest(f *testing.F) {
	f.Add([]byte(runBody("tools", "")))
	f.Add([]byte(runBody("bench", `{"events":3,"size":5,"intervalMs":0}`)))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[{"role":"user","content":"scenario:unicode"}]}`))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[{"role":"user","content":[{"type":"text","text":"state"}]}]}`))
	f.Add([]byte(`{"threadId":"t","runId":"r","forwardedProps":{"events":1e400}}`))
	f.Add([]byte(`{"threadId":"t","runId":"r","forwardedProps":[1,2]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodeRequest(body)
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("decodeRequest(%q) error = %v, want ErrInvalidInput", body, err)
			}
			return
		}
		p, err := parseParams(in.ForwardedProps)
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("parseParams(%q) error = %v, want ErrInvalidInput", in.ForwardedProps, err)
			}
			return
		}
		name, err := pickScenario(in, p)
		if err != nil {
			if !errors.Is(err, ErrUnknownScenario) {
				t.Fatalf("pickScenario(%q) error = %v, want ErrUnknownScenario", body, err)
			}
			return
		}
		if !slices.Contains(Scenarios(), name) {
			t.Fatalf("pickScenario(%q) = %q, not a listed scenario", body, name)
		}
		if p.count(0) > 1000 || p.bytes(0) > 1<<20 {
			return // valid, but too slow to generate in a fuzz loop
		}
		events, err := Events(name, in)
		if err != nil {
			t.Fatalf("Events(%q) after an accepted request error = %v", name, err)
		}
		checkProtocol(t, name, in, events)
	})
}
