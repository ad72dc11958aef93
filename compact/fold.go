package compact

// Where the fold stops. A STATE_DELTA or ACTIVITY_DELTA is folded into the snapshot only when
// every client applies it the same way. Three appliers are in play:
//
//   - the browser build of @ag-ui/client: bundlers pick fast-json-patch's ES module, which runs
//     in strict mode, so a write of a property into a string, number or boolean (the inner add
//     of a move or copy, or any operation below a document that an earlier operation of the
//     delta replaced with a primitive) throws and the client drops the whole delta
//     (patcher.primitiveWrite);
//   - the Node build: fast-json-patch's CommonJS module runs in sloppy mode, where that write
//     is silently ignored and the rest of the delta applies;
//   - clients that are not JavaScript (Python, Go, Kotlin...) apply RFC 6902 with a library;
//     github.com/evanphx/json-patch/v5 stands for them (rfcDisagrees). It is consulted only
//     for deltas whose operations fall in the shapes where RFC semantics and fast-json-patch
//     can differ (divergentShape), so the common delta costs nothing more.
//
// A move or copy that goes where the mirror of fast-json-patch is not exact
// (patcher.unmodeled: a from pointer through an array's "length", a value left in an array
// property, the whole document moved inside itself) stops the fold as well, so the client's
// own applier decides.
//
// At the first delta where they could differ, the fold stops: the snapshot carries the state
// (or the activity message) as it stood before that delta, and that delta and every later one
// travel raw after the snapshot until a STATE_SNAPSHOT (an ACTIVITY_SNAPSHOT that replaces the
// content, or a MESSAGES_SNAPSHOT that replaces the message) resets the document and lets the
// fold resume. Each client then applies the raw deltas itself and ends where it would have
// ended on the original stream.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"slices"
	"strconv"
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
// one applies and the other rejects, or both apply to different documents. When the second
// opinion cannot be had (rfcApply's ok is false), it reports a disagreement: the fold stops
// and the raw deltas travel, which is always correct.
func rfcDisagrees(before []byte, rawPatch []byte, ours any, oursErr error) bool {
	p, err := jsonpatch.DecodePatch(rawPatch)
	if err != nil {
		return oursErr == nil
	}
	out, err, ok := rfcApply(before, p)
	if !ok {
		return true
	}
	if (err != nil) != (oursErr != nil) {
		return true
	}
	if err != nil {
		return false
	}
	theirs, derr := decodeJS(out)
	return derr != nil || !jsEqual(theirs, ours)
}

// maxRFCRuns bounds the library calls of one second opinion: a patch that alternates test
// operations with others more often than this is not asked about (the fold stops), so that
// a delta cannot make the fold decode and render the document once per operation.
const maxRFCRuns = 8

// rfcApply applies patch p to doc with evanphx/json-patch, except for its test operations,
// which it evaluates itself (rfcTest) against the document as the operations before them
// left it: the library's lazyNode.equal (v5.9.11) dereferences a nil node, and panics, when
// an array on either side holds null. Each run of other operations is one library call,
// under recover. ok is false (no answer) when the library panics, when the patch needs more
// than maxRFCRuns calls, when a pointer has an empty token (emptyToken), or when RFC clients
// answer a test differently. err is the first
// operation's failure.
func rfcApply(doc []byte, p jsonpatch.Patch) (out []byte, err error, ok bool) {
	var tree any
	decoded := false
	runs := 0
	for i := 0; i < len(p); {
		if p[i].Kind() == "test" {
			if !decoded {
				if tree, err = decodeNumbers(doc); err != nil {
					return nil, nil, false
				}
				decoded = true
			}
			if err, sure := rfcTest(tree, p[i]); !sure || err != nil {
				return nil, err, sure
			}
			i++
			continue
		}
		j := i + 1
		for j < len(p) && p[j].Kind() != "test" {
			j++
		}
		if runs++; runs > maxRFCRuns || emptyToken(p[i:j]) {
			return nil, nil, false
		}
		if doc, err, ok = libraryApply(p[i:j], doc); !ok || err != nil {
			return nil, err, ok
		}
		decoded = false
		i = j
	}
	return doc, nil, true
}

// emptyToken reports an operation with an empty reference token ("/", "/a//b") in from, or
// in path before its last token. RFC 6901 names the member "" there; evanphx/json-patch
// v5.9.11 reads it as the container itself (partialDoc.get and partialArray.get of ""), so a
// copy or move through one can put a document inside itself: {"":[]} with
// [{"op":"copy","from":"/","path":"//0"}] makes a cycle, and marshalling it overflows the
// stack, a fatal error that no recover catches. Such a patch is not asked about. A last token
// "" of path is the member "" to the library too (set, remove), and is asked about.
func emptyToken(p jsonpatch.Patch) bool {
	for _, op := range p {
		for _, field := range []string{"path", "from"} {
			raw := op[field]
			var ptr string
			if raw == nil || json.Unmarshal(*raw, &ptr) != nil || ptr == "" {
				continue
			}
			toks := strings.Split(ptr, "/")[1:]
			if field == "path" {
				toks = toks[:len(toks)-1]
			}
			if slices.Contains(toks, "") {
				return true
			}
		}
	}
	return false
}

// libraryApply is p.ApplyWithOptions(doc, rfcOptions) with a panic of the library reported
// as ok false.
func libraryApply(p jsonpatch.Patch, doc []byte) (out []byte, err error, ok bool) {
	defer func() {
		if recover() != nil {
			out, err, ok = nil, nil, false
		}
	}()
	out, err = p.ApplyWithOptions(doc, rfcOptions)
	return out, err, true
}

// errRFCTest is a test operation that fails, or is malformed, under RFC 6902.
var errRFCTest = errors.New("rfc 6902 test operation failed")

// rfcTest evaluates one test operation under RFC 6902 against doc (decoded by
// decodeNumbers): the path must resolve (RFC 6901, no "-", no leading zeros) and its value
// must equal the operation's value (rfcCompare). A missing or non-string path or a missing
// value is malformed and fails. sure is false where RFC clients answer differently (numbers
// equal in value but written differently), and the caller then asks no one.
func rfcTest(doc any, op jsonpatch.Operation) (err error, sure bool) {
	rawPath, ok := op["path"]
	if !ok || rawPath == nil {
		return errRFCTest, true
	}
	var path string
	if json.Unmarshal(*rawPath, &path) != nil {
		return errRFCTest, true
	}
	rawValue, ok := op["value"]
	if !ok {
		return errRFCTest, true
	}
	var value any // a JSON null decodes to a nil *json.RawMessage
	if rawValue != nil {
		v, err := decodeNumbers(*rawValue)
		if err != nil {
			return errRFCTest, true
		}
		value = v
	}
	target, ok := rfcResolve(doc, path)
	if !ok {
		return errRFCTest, true
	}
	switch rfcCompare(target, value) {
	case rfcEqual:
		return nil, true
	case rfcUnequal:
		return errRFCTest, true
	}
	return nil, false
}

// decodeNumbers decodes one JSON text keeping numbers as their literal text.
func decodeNumbers(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

// rfcResolve resolves an RFC 6901 pointer: array tokens are "0" or digits without a leading
// zero, within the array ("-" names no element); an escape other than ~0 and ~1 resolves
// nothing.
func rfcResolve(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	if ptr[0] != '/' {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		for i := 0; i < len(tok); i++ {
			if tok[i] == '~' && (i+1 == len(tok) || (tok[i+1] != '0' && tok[i+1] != '1')) {
				return nil, false
			}
		}
		tok = unescapeToken(tok)
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			if tok == "" || !isInteger(tok) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			n, err := strconv.Atoi(tok)
			if err != nil || n >= len(c) {
				return nil, false
			}
			cur = c[n]
		default:
			return nil, false
		}
	}
	return cur, true
}

// rfcVerdict is the answer of RFC 6902 equality as every RFC client gives it, or rfcUnsure
// where they do not all give the same.
type rfcVerdict int

const (
	rfcEqual rfcVerdict = iota
	rfcUnequal
	rfcUnsure
)

// rfcCompare is RFC 6902 section 4.6 equality over values decoded by decodeNumbers: strings
// by their decoded text, objects by their members in any order, arrays element by element,
// literals by identity. Numbers are equal "if their values are numerically equal", which
// libraries read differently: by their text (evanphx/json-patch), by type (Jackson: 1 is not
// 1.0), as float64 (2^53+1 is 2^53) or exactly; so two numbers are rfcEqual only when written
// alike, rfcUnequal when they differ both exactly and as float64, and rfcUnsure otherwise. A
// difference that every reading sees (a type, a length, a member, a string) makes containers
// rfcUnequal whatever their numbers.
func rfcCompare(a, b any) rfcVerdict {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return rfcUnequal
		}
		v := rfcEqual
		for k, xv := range x {
			yv, ok := y[k]
			if !ok {
				return rfcUnequal
			}
			switch rfcCompare(xv, yv) {
			case rfcUnequal:
				return rfcUnequal
			case rfcUnsure:
				v = rfcUnsure
			}
		}
		return v
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return rfcUnequal
		}
		v := rfcEqual
		for i := range x {
			switch rfcCompare(x[i], y[i]) {
			case rfcUnequal:
				return rfcUnequal
			case rfcUnsure:
				v = rfcUnsure
			}
		}
		return v
	case json.Number:
		y, ok := b.(json.Number)
		switch {
		case !ok:
			return rfcUnequal
		case x == y:
			return rfcEqual
		case canonicalNumber(string(x)) == canonicalNumber(string(y)):
			return rfcUnsure
		}
		fx, errx := strconv.ParseFloat(string(x), 64)
		fy, erry := strconv.ParseFloat(string(y), 64)
		if errx != nil || erry != nil || fx == fy {
			return rfcUnsure
		}
		return rfcUnequal
	case string:
		y, ok := b.(string)
		return verdict(ok && x == y)
	case bool:
		y, ok := b.(bool)
		return verdict(ok && x == y)
	case nil:
		return verdict(b == nil)
	}
	return rfcUnequal
}

func verdict(equal bool) rfcVerdict {
	if equal {
		return rfcEqual
	}
	return rfcUnequal
}

// canonicalNumber renders a JSON number literal as its exact value: "0" for any zero, else
// an optional "-", the significant digits (no leading or trailing zeros) and "e" with the
// exponent of the last digit, so that two literals are equal in value exactly when their
// canonical forms are the same string (1, 1.0, 10e-1 and 0.1e1 all give "1e0").
func canonicalNumber(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expText, _ := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return "0"
	}
	trimmed := strings.TrimRight(digits, "0")
	exp := new(big.Int)
	if expText != "" {
		exp.SetString(expText, 10)
	}
	exp.Sub(exp, big.NewInt(int64(len(frac))))
	exp.Add(exp, big.NewInt(int64(len(digits)-len(trimmed))))
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + exp.String()
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
	} else if check && p.primitiveWrite {
		// A write into a primitive needs no odd shape (an add below a string): the two
		// builds part here. The write failed or was ignored, so doc is still as before.
		diverges = true
		if before, err = marshalJS(doc); err != nil {
			return doc, false, false, nil, err
		}
	}
	if perr != nil {
		return doc, false, diverges, before, nil
	}
	return nd, true, diverges, before, nil
}
