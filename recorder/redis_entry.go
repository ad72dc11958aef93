package recorder

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// A run's stream (<prefix>:{<threadId>}:events:<runId>) holds its events in entries of two
// versions, which readers tell apart by their fields:
//
//   - version 1, one event: id "<seq>-0", fields t (the type) and f (the frame);
//   - version 2, the run's consecutive events of one batch: id "<last seq>-0", fields n (the
//     event count c) and p (per event, a uvarint length and the type, a uvarint length and
//     the frame), holding seqs last-c+1 .. last.
//
// The id of an entry is the seq of its last event, so XRANGE from "<s>-0" returns first the
// entry that holds s (or the first one after it): cursors, resume, export and compaction still
// address single events; a reader drops the events of the first entry at or below where it
// starts. At token rates a run has several events in each batch, and an XADD costs Redis
// about as much for a few events as for one; version 1 data (written before version 2, or a
// lone event) is read the same way.
const (
	// maxEntryEvents bounds the events of one version 2 entry.
	maxEntryEvents = 64
	// maxEntryBytes bounds the packed bytes of one version 2 entry: a larger event goes alone,
	// and a follower's page of entries stays bounded.
	maxEntryBytes = 32 << 10
)

// errBadEntry reports a stream entry that does not decode.
var errBadEntry = errors.New("damaged stream entry")

// entry is one stream entry append.lua is asked to write: events last-count+1 .. last of
// one run, packed when count > 1, else the event itself.
type entry struct {
	last, count int64
	ev          *Event // the event, when count is 1
	packed      frameArg
}

// appendEntries appends to dst the entries of one run's batch of events (in seq order): each
// maximal stretch of consecutive seqs, in entries of at most maxEntryEvents events and
// maxEntryBytes packed bytes. The packed bytes are appended to *buf (the entries alias it).
func appendEntries(dst []entry, evs []Event, buf *[]byte) []entry {
	for i := 0; i < len(evs); {
		j, size := i+1, packedSize(&evs[i])
		for j < len(evs) && j-i < maxEntryEvents && evs[j].Seq == evs[j-1].Seq+1 {
			s := packedSize(&evs[j])
			if size+s > maxEntryBytes {
				break
			}
			size += s
			j++
		}
		if j == i+1 {
			dst = append(dst, entry{last: evs[i].Seq, count: 1, ev: &evs[i]})
			i = j
			continue
		}
		start := len(*buf)
		b := *buf
		for k := i; k < j; k++ {
			b = binary.AppendUvarint(b, uint64(len(evs[k].Type)))
			b = append(b, evs[k].Type...)
			b = binary.AppendUvarint(b, uint64(len(evs[k].Frame)))
			b = append(b, evs[k].Frame...)
		}
		*buf = b
		dst = append(dst, entry{last: evs[j-1].Seq, count: int64(j - i), packed: b[start:len(b):len(b)]})
		i = j
	}
	return dst
}

// packedSize is an event's size in a version 2 entry.
func packedSize(e *Event) int {
	return 2*binary.MaxVarintLen32 + len(e.Type) + len(e.Frame)
}

// decodeEntry calls fn for each event of a stream entry (either version) with a seq above
// after, in seq order; typ and frame alias the reply's strings.
func decodeEntry(m redis.XMessage, after int64, fn func(seq int64, typ, frame string)) error {
	last, err := streamSeq(m.ID)
	if err != nil {
		return err
	}
	p, packed := m.Values["p"].(string)
	if !packed {
		if last > after {
			t, _ := m.Values["t"].(string)
			f, _ := m.Values["f"].(string)
			fn(last, t, f)
		}
		return nil
	}
	ns, _ := m.Values["n"].(string)
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil || n < 1 || n > last {
		return fmt.Errorf("entry %s: %w", m.ID, errBadEntry)
	}
	field := func() (string, bool) {
		l, i := binary.Uvarint([]byte(p[:min(len(p), binary.MaxVarintLen64)]))
		if i <= 0 || l > uint64(len(p)-i) {
			return "", false
		}
		v := p[i : i+int(l)]
		p = p[i+int(l):]
		return v, true
	}
	for seq := last - n + 1; seq <= last; seq++ {
		t, ok1 := field()
		f, ok2 := field()
		if !ok1 || !ok2 {
			return fmt.Errorf("entry %s: %w", m.ID, errBadEntry)
		}
		if seq > after {
			fn(seq, t, f)
		}
	}
	if p != "" {
		return fmt.Errorf("entry %s: %w", m.ID, errBadEntry)
	}
	return nil
}

// entryFirst returns the seq of the first event of a stream entry (either version).
func entryFirst(m redis.XMessage) (int64, error) {
	last, err := streamSeq(m.ID)
	if err != nil {
		return 0, err
	}
	ns, packed := m.Values["n"].(string)
	if !packed {
		return last, nil
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil || n < 1 || n > last {
		return 0, fmt.Errorf("entry %s: %w", m.ID, errBadEntry)
	}
	return last - n + 1, nil
}
