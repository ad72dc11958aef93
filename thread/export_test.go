package thread

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/hydrate"
)

// KeepEveryFold has the service keep the fold of every branch it builds, however small, for
// the duration of t (the default keeps those of branches from foldMinBytes on).
func KeepEveryFold(t testing.TB) {
	old := foldMinBytes
	foldMinBytes = 0
	t.Cleanup(func() { foldMinBytes = old })
}

// CorruptRecord returns an encoded version 2 checkpoint record changed as how says, for the
// tests of package thread_test: "keep-more" (the first delta keeps more than its parent has),
// "checksum" (another sum), "seg:<run>" (names another segment).
func CorruptRecord(data []byte, how string) []byte {
	rec, err := decodeRecord(data, false)
	if err != nil {
		panic(err)
	}
	switch {
	case how == "keep-more":
		rec.Deltas[0].KeepM += 1000
	case how == "checksum":
		rec.Sum = "1-00000000"
	case len(how) > 4 && how[:4] == "seg:":
		rec.Seg = how[4:]
	default:
		panic(how)
	}
	return encodeRecord(rec)
}

// PackRecord returns an encoded version 2 checkpoint record as a packed (version 3) one, with
// its CRC changed when badCRC.
func PackRecord(data []byte, badCRC bool) []byte {
	rec, err := decodeRecord(data, false)
	if err != nil {
		panic(err)
	}
	rec.Packed = true
	p := encodeRecord(rec)
	if badCRC {
		header := len(encodeRecord(&checkpointRecord{Sum: rec.Sum, IDHash: rec.IDHash, IDCount: rec.IDCount, Seg: rec.Seg})) - 2
		_, n := binary.Uvarint(p[header:])
		p[header+n] ^= 1
	}
	return p
}

// SetSegmentMinBytes sets the delta budget of small segments for the test (not parallel).
func SetSegmentMinBytes(t testing.TB, n int) {
	old := segmentMinBytes
	segmentMinBytes = n
	t.Cleanup(func() { segmentMinBytes = old })
}

// RecordSegment returns the segment an encoded version 2 or 3 record names ("" for a segment
// record itself).
func RecordSegment(data []byte) string {
	rec, err := decodeRecord(data, true)
	if err != nil {
		panic(err)
	}
	return rec.Seg
}

// HydrationInputs returns what hydration adds to a request for a branch's compacted events,
// both ways: read from its snapshots (ok false when the branch has not that shape) and
// replayed.
func HydrationInputs(events []compact.Event) (fast hydrate.Branch, ok bool, replayed hydrate.Branch, err error) {
	fast, ok = snapshotInput(events, nil)
	replayed, _, err = replayedInput("", events)
	if ok {
		// The same from the messages split as a branch in memory holds them.
		if msgs := flatten(events).Msgs; msgs != nil {
			if b, ok2 := snapshotInput(events, msgs); !ok2 || !slices.EqualFunc(b.Messages, fast.Messages, func(x, y json.RawMessage) bool { return bytes.Equal(x, y) }) || !bytes.Equal(b.State, fast.State) {
				return b, ok2, fast, errors.New("the split messages answer otherwise")
			}
		}
	}
	return fast, ok, replayed, err
}
