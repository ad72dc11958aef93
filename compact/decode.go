package compact

import (
	"strconv"
	"unicode/utf8"
)

// fastDecode decodes raw exactly as json.Unmarshal into an any would (map[string]any with the
// last duplicate key winning, []any, float64, string, bool, nil), without reflection. It
// gives up (ok false) on anything it does not handle identically, and decodeJS then asks
// encoding/json: escaped or non-UTF-8 strings, numbers ParseFloat refuses, nesting beyond
// encoding/json's limit, and invalid JSON. FuzzDecodeJS checks the equivalence.
func fastDecode(raw []byte) (v any, ok bool) {
	d := decoder{b: raw}
	if v, ok = d.value(0); !ok {
		return nil, false
	}
	return v, skipWS(raw, d.i) == len(raw)
}

type decoder struct {
	b []byte
	i int
}

func (d *decoder) value(depth int) (any, bool) {
	d.i = skipWS(d.b, d.i)
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '"':
		return d.str()
	case c == '{':
		if depth >= maxNesting {
			return nil, false
		}
		m := map[string]any{}
		d.i = skipWS(d.b, d.i+1)
		if d.i < len(d.b) && d.b[d.i] == '}' {
			d.i++
			return m, true
		}
		for {
			d.i = skipWS(d.b, d.i)
			if d.i >= len(d.b) || d.b[d.i] != '"' {
				return nil, false
			}
			k, ok := d.str()
			if !ok {
				return nil, false
			}
			d.i = skipWS(d.b, d.i)
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return nil, false
			}
			d.i++
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			m[k.(string)] = v
			if more, ok := d.next('}'); !ok {
				return nil, false
			} else if !more {
				return m, true
			}
		}
	case c == '[':
		if depth >= maxNesting {
			return nil, false
		}
		a := make([]any, 0) // encoding/json's empty array is non-nil
		d.i = skipWS(d.b, d.i+1)
		if d.i < len(d.b) && d.b[d.i] == ']' {
			d.i++
			return a, true
		}
		for {
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			a = append(a, v)
			if more, ok := d.next(']'); !ok {
				return nil, false
			} else if !more {
				return a, true
			}
		}
	case c == '-' || isDigit(c):
		end, ok := scanNumber(d.b, d.i)
		if !ok {
			return nil, false
		}
		f, err := strconv.ParseFloat(string(d.b[d.i:end]), 64)
		if err != nil {
			return nil, false
		}
		d.i = end
		return f, true
	case c == 't':
		return d.lit("true", true)
	case c == 'f':
		return d.lit("false", false)
	case c == 'n':
		return d.lit("null", nil)
	}
	return nil, false
}

// next reads the separator after an object member or an array element: a comma (more
// follows) or the closing bracket close (the value ends); anything else fails.
func (d *decoder) next(close byte) (more, ok bool) {
	d.i = skipWS(d.b, d.i)
	if d.i >= len(d.b) || (d.b[d.i] != ',' && d.b[d.i] != close) {
		return false, false
	}
	d.i++
	return d.b[d.i-1] == ',', true
}

func (d *decoder) lit(s string, v any) (any, bool) {
	if len(d.b)-d.i < len(s) || string(d.b[d.i:d.i+len(s)]) != s {
		return nil, false
	}
	d.i += len(s)
	return v, true
}

// str decodes a string without escapes, control characters or invalid UTF-8.
func (d *decoder) str() (any, bool) {
	j := nextSpecialCtl(d.b, d.i+1)
	if j >= len(d.b) || d.b[j] != '"' {
		return nil, false
	}
	body := d.b[d.i+1 : j]
	if !utf8.Valid(body) {
		return nil, false
	}
	d.i = j + 1
	return string(body), true
}
