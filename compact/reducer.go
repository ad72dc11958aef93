package compact

// The reducer: a Go mirror of the pipeline @ag-ui/client 1.0.0 runs on every event of a run
// (AbstractAgent.runAgent in src/agent/agent.ts): enforceEvents (src/enforce/enforce.ts,
// enforce.go), transformChunks (src/chunks/transform.ts, chunks.go), verifyEvents
// (src/verify/verify.ts, verify.go) and defaultApplyEvents (src/apply/default.ts, apply.go),
// with a fast path for content deltas beside it (hotpath.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agui-proxy/agui-proxy/agui"
)

// reducer mirrors @ag-ui/client 1.0's pipeline: enforceEvents (unknown types dropped, basic
// schema checks), transformChunks, verifyEvents and defaultApplyEvents.
type reducer struct {
	opts Options

	messages []*message
	byID     map[string]*message
	callIdx  map[string]*message // tool call id -> first owning message
	state    any
	stateSet bool
	fold     bool       // Compact: decide where the fold stops (fold.go); Replay only applies
	sloppy   bool       // ReplayCommonJS: writes into primitives are ignored, not thrown
	held     *heldState // the state's fold stopped
	bytes    int

	// transformChunks
	lanes     map[string]*lane
	laneOrder []string

	// verifyEvents
	first       bool
	runStarted  bool
	runFinished bool
	runError    bool
	openText    map[string]*openItem
	openTool    map[string]*openItem
	openReason  map[string]*openItem
	openSpan    map[string]bool
	steps       map[string]map[string]bool
	subagents   map[string]bool
	seq         int

	hot hotCache
	// keepRendered: appendMessages keeps each message's rendering (message.rendered) and
	// copies those kept; set by a Fold once it has answered Events (one Compact renders once).
	keepRendered bool
	sizeHint     int  // initial capacity for streamed content (appendDelta)
	general      bool // tests: no hot cache, no fastDelta

	cur []byte // raw of the input event being processed
	idx int    // index of the input event being processed
	typ string
}

func newReducer(opts Options) *reducer {
	return &reducer{
		opts:       opts.withDefaults(),
		byID:       map[string]*message{},
		callIdx:    map[string]*message{},
		state:      map[string]any{},
		lanes:      map[string]*lane{},
		openText:   map[string]*openItem{},
		openTool:   map[string]*openItem{},
		openReason: map[string]*openItem{},
		openSpan:   map[string]bool{},
		steps:      map[string]map[string]bool{},
		subagents:  map[string]bool{},
	}
}

func (r *reducer) reject(format string, a ...any) error {
	return &StreamError{Index: r.idx, Type: r.typ, Reason: fmt.Sprintf(format, a...)}
}

// feed runs one recorded event through the pipeline.
func (r *reducer) feed(i int, e *Event, t agui.Kind) error {
	r.idx, r.typ = i, e.Type
	if t == agui.KindUnknown {
		return nil // enforceEvents drops unrecognised types with a warning
	}
	if r.hot.typ == t && !r.general && len(r.lanes) == 0 && r.fastDelta(e.Raw) {
		return nil
	}
	p := pipelineEvent{typ: t, raw: e.Raw}
	scanFields(e.Raw, &p.f)
	r.cur = e.Raw
	if err := r.checkSchema(t, &p.f); err != nil {
		return err
	}
	return r.transform(&p)
}

func (r *reducer) process(e *pipelineEvent) error {
	if r.hot.typ == e.typ && r.hot.typ != agui.KindUnknown && e.f.metadata == nil && string(e.f.messageID) == string(r.hot.id) &&
		string(e.f.toolCallID) == string(r.hot.callID) {
		return r.hotDelta(e)
	}
	r.hot.typ = agui.KindUnknown
	if err := r.verify(e); err != nil {
		return err
	}
	if err := r.apply(e); err != nil {
		return err
	}
	switch e.typ {
	case agui.KindTextMessageContent, agui.KindReasoningMessageContent, agui.KindToolCallArgs:
		if e.f.metadata == nil && !r.general {
			r.rememberDelta(e)
		}
	}
	return nil
}

// openItem is something the verifier considers open at the end of the stream.
type openItem struct {
	kind   string // "text", "tool", "reasoning"
	id     string
	seq    int
	chunk  bool // opened through a *_CHUNK lane that is still open
	role   string
	name   []byte
	parent []byte
	subRun []byte
}

// openItems returns what is open at the end, in opening order.
func (r *reducer) openItems() []*openItem {
	var out []*openItem
	for _, m := range []map[string]*openItem{r.openText, r.openTool, r.openReason} {
		for _, it := range m {
			out = append(out, it)
		}
	}
	slices.SortFunc(out, func(a, b *openItem) int { return a.seq - b.seq })
	// An item is still chunk-driven only if its lane is still open. (The answer is a copy: a
	// Fold's output must not change what it goes on folding.)
	for i, it := range out {
		if it.chunk {
			still := false
			for _, l := range r.lanes {
				if l.kind == it.kind && l.id == it.id {
					still = true
				}
			}
			cp := *it
			cp.chunk = still
			out[i] = &cp
		}
	}
	return out
}

// messagesJSON renders the message list.
func (r *reducer) messagesJSON() []byte { return r.appendMessages(nil) }

// appendMessages appends the message list to dst, growing dst once to about the final size.
func (r *reducer) appendMessages(dst []byte) []byte { return r.appendMessagesAt(dst, nil) }

// appendMessagesAt is appendMessages that, with ends not nil, appends to *ends where each
// message ends in the result.
func (r *reducer) appendMessagesAt(dst []byte, ends *[]int) []byte {
	n := 2
	for _, m := range r.messages {
		if m.rendered != nil {
			n += 1 + len(m.rendered)
			continue
		}
		n += 96 + len(m.content)
		for _, t := range m.toolCalls {
			n += 96 + len(t.args)
		}
	}
	b := bytes.NewBuffer(slices.Grow(dst, n))
	b.WriteByte('[')
	for i, m := range r.messages {
		if i > 0 {
			b.WriteByte(',')
		}
		switch {
		case !r.keepRendered:
			m.write(b)
		case m.rendered != nil:
			b.Write(m.rendered)
		default:
			at := b.Len()
			m.write(b)
			m.rendered = bytes.Clone(b.Bytes()[at:]) // bytes of its own: b is the caller's
		}
		if ends != nil {
			*ends = append(*ends, b.Len())
		}
	}
	b.WriteByte(']')
	return b.Bytes()
}

func (r *reducer) stateJSON() ([]byte, error) { return marshalJS(r.state) }

// Replay applies events like the official client's defaultApplyEvents (after its chunk
// transform and verifier; unknown types dropped as enforceEvents does) starting from no
// messages and state {}, and returns the final messages and state as compact JSON.
//
// Legacy THINKING_* events are ignored: the 1.0 client drops them as unrecognised. A stream
// the client would reject returns the messages and state reached just before the offending
// event together with a *StreamError; input beyond the default limits returns a *LimitError.
func Replay(events []Event) (messages json.RawMessage, state json.RawMessage, err error) {
	return replay(events, false)
}

// ReplayCommonJS is Replay as the client's CommonJS build (what Node loads) applies deltas:
// fast-json-patch's CommonJS module runs in sloppy mode, where a write into a string, number
// or boolean (a move or copy whose inner add lands there, or an operation below a document
// that the delta replaced with a primitive) is ignored instead of failing the delta.
// Replay answers for the ES module build that browser bundlers pick (strict mode). The two
// differ only on such deltas; Compact's output replays equal under both (fold.go).
func ReplayCommonJS(events []Event) (messages json.RawMessage, state json.RawMessage, err error) {
	return replayWith(events, false, true)
}

// replay is Replay; general turns the delta fast paths off (tests compare both).
func replay(events []Event, general bool) (messages json.RawMessage, state json.RawMessage, err error) {
	return replayWith(events, general, false)
}

func replayWith(events []Event, general, sloppy bool) (messages json.RawMessage, state json.RawMessage, err error) {
	r := newReducer(Options{})
	r.general, r.sloppy = general, sloppy
	for i, e := range events {
		if err = r.feed(i, &e, agui.KindOf(e.Type)); err != nil {
			break
		}
	}
	st, serr := r.stateJSON()
	if serr != nil && err == nil {
		err = serr
	}
	return r.messagesJSON(), st, err
}
