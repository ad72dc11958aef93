package proxy

import (
	"bytes"
	"encoding/json"
	"log/slog"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/recorder"
)

// enrichRunStarted adds "parentRunId" (with LineageMetadata: metadata["agui-proxy"].parentRunId,
// leaving parentRunId to the agent) and "input" to the upstream's RUN_STARTED when it lacks
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
	inMetadata := r.h.cfg.Lineage == LineageMetadata
	addParent := r.parent != "" && !hasParent && !inMetadata
	if inMetadata && r.parent != "" {
		if meta, ok := members["metadata"]; ok {
			data = r.withMetadataLineage(data, meta)
		} else {
			addParent = true // appended below, as metadata
		}
	}
	if !addParent && hasInput {
		return data
	}
	body := bytes.TrimRight(data, " \t\r\n")
	out := make([]byte, 0, len(body)+len(r.inputJSON)+len(r.parent)+48)
	out = append(out, body[:len(body)-1]...) // without '}'
	if addParent {
		out = r.appendLineage(out)
	}
	if !hasInput {
		out = append(out, `,"input":`...)
		out = append(out, r.inputJSON...)
	}
	return append(out, '}')
}

// appendLineage appends the run's lineage member to a RUN_STARTED being built:
// ,"parentRunId":"<parent>" or, with LineageMetadata,
// ,"metadata":{"agui-proxy":{"parentRunId":"<parent>"}}.
func (r *run) appendLineage(out []byte) []byte {
	if r.h.cfg.Lineage != LineageMetadata {
		out = append(out, `,"parentRunId":`...)
		return appendJSONString(out, r.parent)
	}
	out = append(out, `,"metadata":{`...)
	out = r.appendLineageEntry(out)
	return append(out, '}')
}

// appendLineageEntry appends "agui-proxy":{"parentRunId":"<parent>"}.
func (r *run) appendLineageEntry(out []byte) []byte {
	out = appendJSONString(out, MetadataKey)
	out = append(out, `:{"parentRunId":`...)
	out = appendJSONString(out, r.parent)
	return append(out, '}')
}

// withMetadataLineage returns the agent's RUN_STARTED (data) with the run's lineage added to
// its metadata object (meta, as the agent sent it) under MetadataKey, the agent's bytes kept
// around it. Metadata that is not an object, or that already has MetadataKey, is left as it
// is (an agent's value is never overwritten), with a warning for the first.
func (r *run) withMetadataLineage(data []byte, meta json.RawMessage) []byte {
	var entries map[string]json.RawMessage
	if json.Unmarshal(meta, &entries) != nil || entries == nil {
		r.h.log.LogAttrs(r.ctx, slog.LevelWarn, "the agent's RUN_STARTED metadata is not an object; the run's lineage is not added to it",
			slog.String("thread_id", r.meta.ThreadID), slog.String("run_id", r.meta.RunID))
		return data
	}
	if _, ok := entries[MetadataKey]; ok {
		return data
	}
	at := metadataObjectStart(data)
	if at < 0 {
		return data
	}
	out := make([]byte, 0, len(data)+len(r.parent)+48)
	out = append(out, data[:at+1]...)
	out = r.appendLineageEntry(out)
	if len(entries) > 0 {
		out = append(out, ',')
	}
	return append(out, data[at+1:]...)
}

// metadataObjectStart returns the offset of the '{' that opens the value of data's top-level
// "metadata" member (the last one, as JSON.parse reads duplicates), or -1.
func metadataObjectStart(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return -1
	}
	at := -1
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return -1
		}
		start := dec.InputOffset() // after the key: the colon and the value follow
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return -1
		}
		if key == "metadata" {
			at = int(start) + bytes.IndexByte(data[start:], '{')
		}
	}
	return at
}

// synthesizedRunStarted is the RUN_STARTED the proxy sends when the upstream's first event is
// something else: a recorded run always starts with RUN_STARTED.
func (r *run) synthesizedRunStarted() []byte {
	out := []byte(`{"type":"RUN_STARTED","threadId":`)
	out = appendJSONString(out, recorder.ThreadIDOf(r.meta.ThreadID))
	out = append(out, `,"runId":`...)
	out = appendJSONString(out, r.meta.RunID)
	if r.parent != "" {
		out = r.appendLineage(out)
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
