package sse

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

// benchStream builds n frames whose data line carries a JSON-looking payload
// of about size bytes, with the given line ending.
func benchStream(n, size int, eol string) []byte {
	head := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":"`
	tail := `"}`
	pad := max(size-len("data: ")-len(head)-len(tail)-2*len(eol), 1)
	frame := "data: " + head + strings.Repeat("x", pad) + tail + eol + eol
	return []byte(strings.Repeat(frame, n))
}

// smallReads returns at most n bytes per Read, like a stream trickling in.
type smallReads struct {
	r io.Reader
	n int
}

func (s smallReads) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.n)]) }

func BenchmarkReader(b *testing.B) {
	const frames = 1000
	cases := []struct {
		name  string
		data  []byte
		chunk int // 0 means reads as large as the buffer
	}{
		{"agui-200B-lf", benchStream(frames, 200, "\n"), 0},
		{"agui-200B-crlf", benchStream(frames, 200, "\r\n"), 0},
		{"agui-4KiB-lf", benchStream(frames, 4096, "\n"), 0},
		{"agui-200B-reads-of-64B", benchStream(frames, 200, "\n"), 64},
		{"agui-200B-reads-of-1-frame", benchStream(frames, 200, "\n"), 200},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			br := bytes.NewReader(tc.data)
			var src io.Reader = br
			if tc.chunk > 0 {
				src = smallReads{br, tc.chunk}
			}
			r := NewReader(src, Limits{})
			b.SetBytes(int64(len(tc.data)))
			b.ReportAllocs()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			for b.Loop() {
				br.Reset(tc.data)
				r.Reset(src)
				n := 0
				for {
					f, err := r.Next()
					if err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
					if f.HasData {
						n++
					}
				}
				if n != frames {
					b.Fatalf("read %d frames, want %d", n, frames)
				}
			}
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N*frames), "allocs/frame")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frames), "ns/frame")
		})
	}
}

func BenchmarkAppendWithID(b *testing.B) {
	for _, size := range []int{200, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			r := NewReader(bytes.NewReader(benchStream(1, size, "\n")), Limits{})
			f, err := r.Next()
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, 0, 2*size)
			b.SetBytes(int64(len(f.Raw)))
			b.ReportAllocs()
			for b.Loop() {
				dst = f.AppendWithID(dst[:0], "01J9ZQ3-000042")
			}
		})
	}
}

func BenchmarkAppendEvent(b *testing.B) {
	for _, size := range []int{200, 4096} {
		data := bytes.Repeat([]byte("y"), size)
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			ev := Event{ID: "01J9ZQ3-000042", Data: data}
			dst := make([]byte, 0, 2*size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = AppendEvent(dst[:0], ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
