// Package hydrate gives a stateless agent the whole conversation when its client sent only
// part of it. A client that reloaded its page, or a second device, often sends one new message;
// an agent that relies on the request for context would answer without it. The proxy holds the
// branch the run continues (its messages and state as of the parent run), so before calling the
// agent it can rebuild the request's "messages" and "state" from it.
//
// # Which messages count as held
//
// Messages are matched by their "id" member, exactly. A request message without an id, or with
// an id the branch does not hold, is new. A branch message whose id the request lacks is
// missing from the request.
//
// # Modes
//
//   - ModeOff: the request goes to the agent as the client sent it.
//   - ModeMissing (the default): only when the request lacks messages the branch holds, the
//     agent gets the branch's messages in branch order, then the request's new messages in
//     request order. For an id both hold, the client's copy is sent: it is what the client
//     shows its user, and what the agent would have seen without the proxy (a client that
//     edits a message in place keeps its edit). When the request's state is absent, null or
//     {}, and the branch has state, the branch's state is sent.
//   - ModeAlways: the store is the source of truth: the agent gets the branch's messages (the
//     stored copy for an id both hold), then the request's new messages, and the branch's state
//     whenever the branch has one.
//
// Activity messages (role "activity") are never restored: the official client keeps them for
// its UI but leaves them out of every request it sends (AbstractAgent.prepareRunAgentInput in
// @ag-ui/client 1.0.0), so an agent never sees them without the proxy either.
//
// Every other member of the request is forwarded byte for byte, in its original order. The
// client still sees a RUN_STARTED whose input holds only the new messages (the proxy's
// normalization is applied to what the client sent, not to what the agent got).
package hydrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/agui-proxy/agui-proxy/agui"
)

// Mode selects when a request is rebuilt from the stored branch (AGUI_HYDRATE).
type Mode string

// Modes.
const (
	ModeOff     Mode = "off"
	ModeMissing Mode = "missing"
	ModeAlways  Mode = "always"
)

// ParseMode parses an AGUI_HYDRATE value ("" is ModeMissing).
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "":
		return ModeMissing, nil
	case ModeOff, ModeMissing, ModeAlways:
		return Mode(s), nil
	}
	return "", fmt.Errorf("hydrate mode %q: want off, missing or always", s)
}

// Branch is what the store holds for the branch a run continues: the messages and state a
// client has after replaying it through the parent run.
type Branch struct {
	// Messages are the branch's messages in order, each a JSON object.
	Messages []json.RawMessage
	// State is the branch's state document; nil or null when it has none.
	State json.RawMessage
	// Valid says each of Messages is known to be valid JSON (a branch the proxy compacted
	// and replayed): their ids and roles are then read without validating them again.
	Valid bool
}

// Result says what Apply did.
type Result struct {
	// Body is the request body to send the agent: the client's own bytes when nothing changed.
	Body []byte
	// Messages reports whether the agent gets another message list than the client sent.
	Messages bool
	// Restored counts the branch messages the request lacked and the agent now gets.
	Restored int
	// State reports whether the branch's state replaced the request's.
	State bool
}

// Changed reports whether the agent gets another body than the client sent.
func (r Result) Changed() bool { return r.Messages || r.State }

// Apply rebuilds in's body from the branch according to mode (see the package documentation).
// in must come from agui.DecodeRunInput. The branch's messages must be JSON objects.
func Apply(mode Mode, in *agui.RunInput, b Branch) (Result, error) {
	res := Result{Body: in.Body}
	if mode == ModeOff || mode == "" {
		return res, nil
	}
	// What the agent streamed is stored as it came; a request body must be valid UTF-8 (the
	// proxy refuses others), so invalid bytes from the store become U+FFFD.
	b.State = validUTF8(b.State)
	// Each message's id and role are read in one scan (a branch of 2,000 messages is 2,000
	// scans, not 6,000); the request's ids were read by agui.DecodeRunInput.
	sendable := make([]json.RawMessage, 0, len(b.Messages))
	bids := make([]string, 0, len(b.Messages))
	branchIDs := make(map[string]int, len(b.Messages))
	for i, m := range b.Messages {
		if len(m) == 0 || m[0] != '{' {
			return res, fmt.Errorf("hydrate: branch message %d is not a JSON object", i)
		}
		m = validUTF8(m)
		var id, role string
		if b.Valid {
			id, role = agui.ValidMessageIDRole(m)
		} else {
			id, role = agui.MessageIDRole(m)
		}
		if role == activityRole {
			continue // clients never send activity messages (see the package documentation)
		}
		if id != "" {
			branchIDs[id] = len(sendable)
		}
		sendable, bids = append(sendable, m), append(bids, id)
	}
	b.Messages = sendable
	reqIDs := in.IDs()
	reqByID := make(map[string]json.RawMessage, len(in.Messages))
	var fresh []json.RawMessage
	for i, m := range in.Messages {
		id := reqIDs[i]
		if _, held := branchIDs[id]; id != "" && held {
			reqByID[id] = m
			continue
		}
		fresh = append(fresh, m)
	}
	missing := 0
	for _, id := range bids {
		if id == "" || reqByID[id] == nil {
			missing++
		}
	}
	var messages []json.RawMessage // nil: the request's stay
	var state json.RawMessage
	if mode == ModeAlways || missing > 0 {
		list := make([]json.RawMessage, 0, len(b.Messages)+len(fresh))
		for i, m := range b.Messages {
			if c, ok := reqByID[bids[i]]; ok && mode == ModeMissing {
				m = c // the client's copy of a message both hold
			}
			list = append(list, m)
		}
		list = append(list, fresh...)
		if missing > 0 || !sameValues(list, in.Messages) {
			messages = list
			res.Messages, res.Restored = true, missing
		}
	}
	if hasState(b.State) && (mode == ModeAlways || !hasState(in.Fields["state"])) &&
		!bytes.Equal(bytes.TrimSpace(b.State), bytes.TrimSpace(in.Fields["state"])) {
		state = b.State
		res.State = true
	}
	if messages == nil && state == nil {
		return res, nil
	}
	res.Body = rewrite(in, messages, state)
	return res, nil
}

// hasState reports whether a state document is worth sending: present, not null, not {}.
func hasState(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return false
	}
	if t[0] == '{' {
		inner := bytes.TrimSpace(t[1 : len(t)-1])
		return len(inner) > 0
	}
	return true
}

// activityRole is the role of the activity messages, which clients never send.
const activityRole = "activity"

// validUTF8 replaces each invalid byte of raw JSON by U+FFFD (JSON allows such bytes only
// inside strings, where the replacement keeps the document valid): one per byte, as
// encoding/json decodes them, so a message's id reads the same before and after (a run of
// bad bytes made one U+FFFD, and an id the client's copy no longer matched).
func validUTF8(raw json.RawMessage) json.RawMessage {
	if utf8.Valid(raw) {
		return raw
	}
	out := make(json.RawMessage, 0, len(raw)+16)
	for i := 0; i < len(raw); {
		r, n := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && n == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, raw[i:i+n]...)
		}
		i += n
	}
	return out
}

// sameValues reports whether two lists hold the same raw values, byte for byte.
func sameValues(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// rewrite re-encodes in's top-level object with "messages" (the array of messages, when not
// nil) and/or "state" replaced (appended when absent), every other member's value byte for
// byte and in its original order. The body is sized once and the messages written straight
// into it: on a long thread they are most of it.
func rewrite(in *agui.RunInput, messages []json.RawMessage, state json.RawMessage) []byte {
	size := len(in.Body) + len(state) + len(`,"messages":[],"state":`) + len(messages)
	for _, m := range messages {
		size += len(m)
	}
	b := make([]byte, 0, size)
	b = append(b, '{')
	n := 0
	key := func(k string) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		kb, _ := json.Marshal(k)
		b = append(append(b, kb...), ':')
	}
	list := func() {
		b = append(b, '[')
		for i, m := range messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, m...)
		}
		b = append(b, ']')
	}
	for _, k := range in.Keys {
		key(k)
		switch {
		case k == "messages" && messages != nil:
			list()
			messages = nil
		case k == "state" && state != nil:
			b = append(b, state...)
			state = nil
		default:
			b = append(b, in.Fields[k]...)
		}
	}
	if messages != nil {
		key("messages")
		list()
	}
	if state != nil {
		key("state")
		b = append(b, state...)
	}
	return append(b, '}')
}
