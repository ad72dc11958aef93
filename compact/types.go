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

// typeOf returns the etype of a type name (tUnknown for types outside AG-UI 1.0): one table
// probe and one string comparison, through a hash that is collision-free on the 31 names
// (typeTable's initializer checks it).
func typeOf(t string) etype {
	if len(t) < 3 {
		return tUnknown
	}
	c := typeTable[typeHash(t)]
	if typeNames[c] != t {
		return tUnknown
	}
	return c
}

// typeOfBytes is typeOf for the body of a raw JSON string.
func typeOfBytes(t []byte) etype {
	if len(t) < 3 {
		return tUnknown
	}
	c := typeTable[uint8(len(t)*8+int(t[2])+int(t[len(t)-2])*3)&127]
	if typeNames[c] != string(t) {
		return tUnknown
	}
	return c
}

func typeHash(t string) uint8 {
	return uint8(len(t)*8+int(t[2])+int(t[len(t)-2])*3) & 127
}

var typeTable = func() (tab [128]etype) {
	for c := tUnknown + 1; c < numTypes; c++ {
		h := typeHash(typeNames[c])
		if tab[h] != tUnknown {
			panic("compact: typeHash collides on " + typeNames[c])
		}
		tab[h] = c
	}
	return tab
}()

// String returns the wire name.
func (t etype) String() string { return typeNames[t] }
