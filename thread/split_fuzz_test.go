package thread

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzSplitArray: on a compact JSON array, splitArray gives exactly the elements
// encoding/json finds; on anything, whatever it gives joins back to the input or is refused
// (flatten checks the join). Seeds: testdata/fuzz/FuzzSplitArray.
func FuzzSplitArray(f *testing.F) {
	for _, s := range []string{`[]`, `[1]`, `[{"a":"b,c"},[1,2],"x\"]",null]`, `[{"id":"m1","content":"a\\"}]`, `[`, `[,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, arr []byte) {
		got, ok := splitArray(arr)
		if ok {
			joined := []byte{'['}
			for i, e := range got {
				if i > 0 {
					joined = append(joined, ',')
				}
				joined = append(joined, e...)
			}
			if joined = append(joined, ']'); !bytes.Equal(joined, arr) {
				t.Fatalf("split %q joins to %q", arr, joined)
			}
		}
		var compacted bytes.Buffer
		if len(arr) == 0 || arr[0] != '[' || json.Compact(&compacted, arr) != nil || !bytes.Equal(compacted.Bytes(), arr) {
			return // not a compact JSON value: only the join property holds
		}
		var want []json.RawMessage
		if json.Unmarshal(arr, &want) != nil {
			return
		}
		if !ok || len(got) != len(want) {
			t.Fatalf("split %q = %d elements (%v), encoding/json finds %d", arr, len(got), ok, len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("element %d of %q = %q, want %q", i, arr, got[i], want[i])
			}
		}
	})
}
