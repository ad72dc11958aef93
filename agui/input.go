package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// ErrInvalidRunInput is returned (wrapped with the reason) for a body that is not a valid
// RunAgentInput.
var ErrInvalidRunInput = errors.New("invalid run input")

// RunInput is the part of a RunAgentInput the proxy reads. The proxy forwards Body, the exact
// bytes it validated, so what the agent receives is what was checked.
type RunInput struct {
	ThreadID    string
	RunID       string
	ParentRunID string // "" when absent or null
	// Messages holds each element of "messages" as raw JSON, in order.
	Messages []json.RawMessage
	// MessageIDs holds MessageID of each of Messages ("" for one without an id).
	MessageIDs []string
	// Fields holds every top-level member as raw JSON, keyed by its exact name.
	Fields map[string]json.RawMessage
	// Keys lists the top-level member names in the order they appeared (each once).
	Keys []string
	// Body is the request body the input was decoded from.
	Body []byte
}

// IDs returns the ids of in's messages (MessageID of each; "" for one without an id): the
// MessageIDs DecodeRunInput read, or, for a RunInput built otherwise, read now.
func (in *RunInput) IDs() []string {
	if len(in.MessageIDs) == len(in.Messages) {
		return in.MessageIDs
	}
	ids := make([]string, len(in.Messages))
	for i, m := range in.Messages {
		ids[i] = MessageID(m)
	}
	return ids
}

// protectedFields are the RunAgentInput members whose spelling must be exact. Go's
// encoding/json matches keys case-insensitively (last one wins) while the Python SDK takes the
// exact camelCase alias and also accepts snake_case: a body holding both "threadId" and
// "THREADID" (or "thread_id") would be read as two different threads by the proxy and the
// agent. Any key that folds to one of these names without being spelled exactly is refused.
var protectedFields = []string{
	"threadId", "runId", "parentRunId", "messages", "state", "tools", "context", "forwardedProps",
}

var protectedByFold = func() map[string]string {
	m := make(map[string]string, len(protectedFields))
	for _, f := range protectedFields {
		m[foldKey(f)] = f
	}
	return m
}()

// foldKey lower-cases a key and drops '_' and '-', the spellings the SDKs treat as equivalent.
func foldKey(k string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '_' || r == '-':
			return -1
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return r
	}, k)
}

// DecodeRunInput decodes body strictly:
//   - it must be valid UTF-8 (invalid bytes are refused, never echoed into history);
//   - it must be exactly one JSON object;
//   - "threadId" and "runId" are required non-empty strings that pass ValidateID;
//   - "parentRunId" is absent, null or a string that passes ValidateID;
//   - "messages" is absent, null or an array of objects;
//   - a protected member may appear once, spelled exactly; a case or snake_case variant of one
//     ("THREADID", "thread_id") is refused rather than guessed at;
//   - no member appears twice, nor two spellings of one that differ only in case, at the top
//     level or in a message (CheckMembers, the rule of every document the proxy reads).
//
// Errors wrap ErrInvalidRunInput (and ErrInvalidID for bad ids).
func DecodeRunInput(body []byte) (*RunInput, error) {
	if !utf8.Valid(body) {
		// JSON text is UTF-8 (RFC 8259); echoing invalid bytes would put them into the
		// history, the export and every replay.
		return nil, fmt.Errorf("%w: body is not valid UTF-8", ErrInvalidRunInput)
	}
	in, err := scanMembers(body)
	if err != nil {
		return nil, err
	}
	if err := in.readMembers(); err != nil {
		return nil, err
	}
	return in, nil
}

// runInputOpaque marks what CheckMembers leaves alone in a RunAgentInput: every member's
// value but the messages, and inside each message every member's value.
func runInputOpaque(path []string) bool {
	return path[0] != "messages" || len(path) > 2
}

// scanMembers reads the top-level members of body (valid UTF-8), refusing variant spellings
// and repeats of the protected members. A body that is valid JSON is split by a scan (values
// alias body); any other takes decodeMembers, which says where it is malformed.
func scanMembers(body []byte) (*RunInput, error) {
	if !Valid(body) {
		return decodeMembers(body)
	}
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return nil, fmt.Errorf("%w: body is not a JSON object", ErrInvalidRunInput)
	}
	in := &RunInput{Fields: make(map[string]json.RawMessage, 8), Body: body}
	for i = skipSpace(body, i+1); body[i] != '}'; {
		end := skipString(body, i)
		key := string(body[i+1 : end-1])
		if strings.IndexByte(key, '\\') >= 0 {
			key = unquote(body[i:end])
		}
		i = skipSpace(body, skipSpace(body, end)+1) // past the ':'
		end = skipValue(body, i)
		if err := in.addMember(key, body[i:end:end]); err != nil {
			return nil, err
		}
		if i = skipSpace(body, end); body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	return in, nil
}

// addMember adds one top-level member, refusing variant spellings and repeats of the protected
// ones.
func (in *RunInput) addMember(key string, val json.RawMessage) error {
	if canon, ok := protectedByFold[foldKey(key)]; ok {
		if key != canon {
			return fmt.Errorf("%w: member %q is a variant spelling of %q", ErrInvalidRunInput, truncate(key), canon)
		}
		if _, dup := in.Fields[key]; dup {
			return fmt.Errorf("%w: member %q appears twice", ErrInvalidRunInput, key)
		}
	}
	if _, seen := in.Fields[key]; !seen {
		in.Keys = append(in.Keys, key)
	}
	in.Fields[key] = val
	return nil
}

// decodeMembers is scanMembers by encoding/json's decoder, for a body that is not valid JSON
// (its errors say where) and as the reference the scan must agree with.
func decodeMembers(body []byte) (*RunInput, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidRunInput, jsonErr(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: body is not a JSON object", ErrInvalidRunInput)
	}
	in := &RunInput{Fields: make(map[string]json.RawMessage, 8), Body: body}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrInvalidRunInput, jsonErr(err))
		}
		key := tok.(string) // object keys are always strings
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("%w: member %q: %s", ErrInvalidRunInput, truncate(key), jsonErr(err))
		}
		if err := in.addMember(key, val); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("%w: %s", ErrInvalidRunInput, jsonErr(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrInvalidRunInput)
	}
	return in, nil
}

// readMembers reads the ids and messages out of the members.
func (in *RunInput) readMembers() (err error) {
	// The one rule for every document the proxy reads (CheckMembers): no member twice, nor
	// two spellings of one, at the top level and in the messages, whose ids and roles the
	// proxy reads; what it forwards without reading (content, state, tools, context,
	// forwardedProps) is the agent's to read.
	if err := CheckMembers(in.Body, runInputOpaque); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidRunInput, err)
	}
	if in.ThreadID, err = requiredID(in.Fields, "threadId"); err != nil {
		return err
	}
	if in.RunID, err = requiredID(in.Fields, "runId"); err != nil {
		return err
	}
	if raw, ok := in.Fields["parentRunId"]; ok && !isNull(raw) {
		if in.ParentRunID, err = stringID(raw, "parentRunId"); err != nil {
			return err
		}
	}
	if raw, ok := in.Fields["messages"]; ok && !isNull(raw) {
		if in.Messages, in.MessageIDs, err = messageArray(raw); err != nil {
			return err
		}
	}
	return nil
}

// messageArray splits raw, the "messages" member's value (valid JSON: the body was checked),
// into its elements, which must be objects, and reads each one's id (validMessageID) in the
// same scan: a long thread's request is walked once here. The elements alias raw.
func messageArray(raw json.RawMessage) ([]json.RawMessage, []string, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, nil, fmt.Errorf("%w: %q is not an array", ErrInvalidRunInput, "messages")
	}
	elems, ids := []json.RawMessage{}, []string{}
	for i = skipSpace(raw, i+1); i < len(raw) && raw[i] != ']'; {
		if raw[i] != '{' {
			return nil, nil, fmt.Errorf("%w: %s[%d] is not an object", ErrInvalidRunInput, "messages", len(elems))
		}
		end, id, _, ok := scanMessage(raw, i, false)
		if !ok {
			end = skipValue(raw, i)
			id = messageIDSlow(raw[i:end])
		}
		elems, ids = append(elems, raw[i:end:end]), append(ids, id)
		if i = skipSpace(raw, end); i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return elems, ids, nil
}

// LooksLikeRunInput reports whether body is a JSON object with top-level "threadId" and
// "runId" members, spelled in any case. It is a cheap pre-check used to tell an AG-UI run
// from another JSON POST; DecodeRunInput does the real validation.
func LooksLikeRunInput(body []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	var thread, run bool
	for k := range m {
		switch foldKey(k) {
		case "threadid":
			thread = true
		case "runid":
			run = true
		}
	}
	return thread && run
}

func requiredID(fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return "", fmt.Errorf("%w: %q is missing", ErrInvalidRunInput, name)
	}
	return stringID(raw, name)
}

func stringID(raw json.RawMessage, name string) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: %q is not a string", ErrInvalidRunInput, name)
	}
	if err := ValidateID(name, s); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidRunInput, err)
	}
	return s, nil
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// MessageID returns the "id" member of a message object, or "" when it has none (or msg is
// not a JSON object, or its "id" is not a string; of repeated "id" members the last counts).
func MessageID(msg json.RawMessage) string {
	if !Valid(msg) {
		return ""
	}
	return validMessageID(msg)
}

// validMessageID is MessageID for msg known to be valid JSON (an element of a decoded
// array): one scan of its top-level members, no allocation but the id's. Keys or an id
// holding an escape or a non-ASCII byte take messageIDSlow, whose answer it must equal.
func validMessageID(msg []byte) string {
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return ""
	}
	if _, id, _, ok := scanMessage(msg, i, false); ok {
		return id
	}
	return messageIDSlow(msg)
}

// MessageIDRole returns the "id" and "role" members of a message object, each as MessageID
// reads "id" ("" when the member is missing or not a string, or msg is not a JSON object;
// exact keys, the last of repeated members counts): one validation and one scan of its
// top-level members, where reading each apart scans the message twice more.
func MessageIDRole(msg json.RawMessage) (id, role string) {
	if !Valid(msg) {
		return "", ""
	}
	return ValidMessageIDRole(msg)
}

// ValidMessageIDRole is MessageIDRole for msg known to be a valid JSON object (a message of a
// branch the proxy compacted): the members are read without validating msg again, which is
// most of MessageIDRole's work. On any other input its answer is unspecified.
func ValidMessageIDRole(msg json.RawMessage) (id, role string) {
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return "", ""
	}
	if _, id, role, ok := scanMessage(msg, i, true); ok {
		return id, role
	}
	return messageMembersSlow(msg)
}

// scanMessage walks the object that starts at data[i] (valid JSON) member by member and
// returns where it ends and its id as validMessageID answers, and with withRole its role the
// same way; ok is false, with nothing else, when the answer is the slow one's (an escaped
// key, an id or role holding an escape or a non-ASCII byte).
func scanMessage(data []byte, i int, withRole bool) (end int, id, role string, ok bool) {
	var idRaw, roleRaw []byte // the last "id" and "role" members' values
	for i++; ; {
		i = skipSpace(data, i)
		if i >= len(data) {
			return 0, "", "", false
		}
		switch data[i] {
		case '}':
			return i + 1, stringValue(idRaw), stringValue(roleRaw), true
		case ',':
			i = skipSpace(data, i+1)
		}
		if i >= len(data) || data[i] != '"' {
			return 0, "", "", false
		}
		end := skipString(data, i)
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return 0, "", "", false // an escaped key may spell "id" or "role"
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return 0, "", "", false
		}
		i = skipSpace(data, i+1)
		start := i
		i = skipValue(data, i)
		var raw *[]byte
		switch {
		case string(key) == "id":
			raw = &idRaw
		case withRole && string(key) == "role":
			raw = &roleRaw
		default:
			continue
		}
		*raw = data[start:i]
		for _, c := range *raw {
			if c == '\\' || c >= utf8.RuneSelf {
				return 0, "", "", false // unescaping (or U+FFFD for bad bytes) is Unmarshal's
			}
		}
	}
}

// stringValue returns the text of a raw JSON string without escapes, "" for any other value
// (none, null, not a string).
func stringValue(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	return string(raw[1 : len(raw)-1])
}

// messageIDSlow is MessageID by encoding/json: the reference the scan must agree with.
func messageIDSlow(msg []byte) string {
	id, _ := messageMembersSlow(msg)
	return id
}

// messageMembersSlow reads a message's "id" and "role" by encoding/json ("" for a member
// missing or not a string): the reference the scans must agree with. Exact-key lookup:
// unmarshalling into a struct would also match "ID" or "Role".
func messageMembersSlow(msg []byte) (id, role string) {
	var members map[string]json.RawMessage
	if json.Unmarshal(msg, &members) != nil {
		return "", ""
	}
	if json.Unmarshal(members["id"], &id) != nil {
		id = ""
	}
	if json.Unmarshal(members["role"], &role) != nil {
		role = ""
	}
	return id, role
}

// jsonErr turns a decoder error into a short message without Go type names.
func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("malformed JSON at offset %d", se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "truncated JSON"
	}
	return "malformed JSON"
}
