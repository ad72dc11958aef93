package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// procCPU returns the user+system CPU time of process pid in seconds, from the utime and
// stime fields of /proc/PID/stat (fields 14 and 15, in clock ticks).
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b, clockTicks())
}

// parseStatCPU reads utime+stime from a /proc/PID/stat line. The command name (field 2) is in
// parentheses and may hold spaces and ')', so fields are counted from the last ')'.
func parseStatCPU(stat []byte, ticks int64) (float64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("stat: no command name")
	}
	f := bytes.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the command name, want at least 13", len(f))
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("stat: utime/stime: %w", err)
	}
	return float64(u+s) / float64(ticks), nil
}

// procPeakRSS returns VmHWM, the peak resident set size of process pid, in bytes.
func procPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(b, "VmHWM:")
}

// parseStatusKB returns the "<field> N kB" value of a /proc/PID/status file in bytes.
func parseStatusKB(status []byte, field string) (int64, error) {
	for line := range bytes.Lines(status) {
		if v, ok := bytes.CutPrefix(line, []byte(field)); ok {
			f := bytes.Fields(v)
			if len(f) != 2 || string(f[1]) != "kB" {
				return 0, fmt.Errorf("status: %s %q, want \"N kB\"", field, bytes.TrimSpace(v))
			}
			n, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("status: %s: %w", field, err)
			}
			return n << 10, nil
		}
	}
	return 0, fmt.Errorf("status: no %s line", field)
}

// clockTicks returns the kernel's USER_HZ from the AT_CLKTCK entry of /proc/self/auxv, or
// 100 (the value on every common Linux build) when it cannot be read.
func clockTicks() int64 {
	const atClkTck = 17
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	for len(b) >= 16 { // 64-bit little-endian pairs; this tool targets linux/amd64 and arm64
		k, v := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		if k == atClkTck && v > 0 {
			return int64(v)
		}
		b = b[16:]
	}
	return 100
}
