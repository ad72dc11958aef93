package agui

import (
	"bytes"
	"encoding/json"

	"github.com/agui-proxy/agui-proxy/agui/jsonscan"
)

// EventType returns the "type" member of an event's JSON. ok is false when data is not valid
// JSON, not an object, or has no string "type" member at its top level. Keys are matched
// exactly (encoding/json would also accept "TYPE"), and a duplicated "type" resolves to the
// last one, as JSON.parse does in the official client.
//
// It allocates only when the type string, or a top-level key, contains escapes; it is on the
// proxy's per-event path.
func EventType(data []byte) (typ string, ok bool) {
	valid, ts, te := scanJSON(data, true)
	if !valid || ts < 0 {
		return "", false // (a "type" member is found only in a top-level object)
	}
	found := data[ts:te]
	if plainASCII(found) {
		return internType(found[1 : len(found)-1]), true
	}
	return unquote(found), true
}

// internType avoids allocating for the event types the protocol defines.
func internType(b []byte) string {
	if k := KindOfBytes(b); k != KindUnknown {
		return k.String()
	}
	if s, ok := thinkingTypes[string(b)]; ok { // the compiler does not allocate for this lookup
		return s
	}
	return string(b)
}

// thinkingTypes are the retired type names that older agents still emit (not in Kind).
var thinkingTypes = map[string]string{
	ThinkingStart: ThinkingStart, ThinkingEnd: ThinkingEnd,
	ThinkingTextMessageStart: ThinkingTextMessageStart, ThinkingTextMessageContent: ThinkingTextMessageContent,
	ThinkingTextMessageEnd: ThinkingTextMessageEnd,
}

// plainASCII reports whether a quoted JSON string needs no decoding: no escapes and no
// non-ASCII bytes (invalid UTF-8 decodes to U+FFFD, as in the client's TextDecoder).
func plainASCII(quoted []byte) bool {
	for _, c := range quoted {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

func unquote(quoted []byte) string {
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		return ""
	}
	return s
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'. b is valid JSON.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		if i = jsonscan.NextSpecial(b, i); i >= len(b) {
			return i
		}
		if b[i] == '"' {
			return i + 1
		}
		i++ // past the backslash (the loop steps over the byte it escapes)
	}
	return i
}

// skipValue returns the index after the JSON value starting at b[i]. b is valid JSON.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default: // number, true, false, null
		for i < len(b) && !bytes.ContainsRune([]byte(",}] \t\n\r"), rune(b[i])) {
			i++
		}
		return i
	}
}
