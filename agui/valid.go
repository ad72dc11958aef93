package agui

import (
	"bytes"

	"github.com/agui-proxy/agui-proxy/agui/jsonscan"
)

// Valid reports whether data is one valid JSON value (RFC 8259), with exactly the answers of
// encoding/json.Valid: whitespace around the value allowed, strings not checked for UTF-8
// (encoding/json accepts invalid UTF-8 and replaces it when decoding), at most
// maxNestingDepth nested arrays and objects. It is a single loop without the per-byte state
// function calls of encoding/json's scanner: several times faster on the proxy's per-event
// path (agui.EventType), and it does not allocate below 64 levels of nesting.
// FuzzValid checks it against encoding/json.Valid.
func Valid(data []byte) bool {
	ok, _, _ := scanJSON(data, false)
	return ok
}

// scanJSON is Valid; with findType it also returns where the value of the last "type" member
// of a top-level object is, when that value is a string (data[typeStart:typeEnd] is the
// quoted string; typeStart is -1 for none): EventType's answer from the pass that validates.
func scanJSON(data []byte, findType bool) (ok bool, typeStart, typeEnd int) {
	typeStart, typeEnd = -1, -1
	var stackBuf [64]byte
	stack := stackBuf[:0] // the open containers, '{' or '['
	typeNext := false     // the value about to be scanned is a top-level "type" member's
	i := skipSpace(data, 0)
	for {
		// A value starts at data[i].
		if i >= len(data) {
			return false, -1, -1
		}
		isType := typeNext
		typeNext = false
		if isType {
			typeStart = -1 // a "type" that is not a string cancels an earlier one (last wins)
		}
		switch c := data[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxNestingDepth {
				return false, -1, -1
			}
			stack = append(stack, c)
			i = skipSpace(data, i+1)
			if i < len(data) && data[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i, typeNext = objectKey(data, i, findType && len(stack) == 1); i < 0 {
					return false, -1, -1
				}
			}
			continue
		case c == '"':
			start := i
			if i = scanString(data, i); i < 0 {
				return false, -1, -1
			}
			if isType {
				typeStart, typeEnd = start, i
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = scanNumber(data, i); i < 0 {
				return false, -1, -1
			}
		case c == 't':
			if i = literal(data, i, "true"); i < 0 {
				return false, -1, -1
			}
		case c == 'f':
			if i = literal(data, i, "false"); i < 0 {
				return false, -1, -1
			}
		case c == 'n':
			if i = literal(data, i, "null"); i < 0 {
				return false, -1, -1
			}
		default:
			return false, -1, -1
		}
		// After a value: close containers, or go on to the next member or element.
		for {
			i = skipSpace(data, i)
			if len(stack) == 0 {
				if i != len(data) {
					return false, -1, -1
				}
				return true, typeStart, typeEnd
			}
			if i >= len(data) {
				return false, -1, -1
			}
			open := stack[len(stack)-1]
			if data[i] == open+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if data[i] != ',' {
				return false, -1, -1
			}
			i = skipSpace(data, i+1)
			if open == '{' {
				if i, typeNext = objectKey(data, i, findType && len(stack) == 1); i < 0 {
					return false, -1, -1
				}
			}
			break
		}
	}
}

// maxNestingDepth is encoding/json's bound on nested arrays and objects.
const maxNestingDepth = 10000

// objectKey scans a member's key and its colon at data[i] and returns the index of the
// member's value, or -1. With checkType, isType reports whether the key is "type" (exactly,
// or spelled with escapes).
func objectKey(data []byte, i int, checkType bool) (next int, isType bool) {
	if i >= len(data) || data[i] != '"' {
		return -1, false
	}
	start := i
	if i = scanString(data, i); i < 0 {
		return -1, false
	}
	if checkType {
		key := data[start:i]
		// (A key with escapes is decoded from a copy: data must not leak into encoding/json,
		// or every caller's data would escape to the heap.)
		isType = string(key) == `"type"` || (bytes.IndexByte(key, '\\') >= 0 && unquote(bytes.Clone(key)) == "type")
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return -1, false
	}
	return skipSpace(data, i+1), isType
}

// scanString returns the index after the string starting at data[i] == '"', or -1.
func scanString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		if i = jsonscan.NextSpecialCtl(data, i); i >= len(data) {
			return -1
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(data) {
				return -1
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(data) {
					return -1
				}
				for _, h := range data[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// scanNumber returns the index after the number starting at data[i], or -1.
func scanNumber(data []byte, i int) int {
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		i = digits(data, i)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := digits(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}

// literal returns the index after word at data[i], or -1.
func literal(data []byte, i int, word string) int {
	if len(data)-i < len(word) || string(data[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}
