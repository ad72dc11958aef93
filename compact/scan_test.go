package compact

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// refParse is ParseEvent as it was before the one-pass scanner: json.Valid, then the last
// top-level "type" member.
func refParse(data []byte) (string, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' || !json.Valid(data) {
		return "", ErrInvalidJSON
	}
	v, ok := field(data, "type")
	if !ok || len(v) < 2 || v[0] != '"' {
		return "", ErrMissingType
	}
	s, ok := jsonString(v)
	if !ok {
		return "", ErrMissingType
	}
	return string(s), nil
}

func TestValidEvent(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, in := range []string{
		``, ` `, `{`, `}`, `{}`, `{} `, ` {}`, `{}{}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,"a":1}`,
		`{"a":1 "b":2}`, `{"a" : 1 , "b" : [ 1 , 2 ] }`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":[]}`,
		`{"a":-}`, `{"a":-0}`, `{"a":01}`, `{"a":1.}`, `{"a":1.5e}`, `{"a":1.5e+3}`, `{"a":1E-0}`,
		`{"a":.5}`, `{"a":+1}`, `{"a":tru}`, `{"a":true}`, `{"a":false}`, `{"a":nul}`, `{"a":null}`,
		`{"a":"\x01"}`, "{\"a\":\"\x7f\xff\"}", `{"a":"\u12"}`, `{"a":"\u12g4"}`, `{"a":"\uABCD"}`,
		`{"a":"\q"}`, `{"a":"\/\b\f\n\r\t\"\\"}`, `{"a":"x`, `{"a":"x\`, `{"type":1}`,
		`{"type":"A","type":"B"}`, `{"typ\u0065":"X"}`, `{"t":{"type":"inner"}}`, `[1]`, `"s"`, `1`,
		`{"a":` + deep(maxNesting-1) + `}`, `{"a":` + deep(maxNesting) + `}`, "{\"a\":1}\n", "{\"a\":1}\v",
		"\f{\"type\":\"X\"}",
	} {
		got, gerr := ParseEvent([]byte(in))
		want, werr := refParse([]byte(in))
		if (gerr == nil) != (werr == nil) || (gerr != nil && !errorsIs(gerr, werr)) || (gerr == nil && got.Type != want) {
			t.Errorf("ParseEvent(%.60q) = %q, %v, want %q, %v", in, got.Type, gerr, want, werr)
		}
		if _, ok := validEvent([]byte(in)); ok != json.Valid([]byte(in)) {
			t.Errorf("validEvent(%.60q) = %v, want %v", in, ok, !ok)
		}
	}
}

func errorsIs(err, target error) bool {
	pe, ok := err.(*ParseError)
	return ok && pe.Err == target
}

// FuzzValidEvent checks the one-pass scanner against encoding/json: validEvent accepts
// exactly what json.Valid accepts, and ParseEvent finds the same type as json.Unmarshal.
func FuzzValidEvent(f *testing.F) {
	f.Add([]byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a\ud83d"}`))
	f.Add([]byte(`{"type":"A","x":[1,-2.5e+3,true,false,null,{"y":"\u00e9"}],"type":"B"}`))
	f.Add([]byte(`{"typ\u0065":"X","t":{"type":1}}`))
	f.Add([]byte(" [0, {} ,\"\\/\"]\t"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, ok := validEvent(data); ok != json.Valid(data) {
			t.Fatalf("validEvent(%q) = %v, json.Valid = %v", data, ok, !ok)
		}
		got, gerr := ParseEvent(data)
		want, werr := refParse(data)
		if (gerr == nil) != (werr == nil) || (gerr != nil && !errorsIs(gerr, werr)) || (gerr == nil && got.Type != want) {
			t.Fatalf("ParseEvent(%q) = %q, %v, want %q, %v", data, got.Type, gerr, want, werr)
		}
	})
}

// BenchmarkParseEvent measures ParseEvent alone on the text-heavy bench thread.
func BenchmarkParseEvent(b *testing.B) {
	lines := bytes.Split(bytes.TrimSpace(benchThread(10000)), []byte("\n"))
	var n int
	for _, l := range lines {
		n += len(l)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			if _, err := ParseEvent(l); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func TestAppendQuote(t *testing.T) {
	ins := []string{"", "m1", "hello world", `a"b`, `a\b`, "tab\there", "\x00", "\x1f", "\x7f", "é", "\u2028", "<&>", "\xff", "a\xffb", "\U0001F600"}
	for c := 0; c < 256; c++ {
		ins = append(ins, string([]byte{'x', byte(c)}))
	}
	for _, in := range ins {
		if got, want := string(appendQuote([]byte("pre"), in)), "pre"+string(slowQuote(in)); got != want {
			t.Errorf("appendQuote(pre, %q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzDecodeJS checks decodeJS's fast decoder against json.Unmarshal: both succeed with the
// same value, or both fail.
func FuzzDecodeJS(f *testing.F) {
	f.Add([]byte(`[{"op":"add","path":"/log/-","value":"m0"}]`))
	f.Add([]byte(`{"a":[],"b":{},"c":[1,-2.5e3,true,false,null],"a":"dup","é":"\u00e9"}`))
	f.Add([]byte(`{"n":1e400,"s":"a\"b","x":"\xff"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var want any
		werr := json.Unmarshal(data, &want)
		got, gerr := decodeJS(data)
		if (werr == nil) != (gerr == nil) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("decodeJS(%q) = %#v, %v, want %#v, %v", data, got, gerr, want, werr)
		}
	})
}
