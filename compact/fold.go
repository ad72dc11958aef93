package compact

// Where the fold stops. A STATE_DELTA or ACTIVITY_DELTA is folded into the snapshot only when
// every client applies it the same way. Three appliers are in play:
//
//   - the browser build of @ag-ui/client: bundlers pick fast-json-patch's ES module, which runs
//     in strict mode, so an inner add of a move or copy that writes a property into a string,
//     number or boolean throws and the client drops the whole delta (patcher.primitiveWrite);
//   - the Node build: fast-json-patch's CommonJS module runs in sloppy mode, where that write
//     is silently ignored and the rest of the delta applies;
//   - clients that are not JavaScript (Python, Go, Kotlin...) apply RFC 6902 with a library;
//     github.com/evanphx/json-patch/v5 stands for them (rfcDisagrees). It is consulted only
//     for deltas whose operations fall in the shapes where RFC semantics and fast-json-patch
//     can differ (divergentShape), so the common delta costs nothing more.
//
// A move or copy that goes where the mirror of fast-json-patch is not exact
// (patcher.unmodeled: a from pointer through an array's "length", a value left in an array
// property) stops the fold as well, so the client's own applier decides.
//
// At the first delta where they could differ, the fold stops: the snapshot carries the state
// (or the activity message) as it stood before that delta, and that delta and every later one
// travel raw after the snapshot until a STATE_SNAPSHOT (an ACTIVITY_SNAPSHOT that replaces the
// content, or a MESSAGES_SNAPSHOT that replaces the message) resets the document and lets the
// fold resume. Each client then applies the raw deltas itself and ends where it would have
// ended on the original stream.

import (
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// divergentShape reports whether a decoded patch has an operation in one of the shapes where
// fast-json-patch 3.1.1 and RFC 6902 libraries can answer differently (docs/design.md lists
// them; each has a golden case in testdata/golden/patch-*.txt): move and copy (unvalidated
// inner add and remove), test (number equality), the root path, leading-zero and negative
// array indices, "-" outside add, and the __proto__ / constructor / prototype names. A patch
// that is not an array of objects is also reported (both sides reject it, but cheaply
// checking costs nothing).
func divergentShape(patch any) bool {
	ops, ok := patch.([]any)
	if !ok {
		return true
	}
	for _, o := range ops {
		op, ok := o.(map[string]any)
		if !ok {
			return true
		}
		name, _ := op["op"].(string)
		switch name {
		case "move", "copy", "test":
			return true
		case "add", "remove", "replace":
		default:
			return true
		}
		path, ok := op["path"].(string)
		if !ok || path == "" || oddPointer(path, name == "add") {
			return true
		}
	}
	return false
}

// oddPointer reports a token that is an array index with a leading zero or a sign, "-" where
// it is not the last token of an add, an empty token, or a prototype name.
func oddPointer(path string, isAdd bool) bool {
	toks := strings.Split(path, "/")[1:]
	for i, t := range toks {
		switch {
		case t == "":
			return true
		case t == "-":
			if !isAdd || i != len(toks)-1 {
				return true
			}
		case t == "__proto__" || t == "constructor" || t == "prototype":
			return true
		case t[0] == '-' || t[0] == '+':
			return true
		case len(t) > 1 && t[0] == '0' && isInteger(t):
			return true
		}
	}
	return false
}

// rfcOptions are the RFC 6902 semantics of the second opinion: no negative indices, no
// missing-path leniency, no copy limit of its own, no HTML escaping.
var rfcOptions = func() *jsonpatch.ApplyOptions {
	o := jsonpatch.NewApplyOptions()
	o.SupportNegativeIndices = false
	o.AccumulatedCopySizeLimit = 0
	o.AllowMissingPathOnRemove = false
	o.EnsurePathExistsOnAdd = false
	o.EscapeHTML = false
	return o
}()

// rfcDisagrees applies the raw patch to the document before (rendered as the client would
// render it) under RFC semantics and reports whether the outcome differs from the client's:
// one applies and the other rejects, or both apply to different documents.
func rfcDisagrees(before []byte, rawPatch []byte, ours any, oursErr error) bool {
	p, err := jsonpatch.DecodePatch(rawPatch)
	if err != nil {
		return oursErr == nil
	}
	out, err := p.ApplyWithOptions(before, rfcOptions)
	if (err != nil) != (oursErr != nil) {
		return true
	}
	if err != nil {
		return false
	}
	theirs, derr := decodeJS(out)
	return derr != nil || !jsEqual(theirs, ours)
}

// heldState is the state document once its fold stopped: its rendering before the first
// delta the clients could apply differently, and the raw STATE_DELTA events from that one on.
type heldState struct {
	before []byte
	events []Event
}

// heldActivity is an activity message once its fold stopped: the message as it stood before
// the first ACTIVITY_DELTA the clients could apply differently (the MESSAGES_SNAPSHOT carries
// this version), and the raw activity events for it from that delta on.
type heldActivity struct {
	before *message
	events []Event
}

// holdCopy returns a copy of m as it stands (fields and metadata cloned).
func (m *message) holdCopy() *heldActivity {
	cp := *m
	cp.fields = append(obj(nil), m.fields...)
	cp.meta = append(obj(nil), m.meta...)
	cp.hold = nil
	return &heldActivity{before: &cp}
}

// heldEvent is a raw event kept after a held document, as compact JSON.
func heldEvent(typ string, raw []byte) Event { return Event{Type: typ, Raw: compactJSON(raw)} }

// heldActivityEvents returns the raw activity events of every held activity message, in
// message order: they follow the last MESSAGES_SNAPSHOT of the output.
func (r *reducer) heldActivityEvents() []Event {
	var out []Event
	for _, m := range r.messages {
		if m.hold != nil {
			out = append(out, m.hold.events...)
		}
	}
	return out
}

// foldDelta applies a decoded patch to doc as the client does and, when check is set (the
// fold is still running for this document), decides whether the fold stops at it. It returns
// the new document (doc itself when the patch fails), whether it applied, whether the clients
// could end differently, and then the rendering of doc before the delta. Only a *LimitError
// is returned as an error.
func (r *reducer) foldDelta(doc any, patch any, rawPatch []byte, check bool) (next any, applied, diverges bool, before []byte, err error) {
	shape := check && divergentShape(patch)
	if shape {
		// applyPatch works on a copy for these (no move, copy or test is in place), so doc
		// still holds the state before; render it now for the second opinion.
		before, err = marshalJS(doc)
		if err != nil {
			return doc, false, false, nil, err
		}
	}
	p := &patcher{copyLimit: r.opts.MaxCopyBytes, sloppy: r.sloppy}
	nd, perr := p.apply(doc, patch)
	if _, limit := perr.(*LimitError); limit {
		return doc, false, false, nil, perr
	}
	if shape {
		diverges = p.primitiveWrite || p.unmodeled || rfcDisagrees(before, rawPatch, nd, perr)
	}
	if perr != nil {
		return doc, false, diverges, before, nil
	}
	return nd, true, diverges, before, nil
}
