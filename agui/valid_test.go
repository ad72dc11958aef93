package agui

import (
	"encoding/json"
	"strings"
	"testing"
)

// validCases are inputs where a validator can go wrong: every literal, number and escape
// form, truncations, whitespace, nesting and bytes encoding/json accepts or refuses.
var validCases = []string{
	``, ` `, `{}`, `[]`, `{ }`, `[ ]`, ` {} `, "\t\n\r{}\n", `{}{}`, `{},`, `[`, `]`, `{`, `}`, `[}`, `{]`,
	`null`, `true`, `false`, `nul`, `tru`, `fals`, `nulll`, `truex`, `True`, `NULL`,
	`0`, `-0`, `-`, `01`, `-01`, `1.`, `.1`, `1.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e-10`, `1.5.5`, `+1`, `0x10`, `1 2`,
	`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u0041"`, `"\u00e9\uD83D\uDE00"`, `"\u12"`, `"\u12G4"`, `"\x"`, `"\'"`,
	"\"\x01\"", "\"\x1f\"", "\"\x7f\"", "\"\xff\xfe\"", "\"caf\xc3\xa9\"", `"abc`, `"\`, `"\u`, `"\u004`,
	`{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":1,"a":2}`, `{1:2}`, `{"a":[1,2,{"b":null}]}`,
	`[1,2,3]`, `[1,,2]`, `[,1]`, `[1,]`, `[1 2]`, `[[[]]]`, `[[[]]`, `[{}]`, `[{"a":"b"},[true,false,null]]`,
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}`, `{"type":"RUN_STARTED"} x`,
}

func TestValid(t *testing.T) {
	for _, s := range validCases {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json.Valid says %v", s, got, want)
		}
	}
	for _, depth := range []int{63, 64, 65, maxNestingDepth, maxNestingDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			s := strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth)
			if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
				t.Errorf("Valid(%d nested %q) = %v, encoding/json.Valid says %v", depth, open, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { Valid([]byte(`{"type":"X","a":[1,{"b":[true]}]}`)) }); n != 0 {
		t.Errorf("Valid allocates %v times", n)
	}
}

// FuzzValid checks Valid against encoding/json.Valid on any input.
func FuzzValid(f *testing.F) {
	for _, s := range validCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json.Valid says %v", data, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	data := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_0123456789","delta":"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam"}`)
	b.Run("agui", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			Valid(data)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			json.Valid(data)
		}
	})
}
