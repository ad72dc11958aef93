package compact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// ErrRejected is wrapped by a *StreamError when the official client would fail the whole
// run: the verifier refuses the event order, a field has the wrong type for the @ag-ui/core
// schema, or the chunk transform cannot attribute a chunk.
var ErrRejected = errors.New("stream rejected by the official client")

// StreamError reports the first event the official client's pipeline would reject.
type StreamError struct {
	Index  int    // position of the event in the input
	Type   string // its type
	Reason string
}

// Error implements error.
func (e *StreamError) Error() string {
	return fmt.Sprintf("event %d (%s): %s", e.Index, e.Type, e.Reason)
}

// Unwrap returns ErrRejected.
func (e *StreamError) Unwrap() error { return ErrRejected }

// LimitError reports input beyond one of Options' limits. Compact does not fold such a
// thread; callers replay it raw.
type LimitError struct {
	Limit string // the Options field name
	Value int
	Max   int
}

// Error implements error.
func (e *LimitError) Error() string {
	return fmt.Sprintf("%s exceeded: %d > %d", e.Limit, e.Value, e.Max)
}

// fields of one event the reducer reads; nil means absent.
type evf struct {
	messageID, toolCallID, toolCallName, parentMessageID, delta, role, name  []byte
	subagentRunID, metadata, rawEvent, snapshot, messages, input, stepName   []byte
	activityType, content, replace, patch, subtype, entityID, encryptedValue []byte
}

// scanFields fills f from the top-level members of the event object raw (already validated),
// the last duplicate winning as in JSON.parse. Known keys are matched in place (match), so the
// common event costs one pass over its values; other keys are skipped and decoded (slot).
func scanFields(raw []byte, f *evf) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return
	}
	i++
	for i < len(raw) {
		switch c := raw[i]; {
		case c == '}':
			return
		case c == ',' || isJSONSpace(c):
			i++
			continue
		case c != '"':
			return // not an object member: Raw did not come from ParseEvent
		}
		dst, n := f.match(raw[i+1:])
		if n > 0 {
			i += n + 2
		} else {
			ks := i
			i = skipString(raw, i)
			if i < ks+2 {
				return
			}
			dst = f.slot(raw[ks+1 : i-1])
		}
		if i < len(raw) && raw[i] != ':' {
			i = skipWS(raw, i)
		}
		if i < len(raw) && raw[i] == ':' {
			i++
		}
		if i < len(raw) && isJSONSpace(raw[i]) {
			i = skipWS(raw, i)
		}
		vs := i
		if i < len(raw) && raw[i] == '"' {
			i = skipString(raw, i)
		} else {
			i = skipValue(raw, i)
		}
		if dst != nil {
			*dst = raw[vs:i]
		}
	}
}

// match recognizes an unescaped known key at the start of b (just past its opening quote)
// and returns its field (nil for "type") and length; n is 0 when b starts with another key.
func (f *evf) match(b []byte) (dst *[]byte, n int) {
	is := func(name string) bool {
		return len(b) > len(name) && b[len(name)] == '"' && string(b[:len(name)]) == name
	}
	if len(b) == 0 {
		return nil, 0
	}
	switch b[0] {
	case 't':
		switch {
		case is("type"):
			return nil, 4
		case is("toolCallId"):
			return &f.toolCallID, 10
		case is("toolCallName"):
			return &f.toolCallName, 12
		}
	case 'm':
		switch {
		case is("messageId"):
			return &f.messageID, 9
		case is("metadata"):
			return &f.metadata, 8
		case is("messages"):
			return &f.messages, 8
		}
	case 'd':
		if is("delta") {
			return &f.delta, 5
		}
	case 'r':
		if is("role") {
			return &f.role, 4
		}
	case 'n':
		if is("name") {
			return &f.name, 4
		}
	case 's':
		if is("subagentRunId") {
			return &f.subagentRunID, 13
		}
	case 'c':
		if is("content") {
			return &f.content, 7
		}
	case 'p':
		if is("parentMessageId") {
			return &f.parentMessageID, 15
		}
	}
	return nil, 0
}

// slot returns the field of f that a top-level member key (raw, still escaped) fills, or nil.
func (f *evf) slot(key []byte) *[]byte {
	if bytes.IndexByte(key, '\\') >= 0 {
		s, ok := jsonString(append(append([]byte{'"'}, key...), '"'))
		if !ok {
			return nil
		}
		key = s
	}
	switch string(key) {
	case "type":
		return nil
	case "messageId":
		return &f.messageID
	case "delta":
		return &f.delta
	case "toolCallId":
		return &f.toolCallID
	case "toolCallName":
		return &f.toolCallName
	case "parentMessageId":
		return &f.parentMessageID
	case "role":
		return &f.role
	case "name":
		return &f.name
	case "subagentRunId":
		return &f.subagentRunID
	case "metadata":
		return &f.metadata
	case "rawEvent":
		return &f.rawEvent
	case "snapshot":
		return &f.snapshot
	case "messages":
		return &f.messages
	case "input":
		return &f.input
	case "stepName":
		return &f.stepName
	case "activityType":
		return &f.activityType
	case "content":
		return &f.content
	case "replace":
		return &f.replace
	case "patch":
		return &f.patch
	case "subtype":
		return &f.subtype
	case "entityId":
		return &f.entityID
	case "encryptedValue":
		return &f.encryptedValue
	}
	return nil
}

// str decodes a raw JSON string field; ok is false when absent or not a string.
func str(raw []byte) (string, bool) {
	if raw == nil {
		return "", false
	}
	s, ok := jsonString(raw)
	if !ok {
		return "", false
	}
	return string(s), true
}

// strKey is str for map lookups: it avoids allocating for unescaped ids.
func isStr(raw []byte) bool { return len(raw) >= 2 && raw[0] == '"' }

// pev is an event inside the pipeline: a recorded one (raw set) or one the chunk transform
// synthesized (raw nil).
type pev struct {
	typ etype
	f   evf
	raw []byte
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

type lane struct {
	kind   string
	id     string
	role   string
	name   []byte
	parent []byte
	subRun []byte
	seq    int
}

// reducer mirrors @ag-ui/client 1.0's pipeline: enforceEvents (unknown types dropped, basic
// schema checks), transformChunks, verifyEvents and defaultApplyEvents.
type reducer struct {
	opts Options

	messages []*message
	byID     map[string]*message
	callIdx  map[string]*message // tool call id -> first owning message
	state    any
	stateSet bool
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

	hot      hotCache
	sizeHint int  // initial capacity for streamed content (appendDelta)
	general  bool // tests: no hot cache, no fastDelta

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
func (r *reducer) feed(i int, e *Event, t etype) error {
	r.idx, r.typ = i, e.Type
	if t == tUnknown {
		return nil // enforceEvents drops unrecognised types with a warning
	}
	if r.hot.typ == t && !r.general && len(r.lanes) == 0 && r.fastDelta(e.Raw) {
		return nil
	}
	p := pev{typ: t, raw: e.Raw}
	scanFields(e.Raw, &p.f)
	r.cur = e.Raw
	if err := r.checkSchema(t, &p.f); err != nil {
		return err
	}
	return r.transform(&p)
}

// checkSchema covers the @ag-ui/core schema rules that the reducer depends on.
func (r *reducer) checkSchema(t etype, f *evf) error {
	need := func(name string, v []byte) error {
		if !isStr(v) {
			return r.reject("%s must be a string", name)
		}
		return nil
	}
	opt := func(name string, v []byte) error {
		if v != nil && !isStr(v) {
			return r.reject("%s must be a string", name)
		}
		return nil
	}
	if f.subagentRunID != nil && string(f.subagentRunID) == "null" {
		return r.reject("subagentRunId must be omitted, not null")
	}
	if err := opt("subagentRunId", f.subagentRunID); err != nil {
		return err
	}
	if f.metadata != nil && (len(f.metadata) == 0 || f.metadata[0] != '{') {
		return r.reject("metadata must be an object")
	}
	var err error
	switch t {
	case tTextMessageStart:
		err = errors.Join(need("messageId", f.messageID), opt("name", f.name), r.checkRole(f.role))
	case tTextMessageContent, tReasoningMessageContent:
		err = errors.Join(need("messageId", f.messageID), need("delta", f.delta))
	case tTextMessageEnd, tReasoningMessageStart, tReasoningMessageEnd, tReasoningStart, tReasoningEnd:
		err = need("messageId", f.messageID)
	case tTextMessageChunk, tReasoningMessageChunk:
		err = errors.Join(opt("messageId", f.messageID), opt("delta", f.delta), opt("name", f.name))
		if t == tTextMessageChunk && err == nil {
			err = r.checkRole(f.role)
		}
	case tToolCallStart:
		err = errors.Join(need("toolCallId", f.toolCallID), need("toolCallName", f.toolCallName), opt("parentMessageId", f.parentMessageID))
	case tToolCallArgs:
		err = errors.Join(need("toolCallId", f.toolCallID), need("delta", f.delta))
	case tToolCallEnd:
		err = need("toolCallId", f.toolCallID)
	case tToolCallChunk:
		err = errors.Join(opt("toolCallId", f.toolCallID), opt("toolCallName", f.toolCallName), opt("parentMessageId", f.parentMessageID), opt("delta", f.delta))
	case tToolCallResult:
		err = errors.Join(need("messageId", f.messageID), need("toolCallId", f.toolCallID))
		if err == nil && f.content == nil {
			err = r.reject("content is required")
		}
	case tStateSnapshot:
		if f.snapshot == nil {
			err = r.reject("snapshot is required")
		}
	case tStateDelta:
		err = r.checkPatch(f.delta)
	case tActivityDelta:
		err = errors.Join(need("messageId", f.messageID), need("activityType", f.activityType), r.checkPatch(f.patch))
	case tActivitySnapshot:
		err = errors.Join(need("messageId", f.messageID), need("activityType", f.activityType))
		if err == nil && (len(f.content) == 0 || f.content[0] != '{') {
			err = r.reject("content must be an object")
		}
		if err == nil && f.replace != nil && string(f.replace) != "true" && string(f.replace) != "false" {
			err = r.reject("replace must be a boolean")
		}
	case tMessagesSnapshot:
		err = r.checkMessages(f.messages)
	case tStepStarted, tStepFinished:
		err = need("stepName", f.stepName)
	case tReasoningEncryptedValue:
		err = errors.Join(need("entityId", f.entityID), need("encryptedValue", f.encryptedValue))
		if err == nil && string(f.subtype) != `"tool-call"` && string(f.subtype) != `"message"` {
			err = r.reject("subtype must be tool-call or message")
		}
	case tRunStarted:
		err = errors.Join(need("threadId", fieldOr(r.cur, "threadId")), need("runId", fieldOr(r.cur, "runId")))
		if err == nil && f.input != nil {
			if len(f.input) == 0 || f.input[0] != '{' {
				err = r.reject("input must be an object")
			} else if m := fieldOr(f.input, "messages"); m != nil {
				err = r.checkMessages(m)
			}
		}
	}
	if err != nil {
		var se *StreamError
		if errors.As(err, &se) {
			return se
		}
		return err
	}
	return nil
}

// checkMessages requires an array of objects with a string id and role (MessageSchema).
func (r *reducer) checkMessages(ms []byte) error {
	if len(ms) == 0 || ms[0] != '[' {
		return r.reject("messages must be an array")
	}
	var err error
	eachElem(ms, func(m []byte) {
		if err == nil && (len(m) == 0 || m[0] != '{' || !isStr(fieldOr(m, "id")) || !isStr(fieldOr(m, "role"))) {
			err = r.reject("every message needs a string id and role")
		}
	})
	return err
}

func fieldOr(o []byte, name string) []byte {
	v, _ := field(o, name)
	return v
}

func (r *reducer) checkRole(role []byte) error {
	if role == nil {
		return nil
	}
	switch string(role) {
	case `"developer"`, `"system"`, `"assistant"`, `"user"`:
		return nil
	}
	return r.reject("role %s is not a text message role", role)
}

// checkPatch enforces JsonPatchSchema: an array of operations with a known op and pointers
// matching ^(/([^/~]|~[01])*)*$, value present for add/replace/test.
func (r *reducer) checkPatch(p []byte) error {
	if len(p) == 0 || p[0] != '[' {
		return r.reject("patch must be an array")
	}
	n := 0
	var err error
	eachElem(p, func(op []byte) {
		n++
		if err != nil {
			return
		}
		if len(op) == 0 || op[0] != '{' {
			err = r.reject("patch operation must be an object")
			return
		}
		name, _ := str(fieldOr(op, "op"))
		path, hasPath := str(fieldOr(op, "path"))
		if !hasPath || !validPointer(path) {
			err = r.reject("patch path must be a JSON pointer")
			return
		}
		switch name {
		case "add", "replace", "test":
			if fieldOr(op, "value") == nil {
				err = r.reject("patch value is required")
			}
		case "move", "copy":
			from, ok := str(fieldOr(op, "from"))
			if !ok || !validPointer(from) {
				err = r.reject("patch from must be a JSON pointer")
			}
		case "remove":
		default:
			err = r.reject("unknown patch op %q", name)
		}
	})
	if err == nil && r.opts.MaxPatchOps > 0 && n > r.opts.MaxPatchOps {
		return &LimitError{Limit: "MaxPatchOps", Value: n, Max: r.opts.MaxPatchOps}
	}
	return err
}

func validPointer(p string) bool {
	if p != "" && p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 >= len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return false
		}
	}
	return true
}

// ---- transformChunks ----

func laneKey(sub []byte) string {
	if sub == nil {
		return "\x00"
	}
	s, _ := str(sub)
	return "s:" + s
}

var laneScoped = [numTypes]bool{
	tTextMessageStart: true, tTextMessageContent: true, tTextMessageEnd: true,
	tToolCallStart: true, tToolCallArgs: true, tToolCallEnd: true, tToolCallResult: true,
	tStateSnapshot: true, tStateDelta: true, tCustom: true, tStepStarted: true,
	tStepFinished: true, tReasoningStart: true, tReasoningMessageStart: true,
	tReasoningMessageContent: true, tReasoningMessageEnd: true, tReasoningEnd: true,
}

func (r *reducer) closeLane(key string) error {
	l, ok := r.lanes[key]
	if !ok {
		return nil
	}
	delete(r.lanes, key)
	r.laneOrder = slices.DeleteFunc(r.laneOrder, func(k string) bool { return k == key })
	var e pev
	idRaw := quote(l.id)
	switch l.kind {
	case "text":
		e = pev{typ: tTextMessageEnd, f: evf{messageID: idRaw, subagentRunID: l.subRun}}
	case "tool":
		e = pev{typ: tToolCallEnd, f: evf{toolCallID: idRaw, subagentRunID: l.subRun}}
	default:
		e = pev{typ: tReasoningMessageEnd, f: evf{messageID: idRaw, subagentRunID: l.subRun}}
	}
	return r.process(&e)
}

func (r *reducer) closeAll() error {
	for len(r.laneOrder) > 0 {
		if err := r.closeLane(r.laneOrder[0]); err != nil {
			return err
		}
	}
	return nil
}

func (r *reducer) transform(e *pev) error {
	switch {
	case laneScoped[e.typ]:
		if len(r.lanes) > 0 {
			if err := r.closeLane(laneKey(e.f.subagentRunID)); err != nil {
				return err
			}
		}
	case e.typ == tRunStarted || e.typ == tRunFinished || e.typ == tRunError || e.typ == tMessagesSnapshot:
		if err := r.closeAll(); err != nil {
			return err
		}
	case e.typ == tSubagentFinished || e.typ == tSubagentError:
		if e.f.subagentRunID != nil {
			if err := r.closeLane(laneKey(e.f.subagentRunID)); err != nil {
				return err
			}
		}
	case e.typ == tTextMessageChunk:
		return r.chunk(e, "text", e.f.messageID)
	case e.typ == tToolCallChunk:
		return r.chunk(e, "tool", e.f.toolCallID)
	case e.typ == tReasoningMessageChunk:
		return r.chunk(e, "reasoning", e.f.messageID)
	}
	return r.process(e)
}

// chunk expands a *_CHUNK event into START / CONTENT events like transformChunks.
func (r *reducer) chunk(e *pev, kind string, idRaw []byte) error {
	id, hasID := str(idRaw)
	// Resolve the lane (function c in the client).
	key := ""
	resolved := false
	if hasID {
		for _, k := range r.laneOrder {
			if l := r.lanes[k]; l.kind == kind && l.id == id {
				key, resolved = k, true
				if e.f.subagentRunID != nil && laneKey(e.f.subagentRunID) != k {
					return r.reject("chunk subagentRunId does not match the open stream")
				}
				break
			}
		}
	}
	if !resolved {
		switch {
		case e.f.subagentRunID != nil:
			key = laneKey(e.f.subagentRunID)
		case r.lanes["\x00"] != nil && r.lanes["\x00"].kind == kind:
			key = "\x00"
		default:
			var ks []string
			for _, k := range r.laneOrder {
				if r.lanes[k].kind == kind {
					ks = append(ks, k)
				}
			}
			if len(ks) > 1 {
				return r.reject("ambiguous chunk: %d lanes are open", len(ks))
			}
			if len(ks) == 1 {
				key = ks[0]
			} else {
				key = "\x00"
			}
		}
	}
	l := r.lanes[key]
	emitted := false
	if l != nil && l.kind == kind && (!hasID || l.id == id) {
		if kind == "text" {
			if e.f.role != nil && string(e.f.role) != string(quote(l.role)) {
				return r.reject("chunk role does not match the open stream")
			}
			if e.f.name != nil && string(e.f.name) != string(l.name) {
				return r.reject("chunk name does not match the open stream")
			}
		}
		if kind == "tool" {
			if e.f.toolCallName != nil && string(e.f.toolCallName) != string(l.name) {
				return r.reject("chunk toolCallName does not match the open stream")
			}
			if e.f.parentMessageID != nil && string(e.f.parentMessageID) != string(l.parent) {
				return r.reject("chunk parentMessageId does not match the open stream")
			}
		}
	} else {
		if err := r.closeLane(key); err != nil {
			return err
		}
		if !hasID {
			return r.reject("first chunk must have an id")
		}
		l = &lane{kind: kind, id: id, subRun: e.f.subagentRunID, seq: r.seq}
		var start pev
		switch kind {
		case "text":
			l.role = "assistant"
			if e.f.role != nil {
				l.role, _ = str(e.f.role)
			}
			l.name = e.f.name
			start = pev{typ: tTextMessageStart, f: evf{messageID: idRaw, role: quote(l.role), name: e.f.name, subagentRunID: e.f.subagentRunID, metadata: e.f.metadata}}
		case "tool":
			if e.f.toolCallName == nil {
				return r.reject("first TOOL_CALL_CHUNK must have a toolCallName")
			}
			l.name, l.parent = e.f.toolCallName, e.f.parentMessageID
			start = pev{typ: tToolCallStart, f: evf{toolCallID: idRaw, toolCallName: e.f.toolCallName, parentMessageID: e.f.parentMessageID, subagentRunID: e.f.subagentRunID, metadata: e.f.metadata}}
		default:
			start = pev{typ: tReasoningMessageStart, f: evf{messageID: idRaw, role: []byte(`"reasoning"`), subagentRunID: e.f.subagentRunID, metadata: e.f.metadata}}
		}
		r.lanes[key] = l
		r.laneOrder = append(r.laneOrder, key)
		if err := r.process(&start); err != nil {
			return err
		}
		if it := r.openItemFor(kind, id); it != nil {
			it.chunk = true
		}
		emitted = true
	}
	idq := quote(l.id)
	sub := e.f.subagentRunID
	if sub == nil {
		sub = l.subRun
	}
	var ct etype
	var cf evf
	switch kind {
	case "text":
		ct, cf = tTextMessageContent, evf{messageID: idq, subagentRunID: sub}
	case "tool":
		ct, cf = tToolCallArgs, evf{toolCallID: idq, subagentRunID: sub}
	default:
		ct, cf = tReasoningMessageContent, evf{messageID: idq, subagentRunID: sub}
	}
	if e.f.delta != nil || e.f.rawEvent != nil {
		cf.delta = e.f.delta
		if cf.delta == nil {
			cf.delta = []byte(`""`)
		}
		cf.metadata = e.f.metadata
		return r.process(&pev{typ: ct, f: cf})
	}
	if !emitted && e.f.metadata != nil {
		cf.delta, cf.metadata = []byte(`""`), e.f.metadata
		return r.process(&pev{typ: ct, f: cf})
	}
	return nil
}

func (r *reducer) openItemFor(kind, id string) *openItem {
	switch kind {
	case "text":
		return r.openText[id]
	case "tool":
		return r.openTool[id]
	}
	return r.openReason[id]
}

// ---- verifyEvents + defaultApplyEvents ----

func (r *reducer) process(e *pev) error {
	if r.hot.typ == e.typ && r.hot.typ != tUnknown && e.f.metadata == nil && string(e.f.messageID) == string(r.hot.id) &&
		string(e.f.toolCallID) == string(r.hot.callID) {
		return r.hotDelta(e)
	}
	r.hot.typ = tUnknown
	if err := r.verify(e); err != nil {
		return err
	}
	if err := r.apply(e); err != nil {
		return err
	}
	switch e.typ {
	case tTextMessageContent, tReasoningMessageContent, tToolCallArgs:
		if e.f.metadata == nil && !r.general {
			r.rememberDelta(e)
		}
	}
	return nil
}

// hotCache caches the lookups of the last content delta so that the deltas that follow it for
// the same message or tool call (the bulk of a thread) append without map lookups. Every other
// event resets it (process), so what verify and apply would look up cannot have changed.
type hotCache struct {
	typ        etype // tUnknown when empty
	id, callID []byte
	msg        *message  // text and reasoning content: lookup(messageId), nil when absent
	call       *toolCall // TOOL_CALL_ARGS: the call, nil when absent
	pre, suf   []byte    // fastDelta's template: a delta event before and after its value
}

// rememberDelta fills the cache after the slow path processed delta e without metadata.
func (r *reducer) rememberDelta(e *pev) {
	h := hotCache{typ: e.typ, id: e.f.messageID, callID: e.f.toolCallID}
	if e.typ == tToolCallArgs {
		if owner := lookupOpen(r.callIdx, e.f.toolCallID); owner != nil {
			id, _ := str(e.f.toolCallID)
			h.call = owner.findCall(id)
		}
	} else if m := r.lookup(e.f.messageID); m != nil && m.role != "activity" {
		h.msg = m
	}
	r.hot = h
}

// fastDelta handles, without the general field scan, a delta that continues the cached
// stream: an object of exactly "type", the cached id member (messageId, or toolCallId for
// TOOL_CALL_ARGS) with the cached value, and a string "delta". That is the event the general
// path would check (checkSchema), route (transform: no lanes are open) and append (process,
// hotDelta). Anything else returns false untouched, for the general path.
func (r *reducer) fastDelta(raw []byte) bool {
	idKey, id, other := "messageId", r.hot.id, r.hot.callID
	if r.hot.typ == tToolCallArgs {
		idKey, id, other = "toolCallId", r.hot.callID, r.hot.id
	}
	if other != nil {
		return false // the cached delta had both ids: let process compare them
	}
	// The template: the last delta handled here with its delta value cut out. An event that
	// is the same bytes around a different string parses the same way except for that value.
	if pre, suf := r.hot.pre, r.hot.suf; pre != nil && len(raw) > len(pre)+len(suf) &&
		raw[len(pre)] == '"' && string(raw[:len(pre)]) == string(pre) &&
		string(raw[len(raw)-len(suf):]) == string(suf) && skipString(raw, len(pre)) == len(raw)-len(suf) {
		return r.hotAppend(raw[len(pre) : len(raw)-len(suf)])
	}
	var gotID, delta []byte
	ds := 0
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	i++
	for i < len(raw) {
		switch c := raw[i]; {
		case c == '}':
			if string(gotID) != string(id) || len(delta) < 2 || delta[0] != '"' || !r.hotAppend(delta) {
				return false
			}
			r.hot.pre, r.hot.suf = raw[:ds], raw[ds+len(delta):]
			return true
		case c == ',' || isJSONSpace(c):
			i++
			continue
		case c != '"':
			return false
		}
		k := raw[i+1:]
		field := 0 // 1 id, 2 delta
		switch {
		case hasKey(k, "type"):
			i += 6
		case hasKey(k, "delta"):
			i, field = i+7, 2
		case hasKey(k, idKey):
			i, field = i+len(idKey)+2, 1
		default:
			return false
		}
		i = skipWS(raw, i)
		if i >= len(raw) || raw[i] != ':' {
			return false
		}
		i = skipWS(raw, i+1)
		vs := i
		switch {
		case field == 0 && i < len(raw) && raw[i] == '"' && hasKey(raw[i+1:], typeNames[r.hot.typ]):
			i += len(typeNames[r.hot.typ]) + 2 // the (unescaped) type, known from ParseEvent
		case field == 1 && len(raw)-i >= len(id) && string(raw[i:i+len(id)]) == string(id):
			i += len(id) // the cached id token itself (a complete JSON string)
		case i < len(raw) && raw[i] == '"':
			i = skipString(raw, i)
		default:
			i = skipValue(raw, i)
		}
		switch field {
		case 1:
			gotID = raw[vs:i]
		case 2:
			delta, ds = raw[vs:i], vs
		}
	}
	return false
}

// hotAppend appends the string token delta to the cached stream (fastDelta). It returns false,
// changing nothing, when the delta would cross MaxStateBytes: the general path reports that.
func (r *reducer) hotAppend(delta []byte) bool {
	body := delta[1 : len(delta)-1]
	if c := r.hot.call; c != nil {
		r.seq++
		c.args = r.appendDelta(c.args, body)
		return true
	}
	if m := r.hot.msg; m != nil {
		if r.opts.MaxStateBytes > 0 && len(m.content)+len(body) > r.opts.MaxStateBytes {
			return false
		}
		m.content = r.appendDelta(m.content, body)
	}
	r.seq++
	return true
}

// hasKey reports whether b (just past a key's opening quote) starts with the unescaped key.
func hasKey(b []byte, key string) bool {
	return len(b) > len(key) && b[len(key)] == '"' && string(b[:len(key)]) == key
}

// hotDelta is verify + apply for a delta that hits the cache: verify only counts it (the
// stream is open, nothing changed since the last delta), apply appends it.
func (r *reducer) hotDelta(e *pev) error {
	r.seq++
	body, _ := strBody(e.f.delta)
	if c := r.hot.call; c != nil {
		c.args = r.appendDelta(c.args, body)
		return nil
	}
	if m := r.hot.msg; m != nil {
		m.content = r.appendDelta(m.content, body)
		if r.opts.MaxStateBytes > 0 && len(m.content) > r.opts.MaxStateBytes {
			return &LimitError{Limit: "MaxStateBytes", Value: len(m.content), Max: r.opts.MaxStateBytes}
		}
	}
	return nil
}

func (r *reducer) verify(e *pev) error {
	t := e.typ
	if r.runError && t != tRunStarted {
		return r.reject("the run has already errored")
	}
	if r.runFinished && t != tRunError && t != tRunStarted {
		return r.reject("the run has already finished")
	}
	if !r.first {
		r.first = true
		if t != tRunStarted && t != tRunError {
			return r.reject("first event must be RUN_STARTED")
		}
	} else if t == tRunStarted {
		if r.runStarted && !r.runFinished && !r.runError {
			return r.reject("RUN_STARTED while a run is still active")
		}
		if r.runFinished || r.runError {
			clear(r.openText)
			clear(r.openTool)
			clear(r.openReason)
			clear(r.openSpan)
			clear(r.steps)
			clear(r.subagents)
			r.runFinished, r.runError = false, false
		}
	}
	id := func(v []byte) string { s, _ := str(v); return s }
	r.seq++
	switch t {
	case tRunStarted:
		r.runStarted = true
	case tTextMessageStart:
		m := id(e.f.messageID)
		if r.openText[m] != nil {
			return r.reject("text message %q is already open", m)
		}
		role := "assistant"
		if e.f.role != nil {
			role, _ = str(e.f.role)
		}
		r.openText[m] = &openItem{kind: "text", id: m, seq: r.seq, role: role, name: e.f.name, subRun: e.f.subagentRunID}
	case tTextMessageContent, tTextMessageEnd:
		if lookupOpen(r.openText, e.f.messageID) == nil {
			return r.reject("text message %s is not open", e.f.messageID)
		}
		if t == tTextMessageEnd {
			delete(r.openText, id(e.f.messageID))
		}
	case tToolCallStart:
		c := id(e.f.toolCallID)
		if r.openTool[c] != nil {
			return r.reject("tool call %q is already open", c)
		}
		r.openTool[c] = &openItem{kind: "tool", id: c, seq: r.seq, name: e.f.toolCallName, parent: e.f.parentMessageID, subRun: e.f.subagentRunID}
	case tToolCallArgs, tToolCallEnd:
		if lookupOpen(r.openTool, e.f.toolCallID) == nil {
			return r.reject("tool call %s is not open", e.f.toolCallID)
		}
		if t == tToolCallEnd {
			delete(r.openTool, id(e.f.toolCallID))
		}
	case tStepStarted, tStepFinished:
		owner := laneKey(e.f.subagentRunID)
		name := id(e.f.stepName)
		if r.steps[owner] == nil {
			r.steps[owner] = map[string]bool{}
		}
		if t == tStepStarted {
			if r.steps[owner][name] {
				return r.reject("step %q is already active", name)
			}
			r.steps[owner][name] = true
		} else {
			if !r.steps[owner][name] {
				return r.reject("step %q is not active", name)
			}
			delete(r.steps[owner], name)
		}
	case tReasoningStart:
		m := id(e.f.messageID)
		if r.openSpan[m] {
			return r.reject("reasoning %q is already open", m)
		}
		r.openSpan[m] = true
	case tReasoningEnd:
		m := id(e.f.messageID)
		if !r.openSpan[m] {
			return r.reject("reasoning %q is not open", m)
		}
		delete(r.openSpan, m)
	case tReasoningMessageStart:
		m := id(e.f.messageID)
		if r.openReason[m] != nil {
			return r.reject("reasoning message %q is already open", m)
		}
		r.openReason[m] = &openItem{kind: "reasoning", id: m, seq: r.seq, subRun: e.f.subagentRunID}
	case tReasoningMessageContent, tReasoningMessageEnd:
		if lookupOpen(r.openReason, e.f.messageID) == nil {
			return r.reject("reasoning message %s is not open", e.f.messageID)
		}
		if t == tReasoningMessageEnd {
			delete(r.openReason, id(e.f.messageID))
		}
	case tSubagentStarted:
		s, ok := str(e.f.subagentRunID)
		if !ok {
			return r.reject("SUBAGENT_STARTED without a subagentRunId")
		}
		if r.subagents[s] {
			return r.reject("subagent %q is already active", s)
		}
		r.subagents[s] = true
	case tSubagentFinished, tSubagentError:
		s, ok := str(e.f.subagentRunID)
		if !ok || !r.subagents[s] {
			return r.reject("subagent %q is not active", s)
		}
		delete(r.subagents, s)
	case tRunFinished:
		for _, st := range r.steps {
			if len(st) > 0 {
				return r.reject("RUN_FINISHED while a step is active")
			}
		}
		if len(r.openText)+len(r.openTool)+len(r.openReason)+len(r.openSpan)+len(r.subagents) > 0 {
			return r.reject("RUN_FINISHED while messages, tool calls, reasoning or subagents are open")
		}
		r.runFinished = true
	case tRunError:
		r.runError = true
	}
	return nil
}

func (r *reducer) push(m *message) {
	r.messages = append(r.messages, m)
	if _, ok := r.byID[m.id]; !ok {
		r.byID[m.id] = m
	}
	for _, t := range m.toolCalls {
		if _, ok := r.callIdx[t.id]; !ok {
			r.callIdx[t.id] = m
		}
	}
}

func (r *reducer) reindex() {
	clear(r.byID)
	clear(r.callIdx)
	for _, m := range r.messages {
		if _, ok := r.byID[m.id]; !ok {
			r.byID[m.id] = m
		}
		for _, t := range m.toolCalls {
			if _, ok := r.callIdx[t.id]; !ok {
				r.callIdx[t.id] = m
			}
		}
	}
}

// lookupOpen finds a raw JSON string id in m without allocating for unescaped ids.
func lookupOpen[V any](m map[string]*V, idRaw []byte) *V {
	if body, ok := strBody(idRaw); ok && bytes.IndexByte(body, '\\') < 0 {
		return m[string(body)]
	}
	s, _ := str(idRaw)
	return m[s]
}

func (r *reducer) lookup(idRaw []byte) *message {
	if body, ok := strBody(idRaw); ok && bytes.IndexByte(body, '\\') < 0 {
		return r.byID[string(body)]
	}
	s, _ := str(idRaw)
	return r.byID[s]
}

func newTextMessage(id, role string, name, sub []byte) *message {
	m := &message{id: id, role: role, contentStr: true}
	m.fields = obj{{"id", quote(id)}, {"role", quote(role)}, {"content", nil}}
	if name != nil {
		m.fields = append(m.fields, kv{"name", name})
	}
	if sub != nil {
		m.fields = append(m.fields, kv{"subagentRunId", sub})
	}
	return m
}

func (r *reducer) apply(e *pev) error {
	f := &e.f
	switch e.typ {
	case tTextMessageStart, tReasoningMessageStart:
		m := r.lookup(f.messageID)
		if m != nil && m.role == "activity" {
			return nil
		}
		if m == nil {
			id, _ := str(f.messageID)
			role := "reasoning"
			var name []byte
			if e.typ == tTextMessageStart {
				role = "assistant"
				if f.role != nil {
					role, _ = str(f.role)
				}
				name = f.name
			}
			m = newTextMessage(id, role, name, f.subagentRunID)
			r.push(m)
		}
		m.mergeMetadata(f.metadata)
	case tTextMessageContent, tReasoningMessageContent:
		m := r.lookup(f.messageID)
		if m == nil || m.role == "activity" {
			return nil
		}
		if !m.contentStr {
			m.content, m.contentStr = m.content[:0], true
			m.fields.set("content", nil)
		}
		body, _ := strBody(f.delta)
		m.content = r.appendDelta(m.content, body)
		m.mergeMetadata(f.metadata)
		if r.opts.MaxStateBytes > 0 && len(m.content) > r.opts.MaxStateBytes {
			return &LimitError{Limit: "MaxStateBytes", Value: len(m.content), Max: r.opts.MaxStateBytes}
		}
	case tTextMessageEnd, tReasoningMessageEnd:
		m := r.lookup(f.messageID)
		if m == nil || m.role == "activity" {
			return nil
		}
		m.mergeMetadata(f.metadata)
		r.sizeHint = min(len(m.content)+len(m.content)/4, 64<<10)
	case tToolCallStart:
		id, _ := str(f.toolCallID)
		if owner := r.callIdx[id]; owner != nil {
			if tc := owner.findCall(id); tc != nil {
				if string(tc.name()) != string(f.toolCallName) {
					tc.fn.set("name", f.toolCallName)
				}
				tc.mergeMetadata(f.metadata)
				return nil
			}
		}
		var target *message
		if pid, ok := str(f.parentMessageID); ok && pid != "" {
			ex := r.byID[pid]
			if ex != nil && ex.role == "assistant" {
				target = ex
			} else {
				nid := pid
				if ex != nil {
					nid = id
				}
				target = &message{id: nid, role: "assistant", fields: obj{{"id", quote(nid)}, {"role", []byte(`"assistant"`)}}}
				if f.subagentRunID != nil {
					target.fields = append(target.fields, kv{"subagentRunId", f.subagentRunID})
				}
				r.push(target)
			}
		} else {
			target = &message{id: id, role: "assistant", fields: obj{{"id", quote(id)}, {"role", []byte(`"assistant"`)}}}
			if f.subagentRunID != nil {
				target.fields = append(target.fields, kv{"subagentRunId", f.subagentRunID})
			}
			r.push(target)
		}
		if !target.hasCalls {
			target.hasCalls = true
			target.fields.set("toolCalls", nil)
		}
		tc := &toolCall{id: id, hasFunc: true, argsStr: true,
			fields: obj{{"id", quote(id)}, {"type", []byte(`"function"`)}, {"function", nil}},
			fn:     obj{{"name", f.toolCallName}, {"arguments", nil}},
		}
		tc.mergeMetadata(f.metadata)
		target.toolCalls = append(target.toolCalls, tc)
		if _, ok := r.callIdx[id]; !ok {
			r.callIdx[id] = target
		}
	case tToolCallArgs, tToolCallEnd:
		owner := lookupOpen(r.callIdx, f.toolCallID)
		if owner == nil {
			return nil
		}
		id, _ := str(f.toolCallID)
		tc := owner.findCall(id)
		if tc == nil {
			return nil
		}
		if e.typ == tToolCallArgs {
			if !tc.hasFunc {
				tc.hasFunc = true
				tc.fields.set("function", nil)
			}
			if !tc.argsStr {
				tc.args, tc.argsStr = nil, true
				tc.fn.set("arguments", nil)
			}
			body, _ := strBody(f.delta)
			tc.args = r.appendDelta(tc.args, body)
		}
		tc.mergeMetadata(f.metadata)
	case tToolCallResult:
		id, _ := str(f.messageID)
		role := []byte(`"tool"`)
		if f.role != nil && string(f.role) != `""` && string(f.role) != "null" {
			role = f.role
		}
		rs, _ := str(role)
		tm := &message{id: id, role: rs, fields: obj{{"id", f.messageID}, {"toolCallId", f.toolCallID}, {"role", role}}}
		if body, ok := strBody(f.content); ok {
			tm.content, tm.contentStr = append([]byte(nil), body...), true
			tm.fields = append(tm.fields, kv{"content", nil})
		} else {
			tm.fields = append(tm.fields, kv{"content", f.content})
		}
		if f.subagentRunID != nil {
			tm.fields = append(tm.fields, kv{"subagentRunId", f.subagentRunID})
		}
		tm.mergeMetadata(f.metadata)
		cid, _ := str(f.toolCallID)
		owner := -1
		for i, m := range r.messages {
			if m.role == "assistant" && m.findCall(cid) != nil {
				owner = i
				break
			}
		}
		if owner < 0 {
			r.push(tm)
			return nil
		}
		at := owner + 1
		for at < len(r.messages) && r.messages[at].role == "tool" {
			at++
		}
		r.messages = slices.Insert(r.messages, at, tm)
		if _, ok := r.byID[tm.id]; !ok {
			r.reindex()
		}
	case tStateSnapshot:
		if err := r.checkDoc(tStateSnapshot, f.snapshot); err != nil {
			return err
		}
		v, err := decodeJS(f.snapshot)
		if err != nil {
			return r.reject("snapshot: %v", err)
		}
		r.state, r.stateSet = v, true
	case tStateDelta:
		if err := r.checkDoc(tStateDelta, f.delta); err != nil {
			return err
		}
		p, err := decodeJS(f.delta)
		if err != nil {
			return r.reject("delta: %v", err)
		}
		ns, err := applyPatch(r.state, p, r.opts.MaxCopyBytes)
		var le *LimitError
		if errors.As(err, &le) {
			return le
		}
		if err == nil {
			r.state, r.stateSet = ns, true
		}
	case tMessagesSnapshot:
		return r.messagesSnapshot(f.messages, f.metadata)
	case tActivitySnapshot:
		return r.activitySnapshot(f)
	case tActivityDelta:
		return r.activityDelta(f)
	case tRunStarted:
		if f.input == nil {
			return nil
		}
		msgs := fieldOr(f.input, "messages")
		eachElem(msgs, func(raw []byte) {
			m := parseMessage(raw)
			if r.byID[m.id] == nil && !r.hasID(m.id) {
				r.push(m)
			}
		})
	case tReasoningEncryptedValue:
		eid, _ := str(f.entityID)
		if string(f.subtype) == `"tool-call"` {
			for _, m := range r.messages {
				if m.role == "assistant" {
					if tc := m.findCall(eid); tc != nil {
						tc.fields.set("encryptedValue", f.encryptedValue)
						break
					}
				}
			}
		} else if m := r.byID[eid]; m != nil && m.role != "activity" {
			m.fields.set("encryptedValue", f.encryptedValue)
		}
	}
	return nil
}

func (r *reducer) hasID(id string) bool {
	_, ok := r.byID[id]
	return ok
}

// checkDoc enforces MaxStateBytes and MaxDepth on a state document or patch.
func (r *reducer) checkDoc(what etype, raw []byte) error {
	if r.opts.MaxStateBytes > 0 && len(raw) > r.opts.MaxStateBytes {
		return &LimitError{Limit: "MaxStateBytes", Value: len(raw), Max: r.opts.MaxStateBytes}
	}
	if r.opts.MaxDepth > 0 {
		if d := depth(raw); d > r.opts.MaxDepth {
			return &LimitError{Limit: "MaxDepth", Value: d, Max: r.opts.MaxDepth}
		}
	}
	return nil
}

// depth returns the maximum nesting depth of a JSON text.
func depth(raw []byte) int {
	d, max := 0, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			i = skipValue(raw, i) - 1
		case '{', '[':
			d++
			if d > max {
				max = d
			}
		case '}', ']':
			d--
		}
	}
	return max
}

func (r *reducer) messagesSnapshot(raw, meta []byte) error {
	var snap []*message
	eachElem(raw, func(m []byte) { snap = append(snap, parseMessage(m)) })
	// authoritativeActivityTypes: undefined (absent), nil-owned-all (null), or a list.
	mode, owned := authority(meta)
	hasActivity, hasReasoning := false, false
	snapMap := make(map[string]*message, len(snap))
	for _, m := range snap {
		snapMap[m.id] = m // a Map keeps the last duplicate
		hasActivity = hasActivity || m.role == "activity"
		hasReasoning = hasReasoning || m.role == "reasoning"
	}
	preserved := func(m *message) bool {
		if m.role == "activity" {
			switch mode {
			case authList:
				t, _ := m.fields.get("activityType")
				ts, _ := str(t)
				return !slices.Contains(owned, ts)
			case authAbsent:
				return !hasActivity
			}
			return false
		}
		return m.role == "reasoning" && !hasReasoning
	}
	// JS checks existingIds built before the loop, so duplicate new ids are all appended.
	var next []*message
	for _, m := range r.messages {
		if s, ok := snapMap[m.id]; ok {
			next = append(next, s)
		} else if preserved(m) {
			next = append(next, m)
		}
	}
	pre := make(map[string]bool, len(next))
	for _, m := range next {
		pre[m.id] = true
	}
	for _, m := range snap {
		if !pre[m.id] {
			next = append(next, m)
		}
	}
	r.messages = next
	r.reindex()
	return nil
}

const (
	authAbsent = iota
	authAll
	authList
)

// authority mirrors authoritativeActivityTypes from activity-history.ts.
func authority(meta []byte) (int, []string) {
	if meta == nil {
		return authAbsent, nil
	}
	v, ok := field(meta, "@ag-ui/client")
	if !ok {
		return authAbsent, nil
	}
	if len(v) == 0 || v[0] != '{' {
		return authList, nil
	}
	types, ok := field(v, "authoritativeActivityTypes")
	if !ok {
		return authAbsent, nil
	}
	if string(types) == "null" {
		return authAll, nil
	}
	var out []string
	okAll := len(types) > 0 && types[0] == '['
	eachElem(types, func(e []byte) {
		s, ok := str(e)
		if !ok {
			okAll = false
		}
		out = append(out, s)
	})
	if !okAll {
		return authList, nil
	}
	return authList, out
}

func (r *reducer) activitySnapshot(f *evf) error {
	id, _ := str(f.messageID)
	replace := string(f.replace) != "false"
	idx := slices.IndexFunc(r.messages, func(m *message) bool { return m.id == id })
	mk := func() *message {
		m := &message{id: id, role: "activity", fields: obj{{"id", f.messageID}, {"role", []byte(`"activity"`)}, {"activityType", f.activityType}, {"content", f.content}}}
		if f.subagentRunID != nil {
			m.fields = append(m.fields, kv{"subagentRunId", f.subagentRunID})
		}
		return m
	}
	var target *message
	switch {
	case idx < 0:
		target = mk()
		r.push(target)
	case r.messages[idx].role == "activity":
		if replace {
			m := r.messages[idx]
			m.fields.set("activityType", f.activityType)
			m.fields.set("content", f.content)
			if f.subagentRunID != nil {
				m.fields.set("subagentRunId", f.subagentRunID)
			} else {
				m.fields.del("subagentRunId")
			}
		}
		target = r.messages[idx]
	case replace:
		target = mk()
		r.messages[idx] = target
		r.reindex()
	}
	if target != nil {
		target.mergeMetadata(f.metadata)
	}
	return nil
}

func (r *reducer) activityDelta(f *evf) error {
	id, _ := str(f.messageID)
	idx := slices.IndexFunc(r.messages, func(m *message) bool { return m.id == id })
	if idx < 0 || r.messages[idx].role != "activity" {
		return nil
	}
	m := r.messages[idx]
	m.mergeMetadata(f.metadata)
	if err := r.checkDoc(tActivityDelta, f.patch); err != nil {
		return err
	}
	cur, _ := m.fields.get("content")
	var doc any = map[string]any{}
	if cur != nil && string(cur) != "null" {
		d, err := decodeJS(cur)
		if err != nil {
			return r.reject("activity content: %v", err)
		}
		doc = d
	}
	p, err := decodeJS(f.patch)
	if err != nil {
		return r.reject("patch: %v", err)
	}
	nd, err := applyPatch(doc, p, r.opts.MaxCopyBytes)
	var le *LimitError
	if errors.As(err, &le) {
		return le
	}
	if err != nil {
		return nil
	}
	b, err := marshalJS(nd)
	if err != nil {
		return r.reject("activity content: %v", err)
	}
	m.fields.set("content", b)
	m.fields.set("activityType", f.activityType)
	return nil
}

// messagesJSON renders the message list.
func (r *reducer) messagesJSON() []byte { return r.appendMessages(nil) }

// appendMessages appends the message list to dst, growing dst once to about the final size.
func (r *reducer) appendMessages(dst []byte) []byte {
	n := 2
	for _, m := range r.messages {
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
		m.write(b)
	}
	b.WriteByte(']')
	return b.Bytes()
}

func (r *reducer) stateJSON() ([]byte, error) { return marshalJS(r.state) }

// openItems returns what is open at the end, in opening order.
func (r *reducer) openItems() []*openItem {
	var out []*openItem
	for _, m := range []map[string]*openItem{r.openText, r.openTool, r.openReason} {
		for _, it := range m {
			out = append(out, it)
		}
	}
	slices.SortFunc(out, func(a, b *openItem) int { return a.seq - b.seq })
	// an item is still chunk-driven only if its lane is still open
	for _, it := range out {
		if it.chunk {
			still := false
			for _, l := range r.lanes {
				if l.kind == it.kind && l.id == it.id {
					still = true
				}
			}
			it.chunk = still
		}
	}
	return out
}

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

// replay is Replay; general turns the delta fast paths off (tests compare both).
func replay(events []Event, general bool) (messages json.RawMessage, state json.RawMessage, err error) {
	r := newReducer(Options{})
	r.general = general
	for i, e := range events {
		if err = r.feed(i, &e, typeOf(e.Type)); err != nil {
			break
		}
	}
	st, serr := r.stateJSON()
	if serr != nil && err == nil {
		err = serr
	}
	return r.messagesJSON(), st, err
}

// appendDelta appends a delta's escaped string body to streamed content. A new buffer starts
// at the size of the last message that ended (plus a quarter, at least 256 bytes, at most 64
// KiB): messages of a thread tend to have similar lengths, so most never grow.
func (r *reducer) appendDelta(dst, body []byte) []byte {
	if cap(dst) == 0 {
		dst = make([]byte, 0, max(256, r.sizeHint, 2*len(body)))
	}
	return append(dst, body...)
}
