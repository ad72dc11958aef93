package demoagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// ErrInvalidInput is returned (wrapped, with the reason) for a request body, message or
// parameter the agent cannot use.
var ErrInvalidInput = errors.New("invalid input")

// Parameter bounds: a run is always finite and its memory bounded, whatever the request says.
const (
	// MaxEvents bounds the "events" parameter.
	MaxEvents = 10_000_000
	// MaxSize bounds the "size" parameter, in bytes.
	MaxSize = 64 << 20
	// MaxIntervalMs bounds the "intervalMs" parameter.
	MaxIntervalMs = 60_000
)

// params are the run parameters read from forwardedProps.
type params struct {
	scenario    string // "" when absent
	events      int    // -1 when absent
	size        int    // -1 when absent
	interval    time.Duration
	intervalSet bool
}

// count returns the "events" parameter, or def when it is absent.
func (p params) count(def int) int {
	if p.events < 0 {
		return def
	}
	return p.events
}

// bytes returns the "size" parameter, or def when it is absent.
func (p params) bytes(def int) int {
	if p.size < 0 {
		return def
	}
	return p.size
}

// parseParams reads scenario, events, size and intervalMs from forwardedProps. An absent,
// null or non-object forwardedProps means defaults: it belongs to the client, not to us.
func parseParams(fp json.RawMessage) (params, error) {
	p := params{events: -1, size: -1}
	fp = bytes.TrimSpace(fp)
	if len(fp) == 0 || fp[0] != '{' {
		return p, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(fp, &m); err != nil {
		return p, fmt.Errorf("%w: forwardedProps: %v", ErrInvalidInput, err)
	}
	if v, ok := m["scenario"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &p.scenario); err != nil {
			return p, fmt.Errorf("%w: forwardedProps.scenario is not a string", ErrInvalidInput)
		}
	}
	var err error
	if p.events, err = intParam(m, "events", MaxEvents); err != nil {
		return p, err
	}
	if p.size, err = intParam(m, "size", MaxSize); err != nil {
		return p, err
	}
	ms, err := intParam(m, "intervalMs", MaxIntervalMs)
	if err != nil {
		return p, err
	}
	if ms >= 0 {
		p.interval, p.intervalSet = time.Duration(ms)*time.Millisecond, true
	}
	return p, nil
}

// intParam reads m[name] as an integer in [0, limit]; -1 when absent or null.
func intParam(m map[string]json.RawMessage, name string, limit int) (int, error) {
	v, ok := m[name]
	if !ok || string(v) == "null" {
		return -1, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || f != math.Trunc(f) || f < 0 || f > float64(limit) {
		return 0, fmt.Errorf("%w: forwardedProps.%s = %s, want an integer from 0 to %d",
			ErrInvalidInput, name, truncate(string(v)), limit)
	}
	return int(f), nil
}

// request is the part of a RunAgentInput the agent reads. Other members are ignored.
type request struct {
	ThreadID       string            `json:"threadId"`
	RunID          string            `json:"runId"`
	Messages       []json.RawMessage `json:"messages"`
	State          json.RawMessage   `json:"state"`
	ForwardedProps json.RawMessage   `json:"forwardedProps"`
}

// decodeRequest decodes a RunAgentInput body. threadId and runId are required.
func decodeRequest(body []byte) (Input, error) {
	var r request
	if err := json.Unmarshal(body, &r); err != nil {
		return Input{}, fmt.Errorf("%w: body: %v", ErrInvalidInput, err)
	}
	if r.ThreadID == "" || r.RunID == "" {
		return Input{}, fmt.Errorf("%w: threadId and runId are required", ErrInvalidInput)
	}
	if err := checkMessages(r.Messages); err != nil {
		return Input{}, err
	}
	return Input{ThreadID: r.ThreadID, RunID: r.RunID, Messages: r.Messages, State: r.State, ForwardedProps: r.ForwardedProps}, nil
}

// checkMessages requires every message to be a JSON object.
func checkMessages(msgs []json.RawMessage) error {
	for i, m := range msgs {
		m = bytes.TrimSpace(m)
		if len(m) == 0 || m[0] != '{' || !json.Valid(m) {
			return fmt.Errorf("%w: messages[%d] is not a JSON object", ErrInvalidInput, i)
		}
	}
	return nil
}

// pickScenario chooses the run's scenario: forwardedProps.scenario (which must exist), else
// the last user message's text when it equals a scenario name or contains "scenario:<name>"
// for an existing name, else "chat".
func pickScenario(in Input, p params) (string, error) {
	if p.scenario != "" {
		if _, ok := scenarios[p.scenario]; !ok {
			return "", fmt.Errorf("%w %q", ErrUnknownScenario, truncate(p.scenario))
		}
		return p.scenario, nil
	}
	if name, ok := scenarioFromText(lastUserText(in.Messages)); ok {
		return name, nil
	}
	return "chat", nil
}

// lastUserText returns the text of the last message whose role is "user": its content string,
// or the text parts of its content array joined with spaces.
func lastUserText(msgs []json.RawMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(msgs[i], &m) != nil || m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return s
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			return ""
		}
		var texts []string
		for _, pt := range parts {
			if pt.Type == "text" {
				texts = append(texts, pt.Text)
			}
		}
		return strings.Join(texts, " ")
	}
	return ""
}

// scenarioFromText finds a scenario named by a user message.
func scenarioFromText(text string) (string, bool) {
	t := strings.TrimSpace(text)
	if _, ok := scenarios[t]; ok {
		return t, true
	}
	for rest := t; ; {
		i := strings.Index(rest, "scenario:")
		if i < 0 {
			return "", false
		}
		rest = rest[i+len("scenario:"):]
		end := strings.IndexFunc(rest, func(r rune) bool { return r < 'a' || r > 'z' })
		if end < 0 {
			end = len(rest)
		}
		if _, ok := scenarios[rest[:end]]; ok {
			return rest[:end], true
		}
	}
}

// truncate keeps error messages short when a value is long.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
