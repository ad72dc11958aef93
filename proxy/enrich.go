package proxy

import (
	"bytes"
	"encoding/json"
	"log/slog"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// enrichRunStarted adds "parentRunId" and "input" to the upstream's RUN_STARTED when it lacks
// them (an upstream value is never overwritten). The upstream's bytes are kept as they are: the
// members are appended before the closing brace, so unknown fields survive byte for byte.
func (r *run) enrichRunStarted(data []byte) []byte {
	var members map[string]json.RawMessage
	if json.Unmarshal(data, &members) != nil { // EventType said it is an object; be safe anyway
		return data
	}
	if tid, rid := jsonString(members["threadId"]), jsonString(members["runId"]); tid != recorder.ThreadIDOf(r.meta.ThreadID) || rid != r.meta.RunID {
		r.h.log.LogAttrs(r.ctx, slog.LevelWarn, "the agent's RUN_STARTED names another thread or run; recorded under the request's ids",
			slog.String("thread_id", r.meta.ThreadID), slog.String("run_id", r.meta.RunID),
			slog.String("upstream_thread_id", tid), slog.String("upstream_run_id", rid))
	}
	_, hasParent := members["parentRunId"]
	_, hasInput := members["input"]
	addParent := r.parent != "" && !hasParent
	if !addParent && hasInput {
		return data
	}
	body := bytes.TrimRight(data, " \t\r\n")
	out := make([]byte, 0, len(body)+len(r.inputJSON)+len(r.parent)+32)
	out = append(out, body[:len(body)-1]...) // without '}'
	if addParent {
		out = append(out, `,"parentRunId":`...)
		out = appendJSONString(out, r.parent)
	}
	if !hasInput {
		out = append(out, `,"input":`...)
		out = append(out, r.inputJSON...)
	}
	return append(out, '}')
}

// synthesizedRunStarted is the RUN_STARTED the proxy sends when the upstream's first event is
// something else: a recorded run always starts with RUN_STARTED.
func (r *run) synthesizedRunStarted() []byte {
	out := []byte(`{"type":"RUN_STARTED","threadId":`)
	out = appendJSONString(out, recorder.ThreadIDOf(r.meta.ThreadID))
	out = append(out, `,"runId":`...)
	out = appendJSONString(out, r.meta.RunID)
	if r.parent != "" {
		out = append(out, `,"parentRunId":`...)
		out = appendJSONString(out, r.parent)
	}
	out = append(out, `,"input":`...)
	out = append(out, r.inputJSON...)
	return append(out, '}')
}

// normalizedInput is the client's RunAgentInput with "messages" reduced to the messages whose
// id is not in known (the thread's history along the run's lineage). Members keep their order
// and bytes; "messages" is always present because the official schema requires it.
func normalizedInput(in *agui.RunInput, known map[string]bool) []byte {
	var out bytes.Buffer
	out.WriteByte('{')
	wroteMessages := false
	for i, k := range in.Keys {
		if i > 0 {
			out.WriteByte(',')
		}
		out.Write(appendJSONString(nil, k))
		out.WriteByte(':')
		if k != "messages" {
			out.Write(in.Fields[k])
			continue
		}
		wroteMessages = true
		out.WriteByte('[')
		n := 0
		ids := in.IDs()
		for i, m := range in.Messages {
			if id := ids[i]; id != "" && known[id] {
				continue
			}
			if n > 0 {
				out.WriteByte(',')
			}
			out.Write(m)
			n++
		}
		out.WriteByte(']')
	}
	if !wroteMessages {
		if len(in.Keys) > 0 {
			out.WriteByte(',')
		}
		out.WriteString(`"messages":[]`)
	}
	out.WriteByte('}')
	return out.Bytes()
}

func jsonString(raw json.RawMessage) string {
	var s string
	json.Unmarshal(raw, &s)
	return s
}

// appendJSONString appends s as a JSON string (encoding/json escaping: control characters,
// U+2028/U+2029 and HTML characters are escaped, so the result is safe on a data: line).
func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}
