package compact

// Mirror of enforceEvents (@ag-ui/client 1.0.0 src/enforce/enforce.ts): unknown types are
// dropped (reducer.feed), and each known event is held to the parts of its @ag-ui/core 1.0.0
// schema (EventSchemas) that the reducer depends on. A schema failure rejects the run.

import (
	"errors"

	"github.com/agui-proxy/agui-proxy/agui"
)

// checkSchema covers the @ag-ui/core schema rules that the reducer depends on.
func (r *reducer) checkSchema(t agui.Kind, f *eventFields) error {
	need := func(name string, v []byte) error {
		if !isStr(v) {
			return r.reject("%s must be a string", name)
		}
		return nil
	}
	opt := func(name string, v []byte) error {
		if v != nil && !isStr(v) {
			return r.reject("%s must be a string", name)
		}
		return nil
	}
	if f.subagentRunID != nil && string(f.subagentRunID) == "null" {
		return r.reject("subagentRunId must be omitted, not null")
	}
	if err := opt("subagentRunId", f.subagentRunID); err != nil {
		return err
	}
	if f.metadata != nil && (len(f.metadata) == 0 || f.metadata[0] != '{') {
		return r.reject("metadata must be an object")
	}
	var err error
	switch t {
	case agui.KindTextMessageStart:
		err = errors.Join(need("messageId", f.messageID), opt("name", f.name), r.checkRole(f.role))
	case agui.KindTextMessageContent, agui.KindReasoningMessageContent:
		err = errors.Join(need("messageId", f.messageID), need("delta", f.delta))
	case agui.KindTextMessageEnd, agui.KindReasoningMessageStart, agui.KindReasoningMessageEnd, agui.KindReasoningStart, agui.KindReasoningEnd:
		err = need("messageId", f.messageID)
	case agui.KindTextMessageChunk, agui.KindReasoningMessageChunk:
		err = errors.Join(opt("messageId", f.messageID), opt("delta", f.delta), opt("name", f.name))
		if t == agui.KindTextMessageChunk && err == nil {
			err = r.checkRole(f.role)
		}
	case agui.KindToolCallStart:
		err = errors.Join(need("toolCallId", f.toolCallID), need("toolCallName", f.toolCallName), opt("parentMessageId", f.parentMessageID))
	case agui.KindToolCallArgs:
		err = errors.Join(need("toolCallId", f.toolCallID), need("delta", f.delta))
	case agui.KindToolCallEnd:
		err = need("toolCallId", f.toolCallID)
	case agui.KindToolCallChunk:
		err = errors.Join(opt("toolCallId", f.toolCallID), opt("toolCallName", f.toolCallName), opt("parentMessageId", f.parentMessageID), opt("delta", f.delta))
	case agui.KindToolCallResult:
		err = errors.Join(need("messageId", f.messageID), need("toolCallId", f.toolCallID))
		if err == nil && f.content == nil {
			err = r.reject("content is required")
		}
	case agui.KindStateSnapshot:
		if f.snapshot == nil {
			err = r.reject("snapshot is required")
		}
	case agui.KindStateDelta:
		err = r.checkPatch(f.delta)
	case agui.KindActivityDelta:
		err = errors.Join(need("messageId", f.messageID), need("activityType", f.activityType), r.checkPatch(f.patch))
	case agui.KindActivitySnapshot:
		err = errors.Join(need("messageId", f.messageID), need("activityType", f.activityType))
		if err == nil && (len(f.content) == 0 || f.content[0] != '{') {
			err = r.reject("content must be an object")
		}
		if err == nil && f.replace != nil && string(f.replace) != "true" && string(f.replace) != "false" {
			err = r.reject("replace must be a boolean")
		}
	case agui.KindMessagesSnapshot:
		err = r.checkMessages(f.messages)
	case agui.KindStepStarted, agui.KindStepFinished:
		err = need("stepName", f.stepName)
	case agui.KindReasoningEncryptedValue:
		err = errors.Join(need("entityId", f.entityID), need("encryptedValue", f.encryptedValue))
		if err == nil && string(f.subtype) != `"tool-call"` && string(f.subtype) != `"message"` {
			err = r.reject("subtype must be tool-call or message")
		}
	case agui.KindRunStarted:
		err = errors.Join(need("threadId", fieldOr(r.cur, "threadId")), need("runId", fieldOr(r.cur, "runId")))
		if err == nil && f.input != nil {
			if len(f.input) == 0 || f.input[0] != '{' {
				err = r.reject("input must be an object")
			} else if m := fieldOr(f.input, "messages"); m != nil {
				err = r.checkMessages(m)
			}
		}
	}
	if err != nil {
		var se *StreamError
		if errors.As(err, &se) {
			return se
		}
		return err
	}
	return nil
}

// checkMessages requires an array of objects with a string id and role (MessageSchema).
func (r *reducer) checkMessages(ms []byte) error {
	if len(ms) == 0 || ms[0] != '[' {
		return r.reject("messages must be an array")
	}
	var err error
	eachElem(ms, func(m []byte) {
		if err == nil && (len(m) == 0 || m[0] != '{' || !isStr(fieldOr(m, "id")) || !isStr(fieldOr(m, "role"))) {
			err = r.reject("every message needs a string id and role")
		}
	})
	return err
}

func (r *reducer) checkRole(role []byte) error {
	if role == nil {
		return nil
	}
	switch string(role) {
	case `"developer"`, `"system"`, `"assistant"`, `"user"`:
		return nil
	}
	return r.reject("role %s is not a text message role", role)
}

// checkPatch enforces JsonPatchSchema: an array of operations with a known op and pointers
// matching ^(/([^/~]|~[01])*)*$, value present for add/replace/test.
func (r *reducer) checkPatch(p []byte) error {
	if len(p) == 0 || p[0] != '[' {
		return r.reject("patch must be an array")
	}
	n := 0
	var err error
	eachElem(p, func(op []byte) {
		n++
		if err != nil {
			return
		}
		if len(op) == 0 || op[0] != '{' {
			err = r.reject("patch operation must be an object")
			return
		}
		name, _ := str(fieldOr(op, "op"))
		path, hasPath := str(fieldOr(op, "path"))
		if !hasPath || !validPointer(path) {
			err = r.reject("patch path must be a JSON pointer")
			return
		}
		switch name {
		case "add", "replace", "test":
			if fieldOr(op, "value") == nil {
				err = r.reject("patch value is required")
			}
		case "move", "copy":
			from, ok := str(fieldOr(op, "from"))
			if !ok || !validPointer(from) {
				err = r.reject("patch from must be a JSON pointer")
			}
		case "remove":
		default:
			err = r.reject("unknown patch op %q", name)
		}
	})
	if err == nil && r.opts.MaxPatchOps > 0 && n > r.opts.MaxPatchOps {
		return &LimitError{Limit: "MaxPatchOps", Value: n, Max: r.opts.MaxPatchOps}
	}
	return err
}

func validPointer(p string) bool {
	if p != "" && p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 >= len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return false
		}
	}
	return true
}
