package recorder

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The disk store's run and thread records (bucketRuns, bucketThreads) are read and written by
// every batch, once per run it carries: at 2,000 streaming runs, decoding and encoding them as
// JSON took two thirds of a commit's own work (BenchmarkAppendManyRuns). They are written in
// a small binary layout instead, recordV1: a version byte, then each field in a fixed order,
// strings as a uvarint length and their bytes, integers as varints, a boolean as one byte.
// Records written as JSON by earlier versions (they start with '{') are still read, and are
// rewritten in the new layout by the next write of the record.

// recordV1 is the first byte of a record in the binary layout (never '{').
const recordV1 = 0xB1

// errBadRecord reports a stored record that does not decode.
var errBadRecord = errors.New("damaged record")

// record is a disk store record with a binary layout.
type record interface {
	appendRecord(b []byte) []byte
	decodeRecord(v []byte) error
}

// getRecord reads the record at key into a new T (nil when missing).
func getRecord[T any, P interface {
	*T
	record
}](b *bolt.Bucket, key []byte) (*T, error) {
	v := b.Get(key)
	if v == nil {
		return nil, nil
	}
	out := P(new(T))
	if err := decodeRecord(out, v); err != nil {
		return nil, fmt.Errorf("record %q: %w", key, err)
	}
	return out, nil
}

// decodeRecord decodes v, in the binary layout or as JSON, into r.
func decodeRecord(r record, v []byte) error {
	if len(v) > 0 && v[0] == recordV1 {
		return r.decodeRecord(v[1:])
	}
	return json.Unmarshal(v, r)
}

// putRecord writes r at key in the binary layout.
func putRecord(b *bolt.Bucket, key []byte, r record) error {
	return b.Put(key, r.appendRecord([]byte{recordV1}))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// recordReader decodes a binary record; the first error sticks.
type recordReader struct {
	v   []byte
	err error
}

func (r *recordReader) fail() {
	if r.err == nil {
		r.err = errBadRecord
	}
	r.v = nil
}

func (r *recordReader) uvarint() uint64 {
	x, n := binary.Uvarint(r.v)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.v = r.v[n:]
	return x
}

func (r *recordReader) varint() int64 {
	x, n := binary.Varint(r.v)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.v = r.v[n:]
	return x
}

func (r *recordReader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.v)) {
		r.fail()
		return ""
	}
	s := string(r.v[:n])
	r.v = r.v[n:]
	return s
}

func (r *recordReader) bool() bool {
	if len(r.v) == 0 || r.v[0] > 1 {
		r.fail()
		return false
	}
	x := r.v[0] == 1
	r.v = r.v[1:]
	return x
}

// end reports the first error, or trailing bytes.
func (r *recordReader) end() error {
	if r.err == nil && len(r.v) > 0 {
		r.err = errBadRecord
	}
	return r.err
}

func (r *diskRun) appendRecord(b []byte) []byte {
	for _, s := range []string{r.Epoch, r.Parent, r.Status, r.Detail, r.Route, r.Owner} {
		b = appendString(b, s)
	}
	for _, n := range []int64{r.Created, r.Updated, r.Last, r.First, r.Count, r.Trimmed} {
		b = binary.AppendVarint(b, n)
	}
	b = appendString(b, r.Gaps)
	b = appendString(b, r.Node)
	b = binary.AppendVarint(b, r.Lease)
	stop := byte(0)
	if r.Stop {
		stop = 1
	}
	b = append(b, stop)
	b = binary.AppendUvarint(b, r.Idx)
	b = binary.AppendVarint(b, r.Bytes)
	return binary.AppendVarint(b, r.Compacted)
}

func (r *diskRun) decodeRecord(v []byte) error {
	d := recordReader{v: v}
	*r = diskRun{
		Epoch: d.string(), Parent: d.string(), Status: d.string(), Detail: d.string(), Route: d.string(), Owner: d.string(),
		Created: d.varint(), Updated: d.varint(), Last: d.varint(), First: d.varint(), Count: d.varint(), Trimmed: d.varint(),
		Gaps: d.string(), Node: d.string(), Lease: d.varint(), Stop: d.bool(), Idx: d.uvarint(), Bytes: d.varint(),
		Compacted: d.varint(),
	}
	return d.end()
}

func (t *diskThread) appendRecord(b []byte) []byte {
	b = appendString(b, t.Owner)
	b = appendString(b, t.Route)
	b = binary.AppendVarint(b, t.Created)
	b = binary.AppendVarint(b, t.Expires)
	b = binary.AppendUvarint(b, t.Next)
	b = binary.AppendVarint(b, int64(t.Count))
	b = appendString(b, t.Latest)
	b = binary.AppendVarint(b, t.Active)
	return appendString(b, t.Title)
}

func (t *diskThread) decodeRecord(v []byte) error {
	d := recordReader{v: v}
	*t = diskThread{
		Owner: d.string(), Route: d.string(), Created: d.varint(), Expires: d.varint(), Next: d.uvarint(),
		Count: int(d.varint()), Latest: d.string(), Active: d.varint(), Title: d.string(),
	}
	return d.end()
}
