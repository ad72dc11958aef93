package thread

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync/atomic"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/agui/jsonscan"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// Checkpoint format versions. Version 1 stored every run's whole compacted branch, so the
// checkpoints of a thread grew with the square of its length; it is still read. Version 2
// (this file) stores the branches of a thread in segments:
//
//   - a segment record, kept as the checkpoint of its base run, holds the base run's branch
//     (its compacted events, with the one MESSAGES_SNAPSHOT split into its messages) and one
//     delta per later run of the segment: the run's branch as "keep the first ke events and km
//     messages of the parent's branch, then these events and these messages";
//   - every other run's checkpoint is a small pointer naming its segment.
//
// A run's delta is appended to its segment as stored (Store.WriteCheckpoints, deltaFrame), so
// a run's end writes the bytes of its delta and of its pointer, not its segment's, which grow
// with the thread; a packed segment, or one the store no longer has, is written whole.
// A segment takes deltas until their bytes pass the larger of segmentGrowth times its base's
// bytes and segmentMinBytes; the next run then starts a new segment. The bases therefore hold
// at most 1/segmentGrowth of the deltas' bytes, and a thread's checkpoints grow with what the thread holds, not
// with the square of its runs. Reading a branch is two record reads and a splice of the
// deltas on its path (no compaction). Every record carries a checksum of its run's branch,
// checked after the splice: a damaged record, segment or delta is detected and the branch is
// rebuilt from the events, never served. It also carries the count and a hash of the branch's
// message ids (in order), so a run start whose request repeats the branch's messages learns
// that without reading the branch (KnownMessageIDs). Records are encoded in a length-prefixed
// binary form (checkpoint_codec.go) that is read without parsing JSON; version 1 records are
// JSON. Version 3 is a version 2 record with all but its header compressed (DEFLATE, with a
// CRC-32C): a segment is packed when the thread goes on in a newer one (storeCheckpoint), and
// by compaction at rest once the whole thread is at rest (packSegments).
const (
	legacyCheckpointVersion = 1
	checkpointVersion       = 2
	// segmentGrowth is a segment's delta budget in bytes of its base: more stores fewer
	// bases (bytes at rest), less reads a shorter segment for a branch.
	segmentGrowth = 2
)

// segmentMinBytes is the delta budget of a segment whose base is smaller (a variable for
// the tests only).
var segmentMinBytes = 64 << 10

// errCorruptCheckpoint marks a checkpoint that cannot be served: unparseable, inconsistent or
// failing its checksum.
var errCorruptCheckpoint = errors.New("corrupt checkpoint")

// flatBranch is a compacted branch with its MESSAGES_SNAPSHOT split into messages: Events
// holds the events in order, the snapshot's place marked by JSON null, and Msgs its messages.
type flatBranch struct {
	Events []json.RawMessage
	Msgs   []json.RawMessage
}

// branchDelta is one run's branch over its parent's, in the same segment: the parent's first
// KeepE events, then CopyE of its events after skipping SkipE more, then E; the parent's first
// KeepM messages, then M. (A chat run's branch keeps its parent's events up to the snapshot,
// skips the snapshots, copies the parent run's last events and adds its own run.)
type branchDelta struct {
	Run    string
	Parent string
	KeepE  int
	SkipE  int
	CopyE  int
	E      []json.RawMessage
	KeepM  int
	M      []json.RawMessage
}

// checkpointRecord is what the store keeps as one run's checkpoint.
type checkpointRecord struct {
	V int
	// Sum is the checksum of the run's branch (branchSum).
	Sum string
	// IDCount and IDHash describe the ids of the messages a client holds after replaying the
	// branch, in order (idsHash); IDHash is "" when they are unknown.
	IDCount int
	IDHash  string
	// Seg names the run whose record is the segment holding this run's branch; "" when this
	// record is the segment (Base set).
	Seg    string
	Base   *flatBranch
	Deltas []branchDelta
	// Packed records are stored compressed (version 3, see packSegment).
	Packed bool

	// Events is the whole branch of a version 1 record.
	Events []json.RawMessage
}

// loadedBranch is a branch read from a checkpoint (or just computed), with what a child's
// checkpoint needs to extend it.
type loadedBranch struct {
	events []compact.Event
	flat   flatBranch
	rec    *checkpointRecord // the run's own record; nil when not stored
	segRun string            // the run whose record is the segment ("" for none: not extendable)
	seg    *checkpointRecord // the segment record
	ids    []string          // the ids of the branch's messages in order, when computed
	// fold is the compact.Fold whose Events are events, while no child has taken it
	// (Service.extend): the next run's end feeds it the run instead of folding the thread.
	fold atomic.Pointer[compact.Fold]
	// whole is true when the branch is known to hold every event of every run of its lineage:
	// built here from a whole base and a run whose events were all kept or read back without
	// gaps, or checked against the runs' records (BranchInput). False: not known (a branch
	// read from a checkpoint), and hydration checks the lineage's records first.
	whole atomic.Bool
}

const snapshotPrefix = `{"type":"MESSAGES_SNAPSHOT","messages":[`

var jsonNull = json.RawMessage("null")

// flatten splits the last MESSAGES_SNAPSHOT of events into its messages, when the split
// rebuilds the event byte for byte (it does for Compact's output).
func flatten(events []compact.Event) flatBranch { return flattenFold(events, nil) }

// flattenFold is flatten for events that fold's last Events returned (fold nil: unknown):
// the fold knows where the snapshot's messages are, so the snapshot is not scanned.
func flattenFold(events []compact.Event, fold *compact.Fold) flatBranch {
	f := flatBranch{Events: make([]json.RawMessage, len(events))}
	snap := -1
	for i, e := range events {
		f.Events[i] = e.Raw
		if e.Type == agui.MessagesSnapshot {
			snap = i
		}
	}
	if snap < 0 {
		return f
	}
	raw := events[snap].Raw
	if fold != nil {
		if msgs, _, ok := fold.Messages(raw); ok {
			f.Events[snap], f.Msgs = jsonNull, msgs
			return f
		}
	}
	if !bytes.HasPrefix(raw, []byte(snapshotPrefix)) || !bytes.HasSuffix(raw, []byte("]}")) {
		return f
	}
	msgs, ok := splitArray(raw[len(snapshotPrefix)-1 : len(raw)-1])
	if !ok || !bytes.Equal(snapshotRaw(msgs), raw) {
		return f
	}
	f.Events[snap], f.Msgs = jsonNull, msgs
	return f
}

// splitArray splits a compact JSON array into its elements (sub-slices of arr), tracking only
// strings and nesting; flatten checks the split by joining it again.
func splitArray(arr []byte) ([]json.RawMessage, bool) {
	if len(arr) < 2 || arr[0] != '[' || arr[len(arr)-1] != ']' {
		return nil, false
	}
	body := arr[1 : len(arr)-1]
	var out []json.RawMessage
	depth, start, inString := 0, 0, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case inString:
			if i = jsonscan.NextSpecial(body, i); i >= len(body) {
				break
			}
			if body[i] == '\\' {
				i++
			} else {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ',' && depth == 0:
			out = append(out, body[start:i:i])
			start = i + 1
		}
	}
	if inString || depth != 0 {
		return nil, false
	}
	if len(body) > 0 {
		out = append(out, body[start:len(body):len(body)])
	}
	return out, true
}

// snapshotRaw is the MESSAGES_SNAPSHOT event holding msgs.
func snapshotRaw(msgs []json.RawMessage) []byte {
	n := len(snapshotPrefix) + 2
	for _, m := range msgs {
		n += len(m) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, snapshotPrefix...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
	}
	return append(b, "]}"...)
}

// events rebuilds the branch's events.
func (f flatBranch) events() ([]compact.Event, error) {
	out := make([]compact.Event, 0, len(f.Events))
	for _, raw := range f.Events {
		if bytes.Equal(raw, jsonNull) {
			out = append(out, compact.Event{Type: agui.MessagesSnapshot, Raw: snapshotRaw(f.Msgs)})
			continue
		}
		ev, err := compact.ParseEvent(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// bytes is the size of the branch's events and messages.
func (f flatBranch) bytes() int { return rawBytes(f.Events) + rawBytes(f.Msgs) }

func rawBytes(list []json.RawMessage) int {
	n := 0
	for _, r := range list {
		n += len(r) + 1
	}
	return n
}

// diff returns child as a delta over parent.
func diff(parent, child flatBranch) branchDelta {
	d := branchDelta{KeepE: commonPrefix(parent.Events, child.Events), KeepM: commonPrefix(parent.Msgs, child.Msgs)}
	// The parent's events after a few skipped ones (its snapshots) often come next whole.
	for skip := 1; skip <= 3 && d.KeepE+skip < len(parent.Events); skip++ {
		rest := parent.Events[d.KeepE+skip:]
		if len(rest) <= len(child.Events)-d.KeepE && commonPrefix(rest, child.Events[d.KeepE:]) == len(rest) {
			d.SkipE, d.CopyE = skip, len(rest)
			break
		}
	}
	d.E, d.M = detach(child.Events[d.KeepE+d.CopyE:]), detach(child.Msgs[d.KeepM:])
	return d
}

// detach copies list into one buffer of its own. A delta's messages are pieces of its run's
// MESSAGES_SNAPSHOT, which holds the whole thread's: the segment kept in memory
// (recentBranches) holds a delta per run of the segment, and each piece, aliased, kept its
// run's whole snapshot alive (a chat thread's memory grew with the square of its length: 89 MB
// live after 400 runs, not one thread's branch).
func detach(list []json.RawMessage) []json.RawMessage {
	if len(list) == 0 {
		return nil
	}
	out := make([]json.RawMessage, len(list))
	buf := make([]byte, 0, rawBytes(list))
	for i, r := range list {
		buf = append(buf, r...)
		out[i] = buf[len(buf)-len(r) : len(buf) : len(buf)]
	}
	return out
}

func commonPrefix(a, b []json.RawMessage) int {
	n := 0
	for n < len(a) && n < len(b) && bytes.Equal(a[n], b[n]) {
		n++
	}
	return n
}

// applyInPlace turns f (whose slices it owns) into the branch d describes over it.
func (f *flatBranch) applyInPlace(d *branchDelta) error {
	if d.KeepE < 0 || d.SkipE < 0 || d.CopyE < 0 || d.KeepE+d.SkipE+d.CopyE > len(f.Events) || d.KeepM < 0 || d.KeepM > len(f.Msgs) {
		return fmt.Errorf("%w: the delta of run %q keeps more than its parent has", errCorruptCheckpoint, d.Run)
	}
	from := d.KeepE + d.SkipE
	f.Events = append(append(f.Events[:d.KeepE], f.Events[from:from+d.CopyE]...), d.E...) // copy moves down: no overlap hazard
	f.Msgs = append(f.Msgs[:d.KeepM], d.M...)
	return nil
}

// deltaBytes is the size of the deltas of a segment.
func (r *checkpointRecord) deltaBytes() int {
	n := 0
	for i := range r.Deltas {
		n += r.Deltas[i].bytes()
	}
	return n
}

func (d *branchDelta) bytes() int { return rawBytes(d.E) + rawBytes(d.M) + len(d.Run) + len(d.Parent) }

// branchOf splices the branch of run out of segment record seg, whose base is segRun's branch.
func (seg *checkpointRecord) branchOf(run, segRun string) (flatBranch, error) {
	if seg.Base == nil {
		return flatBranch{}, fmt.Errorf("%w: segment of run %q has no base", errCorruptCheckpoint, segRun)
	}
	var path []*branchDelta
	for id := run; id != segRun; {
		i := slices.IndexFunc(seg.Deltas, func(d branchDelta) bool { return d.Run == id })
		if i < 0 || len(path) == len(seg.Deltas) {
			return flatBranch{}, fmt.Errorf("%w: segment of run %q has no path to run %q", errCorruptCheckpoint, segRun, run)
		}
		path = append(path, &seg.Deltas[i])
		id = seg.Deltas[i].Parent
	}
	// One copy of the base, then each delta in place: a delta costs its own size, not the
	// branch's.
	f := flatBranch{Events: slices.Clone(seg.Base.Events), Msgs: slices.Clone(seg.Base.Msgs)}
	for i := len(path) - 1; i >= 0; i-- {
		if err := f.applyInPlace(path[i]); err != nil {
			return flatBranch{}, err
		}
	}
	return f, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// branchSum is the checksum of a branch's events: their count and a CRC-32C over each event's
// length and bytes.
func branchSum(events []compact.Event) string {
	var crc uint32
	var n [binary.MaxVarintLen64]byte
	for _, e := range events {
		crc = crc32.Update(crc, castagnoli, n[:binary.PutUvarint(n[:], uint64(len(e.Raw)))])
		crc = crc32.Update(crc, castagnoli, e.Raw)
	}
	return fmt.Sprintf("%d-%08x", len(events), crc)
}

// idsHash is a hash of a list of message ids in order (SHA-256 over each id's length and
// bytes, 128 bits in hex): equal hashes mean equal lists.
func idsHash(ids []string) string {
	// The hashed bytes are built first and hashed at once: a long thread has thousands of
	// short ids, and a write to the hash per id costs more than the hashing.
	size := 0
	for _, id := range ids {
		size += binary.MaxVarintLen64 + len(id)
	}
	b := make([]byte, 0, size)
	for _, id := range ids {
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// readRecord reads and decodes one run's checkpoint record (headerOnly: for a version 2
// record, only the sum, the message-id count and hash and the segment name).
func (s *Service) readRecord(ctx context.Context, threadID, runID string, headerOnly bool) (*checkpointRecord, error) {
	data, err := s.store.Checkpoint(ctx, threadID, runID)
	if err != nil {
		return nil, err
	}
	if len(data) > 0 && data[0] == '{' {
		// JSON: version 1 (or a version this build does not know).
		var v1 struct {
			V      int               `json:"v"`
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(data, &v1); err != nil {
			return nil, fmt.Errorf("%w of run %q: %v", errCorruptCheckpoint, runID, err)
		}
		if v1.V != legacyCheckpointVersion {
			return nil, fmt.Errorf("%w: checkpoint of run %q has the unknown version %d", errCorruptCheckpoint, runID, v1.V)
		}
		return &checkpointRecord{V: legacyCheckpointVersion, Events: v1.Events}, nil
	}
	rec, err := decodeRecord(data, headerOnly)
	if err != nil {
		return nil, fmt.Errorf("%w of run %q: %v", errCorruptCheckpoint, runID, err)
	}
	return rec, nil
}

// loadBranch reads the branch through runID from its checkpoint. Errors: recorder.ErrNotFound
// (no checkpoint), errCorruptCheckpoint, store errors.
func (s *Service) loadBranch(ctx context.Context, threadID, runID string) (*loadedBranch, error) {
	rec, err := s.readRecord(ctx, threadID, runID, false)
	if err != nil {
		return nil, err
	}
	if rec.V == legacyCheckpointVersion {
		events := make([]compact.Event, 0, len(rec.Events))
		for _, raw := range rec.Events {
			ev, err := compact.ParseEvent(raw)
			if err != nil {
				return nil, fmt.Errorf("%w of run %q: %v", errCorruptCheckpoint, runID, err)
			}
			events = append(events, ev)
		}
		return &loadedBranch{events: events, flat: flatten(events), rec: rec}, nil
	}
	seg, segRun := rec, runID
	if rec.Seg != "" {
		segRun = rec.Seg
		if seg, err = s.readRecord(ctx, threadID, segRun, false); err != nil {
			if errors.Is(err, recorder.ErrNotFound) {
				return nil, fmt.Errorf("%w: the segment of run %q (run %q's checkpoint) is gone", errCorruptCheckpoint, runID, segRun)
			}
			return nil, err
		}
		if seg.V != checkpointVersion || seg.Seg != "" {
			return nil, fmt.Errorf("%w: run %q's checkpoint names run %q, which holds no segment", errCorruptCheckpoint, runID, segRun)
		}
	}
	flat, err := seg.branchOf(runID, segRun)
	if err != nil {
		return nil, err
	}
	events, err := flat.events()
	if err != nil {
		return nil, fmt.Errorf("%w of run %q: %v", errCorruptCheckpoint, runID, err)
	}
	if sum := branchSum(events); sum != rec.Sum {
		return nil, fmt.Errorf("%w: the branch of run %q has checksum %s, its checkpoint says %s", errCorruptCheckpoint, runID, sum, rec.Sum)
	}
	return &loadedBranch{events: events, flat: flat, rec: rec, segRun: segRun, seg: seg}, nil
}

// storeCheckpoint stores the checkpoint of runID, whose branch is events (the last Events of
// fold, when not nil: the branch keeps it for the next run) and whose parent's branch is
// parent (nil when unknown): as a delta in the parent's segment while the segment
// has room, else as the base of a new segment. It returns the branch as stored, for a child.
func (s *Service) storeCheckpoint(ctx context.Context, threadID, runID string, events []compact.Event, fold *compact.Fold, parent *loadedBranch, parentRun string) *loadedBranch {
	b := &loadedBranch{events: events, flat: flattenFold(events, fold)}
	b.fold.Store(fold)
	rec := &checkpointRecord{V: checkpointVersion, Sum: branchSum(events)}
	if ids, err := branchMessageIDs(events, b.flat, fold); err == nil {
		rec.IDCount, rec.IDHash, b.ids = len(ids), idsHash(ids), ids
	}
	b.rec = rec
	if parent != nil && parent.seg != nil && parent.segRun != runID {
		d := diff(parent.flat, b.flat)
		d.Run, d.Parent = runID, parentRun
		seg := *parent.seg
		seg.Packed = false // a segment runs extend is stored unpacked (packSegments)
		seg.Deltas = slices.DeleteFunc(slices.Clone(seg.Deltas), func(x branchDelta) bool { return x.Run == runID })
		if seg.deltaBytes()+d.bytes() <= max(segmentGrowth*seg.Base.bytes(), segmentMinBytes) {
			seg.Deltas = append(seg.Deltas, d)
			rec.Seg = parent.segRun
			stored, err := s.putSegmentDelta(ctx, threadID, runID, parent, &seg, &d, rec)
			if stored {
				b.segRun, b.seg = parent.segRun, &seg
			}
			if err != nil {
				s.log.Warn("could not store a checkpoint", "thread_id", threadID, "run_id", runID, "segment_run_id", parent.segRun, "segment_stored", stored, "err", err)
			}
			return b
		}
	}
	rec.Base = &b.flat
	if err := s.putRecord(ctx, threadID, runID, rec); err != nil {
		s.log.Warn("could not store a checkpoint", "thread_id", threadID, "run_id", runID, "err", err)
		return b
	}
	b.segRun, b.seg = runID, rec
	if parent != nil && parent.seg != nil && !parent.seg.Packed && parent.segRun != runID {
		// The parent's segment had no room for this run: the thread goes on in this one, so
		// that one is read for time travel and the like from now on, and stored packed.
		if err := s.packSegment(ctx, threadID, parent.segRun); err != nil {
			s.log.Warn("could not pack a checkpoint segment", "thread_id", threadID, "run_id", parent.segRun, "err", err)
		}
	}
	return b
}

// putSegmentDelta stores seg, parent's segment with d added, then runID's pointer rec, in one
// store call: the segment by appending d to it as stored (the bytes of one run's delta, where
// the segment's grow with the thread), or, when that segment is packed or not there, by
// writing seg whole. The segment goes first: a pointer stored without it is detected and
// rebuilt. stored tells whether the segment was.
func (s *Service) putSegmentDelta(ctx context.Context, threadID, runID string, parent *loadedBranch, seg *checkpointRecord, d *branchDelta, rec *checkpointRecord) (stored bool, err error) {
	pointer := recorder.CheckpointWrite{RunID: runID, Data: encodeRecord(rec)}
	if !parent.seg.Packed {
		n, err := s.store.WriteCheckpoints(ctx, threadID, []recorder.CheckpointWrite{
			{RunID: parent.segRun, Data: deltaFrame(d), Append: true, Prefix: recordMagic}, pointer})
		if n > 0 || !errors.Is(err, recorder.ErrNotFound) {
			return n > 0, err
		}
	}
	n, err := s.store.WriteCheckpoints(ctx, threadID, []recorder.CheckpointWrite{{RunID: parent.segRun, Data: encodeRecord(seg)}, pointer})
	return n > 0, err
}

func (s *Service) putRecord(ctx context.Context, threadID, runID string, rec *checkpointRecord) error {
	return s.store.PutCheckpoint(ctx, threadID, runID, encodeRecord(rec))
}

// orderedMessageIDs returns the ids of the messages a client holds after replaying events, in
// the client's order.
func orderedMessageIDs(events []compact.Event) ([]string, error) {
	messages, _, err := compact.Replay(events)
	if err != nil {
		return nil, err
	}
	return compact.MessageIDs(messages), nil
}

// quietAfterSnapshot lists the event types that change no message: when only they follow a
// branch's MESSAGES_SNAPSHOT (as in a compacted ended branch), its messages are the snapshot's.
var quietAfterSnapshot = map[string]bool{
	agui.StateSnapshot: true, agui.StateDelta: true, agui.StepStarted: true, agui.StepFinished: true,
	agui.Custom: true, agui.Raw: true, agui.RunFinished: true, agui.RunError: true,
}

// branchMessageIDs is orderedMessageIDs for a branch and its flat form: read from the
// snapshot's messages when nothing after the snapshot can change them, else replayed. fold,
// when not nil, is the fold whose last Events are events: it knows the snapshot's ids.
func branchMessageIDs(events []compact.Event, f flatBranch, fold *compact.Fold) ([]string, error) {
	snap := -1
	for i, raw := range f.Events {
		if bytes.Equal(raw, jsonNull) {
			snap = i
		}
	}
	if snap < 0 {
		return orderedMessageIDs(events)
	}
	for _, e := range events[snap+1:] {
		if !quietAfterSnapshot[e.Type] {
			return orderedMessageIDs(events)
		}
	}
	raw := events[snap].Raw
	if fold != nil {
		if _, ids, ok := fold.Messages(raw); ok {
			return ids, nil
		}
	}
	return compact.MessageIDs(raw[len(snapshotPrefix)-1 : len(raw)-1]), nil
}
