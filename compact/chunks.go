package compact

// Mirror of transformChunks (@ag-ui/client 1.0.0 src/chunks/transform.ts): TEXT_MESSAGE_CHUNK,
// TOOL_CALL_CHUNK and REASONING_MESSAGE_CHUNK become START / CONTENT events on a lane per
// subagent run, and the lane's END is synthesized when another event closes it.

import (
	"slices"

	"github.com/agui-proxy/agui-proxy/agui"
)

type lane struct {
	kind   string
	id     string
	role   string
	name   []byte
	parent []byte
	subRun []byte
	seq    int
}

func laneKey(sub []byte) string {
	if sub == nil {
		return "\x00"
	}
	s, _ := str(sub)
	return "s:" + s
}

var laneScoped = [agui.NumKinds]bool{
	agui.KindTextMessageStart: true, agui.KindTextMessageContent: true, agui.KindTextMessageEnd: true,
	agui.KindToolCallStart: true, agui.KindToolCallArgs: true, agui.KindToolCallEnd: true, agui.KindToolCallResult: true,
	agui.KindStateSnapshot: true, agui.KindStateDelta: true, agui.KindCustom: true, agui.KindStepStarted: true,
	agui.KindStepFinished: true, agui.KindReasoningStart: true, agui.KindReasoningMessageStart: true,
	agui.KindReasoningMessageContent: true, agui.KindReasoningMessageEnd: true, agui.KindReasoningEnd: true,
}

func (r *reducer) closeLane(key string) error {
	l, ok := r.lanes[key]
	if !ok {
		return nil
	}
	delete(r.lanes, key)
	r.laneOrder = slices.DeleteFunc(r.laneOrder, func(k string) bool { return k == key })
	var e pipelineEvent
	idRaw := quote(l.id)
	switch l.kind {
	case "text":
		e = pipelineEvent{typ: agui.KindTextMessageEnd, f: eventFields{messageID: idRaw, subagentRunID: l.subRun}}
	case "tool":
		e = pipelineEvent{typ: agui.KindToolCallEnd, f: eventFields{toolCallID: idRaw, subagentRunID: l.subRun}}
	default:
		e = pipelineEvent{typ: agui.KindReasoningMessageEnd, f: eventFields{messageID: idRaw, subagentRunID: l.subRun}}
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

func (r *reducer) transform(e *pipelineEvent) error {
	switch {
	case laneScoped[e.typ]:
		if len(r.lanes) > 0 {
			if err := r.closeLane(laneKey(e.f.subagentRunID)); err != nil {
				return err
			}
		}
	case e.typ == agui.KindRunStarted || e.typ == agui.KindRunFinished || e.typ == agui.KindRunError || e.typ == agui.KindMessagesSnapshot:
		if err := r.closeAll(); err != nil {
			return err
		}
	case e.typ == agui.KindSubagentFinished || e.typ == agui.KindSubagentError:
		if e.f.subagentRunID != nil {
			if err := r.closeLane(laneKey(e.f.subagentRunID)); err != nil {
				return err
			}
		}
	case e.typ == agui.KindTextMessageChunk:
		return r.chunk(e, "text", e.f.messageID)
	case e.typ == agui.KindToolCallChunk:
		return r.chunk(e, "tool", e.f.toolCallID)
	case e.typ == agui.KindReasoningMessageChunk:
		return r.chunk(e, "reasoning", e.f.messageID)
	}
	return r.process(e)
}

// chunk expands a *_CHUNK event into START / CONTENT events like transformChunks.
func (r *reducer) chunk(e *pipelineEvent, kind string, idRaw []byte) error {
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
		var start pipelineEvent
		switch kind {
		case "text":
			l.role = "assistant"
			if e.f.role != nil {
				l.role, _ = str(e.f.role)
			}
			l.name = e.f.name
			start = pipelineEvent{typ: agui.KindTextMessageStart, f: eventFields{messageID: idRaw, role: quote(l.role), name: e.f.name, subagentRunID: e.f.subagentRunID, metadata: e.f.metadata}}
		case "tool":
			if e.f.toolCallName == nil {
				return r.reject("first TOOL_CALL_CHUNK must have a toolCallName")
			}
			l.name, l.parent = e.f.toolCallName, e.f.parentMessageID
			start = pipelineEvent{typ: agui.KindToolCallStart, f: eventFields{toolCallID: idRaw, toolCallName: e.f.toolCallName, parentMessageID: e.f.parentMessageID, subagentRunID: e.f.subagentRunID, metadata: e.f.metadata}}
		default:
			start = pipelineEvent{typ: agui.KindReasoningMessageStart, f: eventFields{messageID: idRaw, role: []byte(`"reasoning"`), subagentRunID: e.f.subagentRunID, metadata: e.f.metadata}}
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
	var ct agui.Kind
	var cf eventFields
	switch kind {
	case "text":
		ct, cf = agui.KindTextMessageContent, eventFields{messageID: idq, subagentRunID: sub}
	case "tool":
		ct, cf = agui.KindToolCallArgs, eventFields{toolCallID: idq, subagentRunID: sub}
	default:
		ct, cf = agui.KindReasoningMessageContent, eventFields{messageID: idq, subagentRunID: sub}
	}
	if e.f.delta != nil || e.f.rawEvent != nil {
		cf.delta = e.f.delta
		if cf.delta == nil {
			cf.delta = []byte(`""`)
		}
		cf.metadata = e.f.metadata
		return r.process(&pipelineEvent{typ: ct, f: cf})
	}
	if !emitted && e.f.metadata != nil {
		cf.delta, cf.metadata = []byte(`""`), e.f.metadata
		return r.process(&pipelineEvent{typ: ct, f: cf})
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
