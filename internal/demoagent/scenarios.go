package demoagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrUnknownScenario is returned (wrapped, with the name quoted) for a scenario name that
// Scenarios does not list.
var ErrUnknownScenario = errors.New("unknown scenario")

// Input is what a scenario reads from the RunAgentInput: the ids its events carry, the
// messages (the snapshot scenario repeats them in its MESSAGES_SNAPSHOT) and forwardedProps,
// where the parameters events, intervalMs and size live.
type Input struct {
	ThreadID       string
	RunID          string
	Messages       []json.RawMessage
	State          json.RawMessage // the echo scenario reports it
	ForwardedProps json.RawMessage
}

// framing is how a scenario's events are put on the wire.
type framing int

const (
	framingLF           framing = iota // "data: <json>\n\n", like the official encoder
	framingCRLF                        // "data: <json>\r\n\r\n": the official client fails on it
	framingUnterminated                // like LF, but the last event lacks its blank line
)

// scenario is one scripted run.
type scenario struct {
	script  func(e *emitter)
	framing framing
	// paced scenarios pause Config.Delay between events when intervalMs is not given, or
	// defaultInterval when Delay is zero too. Other scenarios pause only for intervalMs.
	paced           bool
	defaultInterval time.Duration
}

var scenarios = map[string]scenario{
	"chat":         {script: chatScript},
	"tools":        {script: toolsScript},
	"parallel":     {script: parallelScript},
	"state":        {script: stateScript},
	"thinking":     {script: thinkingScript},
	"reasoning":    {script: reasoningScript},
	"steps":        {script: stepsScript},
	"activity":     {script: activityScript},
	"snapshot":     {script: snapshotScript},
	"fidelity":     {script: fidelityScript},
	"chunks":       {script: chunksScript},
	"custom":       {script: customScript},
	"unicode":      {script: unicodeScript},
	"error":        {script: errorScript},
	"noend":        {script: noendScript},
	"slow":         {script: slowScript, paced: true, defaultInterval: 50 * time.Millisecond},
	"large":        {script: largeScript},
	"bench":        {script: benchScript, paced: true},
	"crlf":         {script: chatScript, framing: framingCRLF},
	"unterminated": {script: chatScript, framing: framingUnterminated},
	"echo":         {script: echoScript},
}

// failureScenarios do not end with RUN_FINISHED, or cannot be parsed by the official client.
var failureScenarios = map[string]bool{"error": true, "noend": true, "crlf": true}

// Scenarios returns the name of every scenario, sorted.
func Scenarios() []string {
	names := make([]string, 0, len(scenarios))
	for n := range scenarios {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Events returns the events a run of scenario sends for in, as compact JSON, one event per
// element, in order, without framing and without pauses. Parameters are read from
// in.ForwardedProps ("events", "size"; "scenario" is ignored: the argument wins). The bench
// scenario's time fields are zero here; a live run stamps each event as it sends it.
//
// Errors wrap ErrUnknownScenario or ErrInvalidInput (a message that is not a JSON object, a
// bad parameter).
func Events(name string, in Input) ([][]byte, error) {
	sc, ok := scenarios[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownScenario, name)
	}
	if err := checkMessages(in.Messages); err != nil {
		return nil, err
	}
	p, err := parseParams(in.ForwardedProps)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	e := &emitter{
		in:   in,
		p:    p,
		now:  func() time.Time { return time.Unix(0, 0) },
		send: func(ev []byte) bool { out = append(out, ev); return true },
	}
	sc.script(e)
	return out, nil
}

// chatWords is the assistant's canned answer, one streamed token per element.
var chatWords = strings.Fields(`Hello! I am the demo agent. I stream this answer token by token so ` +
	`that proxies, recorders and clients can be tested without a language model.`)

// tokens returns n deltas cycling through chatWords, each with its trailing space.
func tokens(n int) []string {
	out := make([]string, n)
	for i := range out {
		w := chatWords[i%len(chatWords)]
		if i < n-1 {
			w += " "
		}
		out[i] = w
	}
	return out
}

// chatScript: one assistant message in about 20 token deltas ("events" overrides the count).
func chatScript(e *emitter) {
	e.runStarted()
	e.text(e.id("msg", 1), tokens(e.p.count(len(chatWords)))...)
	e.runFinished()
}

// echoScript: one assistant message saying what the agent received, so tests can see what a
// proxy in front of it forwarded: "received <n> messages [<id> ...]; state <json>" (ids in
// order, "-" for a message without one; state "null" when absent).
func echoScript(e *emitter) {
	e.runStarted()
	ids := make([]string, len(e.in.Messages))
	for i, m := range e.in.Messages {
		var v struct {
			ID string `json:"id"`
		}
		json.Unmarshal(m, &v)
		ids[i] = v.ID
		if ids[i] == "" {
			ids[i] = "-"
		}
	}
	state := "null"
	if len(bytes.TrimSpace(e.in.State)) > 0 {
		var buf bytes.Buffer
		if json.Compact(&buf, e.in.State) == nil {
			state = buf.String()
		}
	}
	e.text(e.id("msg", 1), fmt.Sprintf("received %d messages [%s]; state %s", len(ids), strings.Join(ids, " "), state))
	e.runFinished()
}

// toolsScript: text, a tool call whose JSON arguments arrive in pieces, its result, an answer.
func toolsScript(e *emitter) {
	e.runStarted()
	m1, call := e.id("msg", 1), e.id("call", 1)
	e.text(m1, "Let me ", "check the ", "weather.")
	e.emit(typeToolStart, "toolCallId", call, "toolCallName", "get_weather", "parentMessageId", m1)
	for _, d := range []string{`{"city":`, `"Paris",`, `"unit":"cel`, `sius"}`} {
		e.emit(typeToolArgs, "toolCallId", call, "delta", d)
	}
	e.emit(typeToolEnd, "toolCallId", call)
	e.emit(typeToolResult, "messageId", e.id("tool", 1), "toolCallId", call,
		"content", `{"temperature":21,"sky":"clear"}`, "role", "tool")
	e.text(e.id("msg", 2), "It is ", "21 °C ", "and clear ", "in Paris.")
	e.runFinished()
}

// parallelScript: two text messages and two tool calls open at the same time, interleaved.
func parallelScript(e *emitter) {
	e.runStarted()
	m1, m2 := e.id("msg", 1), e.id("msg", 2)
	c1, c2 := e.id("call", 1), e.id("call", 2)
	e.emit(typeTextStart, "messageId", m1, "role", "assistant")
	e.emit(typeTextStart, "messageId", m2, "role", "assistant")
	e.emit(typeTextContent, "messageId", m1, "delta", "Searching flights ")
	e.emit(typeTextContent, "messageId", m2, "delta", "Searching hotels ")
	e.emit(typeToolStart, "toolCallId", c1, "toolCallName", "search_flights", "parentMessageId", m1)
	e.emit(typeToolStart, "toolCallId", c2, "toolCallName", "search_hotels", "parentMessageId", m2)
	e.emit(typeToolArgs, "toolCallId", c1, "delta", `{"from":"CDG",`)
	e.emit(typeToolArgs, "toolCallId", c2, "delta", `{"city":"Rome",`)
	e.emit(typeTextContent, "messageId", m1, "delta", "for you.")
	e.emit(typeToolArgs, "toolCallId", c2, "delta", `"nights":2}`)
	e.emit(typeToolArgs, "toolCallId", c1, "delta", `"to":"FCO"}`)
	e.emit(typeTextContent, "messageId", m2, "delta", "for you.")
	e.emit(typeToolEnd, "toolCallId", c2)
	e.emit(typeToolEnd, "toolCallId", c1)
	e.emit(typeTextEnd, "messageId", m2)
	e.emit(typeTextEnd, "messageId", m1)
	e.emit(typeToolResult, "messageId", e.id("tool", 1), "toolCallId", c1, "content", `["AF1004"]`, "role", "tool")
	e.emit(typeToolResult, "messageId", e.id("tool", 2), "toolCallId", c2, "content", `["Hotel Roma"]`, "role", "tool")
	e.text(e.id("msg", 3), "Flight AF1004 ", "and Hotel Roma ", "are booked.")
	e.runFinished()
}

// stateScript: a STATE_SNAPSHOT then 50 STATE_DELTA events mixing add, replace, remove and
// test on objects, nested objects and arrays (append, insert at an index, replace inside an
// element). Every operation applies: the package tests fold them with a JSON Patch library.
func stateScript(e *emitter) {
	e.runStarted()
	e.emit(typeStateSnapshot, "snapshot", raw(`{"counter":0,"todos":[{"id":1,"title":"start","done":false}],`+
		`"user":{"name":"Ada","prefs":{"theme":"dark"}},"tags":[],"note":null}`))
	for g := range 10 {
		e.emit(typeStateDelta, "delta", raw(fmt.Sprintf(
			`[{"op":"test","path":"/counter","value":%d},{"op":"replace","path":"/counter","value":%d}]`, g, g+1)))
		e.emit(typeStateDelta, "delta", raw(fmt.Sprintf(
			`[{"op":"add","path":"/todos/-","value":{"id":%d,"title":"task %d","done":false}}]`, g+2, g)))
		e.emit(typeStateDelta, "delta", raw(fmt.Sprintf(
			`[{"op":"replace","path":"/todos/%d/done","value":true}]`, g)))
		e.emit(typeStateDelta, "delta", raw(fmt.Sprintf(
			`[{"op":"add","path":"/user/prefs/k%d","value":{"n":%d,"list":[%d,{"deep":[true]}]}},`+
				`{"op":"add","path":"/tags/0","value":"t%d"}]`, g, g, g, g)))
		if g == 0 {
			e.emit(typeStateDelta, "delta", raw(`[{"op":"replace","path":"/note","value":"first pass"}]`))
		} else {
			e.emit(typeStateDelta, "delta", raw(fmt.Sprintf(
				`[{"op":"remove","path":"/user/prefs/k%d/list/1"},{"op":"remove","path":"/tags/1"}]`, g-1)))
		}
	}
	e.text(e.id("msg", 1), "State ", "updated.")
	e.runFinished()
}

// thinkingScript: the retired THINKING_* events (pre-1.0 agents still send them; the 1.0
// client translates them to REASONING_* with random ids) then a text answer.
func thinkingScript(e *emitter) {
	e.runStarted()
	e.emit(typeThinkingStart, "title", "Planning")
	e.emit(typeThinkingTextStart)
	for _, d := range []string{"The user ", "wants a ", "short answer."} {
		e.emit(typeThinkingTextContent, "delta", d)
	}
	e.emit(typeThinkingTextEnd)
	e.emit(typeThinkingEnd)
	e.text(e.id("msg", 1), "Here is ", "the short ", "answer.")
	e.runFinished()
}

// reasoningScript: a reasoning span holding a streamed reasoning message and its encrypted
// value, then a text answer.
func reasoningScript(e *emitter) {
	e.runStarted()
	span, rm := e.id("reason", 1), e.id("rmsg", 1)
	e.emit(typeReasoningStart, "messageId", span)
	e.emit(typeReasoningMessageStart, "messageId", rm, "role", "reasoning")
	for _, d := range []string{"Compare ", "both options, ", "then pick ", "the cheaper one."} {
		e.emit(typeReasoningMessageContent, "messageId", rm, "delta", d)
	}
	e.emit(typeReasoningMessageEnd, "messageId", rm)
	e.emit(typeReasoningEncrypted, "subtype", "message", "entityId", rm,
		"encryptedValue", "ZGVtby1lbmNyeXB0ZWQtcmVhc29uaW5nLQ=="+e.in.RunID)
	e.emit(typeReasoningEnd, "messageId", span)
	e.text(e.id("msg", 1), "The cheaper ", "option wins.")
	e.runFinished()
}

// stepsScript: nested STEP_STARTED/STEP_FINISHED around text messages.
func stepsScript(e *emitter) {
	e.runStarted()
	e.emit(typeStepStarted, "stepName", "plan")
	e.emit(typeStepStarted, "stepName", "search")
	e.text(e.id("msg", 1), "Searching ", "the docs.")
	e.emit(typeStepFinished, "stepName", "search")
	e.emit(typeStepStarted, "stepName", "answer")
	e.text(e.id("msg", 2), "Found ", "three results.")
	e.emit(typeStepFinished, "stepName", "answer")
	e.emit(typeStepFinished, "stepName", "plan")
	e.runFinished()
}

// activityScript: an activity message created by ACTIVITY_SNAPSHOT and patched by
// ACTIVITY_DELTA, then a text answer.
func activityScript(e *emitter) {
	e.runStarted()
	a := e.id("activity", 1)
	e.emit(typeActivitySnapshot, "messageId", a, "activityType", "progress",
		"content", raw(`{"title":"Indexing","percent":0,"steps":[]}`))
	for i := 1; i <= 4; i++ {
		e.emit(typeActivityDelta, "messageId", a, "activityType", "progress", "patch", raw(fmt.Sprintf(
			`[{"op":"replace","path":"/percent","value":%d},{"op":"add","path":"/steps/-","value":"step %d"}]`,
			i*25, i)))
	}
	e.text(e.id("msg", 1), "Indexing ", "done.")
	e.runFinished()
}

// fidelityScript: the streams a careless compaction gets wrong (docs/compaction.md). A tool
// call streams while a MESSAGES_SNAPSHOT keeps its message without calls (the verifier still
// has it open, so its END is valid); state deltas whose move lands past the end after its
// inner remove, that copy an array into itself, and that write into a string (the browser
// build of the client rejects that delta, the Node build ignores the write); the same on
// activity content.
func fidelityScript(e *emitter) {
	e.runStarted()
	call := e.id("call", 1)
	e.emit(typeToolStart, "toolCallId", call, "toolCallName", "plan")
	e.emit(typeToolArgs, "toolCallId", call, "delta", `{"steps":`)
	msgs := make([]any, 0, len(e.in.Messages)+1)
	for _, m := range e.in.Messages {
		msgs = append(msgs, compactRaw(m))
	}
	msgs = append(msgs, obj("id", call, "role", "assistant", "toolCalls", raw(`[]`)))
	e.emit(typeMessagesSnapshot, "messages", raw(joinArray(msgs)))
	e.emit(typeToolArgs, "toolCallId", call, "delta", `3}`)
	e.emit(typeToolEnd, "toolCallId", call)
	e.emit(typeStateSnapshot, "snapshot", raw(`{"k":[298,"漢字"],"items":["",-737,"hello",740],"list":[{},"s"]}`))
	e.emit(typeStateDelta, "delta", raw(`[{"op":"move","from":"/k/1","path":"/k/2"}]`))
	e.emit(typeStateDelta, "delta", raw(`[{"op":"copy","from":"/items","path":"/items/3"}]`))
	e.emit(typeStateDelta, "delta", raw(`[{"op":"move","from":"/list/0","path":"/list/0/n"}]`))
	e.emit(typeStateDelta, "delta", raw(`[{"op":"add","path":"/after","value":1}]`))
	a := e.id("activity", 1)
	e.emit(typeActivitySnapshot, "messageId", a, "activityType", "plan", "content", raw(`{"list":[{},"s"],"k":[1,2]}`))
	e.emit(typeActivityDelta, "messageId", a, "activityType", "plan", "patch", raw(`[{"op":"move","from":"/k/1","path":"/k/2"}]`))
	e.emit(typeActivityDelta, "messageId", a, "activityType", "plan", "patch", raw(`[{"op":"move","from":"/list/0","path":"/list/0/n"}]`))
	e.text(e.id("msg", 1), "Planned ", "in 3 steps.")
	e.runFinished()
}

// snapshotScript: a message, then a MESSAGES_SNAPSHOT mid-run that repeats the input messages
// and that message and adds one, then more streaming.
func snapshotScript(e *emitter) {
	e.runStarted()
	m1, m2, m3 := e.id("msg", 1), e.id("msg", 2), e.id("msg", 3)
	e.text(m1, "First ", "answer.")
	msgs := make([]any, 0, len(e.in.Messages)+2)
	for _, m := range e.in.Messages {
		msgs = append(msgs, compactRaw(m))
	}
	msgs = append(msgs,
		obj("id", m1, "role", "assistant", "content", "First answer."),
		obj("id", m2, "role", "assistant", "content", "Inserted by the snapshot."))
	e.emit(typeMessagesSnapshot, "messages", raw(joinArray(msgs)))
	e.text(m3, "After ", "the snapshot.")
	e.runFinished()
}

// chunksScript: TEXT_MESSAGE_CHUNK and TOOL_CALL_CHUNK events, which the client expands into
// start/content/end and start/args/end.
func chunksScript(e *emitter) {
	e.runStarted()
	m1, call, m2 := e.id("msg", 1), e.id("call", 1), e.id("msg", 2)
	e.emit(typeTextChunk, "messageId", m1, "role", "assistant", "delta", "Looking ")
	e.emit(typeTextChunk, "messageId", m1, "delta", "it up.")
	e.emit(typeToolChunk, "toolCallId", call, "toolCallName", "lookup", "parentMessageId", m1, "delta", `{"q":`)
	e.emit(typeToolChunk, "toolCallId", call, "delta", `"agui"}`)
	e.emit(typeToolResult, "messageId", e.id("tool", 1), "toolCallId", call, "content", "found", "role", "tool")
	e.emit(typeTextChunk, "messageId", m2, "role", "assistant", "delta", "Found ")
	e.emit(typeTextChunk, "messageId", m2, "delta", "it.")
	e.runFinished()
}

// customScript: CUSTOM and RAW events, and a text message whose events carry metadata and a
// member no schema knows.
func customScript(e *emitter) {
	e.runStarted()
	m1 := e.id("msg", 1)
	e.emit(typeCustom, "name", "demo.highlight", "value", raw(`{"selector":"#total","color":"yellow"}`))
	e.emit(typeRaw, "event", raw(`{"provider":"demo","kind":"log","line":"warming up"}`), "source", "demo-agent")
	e.emit(typeTextStart, "messageId", m1, "role", "assistant",
		"metadata", raw(`{"model":"scripted","trace":{"span":1}}`), "xDemoExtra", raw(`{"kept":"by the proxy"}`))
	e.emit(typeTextContent, "messageId", m1, "delta", "Custom ", "metadata", raw(`{"chunk":1}`))
	e.emit(typeTextContent, "messageId", m1, "delta", "events sent.")
	e.emit(typeTextEnd, "messageId", m1, "metadata", raw(`{"finish":"stop"}`))
	e.emit(typeCustom, "name", "demo.done", "value", true)
	e.runFinished()
}

// unicodeScript: a rocket emoji split into its UTF-16 surrogate halves across two deltas, the
// way a JavaScript agent that slices by code unit sends it, plus multi-byte text.
func unicodeScript(e *emitter) {
	e.runStarted()
	m1 := e.id("msg", 1)
	e.emit(typeTextStart, "messageId", m1, "role", "assistant")
	e.emit(typeTextContent, "messageId", m1, "delta", "Launch ")
	e.emit(typeTextContent, "messageId", m1, "delta", raw(`"\ud83d"`))
	e.emit(typeTextContent, "messageId", m1, "delta", raw(`"\ude80"`))
	e.emit(typeTextContent, "messageId", m1, "delta", " done ✓ — ünïcödé 漢字 \u2028 <&>")
	e.emit(typeTextEnd, "messageId", m1)
	e.runFinished()
}

// errorScript: a message interrupted by RUN_ERROR.
func errorScript(e *emitter) {
	e.runStarted()
	m1 := e.id("msg", 1)
	e.emit(typeTextStart, "messageId", m1, "role", "assistant")
	e.emit(typeTextContent, "messageId", m1, "delta", "Working on ")
	e.emit(typeTextContent, "messageId", m1, "delta", "it...")
	e.emit(typeRunError, "message", "demo failure: the model is unavailable", "code", "DEMO_MODEL_UNAVAILABLE")
}

// noendScript: the stream stops in the middle of a message, without RUN_FINISHED, as when an
// agent process dies.
func noendScript(e *emitter) {
	e.runStarted()
	e.text(e.id("msg", 1), "Complete ", "message.")
	m2 := e.id("msg", 2)
	e.emit(typeTextStart, "messageId", m2, "role", "assistant")
	e.emit(typeTextContent, "messageId", m2, "delta", "Cut off ")
	e.emit(typeTextContent, "messageId", m2, "delta", "in the mid")
}

// slowScript: a chat answer of "events" deltas (default 20), paced.
func slowScript(e *emitter) {
	e.runStarted()
	e.text(e.id("msg", 1), tokens(e.p.count(20))...)
	e.runFinished()
}

// largeChunk is the delta size of the large scenario.
const largeChunk = 16 << 10

// largeScript: one message of "size" bytes (default 1 MiB) in 16 KiB deltas.
func largeScript(e *emitter) {
	e.runStarted()
	m1 := e.id("msg", 1)
	size := e.p.bytes(1 << 20)
	e.emit(typeTextStart, "messageId", m1, "role", "assistant")
	for off := 0; off < size && !e.stopped; off += largeChunk {
		e.emit(typeTextContent, "messageId", m1, "delta", filler(off, min(largeChunk, size-off)))
	}
	e.emit(typeTextEnd, "messageId", m1)
	e.runFinished()
}

// filler returns n bytes of printable ASCII that depend on the offset, so a reordered or
// repeated chunk is visible in a comparison.
func filler(off, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
	var b strings.Builder
	b.Grow(n)
	for i := range n {
		b.WriteByte(alphabet[(off+i)%len(alphabet)])
	}
	return b.String()
}

// benchScript: "events" content events (default 100) of about 200 bytes each ("size" sets
// the delta length, default 80). Each carries its send time: "timestamp" in Unix
// milliseconds (the schema's field) and rawEvent {"sentNs": Unix nanoseconds}, which
// agui-bench subtracts from its receive time.
func benchScript(e *emitter) {
	e.runStarted()
	m1 := e.id("msg", 1)
	delta := filler(0, e.p.bytes(80))
	e.emit(typeTextStart, "messageId", m1, "role", "assistant")
	n := e.p.count(100)
	for i := 0; i < n && !e.stopped; i++ {
		e.emitStamped(typeTextContent, "messageId", m1, "delta", delta)
	}
	e.emit(typeTextEnd, "messageId", m1)
	e.runFinished()
}

// emitStamped is emit with the send time appended as "timestamp" and rawEvent.sentNs. The
// event is built after the pause, right before it is written.
func (e *emitter) emitStamped(typ string, kv ...any) {
	e.deliver(func() []byte {
		t := e.now()
		return event(typ, append(kv, "timestamp", t.UnixMilli(),
			"rawEvent", raw(`{"sentNs":`+strconv.FormatInt(t.UnixNano(), 10)+`}`))...)
	})
}

// compactRaw returns m without insignificant white space and without HTML escaping (unlike
// json.Marshal). Events and the handler check messages first, so m is valid JSON.
func compactRaw(m json.RawMessage) raw {
	var b bytes.Buffer
	if err := json.Compact(&b, m); err != nil {
		return raw("null")
	}
	return raw(b.String())
}

// joinArray renders values (raw or []byte objects) as a JSON array.
func joinArray(vals []any) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(',')
		}
		switch v := v.(type) {
		case raw:
			b.WriteString(string(v))
		case []byte:
			b.Write(v)
		}
	}
	b.WriteByte(']')
	return b.String()
}
