package compact

import (
	"bytes"
	"slices"
)

// Concat is the official TypeScript compactEvents (@ag-ui/client 1.0,
// src/compact/compact.ts), for callers who want exactly that behaviour: the deltas of each
// text message and tool call are joined into one CONTENT / ARGS event (at the JSON-string
// level, so UTF-16 surrogate halves split across deltas stay correct), events that arrive
// while a message or tool call is streaming move to after it, and STATE_SNAPSHOT /
// STATE_DELTA events between run boundaries fold into one STATE_SNAPSHOT starting at the last
// snapshot of the group (a group without a snapshot is kept as is; a delta that does not apply
// is skipped). It keeps every other event, and unlike Compact it is not guaranteed to replay
// to the same messages when snapshots interleave open streams.
func Concat(events []Event) ([]Event, error) {
	c := &concat{texts: map[string]*stream{}, tools: map[string]*stream{}}
	for _, e := range events {
		var f eventFields
		scanFields(e.Raw, &f)
		switch e.Type {
		case "TEXT_MESSAGE_START", "TOOL_CALL_START":
			s := c.get(e.Type, f)
			if len(s.deltas) == 0 {
				s.start = startMerge(s.start, e)
			} else {
				s.start = startReplace(s.start, e)
				s.post = metaMerge(s.post, f.metadata)
			}
		case "TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS":
			s := c.get(e.Type, f)
			s.deltas = append(s.deltas, f.delta)
			s.post = metaMerge(s.post, f.metadata)
		case "TEXT_MESSAGE_END", "TOOL_CALL_END":
			s := c.get(e.Type, f)
			ev := e
			s.end = &ev
			c.flush(s)
			c.remove(s)
		case "RUN_STARTED", "RUN_FINISHED", "RUN_ERROR":
			if err := c.flushState(); err != nil {
				return nil, err
			}
			c.out = append(c.out, e)
		case "STATE_SNAPSHOT", "STATE_DELTA":
			c.state = append(c.state, e)
		default:
			if s := c.firstOpen(); s != nil {
				s.other = append(s.other, e)
			} else {
				c.out = append(c.out, e)
			}
		}
	}
	for len(c.textOrder) > 0 {
		s := c.texts[c.textOrder[0]]
		c.flush(s)
		c.remove(s)
	}
	for len(c.toolOrder) > 0 {
		s := c.tools[c.toolOrder[0]]
		c.flush(s)
		c.remove(s)
	}
	if err := c.flushState(); err != nil {
		return nil, err
	}
	return c.out, nil
}

type stream struct {
	tool   bool
	id     string
	idRaw  []byte
	start  *Event
	deltas [][]byte
	post   obj // metadata after the first delta
	end    *Event
	other  []Event
}

type concat struct {
	out                  []Event
	texts, tools         map[string]*stream
	textOrder, toolOrder []string
	state                []Event
}

func (c *concat) get(t string, f eventFields) *stream {
	tool := t == "TOOL_CALL_START" || t == "TOOL_CALL_ARGS" || t == "TOOL_CALL_END"
	idRaw := f.messageID
	m, order := c.texts, &c.textOrder
	if tool {
		idRaw, m, order = f.toolCallID, c.tools, &c.toolOrder
	}
	id, _ := str(idRaw)
	s := m[id]
	if s == nil {
		s = &stream{tool: tool, id: id, idRaw: idRaw}
		m[id] = s
		*order = append(*order, id)
	}
	return s
}

func (c *concat) remove(s *stream) {
	if s.tool {
		delete(c.tools, s.id)
		c.toolOrder = slices.DeleteFunc(c.toolOrder, func(k string) bool { return k == s.id })
	} else {
		delete(c.texts, s.id)
		c.textOrder = slices.DeleteFunc(c.textOrder, func(k string) bool { return k == s.id })
	}
}

func (c *concat) firstOpen() *stream {
	for _, k := range c.textOrder {
		if s := c.texts[k]; s.start != nil && s.end == nil {
			return s
		}
	}
	for _, k := range c.toolOrder {
		if s := c.tools[k]; s.start != nil && s.end == nil {
			return s
		}
	}
	return nil
}

func (c *concat) flush(s *stream) {
	if s.start != nil {
		c.out = append(c.out, *s.start)
	}
	if len(s.deltas) > 0 {
		var b bytes.Buffer
		if s.tool {
			b.WriteString(`{"type":"TOOL_CALL_ARGS","toolCallId":`)
		} else {
			b.WriteString(`{"type":"TEXT_MESSAGE_CONTENT","messageId":`)
		}
		b.Write(quote(s.id))
		b.WriteString(`,"delta":"`)
		for _, d := range s.deltas {
			body, _ := strBody(d)
			b.Write(body)
		}
		b.WriteByte('"')
		if s.post != nil {
			b.WriteString(`,"metadata":`)
			writeObj(&b, s.post, nil)
		}
		b.WriteByte('}')
		t := "TEXT_MESSAGE_CONTENT"
		if s.tool {
			t = "TOOL_CALL_ARGS"
		}
		c.out = append(c.out, mustEvent(t, b.Bytes()))
	}
	if s.end != nil {
		c.out = append(c.out, *s.end)
	}
	c.out = append(c.out, s.other...)
}

func metaMerge(dst obj, raw []byte) obj {
	if raw == nil || len(raw) == 0 || raw[0] != '{' {
		return dst
	}
	return mergeMeta(dst, raw)
}

// startMerge mirrors Ht: the new START wins, with the previous START's metadata merged under
// its own.
func startMerge(prev *Event, e Event) *Event {
	if prev == nil {
		return &e
	}
	pm := fieldOr(prev.Raw, "metadata")
	em := fieldOr(e.Raw, "metadata")
	merged := metaMerge(metaMerge(nil, pm), em)
	if merged == nil {
		return &e
	}
	o := parseObj(e.Raw)
	var b bytes.Buffer
	writeObj(&b, obj{{"m", nil}}, func(string, *bytes.Buffer) { writeObj(&b, merged, nil) })
	o.set("metadata", b.Bytes()[5:b.Len()-1])
	return objEvent(e.Type, o)
}

// startReplace mirrors Ut: the new START without its metadata, keeping the previous START's.
func startReplace(prev *Event, e Event) *Event {
	o := parseObj(e.Raw)
	o.del("metadata")
	if prev != nil {
		if pm, ok := field(prev.Raw, "metadata"); ok {
			o = append(o, kv{"metadata", pm})
		}
	}
	return objEvent(e.Type, o)
}

func objEvent(t string, o obj) *Event {
	var b bytes.Buffer
	writeObj(&b, o, nil)
	return &Event{Type: t, Raw: b.Bytes()}
}

// flushState mirrors Yt.
func (c *concat) flushState() error {
	group := c.state
	c.state = nil
	if len(group) == 0 {
		return nil
	}
	last := -1
	for i := len(group) - 1; i >= 0; i-- {
		if group[i].Type == "STATE_SNAPSHOT" {
			last = i
			break
		}
	}
	if last < 0 {
		c.out = append(c.out, group...)
		return nil
	}
	var st any = map[string]any{}
	for _, e := range group[last:] {
		var f eventFields
		scanFields(e.Raw, &f)
		if e.Type == "STATE_SNAPSHOT" {
			v, err := decodeJS(f.snapshot)
			if err != nil {
				return err
			}
			st = v
			continue
		}
		p, err := decodeJS(f.delta)
		if err != nil {
			continue
		}
		if ns, err := applyPatch(st, p, DefaultMaxCopyBytes); err == nil {
			st = ns
		}
	}
	var meta obj
	for _, e := range group {
		meta = metaMerge(meta, fieldOr(e.Raw, "metadata"))
	}
	sb, err := marshalJS(st)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"STATE_SNAPSHOT","snapshot":`)
	b.Write(sb)
	if meta != nil {
		b.WriteString(`,"metadata":`)
		writeObj(&b, meta, nil)
	}
	b.WriteByte('}')
	c.out = append(c.out, mustEvent("STATE_SNAPSHOT", b.Bytes()))
	return nil
}
