package thread

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/agui-proxy/agui-proxy/compact"
)

// KeptEvents is a run's events as the process pumping it recorded them, kept in memory so
// that the checkpoint at the run's end (Service.CheckpointEnded) is built without reading the
// run back from the store. It holds each event's JSON data only (not its SSE frame, id line
// or store record), and of that only what differs from the event before it: the bytes
// between the prefix and the suffix the two share. A text delta's event repeats its
// predecessor but for the delta (the type, the message id), so keeping a streamed answer costs
// about its text and 20 bytes per event, in byte chunks the garbage collector does not scan.
//
// Events are added in seq order, one per recorded event (Add); the checkpoint uses them when
// they are exactly the run's events 1..LastSeq (Len equals the run's last seq), and reads the
// run back otherwise. The zero value is empty and ready. Not safe for concurrent use.
type KeptEvents struct {
	chunks [][]byte
	spans  []keptSpan
	last   []byte // the data of the last event added (what the next one is kept against)
	own    []byte // last's bytes when they are a copy (a large event without shared bytes is last in its chunk)
	cost   int64
	// tooLarge: an event of 4 GiB or more was added (past what a span holds); Len is then -1,
	// so the checkpoint reads the run back.
	tooLarge bool
}

// keptSpan is one event: the first pre bytes of the previous event's data, then n bytes at
// off in chunk, then the last suf bytes of the previous event's data.
type keptSpan struct{ chunk, off, n, pre, suf uint32 }

// notEvent marks a record whose frame is not a JSON event (ParseRecords skips those too).
const notEvent = ^uint32(0)

// Chunk sizes: a run starts small (a chat turn is a few KB) and doubles up to maxKeptChunk; an
// event's bytes larger than the chunk they would start get a chunk of their own size.
const (
	minKeptChunk = 512
	maxKeptChunk = 64 << 10
	keptSpanSize = 20
)

// Add keeps the next event of the run: typ is the type the store records it with ("" for a
// frame whose data is not a JSON event) and data its JSON (not retained: the bytes it keeps
// are copies).
func (k *KeptEvents) Add(typ string, data []byte) {
	if typ == "" || uint64(len(data)) >= uint64(notEvent) {
		k.tooLarge = k.tooLarge || typ != ""
		k.addSpan(keptSpan{chunk: notEvent})
		return
	}
	pre := sharedPrefix(k.last, data)
	suf := sharedSuffix(k.last[pre:], data[pre:])
	mid := data[pre : len(data)-suf]
	last := len(k.chunks) - 1
	if last < 0 || cap(k.chunks[last])-len(k.chunks[last]) < len(mid) {
		size := minKeptChunk
		if last >= 0 {
			size = min(2*cap(k.chunks[last]), maxKeptChunk)
		}
		size = max(size, len(mid))
		k.chunks = append(k.chunks, make([]byte, 0, size))
		k.cost += int64(size) + 24 // the chunk, and its slice header
		last++
	}
	c := k.chunks[last]
	k.chunks[last] = append(c, mid...)
	k.addSpan(keptSpan{chunk: uint32(last), off: uint32(len(c)), n: uint32(len(mid)), pre: uint32(pre), suf: uint32(suf)})
	if len(mid) == len(data) && len(data) > minKeptChunk {
		k.last = k.chunks[last][len(c):len(k.chunks[last]):len(k.chunks[last])] // read only
		return
	}
	had := cap(k.own)
	k.own = append(k.own[:0], data...)
	k.cost += int64(cap(k.own) - had)
	k.last = k.own
}

// sharedPrefix returns the length of the longest common prefix of a and b.
func sharedPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// sharedSuffix returns the length of the longest common suffix of a and b.
func sharedSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n {
		if x := binary.BigEndian.Uint64(a[len(a)-i-8:]) ^ binary.BigEndian.Uint64(b[len(b)-i-8:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
		i += 8
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}

func (k *KeptEvents) addSpan(s keptSpan) {
	if len(k.spans) == cap(k.spans) {
		old := cap(k.spans)
		k.spans = append(k.spans, s)
		k.cost += int64(cap(k.spans)-old) * keptSpanSize
		return
	}
	k.spans = append(k.spans, s)
}

// Len returns the number of events added: the seq of the last one (-1 once an event too
// large to keep was added).
func (k *KeptEvents) Len() int64 {
	if k == nil {
		return 0
	}
	if k.tooLarge {
		return -1
	}
	return int64(len(k.spans))
}

// Cost returns the bytes k holds: its chunks' and its bookkeeping's capacity.
func (k *KeptEvents) Cost() int64 {
	if k == nil {
		return 0
	}
	return k.cost
}

// Events returns the kept events parsed as ParseRecords parses the same records read from the
// store: records that are not a JSON event are left out. Their bytes are a copy, one buffer
// for all of them, never k's.
func (k *KeptEvents) Events() []compact.Event {
	events, _ := k.events()
	return events
}

// events is Events, and the buffer the events' bytes are in.
func (k *KeptEvents) events() ([]compact.Event, []byte) {
	if k == nil {
		return nil, nil
	}
	size := 0
	for _, s := range k.spans {
		if s.chunk != notEvent {
			size += int(s.pre + s.n + s.suf)
		}
	}
	// Each event is rebuilt from the one before it in buf, which never grows past size: the
	// previous event's bytes stay where they are.
	buf := make([]byte, 0, size)
	var prev []byte
	events := make([]compact.Event, 0, len(k.spans))
	for _, s := range k.spans {
		if s.chunk == notEvent {
			continue
		}
		at := len(buf)
		buf = append(buf, prev[:s.pre]...)
		buf = append(buf, k.chunks[s.chunk][s.off:s.off+s.n]...)
		buf = append(buf, prev[len(prev)-int(s.suf):]...)
		prev = buf[at:len(buf):len(buf)]
		if ev, err := compact.ParseEvent(prev); err == nil {
			events = append(events, ev)
		}
	}
	return withoutContinuedFinishes(events), buf
}

// unalias gives every event of events whose bytes are in buf bytes of its own, so that what
// outlives the call (a branch kept in memory) does not hold all of buf.
func unalias(events []compact.Event, buf []byte) {
	if cap(buf) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf[:1])))
	hi := lo + uintptr(cap(buf))
	for i := range events {
		if len(events[i].Raw) == 0 {
			continue
		}
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(events[i].Raw))); p >= lo && p < hi {
			events[i].Raw = bytes.Clone(events[i].Raw)
		}
	}
}
