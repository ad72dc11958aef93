package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// refCheckMembers is CheckMembers by encoding/json's tokenizer: the model it must agree with.
func refCheckMembers(data []byte, opaque func([]string) bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(path []string) error
	walk = func(path []string) error {
		if opaque != nil && len(path) > 0 && opaque(path) {
			var raw json.RawMessage
			return dec.Decode(&raw)
		}
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return nil
		}
		if d == '[' {
			for dec.More() {
				if err := walk(append(path, "*")); err != nil {
					return err
				}
			}
		} else {
			seen := map[string]bool{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return err
				}
				k := tok.(string)
				f := strings.ToLower(strings.ToUpper(k))
				if seen[f] {
					return ErrDuplicateMember
				}
				seen[f] = true
				if err := walk(append(path[:len(path):len(path)], k)); err != nil {
					return err
				}
			}
		}
		_, err = dec.Token() // the closing delimiter
		return err
	}
	err := walk(nil)
	if err == nil {
		if _, e := dec.Token(); e != io.EOF {
			err = errors.New("data after the value")
		}
	}
	return err
}

// eventsOpaque is the opaque rule of an export document: the events are kept as sent.
func eventsOpaque(path []string) bool {
	return len(path) == 4 && path[0] == "runs" && path[2] == "eventList"
}

func TestCheckMembers(t *testing.T) {
	for _, tc := range []struct {
		doc    string
		opaque func([]string) bool
		bad    string // "" accepted; else a piece of the error
	}{
		{`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`, nil, ""},
		{`{"runId":"r1","runId":"r2"}`, nil, `"runId" appears twice at the top level`},
		{`{"runs":[],"runs":[]}`, nil, `"runs" appears twice`},
		{`{"runs":[{"runId":"a","RUNID":"b"}]}`, nil, `"runId" and "RUNID" differ only in case in runs.*`},
		{`{"a":{"b":{"c":1,"c":2}}}`, nil, `"c" appears twice in a.b`},
		{`{"a\u0062":1,"ab":2}`, nil, `"ab" appears twice`},
		{`{"k":1,"\u212a":2}`, nil, `differ only in case`}, // the Kelvin sign folds to k
		{`[{"x":1},{"x":1,"y":2,"x":3}]`, nil, `"x" appears twice in *`},
		{`{"runs":[{"eventList":[{"type":"A","type":"B"}]}]}`, eventsOpaque, ""},
		{`{"runs":[{"eventList":[{"type":"A"}],"eventList":[]}]}`, eventsOpaque, `"eventList" appears twice in runs.*`},
		{`"s"`, nil, ""}, {`[]`, nil, ""}, {`{}`, nil, ""}, {` { "a" : [ 1 , { } ] } `, nil, ""},
	} {
		err := CheckMembers([]byte(tc.doc), tc.opaque)
		if tc.bad == "" && err != nil || tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad) || !errors.Is(err, ErrDuplicateMember)) {
			t.Errorf("CheckMembers(%s) = %v, want %q", tc.doc, err, tc.bad)
		}
		if ref := refCheckMembers([]byte(tc.doc), tc.opaque); (ref == nil) != (err == nil) {
			t.Errorf("CheckMembers(%s) = %v, the reference %v", tc.doc, err, ref)
		}
	}
}

// FuzzCheckMembers: on every valid JSON value CheckMembers agrees with the model built on
// encoding/json's tokenizer, with and without an opaque path.
func FuzzCheckMembers(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"B":1,"b":2}}`, `[{"x":[{"y":1,"Y":2}]}]`, `{"runs":[{"eventList":[{"t":1,"t":2}]}]}`,
		`{"\u00e9":1,"\u00c9":2}`, `{"a":"\"}","a\\":1}`, `1`, `{"a":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !Valid(data) {
			return
		}
		for _, opaque := range []func([]string) bool{nil, eventsOpaque, func(p []string) bool { return len(p) == 2 }} {
			got, want := CheckMembers(data, opaque), refCheckMembers(data, opaque)
			if (got == nil) != (want == nil) {
				t.Fatalf("CheckMembers(%q) = %v, the encoding/json model %v", data, got, want)
			}
		}
	})
}
