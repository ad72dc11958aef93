package compact

// etype is an AG-UI 1.0 event type as a small integer: the reducer switches on it instead of
// comparing strings or looking types up in maps on every event.
type etype uint8

// The 31 event types of AG-UI 1.0; tUnknown is any other type.
const (
	tUnknown etype = iota
	tRunStarted
	tRunFinished
	tRunError
	tStepStarted
	tStepFinished
	tTextMessageStart
	tTextMessageContent
	tTextMessageEnd
	tTextMessageChunk
	tToolCallStart
	tToolCallArgs
	tToolCallEnd
	tToolCallChunk
	tToolCallResult
	tStateSnapshot
	tStateDelta
	tMessagesSnapshot
	tActivitySnapshot
	tActivityDelta
	tReasoningStart
	tReasoningMessageStart
	tReasoningMessageContent
	tReasoningMessageEnd
	tReasoningMessageChunk
	tReasoningEnd
	tReasoningEncryptedValue
	tSubagentStarted
	tSubagentFinished
	tSubagentError
	tRaw
	tCustom

	numTypes = tCustom + 1
)

// typeNames maps an etype back to its wire name.
var typeNames = [...]string{
	tUnknown:                 "",
	tRunStarted:              "RUN_STARTED",
	tRunFinished:             "RUN_FINISHED",
	tRunError:                "RUN_ERROR",
	tStepStarted:             "STEP_STARTED",
	tStepFinished:            "STEP_FINISHED",
	tTextMessageStart:        "TEXT_MESSAGE_START",
	tTextMessageContent:      "TEXT_MESSAGE_CONTENT",
	tTextMessageEnd:          "TEXT_MESSAGE_END",
	tTextMessageChunk:        "TEXT_MESSAGE_CHUNK",
	tToolCallStart:           "TOOL_CALL_START",
	tToolCallArgs:            "TOOL_CALL_ARGS",
	tToolCallEnd:             "TOOL_CALL_END",
	tToolCallChunk:           "TOOL_CALL_CHUNK",
	tToolCallResult:          "TOOL_CALL_RESULT",
	tStateSnapshot:           "STATE_SNAPSHOT",
	tStateDelta:              "STATE_DELTA",
	tMessagesSnapshot:        "MESSAGES_SNAPSHOT",
	tActivitySnapshot:        "ACTIVITY_SNAPSHOT",
	tActivityDelta:           "ACTIVITY_DELTA",
	tReasoningStart:          "REASONING_START",
	tReasoningMessageStart:   "REASONING_MESSAGE_START",
	tReasoningMessageContent: "REASONING_MESSAGE_CONTENT",
	tReasoningMessageEnd:     "REASONING_MESSAGE_END",
	tReasoningMessageChunk:   "REASONING_MESSAGE_CHUNK",
	tReasoningEnd:            "REASONING_END",
	tReasoningEncryptedValue: "REASONING_ENCRYPTED_VALUE",
	tSubagentStarted:         "SUBAGENT_STARTED",
	tSubagentFinished:        "SUBAGENT_FINISHED",
	tSubagentError:           "SUBAGENT_ERROR",
	tRaw:                     "RAW",
	tCustom:                  "CUSTOM",
}

// typeOf returns the etype of a type name (tUnknown for types outside AG-UI 1.0).
func typeOf(t string) etype {
	switch t {
	case "RUN_STARTED":
		return tRunStarted
	case "RUN_FINISHED":
		return tRunFinished
	case "RUN_ERROR":
		return tRunError
	case "STEP_STARTED":
		return tStepStarted
	case "STEP_FINISHED":
		return tStepFinished
	case "TEXT_MESSAGE_START":
		return tTextMessageStart
	case "TEXT_MESSAGE_CONTENT":
		return tTextMessageContent
	case "TEXT_MESSAGE_END":
		return tTextMessageEnd
	case "TEXT_MESSAGE_CHUNK":
		return tTextMessageChunk
	case "TOOL_CALL_START":
		return tToolCallStart
	case "TOOL_CALL_ARGS":
		return tToolCallArgs
	case "TOOL_CALL_END":
		return tToolCallEnd
	case "TOOL_CALL_CHUNK":
		return tToolCallChunk
	case "TOOL_CALL_RESULT":
		return tToolCallResult
	case "STATE_SNAPSHOT":
		return tStateSnapshot
	case "STATE_DELTA":
		return tStateDelta
	case "MESSAGES_SNAPSHOT":
		return tMessagesSnapshot
	case "ACTIVITY_SNAPSHOT":
		return tActivitySnapshot
	case "ACTIVITY_DELTA":
		return tActivityDelta
	case "REASONING_START":
		return tReasoningStart
	case "REASONING_MESSAGE_START":
		return tReasoningMessageStart
	case "REASONING_MESSAGE_CONTENT":
		return tReasoningMessageContent
	case "REASONING_MESSAGE_END":
		return tReasoningMessageEnd
	case "REASONING_MESSAGE_CHUNK":
		return tReasoningMessageChunk
	case "REASONING_END":
		return tReasoningEnd
	case "REASONING_ENCRYPTED_VALUE":
		return tReasoningEncryptedValue
	case "SUBAGENT_STARTED":
		return tSubagentStarted
	case "SUBAGENT_FINISHED":
		return tSubagentFinished
	case "SUBAGENT_ERROR":
		return tSubagentError
	case "RAW":
		return tRaw
	case "CUSTOM":
		return tCustom
	}
	return tUnknown
}

// String returns the wire name.
func (t etype) String() string { return typeNames[t] }
