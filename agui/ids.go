package agui

import (
	"errors"
	"fmt"
)

// MaxIDLength is the longest thread, run or message id the proxy accepts, in bytes.
const MaxIDLength = 128

// ErrInvalidID is returned (wrapped, with the offending value quoted) for an id that is empty,
// too long, or holds a byte outside the allowed set.
var ErrInvalidID = errors.New("invalid id")

// ValidateID checks an id that will become part of a storage key or an SSE id line.
//
// Allowed: 1 to MaxIDLength bytes from [A-Za-z0-9], '-', '_', '.', ':', '~', '@', '+', '='.
// This admits UUIDs, ULIDs, nanoids and the usual prefixed forms ("thread_abc", "run:1") while
// refusing everything that could break out of a key or a frame: whitespace, control characters,
// NUL, Redis hash-tag braces '{' '}', glob characters '*' '?' '[' ']', quotes, slashes and
// non-ASCII bytes. kind names the field in the error ("threadId", "runId", ...).
//
// Security invariant: storage keys and wire ids are built only from values that passed this
// check; widening the set needs a look at recorder key building and sse id lines.
func ValidateID(kind, id string) error {
	if id == "" {
		return fmt.Errorf("%s is empty: %w", kind, ErrInvalidID)
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("%s is %d bytes long, more than %d: %w", kind, len(id), MaxIDLength, ErrInvalidID)
	}
	for i := 0; i < len(id); i++ {
		if !idByte[id[i]] {
			return fmt.Errorf("%s %q has a forbidden byte at offset %d: %w", kind, truncate(id), i, ErrInvalidID)
		}
	}
	return nil
}

var idByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "-_.:~@+=" {
		t[c] = true
	}
	return t
}()

// truncate keeps error messages short when an id is hostile and long.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
