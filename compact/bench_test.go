package compact

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// benchThread returns an NDJSON text-heavy thread of about n events: runs of a user turn,
// assistant messages streamed in small deltas, an occasional tool call and state delta.
func benchThread(n int) []byte {
	return benchThreadWith(n, `[{"op":"add","path":"/log/-","value":"m%d"}]`)
}

// benchThreadWith is benchThread with the given STATE_DELTA patch (a format with one %d).
func benchThreadWith(n int, delta string) []byte {
	var b bytes.Buffer
	ev := 0
	line := func(format string, a ...any) {
		fmt.Fprintf(&b, format, a...)
		b.WriteByte('\n')
		ev++
	}
	for r := 0; ev < n; r++ {
		line(`{"type":"RUN_STARTED","threadId":"t1","runId":"r%d","input":{"threadId":"t1","runId":"r%d","state":{},"messages":[{"id":"u%d","role":"user","content":"question %d"}],"tools":[],"context":[],"forwardedProps":{}}}`, r, r, r, r)
		line(`{"type":"STATE_SNAPSHOT","snapshot":{"turn":%d,"log":[]}}`, r)
		for m := 0; m < 4 && ev < n-4; m++ {
			line(`{"type":"TEXT_MESSAGE_START","messageId":"m%d-%d","role":"assistant"}`, r, m)
			for d := 0; d < 120 && ev < n-3; d++ {
				line(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m%d-%d","delta":"token %d "}`, r, m, d)
			}
			line(`{"type":"TEXT_MESSAGE_END","messageId":"m%d-%d"}`, r, m)
			line(`{"type":"STATE_DELTA","delta":`+delta+`}`, m)
		}
		line(`{"type":"RUN_FINISHED","threadId":"t1","runId":"r%d"}`, r)
	}
	return b.Bytes()
}

// cpuTime returns the user plus system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCompact measures bytes in -> bytes out: split NDJSON, ParseEvent each line,
// Compact, and write the output as NDJSON. The input is also written to
// $TMPDIR/agui-compact-bench-<n>.ndjson for e2e/compact-bench.mjs (the official
// compactEvents on the same bytes).
func BenchmarkCompact(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		in := benchThread(n)
		_ = os.WriteFile(filepath.Join(os.TempDir(), fmt.Sprintf("agui-compact-bench-%d.ndjson", n)), in, 0o644)
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) { benchCompact(b, in) })
	}
}

// BenchmarkCompactDivergentShape is BenchmarkCompact on threads whose every STATE_DELTA
// falls in a shape where RFC 6902 and fast-json-patch can differ (a copy, a test), so each
// one is also applied by the second opinion (fold.go); shape=plain is the same thread with
// plain adds. The difference is the cost of the second opinion.
func BenchmarkCompactDivergentShape(b *testing.B) {
	for _, c := range []struct{ name, delta string }{
		{"plain", `[{"op":"add","path":"/log/-","value":"m%d"}]`},
		{"copy", `[{"op":"add","path":"/log/-","value":"m%d"},{"op":"copy","from":"/log/0","path":"/last"}]`},
		{"test", `[{"op":"test","path":"/turn","value":%d},{"op":"add","path":"/log/-","value":"t"}]`},
	} {
		in := benchThreadWith(10000, c.delta)
		b.Run("shape="+c.name, func(b *testing.B) { benchCompact(b, in) })
	}
}

func benchCompact(b *testing.B, in []byte) {
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	var outLen, events int
	var out bytes.Buffer
	cpu0 := cpuTime()
	for b.Loop() {
		evs := make([]Event, 0, bytes.Count(in, []byte("\n"))+1)
		for rest := in; len(rest) > 0; {
			l := rest
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				l, rest = rest[:i], rest[i+1:]
			} else {
				rest = nil
			}
			if len(l) == 0 {
				continue
			}
			e, err := ParseEvent(l)
			if err != nil {
				b.Fatal(err)
			}
			evs = append(evs, e)
		}
		res, err := Compact(evs, Options{})
		if err != nil {
			b.Fatal(err)
		}
		out.Reset()
		for _, e := range res {
			out.Write(e.Raw)
			out.WriteByte('\n')
		}
		outLen, events = out.Len(), len(evs)
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	// CPU time of the whole process (GC included), steadier than wall time on a
	// shared machine; compact-bench.mjs reports the same for node.
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(events)*float64(b.N)/cpu.Seconds(), "events/cpu-s")
	}
	b.ReportMetric(float64(outLen)/float64(len(in)), "out/in")
}
