package compact

// The hot path: the content deltas that make up the bulk of a thread (TEXT_MESSAGE_CONTENT,
// TOOL_CALL_ARGS, REASONING_MESSAGE_CONTENT continuing the stream of the previous delta) skip
// the general field scan, verify and apply. It mirrors no client function: it must end exactly
// where verify + apply would (TestFastPathsMatchGeneralPath compares both on every generated
// stream).

import (
	"github.com/agui-proxy/agui-proxy/agui"
)

// hotCache caches the lookups of the last content delta so that the deltas that follow it for
// the same message or tool call (the bulk of a thread) append without map lookups. Every other
// event resets it (process), so what verify and apply would look up cannot have changed.
type hotCache struct {
	typ        agui.Kind // agui.KindUnknown when empty
	id, callID []byte
	msg        *message  // text and reasoning content: lookup(messageId), nil when absent
	call       *toolCall // TOOL_CALL_ARGS: the call, nil when absent
	owner      *message  // the message holding call
	pre, suf   []byte    // fastDelta's template: a delta event before and after its value
}

// rememberDelta fills the cache after the slow path processed delta e without metadata.
func (r *reducer) rememberDelta(e *pipelineEvent) {
	h := hotCache{typ: e.typ, id: e.f.messageID, callID: e.f.toolCallID}
	if e.typ == agui.KindToolCallArgs {
		if owner := lookupOpen(r.callIdx, e.f.toolCallID); owner != nil {
			id, _ := str(e.f.toolCallID)
			h.call, h.owner = owner.findCall(id), owner
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
	if r.hot.typ == agui.KindToolCallArgs {
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
		case field == 0 && i < len(raw) && raw[i] == '"' && hasKey(raw[i+1:], r.hot.typ.String()):
			i += len(r.hot.typ.String()) + 2 // the (unescaped) type, known from ParseEvent
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
		r.hot.owner.changed()
		c.args = r.appendDelta(c.args, body)
		return true
	}
	if m := r.hot.msg; m != nil {
		if r.opts.MaxStateBytes > 0 && len(m.content)+len(body) > r.opts.MaxStateBytes {
			return false
		}
		m.changed()
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
func (r *reducer) hotDelta(e *pipelineEvent) error {
	r.seq++
	body, _ := strBody(e.f.delta)
	if c := r.hot.call; c != nil {
		r.hot.owner.changed()
		c.args = r.appendDelta(c.args, body)
		return nil
	}
	if m := r.hot.msg; m != nil {
		m.changed()
		m.content = r.appendDelta(m.content, body)
		if r.opts.MaxStateBytes > 0 && len(m.content) > r.opts.MaxStateBytes {
			return &LimitError{Limit: "MaxStateBytes", Value: len(m.content), Max: r.opts.MaxStateBytes}
		}
	}
	return nil
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
