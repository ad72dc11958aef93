// Package jsonscan finds where a run of ordinary JSON string bytes ends: at a quote, a
// backslash or (NextSpecialCtl) a control byte, eight bytes at a time, and (NextSpecial) with
// the runtime's vectorized bytes.IndexByte past a string's first words. Long strings (message
// content, text deltas, a thread's snapshot) are most of what the proxy's JSON scanners walk;
// these searches walk them several times faster than a byte loop.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// The flags: for each byte lane of a word, the high bit is set where the lane holds a byte
// searched for. Only the lowest flag is exact (a borrow can set flags above it), and that is
// the only one used.
const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special flags the quotes and backslashes of x.
func special(x uint64) uint64 {
	q := x ^ ('"' * lows)
	bs := x ^ ('\\' * lows)
	return ((q-lows)&^q | (bs-lows)&^bs) & highs
}

// specialOrControl is special plus the bytes below 0x20.
func specialOrControl(x uint64) uint64 {
	q := x ^ ('"' * lows)
	bs := x ^ ('\\' * lows)
	return ((q-lows)&^q | (bs-lows)&^bs | (x-0x20*lows)&^x) & highs
}

// NextSpecial returns the index of the first '"' or '\\' in b at or after i, or len(b) when
// there is none (i may be len(b)).
//
// The first two words are searched eight bytes at a time (keys, ids and short values end
// there); a longer string is searched a window at a time with bytes.IndexByte, which the
// runtime implements with vector instructions: a message's content, scanned several times at
// each run's end on a long thread, goes by at several times the word loop's speed.
func NextSpecial(b []byte, i int) int {
	for range 2 {
		if i+8 > len(b) {
			if i >= len(b) {
				return len(b)
			}
			if len(b) < 8 {
				for ; i < len(b) && b[i] != '"' && b[i] != '\\'; i++ {
				}
				return i
			}
			return tail(b, i, special(last(b, i)))
		}
		if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(b) {
		// The window bounds each search: a string with an escape every few bytes costs a
		// search of those few bytes per escape, not of the rest of the string.
		w := b[i:min(len(b), i+scanWindow)]
		bs := bytes.IndexByte(w, '\\')
		if bs >= 0 {
			w = w[:bs]
		}
		if q := bytes.IndexByte(w, '"'); q >= 0 {
			return i + q
		}
		if bs >= 0 {
			return i + bs
		}
		i += len(w)
	}
	return len(b)
}

// scanWindow is how many bytes NextSpecial hands bytes.IndexByte at a time.
const scanWindow = 512

// NextSpecialCtl is NextSpecial that also stops at the bytes below 0x20 (invalid inside a JSON
// string), eight bytes at a time throughout: bytes.IndexByte cannot look for a range of bytes.
func NextSpecialCtl(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := specialOrControl(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	if i >= len(b) {
		return len(b)
	}
	if len(b) < 8 {
		for ; i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20; i++ {
		}
		return i
	}
	return tail(b, i, specialOrControl(last(b, i)))
}

// last returns the bytes b[i:] (fewer than eight, len(b) at least eight) in the low lanes of a
// word: the word ending at len(b), its lanes before i shifted out. Zero lanes shift in at the
// top; they lie past len(b), so tail does not take a flag there.
func last(b []byte, i int) uint64 {
	return binary.LittleEndian.Uint64(b[len(b)-8:]) >> (uint(8-(len(b)-i)) * 8)
}

// tail returns the index the flags m of last(b, i) point to, or len(b).
func tail(b []byte, i int, m uint64) int {
	if j := i + bits.TrailingZeros64(m)>>3; m != 0 && j < len(b) {
		return j
	}
	return len(b)
}
