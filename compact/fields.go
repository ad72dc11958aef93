package compact

// The fields of an event that the reducer reads, found in one pass over its raw JSON (the
// client gets them from JSON.parse), and the event as it travels through the pipeline.

import (
	"bytes"

	"github.com/agui-proxy/agui-proxy/agui"
)

// fields of one event the reducer reads; nil means absent.
type eventFields struct {
	messageID, toolCallID, toolCallName, parentMessageID, delta, role, name  []byte
	subagentRunID, metadata, rawEvent, snapshot, messages, input, stepName   []byte
	activityType, content, replace, patch, subtype, entityID, encryptedValue []byte
}

// scanFields fills f from the top-level members of the event object raw (already validated),
// the last duplicate winning as in JSON.parse. Known keys are matched in place (match), so the
// common event costs one pass over its values; other keys are skipped and decoded (slot).
func scanFields(raw []byte, f *eventFields) {
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
func (f *eventFields) match(b []byte) (dst *[]byte, n int) {
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
func (f *eventFields) slot(key []byte) *[]byte {
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

// pipelineEvent is an event inside the pipeline: a recorded one (raw set) or one the chunk
// transform synthesized (raw nil).
type pipelineEvent struct {
	typ agui.Kind
	f   eventFields
	raw []byte
}

func fieldOr(o []byte, name string) []byte {
	v, _ := field(o, name)
	return v
}
