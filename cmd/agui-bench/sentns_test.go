package main

import (
	"testing"
)

func TestSentNs(t *testing.T) {
	tests := []struct {
		ev string
		ns int64
		ok bool
	}{
		{`{"type":"TEXT_MESSAGE_CONTENT","delta":"x","timestamp":1,"rawEvent":{"sentNs":1763890000123456789}}`, 1763890000123456789, true},
		{`{"type":"RUN_FINISHED","threadId":"t"}`, 0, false},
		{`{"rawEvent":{"sentNs":}}`, 0, false},
		{`{"type":"X","sentNs":99999999999999999999}`, 0, false},
		{`{"type":`, 0, false},
	}
	for _, tt := range tests {
		ns, ok := sentNs([]byte(tt.ev))
		if ns != tt.ns || ok != tt.ok {
			t.Errorf("sentNs(%s) = %d, %v, want %d, %v", tt.ev, ns, ok, tt.ns, tt.ok)
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
