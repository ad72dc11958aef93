package proxy

import (
	"strings"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
)

// TestOpenStreamsClosing: what a stop closes, for each kind of opener, most recent first, with
// the opener's subagent; what was closed (by either of its closers) or streams through chunks
// is left alone.
func TestOpenStreamsClosing(t *testing.T) {
	var o openStreams
	for _, ev := range []string{
		`{"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"helper"}`,
		`{"type":"STEP_STARTED","stepName":"look","subagentRunId":"s1"}`,
		`{"type":"STEP_STARTED","stepName":"look"}`,
		`{"type":"STEP_FINISHED","stepName":"look"}`, // the parent's, not s1's
		`{"type":"TEXT_MESSAGE_START","messageId":"m1","subagentRunId":"s1"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"c1","delta":"x"}`,
		`{"type":"SUBAGENT_STARTED","subagentRunId":"s2","name":"other"}`,
		`{"type":"SUBAGENT_FINISHED","subagentRunId":"s2"}`,
		`{"type":"THINKING_START"}`,
		`{"type":"THINKING_TEXT_MESSAGE_START"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c9","toolCallName":"x"}`,
		`{"type":"TOOL_CALL_END","toolCallId":"c9"}`,
		`{"type":"TOOL_CALL_END","toolCallId":"never-opened"}`,
		`not json`,
	} {
		typ, _ := jsonType(ev)
		o.observe(typ, []byte(ev))
	}
	var got []string
	for _, d := range o.closing() {
		got = append(got, string(d))
	}
	want := []string{
		`{"type":"THINKING_TEXT_MESSAGE_END"}`,
		`{"type":"THINKING_END"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"m1","subagentRunId":"s1"}`,
		`{"type":"STEP_FINISHED","stepName":"look","subagentRunId":"s1"}`,
		`{"type":"SUBAGENT_ERROR","subagentRunId":"s1","message":"agui-proxy: the run was stopped on request","code":"CANCELLED"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("closing =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if left := o.closing(); len(left) != 0 {
		t.Errorf("a second closing = %q, want nothing (closing forgets)", left)
	}
}

// jsonType is agui.EventType for a string.
func jsonType(s string) (string, bool) { return agui.EventType([]byte(s)) }
