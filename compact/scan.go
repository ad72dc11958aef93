package compact

import "github.com/agui-proxy/agui-proxy/agui/jsonscan"

// One-pass validation of an event's JSON. ParseEvent used to run json.Valid and then scan the
// object a second time for "type"; validEvent does both in one pass and accepts exactly what
// json.Valid accepts (FuzzValidEvent checks that against encoding/json), so ParseEvent's
// contract is unchanged.

// maxNesting is encoding/json's nesting limit: json.Valid refuses deeper documents.
const maxNesting = 10000

// isJSONSpace reports JSON whitespace (the only kind json.Valid skips).
func isJSONSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// validEvent reports whether data is one valid JSON value, by json.Valid's rules. When data is
// an object, typ is the raw value of its last top-level member whose decoded key is "type"
// (nil if there is none).
func validEvent(data []byte) (typ []byte, ok bool) {
	i := skipWS(data, 0)
	if i < len(data) && data[i] == '{' {
		i, typ, ok = scanObject(data, i, 1, true)
	} else {
		i, ok = scanValue(data, i, 0)
	}
	if !ok {
		return nil, false
	}
	return typ, skipWS(data, i) == len(data)
}

// scanValue validates the JSON value at b[i] (leading whitespace allowed) and returns the
// index just past it. depth counts the arrays and objects enclosing it.
func scanValue(b []byte, i, depth int) (int, bool) {
	i = skipWS(b, i)
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '{':
		j, _, ok := scanObject(b, i, depth+1, false)
		return j, ok
	case c == '[':
		return scanArray(b, i, depth+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return i, false
}

func scanLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// scanString validates the string starting at the quote b[i] and returns the index past the
// closing quote. Like encoding/json it refuses control characters and bad escapes and lets
// any other byte (invalid UTF-8 included) through.
func scanString(b []byte, i int) (int, bool) {
	if j := nextSpecialCtl(b, i+1); j < len(b) && b[j] == '"' {
		return j + 1, true // no escapes
	}
	return scanEscaped(b, i)
}

// scanEscaped is scanString for strings with escapes (or errors).
func scanEscaped(b []byte, i int) (int, bool) {
	i++
	for {
		i = nextSpecialCtl(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default:
			return i, false
		}
	}
}

// nextQuote returns the index of the first '"' or '\\' at or after i, or len(b)
// (jsonscan.NextSpecial).
func nextQuote(b []byte, i int) int { return jsonscan.NextSpecial(b, i) }

// nextSpecialCtl is nextQuote that also stops at control bytes (jsonscan.NextSpecialCtl).
func nextSpecialCtl(b []byte, i int) int { return jsonscan.NextSpecialCtl(b, i) }

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at b[i].
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i, true
}

func scanArray(b []byte, i, depth int) (int, bool) {
	if depth > maxNesting {
		return i, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = scanValue(b, i, depth); !ok {
			return i, false
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i++
		case ']':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// scanObject validates the object at b[i]. With wantType it also returns the raw value of the
// last member whose decoded key is "type".
func scanObject(b []byte, i, depth int, wantType bool) (int, []byte, bool) {
	if depth > maxNesting {
		return i, nil, false
	}
	var typ []byte
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, nil, false
		}
		ks := i
		var ok bool
		if i, ok = scanString(b, i); !ok {
			return i, nil, false
		}
		key := b[ks+1 : i-1]
		if i < len(b) && b[i] != ':' {
			i = skipWS(b, i)
		}
		if i >= len(b) || b[i] != ':' {
			return i, nil, false
		}
		vs := i + 1
		if vs < len(b) && isJSONSpace(b[vs]) {
			vs = skipWS(b, vs)
		}
		if vs < len(b) && b[vs] == '"' {
			i, ok = scanString(b, vs)
		} else {
			i, ok = scanValue(b, vs, depth)
		}
		if !ok {
			return i, nil, false
		}
		if wantType && (string(key) == "type" || (len(key) > 4 && (key[0] == 't' || key[0] == '\\') && keyIs(key, "type"))) {
			typ = b[vs:i]
		}
		if i < len(b) && isJSONSpace(b[i]) {
			i = skipWS(b, i)
		}
		if i >= len(b) {
			return i, nil, false
		}
		switch b[i] {
		case ',':
			i++
			if i < len(b) && isJSONSpace(b[i]) {
				i = skipWS(b, i)
			}
		case '}':
			return i + 1, typ, true
		default:
			return i, nil, false
		}
	}
}
