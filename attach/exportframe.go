package attach

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/agui-proxy/agui-proxy/agui"
)

// RawFrameKey is the only member of the object an export document holds in place of a
// recorded frame whose data is not JSON: {"agui-proxy.frame": "<the data>"}. A recorded frame
// whose data is itself such an object is wrapped the same way, so import unwraps exactly once
// and export → import → export gives the same document.
const RawFrameKey = "agui-proxy.frame"

// exportFrame returns the eventList element for one recorded frame's data: the JSON itself
// (an event, or JSON that is not an event, both kept), or the data wrapped under RawFrameKey.
func exportFrame(data []byte) json.RawMessage {
	if agui.Valid(data) {
		if _, wrapped := rawFrame(data); !wrapped {
			return json.RawMessage(data)
		}
	}
	b, _ := json.Marshal(map[string]string{RawFrameKey: string(data)})
	return b
}

// rawFrame reports whether raw is {"agui-proxy.frame": <string>} and returns the string.
func rawFrame(raw []byte) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !bytes.Contains(raw, []byte(RawFrameKey)) {
		return "", false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || len(m) != 1 {
		return "", false
	}
	v, ok := m[RawFrameKey]
	var s string
	if !ok || json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// importFrame turns one eventList element back into a frame's data and its event type (""
// when the data is not an event, as the recorder flags it).
func importFrame(raw json.RawMessage) (data []byte, typ string, err error) {
	if s, ok := rawFrame(raw); ok {
		data = []byte(s)
	} else if agui.Valid(raw) {
		data = compactJSON(raw)
	} else {
		return nil, "", errors.New("not JSON")
	}
	typ, _ = agui.EventType(data)
	return data, typ, nil
}
