package demoagent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Event types the scripts emit (AG-UI 1.0, @ag-ui/core, plus the retired THINKING_* family).
// They are spelled out here rather than imported so that this test fixture does not move when
// the production vocabulary does.
const (
	typeRunStarted              = "RUN_STARTED"
	typeRunFinished             = "RUN_FINISHED"
	typeRunError                = "RUN_ERROR"
	typeStepStarted             = "STEP_STARTED"
	typeStepFinished            = "STEP_FINISHED"
	typeTextStart               = "TEXT_MESSAGE_START"
	typeTextContent             = "TEXT_MESSAGE_CONTENT"
	typeTextEnd                 = "TEXT_MESSAGE_END"
	typeTextChunk               = "TEXT_MESSAGE_CHUNK"
	typeToolStart               = "TOOL_CALL_START"
	typeToolArgs                = "TOOL_CALL_ARGS"
	typeToolEnd                 = "TOOL_CALL_END"
	typeToolChunk               = "TOOL_CALL_CHUNK"
	typeToolResult              = "TOOL_CALL_RESULT"
	typeStateSnapshot           = "STATE_SNAPSHOT"
	typeStateDelta              = "STATE_DELTA"
	typeMessagesSnapshot        = "MESSAGES_SNAPSHOT"
	typeActivitySnapshot        = "ACTIVITY_SNAPSHOT"
	typeActivityDelta           = "ACTIVITY_DELTA"
	typeReasoningStart          = "REASONING_START"
	typeReasoningMessageStart   = "REASONING_MESSAGE_START"
	typeReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	typeReasoningMessageEnd     = "REASONING_MESSAGE_END"
	typeReasoningEnd            = "REASONING_END"
	typeReasoningEncrypted      = "REASONING_ENCRYPTED_VALUE"
	typeThinkingStart           = "THINKING_START"
	typeThinkingEnd             = "THINKING_END"
	typeThinkingTextStart       = "THINKING_TEXT_MESSAGE_START"
	typeThinkingTextContent     = "THINKING_TEXT_MESSAGE_CONTENT"
	typeThinkingTextEnd         = "THINKING_TEXT_MESSAGE_END"
	typeRaw                     = "RAW"
	typeCustom                  = "CUSTOM"
)

// raw is a value that is already JSON and is copied into an event verbatim. The unicode
// scenario needs it: encoding/json cannot produce a lone surrogate escape such as "\ud83d".
type raw string

// obj builds a compact JSON object whose members keep the order they are given in, like
// JSON.stringify in the official encoder (so "type" comes first). kv alternates member names
// and values; values are raw, string, int, int64, bool or anything json.Marshal accepts.
func obj(kv ...any) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(strconv.AppendQuote(nil, kv[i].(string))) // names are ASCII literals
		b.WriteByte(':')
		appendValue(&b, kv[i+1])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// event builds one event: {"type":typ, kv...}.
func event(typ string, kv ...any) []byte {
	return obj(append([]any{"type", typ}, kv...)...)
}

func appendValue(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case raw:
		b.WriteString(string(v))
	case []byte: // an already built object
		b.Write(v)
	case int:
		b.WriteString(strconv.Itoa(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	default:
		// Strings and composite values. HTML escaping off, like JSON.stringify.
		var tmp bytes.Buffer
		enc := json.NewEncoder(&tmp)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			// Only the package's own literals reach here; a failure is a programming error.
			panic(fmt.Sprintf("demoagent: encoding %T: %v", v, err))
		}
		b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte{'\n'}))
	}
}

// emitter hands a script's events, one at a time, to whoever runs it. A script keeps calling
// emit after a stop; those calls are cheap no-ops, and long loops check stopped.
type emitter struct {
	in  Input
	p   params
	now func() time.Time
	// wait runs before every event but the first (pacing, cancellation); false stops the run.
	wait func() bool
	// send delivers one event; false stops the run.
	send func([]byte) bool

	n       int
	stopped bool
}

// emit builds and delivers the event {"type":typ, kv...}.
func (e *emitter) emit(typ string, kv ...any) {
	e.deliver(func() []byte { return event(typ, kv...) })
}

// deliver pauses (wait), builds the event and sends it. Building after the pause matters for
// the bench scenario, which stamps the send time while building.
func (e *emitter) deliver(build func() []byte) {
	if e.stopped {
		return
	}
	if e.n > 0 && e.wait != nil && !e.wait() {
		e.stopped = true
		return
	}
	if !e.send(build()) {
		e.stopped = true
		return
	}
	e.n++
}

// id derives a deterministic id from the run id: kind-runId-n.
func (e *emitter) id(kind string, n int) string {
	return kind + "-" + e.in.RunID + "-" + strconv.Itoa(n)
}

// runStarted and runFinished bracket every scenario that is not about failure.
func (e *emitter) runStarted() {
	e.emit(typeRunStarted, "threadId", e.in.ThreadID, "runId", e.in.RunID)
}

func (e *emitter) runFinished() {
	e.emit(typeRunFinished, "threadId", e.in.ThreadID, "runId", e.in.RunID)
}

// text streams one assistant text message made of deltas.
func (e *emitter) text(messageID string, deltas ...string) {
	e.emit(typeTextStart, "messageId", messageID, "role", "assistant")
	for _, d := range deltas {
		e.emit(typeTextContent, "messageId", messageID, "delta", d)
	}
	e.emit(typeTextEnd, "messageId", messageID)
}
