package compact

// Mirror of verifyEvents (@ag-ui/client 1.0.0 src/verify/verify.ts): the order rules of a run
// (first event, one active run, what is open, steps, subagents). A violation rejects the run.

import (
	"github.com/agui-proxy/agui-proxy/agui"
)

// verifyRunLifecycle mirrors verifyEvents' run rules: nothing after RUN_ERROR but a new run,
// nothing after RUN_FINISHED but RUN_ERROR or a new run, RUN_STARTED (or RUN_ERROR) first,
// and no RUN_STARTED while a run is active. A new run after an ended one starts from nothing
// open.
func (r *reducer) verifyRunLifecycle(t agui.Kind) error {
	if r.runError && t != agui.KindRunStarted {
		return r.reject("the run has already errored")
	}
	if r.runFinished && t != agui.KindRunError && t != agui.KindRunStarted {
		return r.reject("the run has already finished")
	}
	if !r.first {
		r.first = true
		if t != agui.KindRunStarted && t != agui.KindRunError {
			return r.reject("first event must be RUN_STARTED")
		}
	} else if t == agui.KindRunStarted {
		if r.runStarted && !r.runFinished && !r.runError {
			return r.reject("RUN_STARTED while a run is still active")
		}
		if r.runFinished || r.runError {
			clear(r.openText)
			clear(r.openTool)
			clear(r.openReason)
			clear(r.openSpan)
			clear(r.steps)
			clear(r.subagents)
			r.runFinished, r.runError = false, false
		}
	}
	return nil
}

// verify mirrors verifyEvents' check of one event: the run lifecycle first, then the rules
// of the event's own type. It counts every event (seq orders what is open).
func (r *reducer) verify(e *pipelineEvent) error {
	t := e.typ
	if err := r.verifyRunLifecycle(t); err != nil {
		return err
	}
	id := func(v []byte) string { s, _ := str(v); return s }
	r.seq++
	switch t {
	case agui.KindRunStarted:
		r.runStarted = true
	case agui.KindTextMessageStart:
		m := id(e.f.messageID)
		if r.openText[m] != nil {
			return r.reject("text message %q is already open", m)
		}
		role := "assistant"
		if e.f.role != nil {
			role, _ = str(e.f.role)
		}
		r.openText[m] = &openItem{kind: "text", id: m, seq: r.seq, role: role, name: e.f.name, subRun: e.f.subagentRunID}
	case agui.KindTextMessageContent, agui.KindTextMessageEnd:
		if lookupOpen(r.openText, e.f.messageID) == nil {
			return r.reject("text message %s is not open", e.f.messageID)
		}
		if t == agui.KindTextMessageEnd {
			delete(r.openText, id(e.f.messageID))
		}
	case agui.KindToolCallStart:
		c := id(e.f.toolCallID)
		if r.openTool[c] != nil {
			return r.reject("tool call %q is already open", c)
		}
		r.openTool[c] = &openItem{kind: "tool", id: c, seq: r.seq, name: e.f.toolCallName, parent: e.f.parentMessageID, subRun: e.f.subagentRunID}
	case agui.KindToolCallArgs, agui.KindToolCallEnd:
		if lookupOpen(r.openTool, e.f.toolCallID) == nil {
			return r.reject("tool call %s is not open", e.f.toolCallID)
		}
		if t == agui.KindToolCallEnd {
			delete(r.openTool, id(e.f.toolCallID))
		}
	case agui.KindStepStarted, agui.KindStepFinished:
		owner := laneKey(e.f.subagentRunID)
		name := id(e.f.stepName)
		if r.steps[owner] == nil {
			r.steps[owner] = map[string]bool{}
		}
		if t == agui.KindStepStarted {
			if r.steps[owner][name] {
				return r.reject("step %q is already active", name)
			}
			r.steps[owner][name] = true
		} else {
			if !r.steps[owner][name] {
				return r.reject("step %q is not active", name)
			}
			delete(r.steps[owner], name)
		}
	case agui.KindReasoningStart:
		m := id(e.f.messageID)
		if r.openSpan[m] {
			return r.reject("reasoning %q is already open", m)
		}
		r.openSpan[m] = true
	case agui.KindReasoningEnd:
		m := id(e.f.messageID)
		if !r.openSpan[m] {
			return r.reject("reasoning %q is not open", m)
		}
		delete(r.openSpan, m)
	case agui.KindReasoningMessageStart:
		m := id(e.f.messageID)
		if r.openReason[m] != nil {
			return r.reject("reasoning message %q is already open", m)
		}
		r.openReason[m] = &openItem{kind: "reasoning", id: m, seq: r.seq, subRun: e.f.subagentRunID}
	case agui.KindReasoningMessageContent, agui.KindReasoningMessageEnd:
		if lookupOpen(r.openReason, e.f.messageID) == nil {
			return r.reject("reasoning message %s is not open", e.f.messageID)
		}
		if t == agui.KindReasoningMessageEnd {
			delete(r.openReason, id(e.f.messageID))
		}
	case agui.KindSubagentStarted:
		s, ok := str(e.f.subagentRunID)
		if !ok {
			return r.reject("SUBAGENT_STARTED without a subagentRunId")
		}
		if r.subagents[s] {
			return r.reject("subagent %q is already active", s)
		}
		r.subagents[s] = true
	case agui.KindSubagentFinished, agui.KindSubagentError:
		s, ok := str(e.f.subagentRunID)
		if !ok || !r.subagents[s] {
			return r.reject("subagent %q is not active", s)
		}
		delete(r.subagents, s)
	case agui.KindRunFinished:
		for _, st := range r.steps {
			if len(st) > 0 {
				return r.reject("RUN_FINISHED while a step is active")
			}
		}
		if len(r.openText)+len(r.openTool)+len(r.openReason)+len(r.openSpan)+len(r.subagents) > 0 {
			return r.reject("RUN_FINISHED while messages, tool calls, reasoning or subagents are open")
		}
		r.runFinished = true
	case agui.KindRunError:
		r.runError = true
	}
	return nil
}
