package recorder

import (
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
)

// FuzzDecodeEntry: decodeEntry never panics on a damaged entry, and a run's events packed by
// appendEntries decode to themselves, from any position.
func FuzzDecodeEntry(f *testing.F) {
	f.Add("10-0", "3", "\x01A\x01x\x01B\x02yy\x00\x00", int64(0))
	f.Add("5-0", "9", "\x01A", int64(2))
	f.Add("2-0", "2", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", int64(0))
	f.Add("1-0", "", "", int64(0))
	f.Fuzz(func(t *testing.T, id, n, p string, after int64) {
		m := redis.XMessage{ID: id, Values: map[string]any{"n": n, "p": p}}
		last := int64(-1)
		err := decodeEntry(m, after, func(seq int64, typ, frame string) {
			if seq <= after || seq <= last {
				t.Fatalf("seq %d after %d (previous %d)", seq, after, last)
			}
			last = seq
		})
		if err == nil {
			if _, err := entryFirst(m); err != nil {
				t.Fatalf("decodeEntry accepts %q but entryFirst: %v", id, err)
			}
		}
		// Round trip: the bytes as a run's events (frames cut from p), packed and decoded.
		var evs []Event
		for i, seq := 0, int64(1); i < len(p); i, seq = i+1+len(p[i:])/3, seq+1 {
			evs = append(evs, Event{Seq: seq, Type: strconv.Itoa(i), Frame: []byte(p[i : i+1+len(p[i:])/3])})
		}
		var buf []byte
		for _, e := range appendEntries(nil, evs, &buf) {
			var m redis.XMessage
			last, first := e.last, e.last-e.count+1
			if e.ev != nil {
				m = redis.XMessage{ID: strconv.FormatInt(last, 10) + "-0", Values: map[string]any{"t": e.ev.Type, "f": string(e.ev.Frame)}}
			} else {
				m = redis.XMessage{ID: strconv.FormatInt(last, 10) + "-0", Values: map[string]any{"n": strconv.FormatInt(e.count, 10), "p": string(e.packed)}}
			}
			seq := max(after, first-1)
			err := decodeEntry(m, after, func(s int64, typ, frame string) {
				seq++
				ev := evs[s-1]
				if s != seq || typ != ev.Type || frame != string(ev.Frame) {
					t.Fatalf("decoded seq %d %q %q; want seq %d %q %q", s, typ, frame, seq, ev.Type, ev.Frame)
				}
			})
			if err != nil {
				t.Fatalf("decodeEntry(appendEntries) = %v", err)
			}
			if seq != max(after, last) {
				t.Fatalf("decoded up to %d; want %d", seq, max(after, last))
			}
		}
	})
}
