package recorder

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDiskRecords: run and thread records round-trip through the binary layout, records
// written as JSON by earlier versions still decode, and a record cut short or with a byte
// too many is refused.
func TestDiskRecords(t *testing.T) {
	run := diskRun{Epoch: "e1", Parent: "p", Status: "running", Detail: "d", Route: "r", Owner: "o",
		Created: 1700000000000, Updated: 1700000000123, Last: 42, First: 1, Count: 42, Trimmed: -1,
		Gaps: "3-4", Node: "n1", Lease: 1700000005000, Stop: true, Idx: 7, Bytes: 9000, Compacted: 5}
	thread := diskThread{Owner: "o", Route: "r", Created: 1, Expires: 2, Next: 3, Count: 4, Latest: "run", Active: 5, Title: "a title ü"}
	for _, c := range []struct {
		in  record
		out func() record
	}{
		{&run, func() record { return new(diskRun) }},
		{&diskRun{}, func() record { return new(diskRun) }},
		{&thread, func() record { return new(diskThread) }},
		{&diskThread{}, func() record { return new(diskThread) }},
	} {
		b := c.in.appendRecord([]byte{recordV1})
		got := c.out()
		if err := decodeRecord(got, b); err != nil || !reflect.DeepEqual(got, c.in) {
			t.Fatalf("binary round trip of %+v: %+v, %v", c.in, got, err)
		}
		js, err := json.Marshal(c.in)
		if err != nil {
			t.Fatal(err)
		}
		got = c.out()
		if err := decodeRecord(got, js); err != nil || !reflect.DeepEqual(got, c.in) {
			t.Fatalf("JSON record %s: %+v, %v", js, got, err)
		}
		for _, bad := range [][]byte{b[:len(b)-1], append(append([]byte(nil), b...), 0)} {
			if err := decodeRecord(c.out(), bad); err == nil {
				t.Fatalf("damaged record %q decoded", bad)
			}
		}
	}
}

// FuzzDiskRecord: decoding a damaged run or thread record never panics, and whatever decodes
// encodes back to a record that decodes to the same value.
func FuzzDiskRecord(f *testing.F) {
	f.Add((&diskRun{Epoch: "e", Status: "running", Last: 3, Gaps: "1-2", Stop: true}).appendRecord([]byte{recordV1}))
	f.Add((&diskThread{Owner: "o", Latest: "r", Next: 2}).appendRecord([]byte{recordV1}))
	f.Add([]byte(`{"e":"x","s":"finished","c":1,"u":2,"i":0}`))
	f.Add([]byte{recordV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{recordV1})
	f.Fuzz(func(t *testing.T, v []byte) {
		for _, mk := range []func() record{func() record { return new(diskRun) }, func() record { return new(diskThread) }} {
			r := mk()
			if decodeRecord(r, v) != nil {
				continue
			}
			again := mk()
			if err := decodeRecord(again, r.appendRecord([]byte{recordV1})); err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("%q decodes to %+v, which re-encodes to %+v (%v)", v, r, again, err)
			}
		}
	})
}
