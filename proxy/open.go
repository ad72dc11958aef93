package proxy

import (
	"encoding/json"
	"slices"

	"github.com/agui-proxy/agui-proxy/agui"
)

// openStreams follows what an agent's stream has opened and not yet closed (text messages,
// tool calls, reasoning spans and messages, steps, subagents, and the retired THINKING_*
// spans), so that a stop can close them before its RUN_FINISHED: the official client's
// verifier refuses a RUN_FINISHED while any of them is open. Only the events that open or
// close something are decoded, and only for their ids; every other event costs a switch.
//
// Things opened through *_CHUNK events are not followed: the official client closes an open
// chunk lane itself when RUN_FINISHED arrives (and when any other event of its lane does),
// so an explicit end would close it a second time and fail the run.
//
// The pump goroutine owns it.
type openStreams struct {
	items []openItem // in opening order
}

// openItem is one thing open in the stream.
type openItem struct {
	end string // the type of the event that closes it (TEXT_MESSAGE_END, ...)
	id  string // its id: messageId, toolCallId, stepName or subagentRunId ("" for THINKING_*)
	// sub is the opener's subagentRunId ("" when it had none): the closing event carries it,
	// since the verifier keys steps by it and checks every end against its opener's.
	sub string
}

// openerOf maps the type of an event that opens something to the type of the event the proxy
// closes it with (openItem.end); closerOf maps the type of an event that closes something to
// the openItem.end of what it closes (SUBAGENT_FINISHED and SUBAGENT_ERROR both close a
// subagent, which the proxy closes with SUBAGENT_ERROR).
var (
	openerOf = map[string]string{
		agui.TextMessageStart:         agui.TextMessageEnd,
		agui.ToolCallStart:            agui.ToolCallEnd,
		agui.ReasoningStart:           agui.ReasoningEnd,
		agui.ReasoningMessageStart:    agui.ReasoningMessageEnd,
		agui.StepStarted:              agui.StepFinished,
		agui.SubagentStarted:          agui.SubagentError,
		agui.ThinkingStart:            agui.ThinkingEnd,
		agui.ThinkingTextMessageStart: agui.ThinkingTextMessageEnd,
	}
	closerOf = map[string]string{
		agui.TextMessageEnd:         agui.TextMessageEnd,
		agui.ToolCallEnd:            agui.ToolCallEnd,
		agui.ReasoningEnd:           agui.ReasoningEnd,
		agui.ReasoningMessageEnd:    agui.ReasoningMessageEnd,
		agui.StepFinished:           agui.StepFinished,
		agui.SubagentFinished:       agui.SubagentError,
		agui.SubagentError:          agui.SubagentError,
		agui.ThinkingEnd:            agui.ThinkingEnd,
		agui.ThinkingTextMessageEnd: agui.ThinkingTextMessageEnd,
	}
)

// openIDs are the members of an opening or closing event that name what it opens or closes.
type openIDs struct {
	MessageID     string `json:"messageId"`
	ToolCallID    string `json:"toolCallId"`
	StepName      string `json:"stepName"`
	SubagentRunID string `json:"subagentRunId"`
}

// key is the id the event names for the closing type end.
func (ids openIDs) key(end string) string {
	switch end {
	case agui.TextMessageEnd, agui.ReasoningEnd, agui.ReasoningMessageEnd:
		return ids.MessageID
	case agui.ToolCallEnd:
		return ids.ToolCallID
	case agui.StepFinished:
		return ids.StepName
	case agui.SubagentError:
		return ids.SubagentRunID
	}
	return "" // THINKING_*: no ids
}

// observe notes the event of type typ (data is its JSON) when it opens or closes something.
func (o *openStreams) observe(typ string, data []byte) {
	end, opens := openerOf[typ]
	if !opens {
		if end, opens = closerOf[typ]; !opens {
			return
		}
		var ids openIDs
		json.Unmarshal(data, &ids) // an event that is not an object closes nothing it names
		key, sub := ids.key(end), ids.SubagentRunID
		// The most recent match: the verifier allows one open item per id (steps: per
		// subagent), so a stray end only closes what it names.
		for i := len(o.items) - 1; i >= 0; i-- {
			it := o.items[i]
			if it.end == end && it.id == key && (end != agui.StepFinished || it.sub == sub) {
				o.items = slices.Delete(o.items, i, i+1)
				return
			}
		}
		return
	}
	var ids openIDs
	if json.Unmarshal(data, &ids) != nil {
		return
	}
	sub := ids.SubagentRunID
	if end == agui.SubagentError {
		sub = ""
	}
	o.items = append(o.items, openItem{end: end, id: ids.key(end), sub: sub})
}

// closing returns the data of the events that close everything still open, the most
// recently opened first (what opened inside a subagent or a step closes before it), and
// forgets them.
func (o *openStreams) closing() [][]byte {
	out := make([][]byte, 0, len(o.items))
	for i := len(o.items) - 1; i >= 0; i-- {
		out = append(out, o.items[i].closer())
	}
	o.items = o.items[:0]
	return out
}

// closer is the data of the event that closes it.
func (it openItem) closer() []byte {
	out := []byte(`{"type":`)
	out = appendJSONString(out, it.end)
	switch it.end {
	case agui.TextMessageEnd, agui.ReasoningEnd, agui.ReasoningMessageEnd:
		out = append(out, `,"messageId":`...)
		out = appendJSONString(out, it.id)
	case agui.ToolCallEnd:
		out = append(out, `,"toolCallId":`...)
		out = appendJSONString(out, it.id)
	case agui.StepFinished:
		out = append(out, `,"stepName":`...)
		out = appendJSONString(out, it.id)
	case agui.SubagentError:
		out = append(out, `,"subagentRunId":`...)
		out = appendJSONString(out, it.id)
		out = append(out, `,"message":"agui-proxy: the run was stopped on request","code":"CANCELLED"`...)
	}
	if it.sub != "" {
		out = append(out, `,"subagentRunId":`...)
		out = appendJSONString(out, it.sub)
	}
	return append(out, '}')
}
