package thread

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
)

// The encoding of a version 2 checkpoint record: the magic, then
//
//	sum, ids (strings), n (uvarint), seg (string),
//	base flag (0 or 1) [, base events (list), base messages (list)],
//	delta count, then per delta: run, parent (strings), ke, se, ce, km (uvarints), e, m (lists)
//
// then any number of appended deltas, each deltaFrameTag and a delta as above (a segment takes
// a run's delta by an append, see deltaFrame), where a string is a uvarint length and its
// bytes and a list a uvarint count and that many strings. Decoding is a walk over the bytes:
// the events and messages it returns alias the record (records are never modified), so a
// segment costs no JSON parse to read.
//
// A packed record (version 3, packedRecordMagic; a segment of runs compacted at rest, see
// packSegments) has the same header, then the rest compressed: its length (uvarint), the
// CRC-32C of its bytes (4 bytes, big endian) and the bytes in raw DEFLATE. Reading it inflates
// the rest (its header alone is read without), checks the length and the CRC, then walks it
// as above: damage is detected before the branch's own checksum is.
var (
	recordMagic       = []byte("AGCP\x02")
	packedRecordMagic = []byte("AGCP\x03")
)

// maxPackedRecord bounds the inflated rest a packed record may claim.
const maxPackedRecord = 1 << 30

var errRecordEncoding = errors.New("malformed checkpoint record")

func appendString(b []byte, s []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendList(b []byte, list []json.RawMessage) []byte {
	b = binary.AppendUvarint(b, uint64(len(list)))
	for _, r := range list {
		b = appendString(b, r)
	}
	return b
}

// encodeRecord returns rec's bytes.
func encodeRecord(rec *checkpointRecord) []byte {
	n := 64
	if rec.Base != nil {
		n += rec.Base.bytes() + 8*(len(rec.Base.Events)+len(rec.Base.Msgs))
	}
	for i := range rec.Deltas {
		d := &rec.Deltas[i]
		n += d.bytes() + 8*(len(d.E)+len(d.M)) + 32
	}
	b := make([]byte, 0, n)
	if rec.Packed {
		b = append(b, packedRecordMagic...)
	} else {
		b = append(b, recordMagic...)
	}
	b = appendString(b, []byte(rec.Sum))
	b = appendString(b, []byte(rec.IDHash))
	b = binary.AppendUvarint(b, uint64(rec.IDCount))
	b = appendString(b, []byte(rec.Seg))
	if !rec.Packed {
		return appendRecordBody(b, rec)
	}
	body := appendRecordBody(nil, rec)
	b = binary.AppendUvarint(b, uint64(len(body)))
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(body, castagnoli))
	buf := bytes.NewBuffer(b)
	w, _ := flate.NewWriter(buf, flate.DefaultCompression)
	_, _ = w.Write(body) // a bytes.Buffer does not fail
	_ = w.Close()
	return buf.Bytes()
}

// appendRecordBody appends what follows a record's header: its base and its deltas.
func appendRecordBody(b []byte, rec *checkpointRecord) []byte {
	if rec.Base == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendList(b, rec.Base.Events)
		b = appendList(b, rec.Base.Msgs)
	}
	b = binary.AppendUvarint(b, uint64(len(rec.Deltas)))
	for i := range rec.Deltas {
		b = appendDelta(b, &rec.Deltas[i])
	}
	return b
}

func appendDelta(b []byte, d *branchDelta) []byte {
	b = appendString(b, []byte(d.Run))
	b = appendString(b, []byte(d.Parent))
	for _, v := range []int{d.KeepE, d.SkipE, d.CopyE, d.KeepM} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = appendList(b, d.E)
	return appendList(b, d.M)
}

// deltaFrameTag starts a delta appended to a stored (unpacked) segment: a run's delta is
// appended by the store (WriteCheckpoints), in bytes of the delta, instead of writing the
// segment again (whose bytes grow with the thread). A record is its body's deltas, then any
// number of appended frames; a frame for a run that has a delta already replaces it (as
// storeCheckpoint's segment in memory does).
const deltaFrameTag = 0xDF

// deltaFrame returns d as a frame to append to its segment's record.
func deltaFrame(d *branchDelta) []byte {
	return appendDelta([]byte{deltaFrameTag}, d)
}

// recordReader walks an encoded record; the first error sticks.
type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) uvarint() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > 1<<40 {
		r.err = errRecordEncoding
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

// count reads a list length, which cannot exceed the bytes left (each entry takes one).
func (r *recordReader) count() int {
	n := r.uvarint()
	if n > len(r.b) {
		r.err = errRecordEncoding
		return 0
	}
	return n
}

func (r *recordReader) bytes() []byte {
	n := r.count()
	if r.err != nil {
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

func (r *recordReader) list() []json.RawMessage {
	n := r.count()
	if r.err != nil || n == 0 {
		return nil
	}
	out := make([]json.RawMessage, n)
	for i := range out {
		out[i] = r.bytes()
	}
	return out
}

// decodeRecord decodes a version 2 or 3 (packed) record; with headerOnly, only the sum, the
// message-id count and hash and the segment name.
func decodeRecord(data []byte, headerOnly bool) (*checkpointRecord, error) {
	packed := bytes.HasPrefix(data, packedRecordMagic)
	if !packed && !bytes.HasPrefix(data, recordMagic) {
		return nil, errRecordEncoding
	}
	r := &recordReader{b: data[len(recordMagic):]}
	rec := &checkpointRecord{V: checkpointVersion, Packed: packed}
	rec.Sum = string(r.bytes())
	rec.IDHash = string(r.bytes())
	rec.IDCount = r.uvarint()
	rec.Seg = string(r.bytes())
	if headerOnly || r.err != nil {
		return rec, r.err
	}
	if packed {
		if r.b = inflateRecordBody(r); r.err != nil {
			return nil, r.err
		}
	}
	switch r.uvarint() {
	case 0:
	case 1:
		rec.Base = &flatBranch{Events: r.list(), Msgs: r.list()}
	default:
		return nil, errRecordEncoding
	}
	n := r.count()
	if r.err == nil && n > 0 {
		rec.Deltas = make([]branchDelta, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		r.delta(&rec.Deltas[i])
	}
	// Appended frames (deltaFrameTag): in an unpacked record only (a packed one ends with its
	// DEFLATE bytes, and the inflated rest with its last delta).
	appended := false
	for !packed && r.err == nil && len(r.b) > 0 {
		if r.b[0] != deltaFrameTag {
			r.err = errRecordEncoding
			break
		}
		r.b = r.b[1:]
		var d branchDelta
		if r.delta(&d); r.err == nil {
			rec.Deltas, appended = append(rec.Deltas, d), true
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errRecordEncoding
	}
	if appended && r.err == nil {
		rec.Deltas = lastDeltaPerRun(rec.Deltas)
	}
	return rec, r.err
}

// lastDeltaPerRun keeps, of deltas naming the same run, the last one, in its place: a frame
// appended for a run that has a delta replaces it, as the segment kept in memory does
// (storeCheckpoint). One pass with a set (a delta per run, thousands in a long segment).
func lastDeltaPerRun(deltas []branchDelta) []branchDelta {
	seen := make(map[string]bool, len(deltas))
	keep := len(deltas)
	for i := len(deltas) - 1; i >= 0; i-- {
		if !seen[deltas[i].Run] {
			seen[deltas[i].Run] = true
			keep--
			deltas[keep] = deltas[i]
		}
	}
	return deltas[keep:]
}

func (r *recordReader) delta(d *branchDelta) {
	d.Run, d.Parent = string(r.bytes()), string(r.bytes())
	d.KeepE, d.SkipE, d.CopyE, d.KeepM = r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
	d.E, d.M = r.list(), r.list()
}

// inflateRecordBody reads the compressed rest of a packed record: its length, CRC and DEFLATE
// bytes, which must end the record.
func inflateRecordBody(r *recordReader) []byte {
	size := r.uvarint()
	if r.err != nil || size > maxPackedRecord || len(r.b) < 4 {
		r.err = errRecordEncoding
		return nil
	}
	sum := binary.BigEndian.Uint32(r.b)
	br := bytes.NewReader(r.b[4:]) // an io.ByteReader: DEFLATE reads no further than its end
	fr := flate.NewReader(br)
	// Up to one byte more than claimed (memory grows with what really inflates): the rest must
	// end exactly there, with DEFLATE's end and the record's.
	body, err := io.ReadAll(io.LimitReader(fr, int64(size)+1))
	_ = fr.Close()
	if err != nil || len(body) != size || br.Len() != 0 || crc32.Checksum(body, castagnoli) != sum {
		r.err = errRecordEncoding
		return nil
	}
	return body
}
