package agui

// Event types of AG-UI 1.0 (the official @ag-ui/core package), plus the retired THINKING_*
// types that older agents still emit. Unknown types are legal on the wire: the proxy forwards
// and records them unchanged.
const (
	RunStarted  = "RUN_STARTED"
	RunFinished = "RUN_FINISHED"
	RunError    = "RUN_ERROR"

	StepStarted  = "STEP_STARTED"
	StepFinished = "STEP_FINISHED"

	TextMessageStart   = "TEXT_MESSAGE_START"
	TextMessageContent = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd     = "TEXT_MESSAGE_END"
	TextMessageChunk   = "TEXT_MESSAGE_CHUNK"

	ToolCallStart  = "TOOL_CALL_START"
	ToolCallArgs   = "TOOL_CALL_ARGS"
	ToolCallEnd    = "TOOL_CALL_END"
	ToolCallChunk  = "TOOL_CALL_CHUNK"
	ToolCallResult = "TOOL_CALL_RESULT"

	StateSnapshot    = "STATE_SNAPSHOT"
	StateDelta       = "STATE_DELTA"
	MessagesSnapshot = "MESSAGES_SNAPSHOT"
	ActivitySnapshot = "ACTIVITY_SNAPSHOT"
	ActivityDelta    = "ACTIVITY_DELTA"

	ReasoningStart          = "REASONING_START"
	ReasoningMessageStart   = "REASONING_MESSAGE_START"
	ReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     = "REASONING_MESSAGE_END"
	ReasoningMessageChunk   = "REASONING_MESSAGE_CHUNK"
	ReasoningEnd            = "REASONING_END"
	ReasoningEncryptedValue = "REASONING_ENCRYPTED_VALUE"

	SubagentStarted  = "SUBAGENT_STARTED"
	SubagentFinished = "SUBAGENT_FINISHED"
	SubagentError    = "SUBAGENT_ERROR"

	Raw    = "RAW"
	Custom = "CUSTOM"

	// Retired in 1.0: the official client translates these to REASONING_* with random ids.
	ThinkingStart              = "THINKING_START"
	ThinkingEnd                = "THINKING_END"
	ThinkingTextMessageStart   = "THINKING_TEXT_MESSAGE_START"
	ThinkingTextMessageContent = "THINKING_TEXT_MESSAGE_CONTENT"
	ThinkingTextMessageEnd     = "THINKING_TEXT_MESSAGE_END"
)

// IsTerminal reports whether an event of type t ends a run (RUN_FINISHED or RUN_ERROR).
func IsTerminal(t string) bool { return t == RunFinished || t == RunError }
