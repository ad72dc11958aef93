package jsonscan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// naive is the byte loop the word-at-a-time search must agree with.
func naive(b []byte, i int, ctl bool) int {
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || ctl && c < 0x20 {
			return i
		}
	}
	return len(b)
}

func check(t testing.TB, b []byte) {
	for i := 0; i <= len(b); i++ {
		if got, want := NextSpecial(b, i), naive(b, i, false); got != want {
			t.Fatalf("NextSpecial(%q, %d) = %d, want %d", b, i, got, want)
		}
		if got, want := NextSpecialCtl(b, i), naive(b, i, true); got != want {
			t.Fatalf("NextSpecialCtl(%q, %d) = %d, want %d", b, i, got, want)
		}
	}
}

// TestNextSpecial compares both searches with a byte loop at every start of random strings of
// 0 to 40 bytes drawn mostly from the bytes next to the ones searched for (borrows across
// lanes, zero and 0xff bytes, the tail shorter than a word).
func TestNextSpecial(t *testing.T) {
	alphabet := []byte{'"', '\\', 0, 0x1f, 0x20, 0x21, '!', '#', '[', ']', 'a', 0x7f, 0x80, 0xff, 0x01, '\n'}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(41))
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = byte(r.IntN(256))
			} else {
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
		}
		check(t, b)
	}
}

// TestNextSpecialLong: the same comparison on strings of up to three of NextSpecial's windows,
// with few special bytes (one in 1 to 2,000), so searches cross window ends and find nothing
// for long stretches.
func TestNextSpecialLong(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		b := make([]byte, r.IntN(3*scanWindow+20))
		rate := 1 + r.IntN(2000)
		for i := range b {
			b[i] = 'a' + byte(i%26)
			if r.IntN(rate) == 0 {
				b[i] = []byte{'"', '\\', 0x1f, 0}[r.IntN(4)]
			}
		}
		check(t, b)
	}
}

// FuzzNextSpecial: the same comparison on any bytes. Seeds: testdata/fuzz/FuzzNextSpecial.
func FuzzNextSpecial(f *testing.F) {
	f.Add([]byte(`"plain ascii text, long enough for two words"`))
	f.Add([]byte("a\\\"b\x00\x1f\x20\xff\x80"))
	f.Fuzz(func(t *testing.T, b []byte) { check(t, b) })
}

// BenchmarkNextSpecial scans a text of 4,096 bytes to its end: without special bytes, with an
// escape every 40 bytes (markdown's newlines, as \n), and split into keys of 6 bytes.
func BenchmarkNextSpecial(b *testing.B) {
	plain := make([]byte, 4096)
	for i := range plain {
		plain[i] = 'a' + byte(i%26)
	}
	escaped := slices.Clone(plain)
	for i := 39; i < len(escaped); i += 40 {
		escaped[i-1], escaped[i] = '\\', 'n'
	}
	keys := slices.Clone(plain)
	for i := 6; i < len(keys); i += 7 {
		keys[i] = '"'
	}
	for _, c := range []struct {
		name string
		s    []byte
	}{{"plain", plain}, {"escaped", escaped}, {"keys", keys}} {
		for _, f := range []struct {
			name string
			next func([]byte, int) int
		}{{"", NextSpecial}, {"Ctl", NextSpecialCtl}} {
			b.Run(c.name+f.name, func(b *testing.B) {
				b.SetBytes(int64(len(c.s)))
				for b.Loop() {
					for i := f.next(c.s, 0); i < len(c.s); i = f.next(c.s, i+1) {
					}
				}
			})
		}
	}
}
