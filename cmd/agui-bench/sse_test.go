package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func readAll(t testing.TB, in string, max int) ([]string, error) {
	t.Helper()
	r := newEventReader(strings.NewReader(in), max)
	var out []string
	for range len(in) + 1 { // each event consumes at least one byte: bounded
		ev, err := r.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, string(ev))
	}
	t.Fatalf("eventReader did not reach EOF on %q", in)
	return nil, nil
}

func TestEventReader(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		wantErr  error
	}{
		{"one", "data: {}\n\n", []string{"{}"}, nil},
		{"two", "data: a\n\ndata: b\n\n", []string{"a", "b"}, nil},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}, nil},
		{"multi-line data", "data: a\ndata:b\n\n", []string{"a\nb"}, nil},
		{"id and comments ignored", ": ping\n\nid: 7\nevent: x\ndata: a\n\n", []string{"a"}, nil},
		{"unterminated last event", "data: a\n\ndata: b\n", []string{"a", "b"}, nil},
		{"unterminated without newline", "data: a", []string{"a"}, nil},
		{"blank lines only", "\n\n\n", nil, nil},
		{"empty", "", nil, nil},
		{"long line", "data: " + strings.Repeat("x", 200000) + "\n\n", []string{strings.Repeat("x", 200000)}, nil},
		{"too large", "data: " + strings.Repeat("x", 2000) + "\n\n", nil, errEventTooLarge},
		{"too large in a long line", "data: " + strings.Repeat("x", 300000) + "\n\n", nil, errEventTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := 1 << 20
			if strings.HasPrefix(tt.name, "too large") {
				max = 1000
			}
			got, err := readAll(t, tt.in, max)
			if !errors.Is(err, tt.wantErr) || strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("read(%.40q) = %q, %v, want %q, %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestSentNsAndType(t *testing.T) {
	tests := []struct {
		ev     string
		ns     int64
		ok     bool
		evType string
	}{
		{`{"type":"TEXT_MESSAGE_CONTENT","delta":"x","timestamp":1,"rawEvent":{"sentNs":1763890000123456789}}`, 1763890000123456789, true, "TEXT_MESSAGE_CONTENT"},
		{`{"type":"RUN_FINISHED","threadId":"t"}`, 0, false, "RUN_FINISHED"},
		{`{"rawEvent":{"sentNs":}}`, 0, false, ""},
		{`{"type":"X","sentNs":99999999999999999999}`, 0, false, "X"},
		{`{"type":`, 0, false, ""},
	}
	for _, tt := range tests {
		ns, ok := sentNs([]byte(tt.ev))
		if ns != tt.ns || ok != tt.ok {
			t.Errorf("sentNs(%s) = %d, %v, want %d, %v", tt.ev, ns, ok, tt.ns, tt.ok)
		}
		if got := string(eventType([]byte(tt.ev))); got != tt.evType {
			t.Errorf("eventType(%s) = %q, want %q", tt.ev, got, tt.evType)
		}
	}
}

func TestParseProc(t *testing.T) {
	stat := []byte("4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 8 0 100 1000000 500 18446744073709551615\n")
	if got, err := parseStatCPU(stat, 100); err != nil || got != 3.0 {
		t.Errorf("parseStatCPU(utime 250, stime 50, 100 Hz) = %v, %v, want 3", got, err)
	}
	if _, err := parseStatCPU([]byte("4242 (x) S 1 2"), 100); err == nil {
		t.Error("parseStatCPU(short line) error = nil, want an error")
	}
	status := []byte("Name:\tdemo\nVmPeak:\t  999 kB\nVmHWM:\t   2048 kB\nVmRSS:\t 1024 kB\n")
	if got, err := parseStatusKB(status, "VmHWM:"); err != nil || got != 2048<<10 {
		t.Errorf("parseStatusKB(VmHWM 2048 kB) = %d, %v, want %d", got, err, 2048<<10)
	}
	if _, err := parseStatusKB(status, "VmSwap:"); err == nil {
		t.Error("parseStatusKB(missing field) error = nil, want an error")
	}
	if ticks := clockTicks(); ticks <= 0 {
		t.Errorf("clockTicks() = %d, want > 0", ticks)
	}
}

// FuzzEventReader: any input ends in EOF or a typed error without panicking, no event
// exceeds the limit, and events written as "data: x\n\n" (x free of CR and LF) read back
// unchanged after the arbitrary prefix is cut off by a blank line.
func FuzzEventReader(f *testing.F) {
	f.Add([]byte("data: {}\n\n"), "payload")
	f.Add([]byte("data: a\r\n\r\n: c\nid: 1\n"), "x")
	f.Add([]byte("data: a\ndata: b\n"), "")
	f.Add([]byte("\r\r\n\ndata"), "{\"sentNs\":1}")
	f.Fuzz(func(t *testing.T, prefix []byte, payload string) {
		const max = 4096
		if _, err := readAll(t, string(prefix), max); err != nil && !errors.Is(err, errEventTooLarge) {
			t.Fatalf("read(%q) error = %v, want nil or errEventTooLarge", prefix, err)
		}
		if strings.ContainsAny(payload, "\r\n") || len(payload) > max {
			return
		}
		in := append(bytes.Clone(prefix), "\n\n\n"...)
		in = append(in, "data: "+payload+"\n\n"...)
		got, err := readAll(t, string(in), max)
		if errors.Is(err, errEventTooLarge) {
			return // the prefix itself was too large
		}
		if err != nil || len(got) == 0 || got[len(got)-1] != payload {
			t.Fatalf("read(%q) = %q, %v, want last event %q", in, got, err, payload)
		}
	})
}
