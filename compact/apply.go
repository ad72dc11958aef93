package compact

// Mirror of defaultApplyEvents (@ag-ui/client 1.0.0 src/apply/default.ts): how each event
// changes the message list and the state. STATE_DELTA and ACTIVITY_DELTA go through the
// JSON Patch applier in patch.go; authoritativeActivityTypes mirrors src/activity-history.ts.

import (
	"bytes"
	"slices"

	"github.com/agui-proxy/agui-proxy/agui"
)

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

// apply mirrors defaultApplyEvents' switch on the event type: how one verified event changes
// the messages and the state.
func (r *reducer) apply(e *pipelineEvent) error {
	f := &e.f
	switch e.typ {
	case agui.KindTextMessageStart, agui.KindReasoningMessageStart:
		return r.applyMessageStart(e)
	case agui.KindTextMessageContent, agui.KindReasoningMessageContent:
		return r.applyMessageContent(e)
	case agui.KindTextMessageEnd, agui.KindReasoningMessageEnd:
		return r.applyMessageEnd(e)
	case agui.KindToolCallStart:
		return r.applyToolCallStart(e)
	case agui.KindToolCallArgs, agui.KindToolCallEnd:
		return r.applyToolCallDelta(e)
	case agui.KindToolCallResult:
		return r.applyToolCallResult(e)
	case agui.KindStateSnapshot:
		return r.applyStateSnapshot(e)
	case agui.KindStateDelta:
		return r.applyStateDelta(e)
	case agui.KindMessagesSnapshot:
		return r.messagesSnapshot(f.messages, f.metadata)
	case agui.KindActivitySnapshot:
		return r.activitySnapshot(e)
	case agui.KindActivityDelta:
		return r.activityDelta(e)
	case agui.KindRunStarted:
		return r.applyRunStarted(e)
	case agui.KindReasoningEncryptedValue:
		return r.applyEncryptedValue(e)
	}
	return nil
}

// applyMessageStart is defaultApplyEvents' case for TEXT_MESSAGE_START and REASONING_MESSAGE_START:
// a new message, unless one with the id exists (an activity message of that id absorbs nothing).
func (r *reducer) applyMessageStart(e *pipelineEvent) error {
	f := &e.f
	m := r.lookup(f.messageID)
	if m != nil && m.role == "activity" {
		return nil
	}
	if m == nil {
		id, _ := str(f.messageID)
		role := "reasoning"
		var name []byte
		if e.typ == agui.KindTextMessageStart {
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
	return nil
}

// applyMessageContent is defaultApplyEvents' case for TEXT_MESSAGE_CONTENT and
// REASONING_MESSAGE_CONTENT: append to the message's content.
func (r *reducer) applyMessageContent(e *pipelineEvent) error {
	f := &e.f
	m := r.lookup(f.messageID)
	if m == nil || m.role == "activity" {
		return nil
	}
	m.changed()
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
	return nil
}

// applyMessageEnd is defaultApplyEvents' case for TEXT_MESSAGE_END and REASONING_MESSAGE_END: merge
// metadata; the size of the ended message sizes the next content buffer.
func (r *reducer) applyMessageEnd(e *pipelineEvent) error {
	f := &e.f
	m := r.lookup(f.messageID)
	if m == nil || m.role == "activity" {
		return nil
	}
	m.mergeMetadata(f.metadata)
	r.sizeHint = min(len(m.content)+len(m.content)/4, 64<<10)
	return nil
}

// applyToolCallStart is defaultApplyEvents' case for TOOL_CALL_START: a call on the parent
// assistant message (resolveOrCreateAssistantMessage), or on a new one; a known call id is renamed
// in place.
func (r *reducer) applyToolCallStart(e *pipelineEvent) error {
	f := &e.f
	id, _ := str(f.toolCallID)
	if owner := r.callIdx[id]; owner != nil {
		if tc := owner.findCall(id); tc != nil {
			owner.changed()
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
	target.changed()
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
	return nil
}

// applyToolCallDelta is defaultApplyEvents' case for TOOL_CALL_ARGS and TOOL_CALL_END: append
// arguments to the call, merge metadata.
func (r *reducer) applyToolCallDelta(e *pipelineEvent) error {
	f := &e.f
	owner := lookupOpen(r.callIdx, f.toolCallID)
	if owner == nil {
		return nil
	}
	id, _ := str(f.toolCallID)
	tc := owner.findCall(id)
	if tc == nil {
		return nil
	}
	owner.changed()
	if e.typ == agui.KindToolCallArgs {
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
	return nil
}

// applyToolCallResult is defaultApplyEvents' case for TOOL_CALL_RESULT: a tool message after the
// results that follow the owning assistant message, or at the end when no message owns the call.
func (r *reducer) applyToolCallResult(e *pipelineEvent) error {
	f := &e.f
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
	return nil
}

// applyStateSnapshot is defaultApplyEvents' case for STATE_SNAPSHOT: the state becomes the
// snapshot.
func (r *reducer) applyStateSnapshot(e *pipelineEvent) error {
	v, err := r.parseDoc(agui.KindStateSnapshot, "snapshot", e.f.snapshot)
	if err != nil {
		return err
	}
	r.state, r.stateSet, r.held = v, true, nil
	return nil
}

// applyStateDelta is defaultApplyEvents' case for STATE_DELTA: applyPatch(state, delta, true,
// false) in a try/catch: a delta that does not apply is skipped.
func (r *reducer) applyStateDelta(e *pipelineEvent) error {
	f := &e.f
	p, err := r.parseDoc(agui.KindStateDelta, "delta", f.delta)
	if err != nil {
		return err
	}
	ns, applied, diverges, before, err := r.foldDelta(r.state, p, f.delta, r.fold && r.held == nil)
	if err != nil {
		return err
	}
	if diverges {
		r.held = &heldState{before: before}
	}
	if r.held != nil {
		r.held.events = append(r.held.events, heldEvent(agui.StateDelta, e.raw))
	}
	if applied {
		r.state, r.stateSet = ns, true
	}
	return nil
}

// applyRunStarted is defaultApplyEvents' case for RUN_STARTED: input.messages whose ids are new are
// appended.
func (r *reducer) applyRunStarted(e *pipelineEvent) error {
	f := &e.f
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
	return nil
}

// applyEncryptedValue is defaultApplyEvents' case for REASONING_ENCRYPTED_VALUE: set encryptedValue
// on the tool call or message it names.
func (r *reducer) applyEncryptedValue(e *pipelineEvent) error {
	f := &e.f
	eid, _ := str(f.entityID)
	if string(f.subtype) == `"tool-call"` {
		for _, m := range r.messages {
			if m.role == "assistant" {
				if tc := m.findCall(eid); tc != nil {
					m.changed()
					tc.fields.set("encryptedValue", f.encryptedValue)
					break
				}
			}
		}
	} else if m := r.byID[eid]; m != nil && m.role != "activity" {
		m.changed()
		m.fields.set("encryptedValue", f.encryptedValue)
	}
	return nil
}

func (r *reducer) hasID(id string) bool {
	_, ok := r.byID[id]
	return ok
}

// parseDoc checks a state document or patch against the limits (checkDoc) and decodes it; one
// that does not decode rejects the stream, naming its field.
func (r *reducer) parseDoc(what agui.Kind, field string, raw []byte) (any, error) {
	if err := r.checkDoc(what, raw); err != nil {
		return nil, err
	}
	v, err := decodeJS(raw)
	if err != nil {
		return nil, r.reject("%s: %v", field, err)
	}
	return v, nil
}

// checkDoc enforces MaxStateBytes and MaxDepth on a state document or patch.
func (r *reducer) checkDoc(what agui.Kind, raw []byte) error {
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

func (r *reducer) activitySnapshot(e *pipelineEvent) error {
	f := &e.f
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
		if h := r.messages[idx].hold; h != nil && !replace {
			h.events = append(h.events, heldEvent(agui.ActivitySnapshot, e.raw))
		}
		if replace {
			m := r.messages[idx]
			m.changed()
			m.hold = nil
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

func (r *reducer) activityDelta(e *pipelineEvent) error {
	f := &e.f
	id, _ := str(f.messageID)
	idx := slices.IndexFunc(r.messages, func(m *message) bool { return m.id == id })
	if idx < 0 || r.messages[idx].role != "activity" {
		return nil
	}
	m := r.messages[idx]
	m.changed()
	p, err := r.parseDoc(agui.KindActivityDelta, "patch", f.patch)
	if err != nil {
		return err
	}
	var pre *heldActivity
	if r.fold && m.hold == nil {
		// Before the metadata merge: the raw delta carries it again. Cheap (the fields are
		// shared), and needed whenever the fold may stop here (foldDelta).
		pre = m.holdCopy()
	}
	m.mergeMetadata(f.metadata)
	cur, _ := m.fields.get("content")
	var doc any = map[string]any{}
	if cur != nil && string(cur) != "null" {
		d, err := decodeJS(cur)
		if err != nil {
			return r.reject("activity content: %v", err)
		}
		doc = d
	}
	nd, applied, diverges, _, err := r.foldDelta(doc, p, f.patch, pre != nil)
	if err != nil {
		return err
	}
	if _, isObj := nd.(map[string]any); pre != nil && applied && !isObj {
		// The client keeps any content a patch leaves (null, an array, a number), but the
		// @ag-ui/core schema of an activity message in a MESSAGES_SNAPSHOT takes only an
		// object: the fold stops, the snapshot carries the message as it was.
		diverges = true
	}
	if diverges {
		m.hold = pre
	}
	if m.hold != nil {
		m.hold.events = append(m.hold.events, heldEvent(agui.ActivityDelta, e.raw))
	}
	if !applied {
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
