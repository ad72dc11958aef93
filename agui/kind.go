package agui

// Kind is an AG-UI 1.0 event type as a small integer, for code that switches on the type of
// every event (package compact's reducer): a switch or an array index instead of string
// comparisons and map lookups. It is the one table of the protocol's event types; the string
// constants in events.go are its names.
type Kind uint8

// The 31 event types of AG-UI 1.0 (the official @ag-ui/core EventType enum). KindUnknown is
// every other type, the retired THINKING_* ones included.
const (
	KindUnknown Kind = iota
	KindRunStarted
	KindRunFinished
	KindRunError
	KindStepStarted
	KindStepFinished
	KindTextMessageStart
	KindTextMessageContent
	KindTextMessageEnd
	KindTextMessageChunk
	KindToolCallStart
	KindToolCallArgs
	KindToolCallEnd
	KindToolCallChunk
	KindToolCallResult
	KindStateSnapshot
	KindStateDelta
	KindMessagesSnapshot
	KindActivitySnapshot
	KindActivityDelta
	KindReasoningStart
	KindReasoningMessageStart
	KindReasoningMessageContent
	KindReasoningMessageEnd
	KindReasoningMessageChunk
	KindReasoningEnd
	KindReasoningEncryptedValue
	KindSubagentStarted
	KindSubagentFinished
	KindSubagentError
	KindRaw
	KindCustom

	// NumKinds sizes arrays indexed by Kind.
	NumKinds = KindCustom + 1
)

// kindNames maps a Kind to its wire name.
var kindNames = [NumKinds]string{
	KindRunStarted:              RunStarted,
	KindRunFinished:             RunFinished,
	KindRunError:                RunError,
	KindStepStarted:             StepStarted,
	KindStepFinished:            StepFinished,
	KindTextMessageStart:        TextMessageStart,
	KindTextMessageContent:      TextMessageContent,
	KindTextMessageEnd:          TextMessageEnd,
	KindTextMessageChunk:        TextMessageChunk,
	KindToolCallStart:           ToolCallStart,
	KindToolCallArgs:            ToolCallArgs,
	KindToolCallEnd:             ToolCallEnd,
	KindToolCallChunk:           ToolCallChunk,
	KindToolCallResult:          ToolCallResult,
	KindStateSnapshot:           StateSnapshot,
	KindStateDelta:              StateDelta,
	KindMessagesSnapshot:        MessagesSnapshot,
	KindActivitySnapshot:        ActivitySnapshot,
	KindActivityDelta:           ActivityDelta,
	KindReasoningStart:          ReasoningStart,
	KindReasoningMessageStart:   ReasoningMessageStart,
	KindReasoningMessageContent: ReasoningMessageContent,
	KindReasoningMessageEnd:     ReasoningMessageEnd,
	KindReasoningMessageChunk:   ReasoningMessageChunk,
	KindReasoningEnd:            ReasoningEnd,
	KindReasoningEncryptedValue: ReasoningEncryptedValue,
	KindSubagentStarted:         SubagentStarted,
	KindSubagentFinished:        SubagentFinished,
	KindSubagentError:           SubagentError,
	KindRaw:                     Raw,
	KindCustom:                  Custom,
}

// String returns the wire name ("" for KindUnknown).
func (k Kind) String() string {
	if k >= NumKinds {
		return ""
	}
	return kindNames[k]
}

// KindOf returns the Kind of an event type name (KindUnknown for names outside AG-UI 1.0):
// one table probe and one string comparison, through a hash that is collision-free on the 31
// names (kindTable's initializer checks it).
func KindOf(name string) Kind {
	if len(name) < 3 {
		return KindUnknown
	}
	k := kindTable[kindHash(len(name), name[2], name[len(name)-2])]
	if kindNames[k] != name {
		return KindUnknown
	}
	return k
}

// KindOfBytes is KindOf for the body of a raw JSON string; it does not allocate.
func KindOfBytes(name []byte) Kind {
	if len(name) < 3 {
		return KindUnknown
	}
	k := kindTable[kindHash(len(name), name[2], name[len(name)-2])]
	if kindNames[k] != string(name) {
		return KindUnknown
	}
	return k
}

func kindHash(n int, third, penultimate byte) uint8 {
	return uint8(n*8+int(third)+int(penultimate)*3) & 127
}

var kindTable = func() (tab [128]Kind) {
	for k := KindUnknown + 1; k < NumKinds; k++ {
		n := kindNames[k]
		h := kindHash(len(n), n[2], n[len(n)-2])
		if tab[h] != KindUnknown {
			panic("agui: kindHash collides on " + n)
		}
		tab[h] = k
	}
	return tab
}()
