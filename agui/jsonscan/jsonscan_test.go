package jsonscan

import (
	"math/rand/v2"
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

// FuzzNextSpecial: the same comparison on any bytes. Seeds: testdata/fuzz/FuzzNextSpecial.
func FuzzNextSpecial(f *testing.F) {
	f.Add([]byte(`"plain ascii text, long enough for two words"`))
	f.Add([]byte("a\\\"b\x00\x1f\x20\xff\x80"))
	f.Fuzz(func(t *testing.T, b []byte) { check(t, b) })
}

func BenchmarkNextSpecial(b *testing.B) {
	s := make([]byte, 4096)
	for i := range s {
		s[i] = 'a' + byte(i%26)
	}
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if NextSpecialCtl(s, 0) != len(s) {
			b.Fatal("found a special byte")
		}
	}
}
