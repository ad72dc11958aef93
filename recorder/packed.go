package recorder

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"sync"
)

// The packed form of a run compacted at rest (RunCompactor): its events, seq 1..n, in one
// value compressed with DEFLATE (compress/flate). A compacted run is read whole (a prelude, a
// history, an export) and never appended to, so one value costs less than a stream or chunks
// (on Redis, a stream entry per event; a stream node is allocated at 4 KB), and the events of
// a run repeat their cursor and much of their JSON, which DEFLATE removes.
//
// Encoding:
//
//	version (1 byte, packVersion), event count (uvarint), body length (uvarint),
//	CRC-32C of the body (4 bytes, big endian), then the body compressed with raw DEFLATE,
//
// where the body is, per event, the type and the frame, each a uvarint length and its bytes.
// unpackEvents checks every length and the CRC of the inflated body: a damaged value is an
// error (errBadPacked), never events.
const packVersion = 1

// maxPackedBody bounds the inflated body a packed value may claim.
const maxPackedBody = 1 << 30

var errBadPacked = errors.New("damaged packed events")

var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.DefaultCompression)
	return w
}}

// packEvents returns the packed form of events, stored as seq 1..len(events) (their Seq is
// ignored).
func packEvents(events []Event) []byte {
	size := 0
	for _, e := range events {
		size += 2*binary.MaxVarintLen32 + len(e.Type) + len(e.Frame)
	}
	body := make([]byte, 0, size)
	for _, e := range events {
		body = binary.AppendUvarint(body, uint64(len(e.Type)))
		body = append(body, e.Type...)
		body = binary.AppendUvarint(body, uint64(len(e.Frame)))
		body = append(body, e.Frame...)
	}
	out := make([]byte, 0, 32+len(body)/3)
	out = append(out, packVersion)
	out = binary.AppendUvarint(out, uint64(len(events)))
	out = binary.AppendUvarint(out, uint64(len(body)))
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(body, castagnoli))
	buf := bytes.NewBuffer(out)
	w := flateWriters.Get().(*flate.Writer)
	w.Reset(buf)
	_, _ = w.Write(body) // a bytes.Buffer does not fail
	_ = w.Close()
	flateWriters.Put(w)
	return buf.Bytes()
}

// packedHeader returns a packed value's event count, body length and CRC, and the compressed
// rest.
func packedHeader(b []byte) (n, size int, sum uint32, rest []byte, err error) {
	if len(b) < 1 || b[0] != packVersion {
		return 0, 0, 0, nil, errBadPacked
	}
	p := b[1:]
	cnt, i := binary.Uvarint(p)
	if i <= 0 {
		return 0, 0, 0, nil, errBadPacked
	}
	p = p[i:]
	l, j := binary.Uvarint(p)
	if j <= 0 || l > maxPackedBody || cnt > l/2 || len(p)-j < 4 {
		return 0, 0, 0, nil, errBadPacked
	}
	p = p[j:]
	return int(cnt), int(l), binary.BigEndian.Uint32(p), p[4:], nil
}

// unpackEvents appends to dst the events of a packed value with seq > after, at most limit in
// all (limit <= 0: no bound). The frames alias one fresh buffer, never b.
func unpackEvents(dst []Event, b []byte, after int64, limit int) ([]Event, error) {
	n, size, sum, rest, err := packedHeader(b)
	if err != nil {
		return dst, err
	}
	if n == 0 {
		if size != 0 {
			return dst, errBadPacked
		}
		return dst, nil
	}
	br := bytes.NewReader(rest) // an io.ByteReader: DEFLATE reads no further than its end
	r := flate.NewReader(br)
	// Read up to one byte more than the header says (memory grows with what really inflates,
	// not with a damaged header's claim): the body must end exactly there, with DEFLATE's end
	// (a cut stream is io.ErrUnexpectedEOF) and the value's.
	body, err := io.ReadAll(io.LimitReader(r, int64(size)+1))
	_ = r.Close()
	if err != nil || len(body) != size || br.Len() != 0 {
		return dst, errBadPacked
	}
	if crc32.Checksum(body, castagnoli) != sum {
		return dst, errBadPacked
	}
	field := func() ([]byte, bool) {
		l, i := binary.Uvarint(body)
		if i <= 0 || l > uint64(len(body)-i) {
			return nil, false
		}
		v := body[i : i+int(l) : i+int(l)]
		body = body[i+int(l):]
		return v, true
	}
	for seq := int64(1); seq <= int64(n); seq++ {
		typ, ok1 := field()
		frame, ok2 := field()
		if !ok1 || !ok2 {
			return dst, errBadPacked
		}
		if seq > after && (limit <= 0 || len(dst) < limit) {
			dst = append(dst, Event{Seq: seq, Type: string(typ), Frame: frame})
		}
	}
	if len(body) != 0 {
		return dst, errBadPacked
	}
	return dst, nil
}
