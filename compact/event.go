package compact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agui-proxy/agui-proxy/agui"
)

// Event is one AG-UI event, kept losslessly: Raw is its JSON exactly as received (compact or
// not). Unknown types and unknown fields survive in Raw untouched.
type Event struct {
	// Type is the event's "type" field.
	Type string
	// Raw is the event's JSON text. Compact and Concat never modify the bytes of an event they
	// pass through, except that output is compacted (insignificant whitespace removed).
	Raw json.RawMessage
}

// ErrInvalidJSON is wrapped by a *ParseError for data that is not one JSON object.
var ErrInvalidJSON = errors.New("invalid JSON")

// ErrMissingType is wrapped by a *ParseError for an object without a string "type".
var ErrMissingType = errors.New("missing event type")

// ParseError reports why ParseEvent refused an SSE frame's data.
type ParseError struct {
	// Err is ErrInvalidJSON or ErrMissingType.
	Err error
}

// Error implements error.
func (e *ParseError) Error() string { return "parsing event: " + e.Err.Error() }

// Unwrap returns the sentinel.
func (e *ParseError) Unwrap() error { return e.Err }

// ParseEvent parses one SSE frame's data into an Event. Raw aliases data (it is not copied).
// It returns a *ParseError wrapping ErrInvalidJSON for anything that is not a single JSON
// object, and ErrMissingType for an object whose "type" is absent or not a string.
func ParseEvent(data []byte) (Event, error) {
	if len(data) == 0 || data[0] != '{' || data[len(data)-1] != '}' {
		data = bytes.TrimSpace(data)
	}
	if len(data) == 0 || data[0] != '{' {
		return Event{}, &ParseError{Err: ErrInvalidJSON}
	}
	t, ok := validEvent(data)
	if !ok {
		return Event{}, &ParseError{Err: ErrInvalidJSON}
	}
	if len(t) < 2 || t[0] != '"' {
		return Event{}, &ParseError{Err: ErrMissingType}
	}
	if c := agui.KindOfBytes(t[1 : len(t)-1]); c != agui.KindUnknown {
		return Event{Type: c.String(), Raw: data}, nil // a known name has no escapes
	}
	s, ok := jsonString(t)
	if !ok {
		return Event{}, &ParseError{Err: ErrMissingType}
	}
	return Event{Type: internType(s), Raw: data}, nil
}

// mustEvent builds an Event from JSON we produced ourselves.
func mustEvent(typ string, raw []byte) Event { return Event{Type: typ, Raw: raw} }

// internType returns a shared string for known types so events do not each hold a copy.
func internType(b []byte) string {
	if t := agui.KindOf(string(b)); t != agui.KindUnknown {
		return t.String()
	}
	return string(b)
}

// isKnownType reports whether t is one of the 31 event types of AG-UI 1.0.
func isKnownType(t string) bool { return agui.KindOf(t) != agui.KindUnknown }

// --- minimal allocation-free JSON scanning over text already checked by json.Valid ---

// skipWS returns the index of the first non-whitespace byte at or after i.
func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index just past the string whose opening quote is b[i] (escapes are
// skipped pairwise, as in valid JSON).
func skipString(b []byte, i int) int {
	for i++; ; i += 2 {
		i = nextQuote(b, i)
		if i >= len(b) {
			return len(b)
		}
		if b[i] == '"' {
			return i + 1
		}
	}
}

// skipValue returns the index just past the JSON value starting at b[i] (i at a non-space).
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipValue(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\n', '\r', '\t':
				return i
			}
			i++
		}
		return i
	}
}

// eachField calls fn for each member of the JSON object obj with the raw key (without quotes,
// still escaped) and the raw value. It stops early when fn returns false.
func eachField(obj []byte, fn func(key, val []byte) bool) {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipWS(obj, i)
		if i >= len(obj) || obj[i] == '}' {
			return
		}
		if obj[i] == ',' {
			i++
			continue
		}
		ks := i
		i = skipValue(obj, i)
		key := obj[ks+1 : i-1]
		i = skipWS(obj, i)
		if i < len(obj) && obj[i] == ':' {
			i++
		}
		i = skipWS(obj, i)
		vs := i
		i = skipValue(obj, i)
		if !fn(key, obj[vs:i]) {
			return
		}
	}
}

// eachElem calls fn for each element of the JSON array arr.
func eachElem(arr []byte, fn func(val []byte)) {
	i := skipWS(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = skipWS(arr, i)
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		if arr[i] == ',' {
			i++
			continue
		}
		vs := i
		i = skipValue(arr, i)
		fn(arr[vs:i])
	}
}

// keyIs reports whether the raw (escaped) key equals name. Keys with escapes are decoded.
func keyIs(raw []byte, name string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == name
	}
	var s string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	return json.Unmarshal(q, &s) == nil && s == name
}

// field returns the raw value of the last member called name (JSON.parse keeps the last of
// duplicate keys, and so do we).
func field(obj []byte, name string) ([]byte, bool) {
	var out []byte
	found := false
	eachField(obj, func(k, v []byte) bool {
		if keyIs(k, name) {
			out, found = v, true
		}
		return true
	})
	return out, found
}

// jsonString returns the decoded value of a raw JSON string. The result aliases raw when the
// string has no escapes.
func jsonString(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return body, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// strBody returns the escaped body of a raw JSON string (between the quotes).
func strBody(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return nil, false
	}
	return raw[1 : len(raw)-1], true
}

// quote returns s as a JSON string without HTML escaping. Invalid UTF-8 becomes U+FFFD
// written literally (as JSON.parse + JSON.stringify would give), so quoting is idempotent.
func quote(s string) []byte { return appendQuote(nil, s) }

// appendQuote appends quote(s) to dst. Plain printable ASCII (the usual id, key or role) is
// copied between quotes directly; anything else goes through encoding/json.
func appendQuote(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return append(dst, slowQuote(s)...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

func slowQuote(s string) []byte {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// marshalJS encodes v compactly without HTML escaping (JSON.stringify does not escape <>&).
func marshalJS(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// compactJSON removes insignificant whitespace; raw is returned as is when already compact.
func compactJSON(raw []byte) []byte {
	needs := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '"' {
			i = skipValue(raw, i) - 1
			continue
		}
		if c == ' ' || c == '\n' || c == '\r' || c == '\t' {
			needs = true
			break
		}
	}
	if !needs {
		return raw
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

// decodeJS decodes raw the way JSON.parse would for our purposes: numbers become float64,
// the last duplicate key wins.
func decodeJS(raw []byte) (any, error) {
	if v, ok := fastDecode(raw); ok {
		return v, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decoding %d bytes: %w", len(raw), err)
	}
	return v, nil
}
