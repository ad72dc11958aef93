package compact

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/panics"
)

// Default limits (Options fields left zero take these; a negative value disables a limit).
const (
	DefaultMaxStateBytes = 8 << 20 // 8 MiB per state document, patch or message content
	DefaultMaxDepth      = 512     // JSON nesting depth of a state document or patch
	DefaultMaxPatchOps   = 10000   // operations per STATE_DELTA / ACTIVITY_DELTA
	DefaultMaxCopyBytes  = 1 << 20 // bytes duplicated by copy operations within one patch
)

// Options configures Compact.
type Options struct {
	// Ephemeral reports whether an event type is live-only (dropped by Compact). nil = default
	// policy: legacy THINKING_* dropped, REASONING_* kept. (The 1.0 client re-ids THINKING_*
	// randomly, so they cannot replay identically; REASONING_* can carry encrypted reasoning
	// an agent needs to continue.)
	Ephemeral func(eventType string) bool

	// MaxStateBytes caps a state snapshot, a patch and a message's streamed content.
	// Zero means DefaultMaxStateBytes; negative means no limit.
	MaxStateBytes int
	// MaxDepth caps the nesting depth of state documents and patches. Zero means
	// DefaultMaxDepth; negative means no limit.
	MaxDepth int
	// MaxPatchOps caps the operations of one delta. Zero means DefaultMaxPatchOps; negative
	// means no limit.
	MaxPatchOps int
	// MaxCopyBytes caps the bytes one patch may duplicate with copy operations (the client
	// has no such limit: past it Compact refuses the thread rather than diverge). Zero means
	// DefaultMaxCopyBytes; negative means no limit.
	MaxCopyBytes int
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		} else if *v < 0 {
			*v = 0
		}
	}
	def(&o.MaxStateBytes, DefaultMaxStateBytes)
	def(&o.MaxDepth, DefaultMaxDepth)
	def(&o.MaxPatchOps, DefaultMaxPatchOps)
	def(&o.MaxCopyBytes, DefaultMaxCopyBytes)
	return o
}

// DefaultEphemeral is the default policy: the retired THINKING_* events are live-only.
func DefaultEphemeral(eventType string) bool { return strings.HasPrefix(eventType, "THINKING_") }

func (o Options) ephemeral(t string) bool {
	if o.Ephemeral == nil {
		return DefaultEphemeral(t)
	}
	return o.Ephemeral(t)
}

// folded reports whether Compact folds an event type into the snapshots (everything that
// changes messages or state) rather than passing it through.
var folded = [agui.NumKinds]bool{
	agui.KindTextMessageStart: true, agui.KindTextMessageContent: true, agui.KindTextMessageEnd: true, agui.KindTextMessageChunk: true,
	agui.KindToolCallStart: true, agui.KindToolCallArgs: true, agui.KindToolCallEnd: true, agui.KindToolCallChunk: true, agui.KindToolCallResult: true,
	agui.KindStateSnapshot: true, agui.KindStateDelta: true, agui.KindMessagesSnapshot: true, agui.KindActivitySnapshot: true, agui.KindActivityDelta: true,
	agui.KindReasoningMessageStart: true, agui.KindReasoningMessageContent: true, agui.KindReasoningMessageEnd: true,
	agui.KindReasoningMessageChunk: true, agui.KindReasoningEncryptedValue: true,
}

// run is one run of a folded stream: its RUN_STARTED, the events that pass through it and
// its terminal events, each already in the form the output carries (compact JSON, the
// RUN_STARTED with input.messages emptied), so that a Fold's output costs what the thread's
// runs hold, not a pass over their bytes.
type run struct {
	start *Event
	pass  []Event
	terms []Event
}

// Compact turns a thread's events (every run of the branch, in order; the last run may still
// be in progress) into the smallest stream that the official client replays to the same
// messages and state.
//
// Output, all compact JSON valid for "data: <json>\n\n" framing:
//   - every run keeps its RUN_STARTED (with input.messages emptied: the history travels in
//     the snapshot, and messages appended before it would land out of order) and its
//     RUN_FINISHED / RUN_ERROR;
//   - events that change neither messages nor state and are not Ephemeral (STEP_*, CUSTOM,
//     RAW, REASONING_START/END, SUBAGENT_*, unknown types) pass through in their run;
//   - the last run that has a RUN_STARTED carries one MESSAGES_SNAPSHOT with every message
//     (user messages included) and one STATE_SNAPSHOT folded across the whole thread;
//   - where a delta could end differently in the browser build, the Node build or an RFC 6902
//     client (fold.go), the fold stops: the STATE_SNAPSHOT (or the activity message in the
//     MESSAGES_SNAPSHOT) holds the document before that delta, and the raw deltas from it on
//     follow the snapshot;
//   - if the last run is still in progress, each open message, tool call and reasoning
//     message is re-opened after the snapshot with a START (or a CHUNK, if it was streaming
//     through chunks) with the same id, so the live tail continues it, including those a
//     MESSAGES_SNAPSHOT removed while the client's verifier still has them open.
//
// Bad input: a stream the official client would reject returns a *StreamError (wrapping
// ErrRejected), input past a limit a *LimitError; callers replay such threads raw. A delta
// that does not apply, content for an unknown message, or a result for an unknown call is
// folded exactly as the client's reducer handles it (skipped, ignored, appended). Compact is
// idempotent and never panics.
func Compact(events []Event, opts Options) ([]Event, error) {
	f := NewFold(opts)
	if err := f.Feed(events); err != nil {
		return nil, err
	}
	return f.Events()
}

// A Fold is Compact over a stream that arrives in parts: Feed the events as they come, and
// Events returns what Compact returns for all the events fed so far. A thread whose runs end
// one after the other keeps one Fold and feeds it each run, so a run's end costs what the run
// holds and what the output holds, not a new fold of the whole thread:
//
//	f.Feed(a); f.Feed(b); f.Events()  ==  Compact(a ++ b)
//
// byte for byte, with Events callable between the Feeds. A Fold holds the messages and state
// it folded, and the bytes of fed events it keeps in them (slices of the fed events' Raw):
// callers must not modify those bytes afterwards. Not safe for concurrent use.
type Fold struct {
	r    *reducer
	opts Options
	runs []*run
	n    int   // events fed so far: the index the next one has in the whole stream
	err  error // the error a Feed returned: the Fold is spent

	// The MESSAGES_SNAPSHOT of the last Events, where its messages end in it, and how many
	// events were fed then; Messages splits it and reads the ids on demand (snapDone).
	snap     []byte
	snapEnds []int
	snapFed  int
	snapDone bool
	snapMsgs []json.RawMessage
	snapIDs  []string
}

// NewFold returns an empty Fold with opts (Compact's options).
func NewFold(opts Options) *Fold {
	opts = opts.withDefaults()
	r := newReducer(opts)
	r.fold = true
	return &Fold{r: r, opts: opts}
}

// Feed folds events after those fed before. An error is the one Compact returns for the
// stream fed so far (a *StreamError's Index counts from the first event ever fed); the Fold
// is then spent, and every later Feed and Events returns that error.
func (f *Fold) Feed(events []Event) (err error) {
	if f.err != nil {
		return f.err
	}
	defer f.contain(&err)
	if panics.Hooked() {
		for _, e := range events {
			panics.Probe(panics.Compact, string(e.Raw))
		}
	}
	r, opts := f.r, f.opts
	for i := range events {
		at := f.n
		f.n++
		e := events[i]
		t := agui.KindOf(e.Type)
		if (t == agui.KindUnknown || opts.Ephemeral != nil) && opts.ephemeral(e.Type) {
			continue // (the default policy keeps every AG-UI 1.0 type)
		}
		if err := r.feed(at, &e, t); err != nil {
			f.err = err
			return err
		}
		if t == agui.KindUnknown && len(f.runs) == 0 {
			continue // nothing to attach it to; the client drops it anyway
		}
		switch t {
		case agui.KindRunStarted:
			start := mustEvent("RUN_STARTED", emptyInputMessages(compactJSON(e.Raw)))
			f.runs = append(f.runs, &run{start: &start})
		case agui.KindRunFinished, agui.KindRunError:
			if len(f.runs) == 0 || (len(f.runs[len(f.runs)-1].terms) > 0 && f.runs[len(f.runs)-1].start == nil) {
				f.runs = append(f.runs, &run{})
			}
			last := f.runs[len(f.runs)-1]
			last.terms = append(last.terms, Event{Type: e.Type, Raw: compactJSON(e.Raw)})
		default:
			if !folded[t] && len(f.runs) > 0 {
				last := f.runs[len(f.runs)-1]
				last.pass = append(last.pass, Event{Type: e.Type, Raw: compactJSON(e.Raw)})
			}
		}
	}
	return nil
}

// contain is deferred by the Fold's entry points: a panic (a bug, or a dependency's on input
// it should accept) spends the Fold with a *panics.Error, counted and logged once, which its
// callers handle as any other error (they replay the thread raw), instead of ending the
// process.
func (f *Fold) contain(err *error) {
	if e := panics.Recovered(panics.Compact, recover(), nil); e != nil {
		f.err, *err = e, e
	}
}

// Events returns Compact's output for the events fed so far. It does not change what the Fold
// answers: feeding more afterwards is the same as having fed everything before one call (it
// only starts keeping each message's rendering, so that the next call copies those no event
// changed). The events share bytes with what the Fold keeps (the runs' own events); callers
// must not modify them.
func (f *Fold) Events() (_ []Event, err error) {
	if f.err != nil {
		return nil, f.err
	}
	defer f.contain(&err)
	r, runs := f.r, f.runs
	snapAt := -1
	for i, rn := range runs {
		if rn.start != nil {
			snapAt = i
		}
	}
	size := 8
	for _, rn := range runs {
		size += 1 + len(rn.pass) + len(rn.terms)
	}
	out := make([]Event, 0, size)
	for i, rn := range runs {
		if rn.start != nil {
			out = append(out, *rn.start)
		}
		if i == snapAt {
			if len(r.messages) > 0 {
				out = append(out, f.snapshotEvent())
			}
			switch {
			case r.held != nil:
				// The fold stopped (fold.go): the state before that delta, then the raw deltas.
				out = append(out, mustEvent("STATE_SNAPSHOT", joinBytes(`{"type":"STATE_SNAPSHOT","snapshot":`, r.held.before, `}`)))
				out = append(out, r.held.events...)
			case r.stateSet:
				st, err := r.stateJSON()
				if err != nil {
					return nil, err
				}
				out = append(out, mustEvent("STATE_SNAPSHOT", joinBytes(`{"type":"STATE_SNAPSHOT","snapshot":`, st, `}`)))
			}
		}
		out = append(out, rn.pass...)
		// The raw events of activity messages whose fold stopped (fold.go) follow the last
		// MESSAGES_SNAPSHOT of the output; reopen may add one.
		if i == len(runs)-1 && len(rn.terms) == 0 {
			out = append(out, r.reopen(r.heldActivityEvents())...)
		} else if i == snapAt {
			out = append(out, r.heldActivityEvents()...)
		}
		out = append(out, rn.terms...)
	}
	// From now on each message's rendering is kept: the next Events copies those no event
	// changed. (A Fold asked once, as Compact's, renders once.)
	r.keepRendered = true
	return out, nil
}

// snapshotEvent is the MESSAGES_SNAPSHOT of Events, with where its messages end in it for
// Messages.
func (f *Fold) snapshotEvent() Event {
	ends := slices.Grow(f.snapEnds[:0], len(f.r.messages))
	b := f.r.appendMessagesAt([]byte(snapshotPrefix), &ends)
	b = append(b, '}')
	f.snap, f.snapEnds, f.snapFed, f.snapDone, f.snapMsgs, f.snapIDs = b, ends, f.n, false, nil, nil
	return mustEvent("MESSAGES_SNAPSHOT", b)
}

// splitSnapshot fills snapMsgs and snapIDs for the snapshot of the last Events; the Fold's
// messages must be those it was rendered from (nothing fed since).
func (f *Fold) splitSnapshot() {
	start := len(snapshotPrefix) + 1
	msgs := make([]json.RawMessage, len(f.snapEnds))
	for i, end := range f.snapEnds {
		msgs[i] = f.snap[start:end:end]
		start = end + 1
	}
	// The ids as MessageIDs reads them from the rendered messages: the string value of each
	// one's "id" member (a message holds one: obj.set keeps the last duplicate).
	ids := make([]string, 0, len(f.r.messages))
	for _, m := range f.r.messages {
		if m.snapIDKnown == 0 {
			m.snapIDKnown = -1
			v, _ := m.fields.get("id")
			if s, ok := jsonString(v); ok {
				m.snapID, m.snapIDKnown = m.id, 1
				if string(s) != m.id {
					m.snapID = string(s)
				}
			}
		}
		if m.snapIDKnown > 0 {
			ids = append(ids, m.snapID)
		}
	}
	f.snapMsgs, f.snapIDs, f.snapDone = msgs, ids, true
}

// snapshotPrefix is how a MESSAGES_SNAPSHOT of Compact's starts, up to its messages' array.
const snapshotPrefix = `{"type":"MESSAGES_SNAPSHOT","messages":`

// Messages returns the messages of snapshot, the bytes of a MESSAGES_SNAPSHOT event that the
// last Events returned (its messages array split into its members, each a slice of
// snapshot), and their ids as MessageIDs returns them for that array; ok is false when
// snapshot is not that event, or when events were fed since. A caller that keeps a branch's
// messages apart learns them without scanning the snapshot again. (They are worked out on
// the first call: a Fold asked only for Events, as Compact's, does not pay for them.)
func (f *Fold) Messages(snapshot []byte) (messages []json.RawMessage, ids []string, ok bool) {
	if len(snapshot) == 0 || len(snapshot) != len(f.snap) || &snapshot[0] != &f.snap[0] || f.n != f.snapFed {
		return nil, nil, false
	}
	if !f.snapDone {
		f.splitSnapshot()
	}
	return f.snapMsgs, f.snapIDs, true
}

func joinBytes(a string, b []byte, c string) []byte {
	out := make([]byte, 0, len(a)+len(b)+len(c))
	return append(append(append(out, a...), b...), c...)
}

func (r *reducer) messagesSnapshotEvent() Event {
	b := r.appendMessages([]byte(snapshotPrefix))
	return mustEvent("MESSAGES_SNAPSHOT", append(b, '}'))
}

// reopen re-opens everything the client's verifier considers open at the cut, without
// changing the messages. START-opened items come first; if one of them names a message or
// tool call that the list no longer holds (a MESSAGES_SNAPSHOT removed it while it streamed),
// the START creates it (a tool call on a phantom parent message), so a second
// MESSAGES_SNAPSHOT removes it again. Chunk-opened items come last because a MESSAGES_SNAPSHOT closes chunk
// streams.
//
// held (raw activity events) must follow the last MESSAGES_SNAPSHOT: it goes right after the
// one reopen adds, or first when reopen adds none, so that the re-opening events stay last (a
// CHUNK must be followed directly by the tail's next CHUNK).
func (r *reducer) reopen(held []Event) []Event {
	var starts, chunks []Event
	phantom, chunkPhantom := false, false
	for _, it := range r.openItems() {
		var b bytes.Buffer
		add := func(k string, v []byte) {
			if v != nil {
				b.WriteByte(',')
				b.Write(quote(k))
				b.WriteByte(':')
				b.Write(compactJSON(v))
			}
		}
		var typ string
		switch it.kind {
		case "text":
			typ = "TEXT_MESSAGE_START"
			if it.chunk {
				typ = "TEXT_MESSAGE_CHUNK"
			}
			b.WriteString(`{"type":"` + typ + `"`)
			add("messageId", quote(it.id))
			add("role", quote(it.role))
			add("name", it.name)
			phantom = phantom || r.byID[it.id] == nil
		case "tool":
			if it.chunk && r.callIdx[it.id] == nil && r.toolReopenCollides(it) {
				// A chunk stream's CHUNK must repeat its parentMessageId, so it cannot move
				// to a phantom parent; re-opening would attach the call to a new message
				// whose id is already taken, which no snapshot can undo: leave it closed.
				continue
			}
			typ = "TOOL_CALL_START"
			if it.chunk {
				typ = "TOOL_CALL_CHUNK"
			}
			b.WriteString(`{"type":"` + typ + `"`)
			add("toolCallId", quote(it.id))
			add("toolCallName", it.name)
			if r.callIdx[it.id] == nil && !it.chunk {
				// A MESSAGES_SNAPSHOT removed the call while it streamed (its message may
				// stay, e.g. with toolCalls: []): the verifier still has it open, so the
				// live tail may continue or end it. Start it on a parent no message has:
				// the client creates that message, and the snapshot after the re-opens
				// removes it again, leaving the list as the snapshot left it.
				add("parentMessageId", quote(r.phantomParent(it.id)))
				phantom = true
			} else {
				add("parentMessageId", it.parent)
				phantom = phantom || r.callIdx[it.id] == nil
			}
		default:
			typ = "REASONING_MESSAGE_START"
			if it.chunk {
				typ = "REASONING_MESSAGE_CHUNK"
			} else if r.byID[it.id] == nil && !r.hasReasoning() && r.openText[it.id] == nil {
				// No message has the id (its START found another message's id and created
				// none, and a MESSAGES_SNAPSHOT removed that one): the START would create a
				// reasoning message that the snapshot after the re-opens keeps (it holds no
				// reasoning message, so it preserves them). A text message of that id first
				// lets the START find one, as it did, and the snapshot removes it again.
				holder := append(append([]byte(`{"type":"TEXT_MESSAGE_START","messageId":`), quote(it.id)...), `,"role":"assistant"}`...)
				end := append(append([]byte(`{"type":"TEXT_MESSAGE_END","messageId":`), quote(it.id)...), '}')
				starts = append(starts, mustEvent("TEXT_MESSAGE_START", holder), mustEvent("TEXT_MESSAGE_END", end))
			}
			b.WriteString(`{"type":"` + typ + `"`)
			add("messageId", quote(it.id))
			if !it.chunk {
				add("role", []byte(`"reasoning"`))
			}
			phantom = phantom || r.byID[it.id] == nil
		}
		add("subagentRunId", it.subRun)
		b.WriteByte('}')
		if it.chunk && r.isPhantom(it) {
			chunkPhantom = true
		}
		if it.chunk {
			chunks = append(chunks, mustEvent(typ, b.Bytes()))
		} else {
			starts = append(starts, mustEvent(typ, b.Bytes()))
		}
	}
	var out []Event
	switch {
	case chunkPhantom:
		// A chunk stream whose message or tool call was replaced while it streamed: the
		// CHUNK must come first to re-create the lane, and the snapshot that removes the
		// phantom it creates then closes the lanes (the live tail restarts them).
		out = append(append(starts, chunks...), r.messagesSnapshotEvent())
		out = append(out, held...)
	case phantom:
		out = append(append(append(starts, r.messagesSnapshotEvent()), held...), chunks...)
	default:
		out = append(append(held, starts...), chunks...)
	}
	return out
}

// emptyInputMessages rewrites RUN_STARTED.input.messages to [] (other bytes untouched).
func emptyInputMessages(raw []byte) []byte {
	in, ok := field(raw, "input")
	if !ok || len(in) == 0 || in[0] != '{' {
		return raw
	}
	msgs, ok := field(in, "messages")
	if !ok || string(msgs) == "[]" {
		return raw
	}
	// msgs aliases raw: splice it out.
	start := len(raw) - len(msgs)
	for i := 0; i+len(msgs) <= len(raw); i++ {
		if &raw[i] == &msgs[0] {
			start = i
			break
		}
	}
	out := make([]byte, 0, len(raw)-len(msgs)+2)
	out = append(out, raw[:start]...)
	out = append(out, "[]"...)
	return append(out, raw[start+len(msgs):]...)
}

// MessageIDs returns the ids of a JSON array of messages, in order (entries without a string
// id are skipped). The proxy uses it to normalize RUN_STARTED.input.messages to the messages
// not already in the thread history.
func MessageIDs(messages json.RawMessage) []string {
	var ids []string
	eachElem(messages, func(m []byte) {
		if s, ok := str(fieldOr(m, "id")); ok {
			ids = append(ids, s)
		}
	})
	return ids
}

// NewMessages returns the members of the JSON array messages whose id is not in known, as a
// compact JSON array (the normalization of RUN_STARTED.input.messages).
func NewMessages(messages json.RawMessage, known map[string]bool) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	n := 0
	eachElem(messages, func(m []byte) {
		if s, ok := str(fieldOr(m, "id")); ok && known[s] {
			return
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.Write(compactJSON(m))
	})
	b.WriteByte(']')
	return b.Bytes()
}

// Open is something still streaming at the end of a stream.
type Open struct {
	// Kind is "text", "tool" or "reasoning".
	Kind string
	// ID is the message id (text, reasoning) or tool call id (tool).
	ID string
	// Chunked reports that it streams through *_CHUNK events.
	Chunked bool
}

// OpenStreams returns the messages, tool calls and reasoning messages still open at the end
// of events (the ones Compact re-opens), in the order they were opened. Ephemeral events are
// skipped as Compact skips them.
func OpenStreams(events []Event, opts Options) ([]Open, error) {
	opts = opts.withDefaults()
	r := newReducer(opts)
	for i, e := range events {
		if opts.ephemeral(e.Type) {
			continue
		}
		if err := r.feed(i, &e, agui.KindOf(e.Type)); err != nil {
			return nil, err
		}
	}
	var out []Open
	for _, it := range r.openItems() {
		out = append(out, Open{Kind: it.kind, ID: it.id, Chunked: it.chunk})
	}
	return out, nil
}

// hasReasoning reports whether a message of the list has the role "reasoning".
func (r *reducer) hasReasoning() bool {
	for _, m := range r.messages {
		if m.role == "reasoning" {
			return true
		}
	}
	return false
}

func (r *reducer) isPhantom(it *openItem) bool {
	if it.kind == "tool" {
		return r.callIdx[it.id] == nil
	}
	return r.byID[it.id] == nil
}

// toolReopenCollides reports whether a TOOL_CALL_START for it would create an assistant
// message whose id another message already has (resolveOrCreateAssistantMessage).
func (r *reducer) toolReopenCollides(it *openItem) bool {
	pid, _ := str(it.parent)
	if pid != "" {
		ex := r.byID[pid]
		if ex == nil || ex.role == "assistant" {
			return false
		}
	}
	return r.byID[it.id] != nil
}

// phantomParent returns a message id that no message has, derived from a tool call id (the
// same for the same list, so Compact stays idempotent).
func (r *reducer) phantomParent(callID string) string {
	id := "agui-proxy.reopen." + callID
	for r.byID[id] != nil {
		id += "~"
	}
	return id
}
