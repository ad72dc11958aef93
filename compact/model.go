package compact

import (
	"bytes"
)

// kv is one member of an ordered JSON object. A nil v marks a member rendered from a
// structured field of its owner (content, toolCalls, metadata, function, arguments).
type kv struct {
	k string
	v []byte
}

type obj []kv

func (o obj) get(k string) ([]byte, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].k == k {
			return o[i].v, true
		}
	}
	return nil, false
}

func (o *obj) set(k string, v []byte) {
	for i := range *o {
		if (*o)[i].k == k {
			(*o)[i].v = v
			return
		}
	}
	*o = append(*o, kv{k, v})
}

func (o *obj) del(k string) {
	out := (*o)[:0]
	for _, e := range *o {
		if e.k != k {
			out = append(out, e)
		}
	}
	*o = out
}

// parseObj splits a raw JSON object into ordered members, the last duplicate winning in the
// position of the first (as JSON.parse does).
func parseObj(raw []byte) obj {
	var o obj
	eachField(raw, func(k, v []byte) bool {
		key := string(k)
		if bytes.IndexByte(k, '\\') >= 0 {
			if s, ok := jsonString(append(append([]byte{'"'}, k...), '"')); ok {
				key = string(s)
			}
		}
		o.set(key, v)
		return true
	})
	return o
}

// mergeMeta mirrors mergeMetadata from @ag-ui/core: a shallow merge, last write wins.
func mergeMeta(dst obj, incoming []byte) obj {
	if dst == nil {
		dst = obj{}
	}
	eachField(incoming, func(k, v []byte) bool {
		dst.set(string(k), v)
		return true
	})
	return dst
}

func writeObj(b *bytes.Buffer, o obj, special func(k string, b *bytes.Buffer)) {
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(appendQuote(b.AvailableBuffer(), e.k))
		b.WriteByte(':')
		if e.v == nil {
			special(e.k, b)
		} else {
			b.Write(compactJSON(e.v))
		}
	}
	b.WriteByte('}')
}

// toolCall is an entry of an assistant message's toolCalls.
type toolCall struct {
	id       string
	fields   obj // "function" and "metadata" are placeholders
	fn       obj // "arguments" is a placeholder when argsStr
	args     []byte
	argsStr  bool
	meta     obj
	hasMeta  bool
	hasFunc  bool
	openedAt int
}

func (t *toolCall) name() []byte {
	if v, ok := t.fn.get("name"); ok {
		return v
	}
	return nil
}

func (t *toolCall) write(b *bytes.Buffer) {
	writeObj(b, t.fields, func(k string, b *bytes.Buffer) {
		switch k {
		case "metadata":
			writeObj(b, t.meta, nil)
		case "function":
			writeObj(b, t.fn, func(string, *bytes.Buffer) {
				b.WriteByte('"')
				b.Write(t.args)
				b.WriteByte('"')
			})
		}
	})
}

func parseToolCall(raw []byte) *toolCall {
	t := &toolCall{fields: parseObj(raw)}
	if v, ok := t.fields.get("id"); ok {
		if s, ok := jsonString(v); ok {
			t.id = string(s)
		}
	}
	if v, ok := t.fields.get("function"); ok && len(v) > 0 && v[0] == '{' {
		t.hasFunc = true
		t.fn = parseObj(v)
		t.fields.set("function", nil)
		if a, ok := t.fn.get("arguments"); ok {
			if body, ok := strBody(a); ok {
				t.args, t.argsStr = append([]byte(nil), body...), true
				t.fn.set("arguments", nil)
			}
		}
	}
	if v, ok := t.fields.get("metadata"); ok && len(v) > 0 && v[0] == '{' {
		t.meta, t.hasMeta = parseObj(v), true
		t.fields.set("metadata", nil)
	}
	return t
}

// message is one entry of the client's message list.
type message struct {
	id         string
	role       string
	fields     obj
	content    []byte // escaped JSON string body, when contentStr
	contentStr bool
	toolCalls  []*toolCall
	hasCalls   bool
	meta       obj
	hasMeta    bool
	hold       *heldActivity // an activity message whose fold stopped (fold.go)
	// rendered is the message as write renders it, kept by a Fold's output (appendMessages)
	// so that a message no event changed since is copied, not rendered again; nil when not
	// kept or changed since. Every change to the message or to one of its tool calls calls
	// changed (apply.go, hotpath.go); TestFoldProperty compares each output with Compact's.
	rendered []byte
	// snapID is the id a Fold's Messages gives for the message (its "id" member's string
	// value), when snapIDKnown; snapIDKnown is 1 when it has one, -1 when not, 0 when not
	// looked up yet. No event changes a message's "id" member once it is made.
	snapID      string
	snapIDKnown int8
}

// changed drops the rendering kept for m: it is about to change.
func (m *message) changed() { m.rendered = nil }

// write renders the message as a MESSAGES_SNAPSHOT carries it (a held activity message as it
// stood when its fold stopped).
func (m *message) write(b *bytes.Buffer) {
	if m.hold != nil {
		m = m.hold.before
	}
	writeObj(b, m.fields, func(k string, b *bytes.Buffer) {
		switch k {
		case "content":
			b.WriteByte('"')
			b.Write(m.content)
			b.WriteByte('"')
		case "metadata":
			writeObj(b, m.meta, nil)
		case "toolCalls":
			b.WriteByte('[')
			for i, t := range m.toolCalls {
				if i > 0 {
					b.WriteByte(',')
				}
				t.write(b)
			}
			b.WriteByte(']')
		}
	})
}

func (m *message) mergeMetadata(raw []byte) {
	if raw == nil || len(raw) == 0 || raw[0] != '{' {
		return
	}
	m.changed()
	m.meta = mergeMeta(m.meta, raw)
	if !m.hasMeta {
		m.hasMeta = true
		m.fields.set("metadata", nil)
	}
}

func (t *toolCall) mergeMetadata(raw []byte) {
	if raw == nil || len(raw) == 0 || raw[0] != '{' {
		return
	}
	t.meta = mergeMeta(t.meta, raw)
	if !t.hasMeta {
		t.hasMeta = true
		t.fields.set("metadata", nil)
	}
}

func (m *message) findCall(id string) *toolCall {
	for _, t := range m.toolCalls {
		if t.id == id {
			return t
		}
	}
	return nil
}

// parseMessage builds a message from a raw message object (snapshot or run input). A
// subagentRunId of null is dropped, as the reducer does.
func parseMessage(raw []byte) *message {
	m := &message{fields: parseObj(raw)}
	if v, ok := m.fields.get("id"); ok {
		if s, ok := jsonString(v); ok {
			m.id = string(s)
		}
	}
	if v, ok := m.fields.get("role"); ok {
		if s, ok := jsonString(v); ok {
			m.role = string(s)
		}
	}
	if v, ok := m.fields.get("subagentRunId"); ok && string(v) == "null" {
		m.fields.del("subagentRunId")
	}
	if v, ok := m.fields.get("content"); ok {
		if body, ok := strBody(v); ok {
			m.content, m.contentStr = append([]byte(nil), body...), true
			m.fields.set("content", nil)
		}
	}
	if v, ok := m.fields.get("toolCalls"); ok && len(v) > 0 && v[0] == '[' {
		m.hasCalls = true
		m.fields.set("toolCalls", nil)
		eachElem(v, func(e []byte) {
			if len(e) > 0 && e[0] == '{' {
				m.toolCalls = append(m.toolCalls, parseToolCall(e))
			}
		})
	}
	if v, ok := m.fields.get("metadata"); ok && len(v) > 0 && v[0] == '{' {
		m.meta, m.hasMeta = parseObj(v), true
		m.fields.set("metadata", nil)
	}
	return m
}
