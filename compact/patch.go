package compact

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
)

// The fold applies JSON Patch (RFC 6902) the way the official client does: fast-json-patch
// 3.1.1 called as applyPatch(state, delta, true, false) (validate every operation, work on a
// deep copy, ban __proto__ and constructor/prototype) inside a try/catch that keeps the old
// state when anything throws. github.com/evanphx/json-patch/v5 disagrees with that oracle in
// ways no option switches off (measured side by side, see docs/design.md, JSON Patch):
// leading-zero indices ("/a/01" replaces index 1 in Go, fails in JS; but "add /a/01" inserts
// in JS), a root path ("add \"\"" fails in Go, replaces the document in JS), test of 1 against
// 1.0 (JS compares numbers as float64), duplicate keys kept in output, __proto__ accepted, no
// copy limit. Wrapping it would mean re-implementing the pointer walk to decide each of those
// cases anyway, so the fold uses this small applier, a line-by-line mirror of fast-json-patch's
// applyOperation and validator over decoded JSON values, and every divergence has a golden case
// (testdata/golden/patch-*.txt) that the cross-language test replays through the real client.
//
// move and copy make their inner remove and add without validation, as fast-json-patch does
// (innerRemove, innerAdd): past-the-end indices append, non-index keys on arrays vanish, and a
// write into a primitive throws in the browser build and is ignored in Node's; fold.go decides
// where such deltas stop the fold, with evanphx/json-patch as the second opinion for RFC
// clients.

// errPatch marks a delta the client would skip with "Failed to apply state patch".
var errPatch = errors.New("patch does not apply")

// objectProtoProps are the names every JavaScript object inherits from Object.prototype:
// fast-json-patch's existence check (obj[key] === undefined) sees them as present.
var objectProtoProps = map[string]bool{
	"constructor": true, "hasOwnProperty": true, "isPrototypeOf": true,
	"propertyIsEnumerable": true, "toLocaleString": true, "toString": true, "valueOf": true,
	"__defineGetter__": true, "__defineSetter__": true, "__lookupGetter__": true,
	"__lookupSetter__": true, "__proto__": true,
}

// jsFunction stands for an inherited method read through obj[key].
type jsFunction struct{}

// patcher applies one delta; copied counts bytes duplicated by copy operations (limit).
//
// primitiveWrite records that the delta wrote a property into a string, number or boolean
// (an inner add of a move or copy, or an operation below a document that is a primitive).
// The browser build of fast-json-patch (an ES module, strict mode) throws there and the
// client drops the whole delta, which is what applyPatch returns; the Node build (CommonJS,
// sloppy mode) ignores the write and applies the rest. The fold stops at such a delta
// (foldDelta).
type patcher struct {
	copyLimit      int
	copied         int
	sloppy         bool // apply as the CommonJS build does (ReplayCommonJS)
	primitiveWrite bool
	// unmodeled records that a move or copy went where this mirror does not follow
	// fast-json-patch exactly: a from pointer that steps into an array with a key that is not
	// an index ("length": the client's validation probe ignores that error and reads it), an
	// inner add that left a value in an array property or a method (a later operation of
	// the same delta could read it back), or a move of the whole document to a path inside
	// it (the client makes a cycle). The fold stops at such a delta.
	unmodeled bool
}

// errPrimitiveWrite is the strict-mode TypeError of a write into a primitive.
var errPrimitiveWrite = patchErr("cannot create a property on a primitive value")

func patchErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errPatch}, a...)...)
}

// applyPatch returns the new document, or an error wrapping errPatch (or a *LimitError)
// leaving doc untouched.
func applyPatch(doc any, patch any, copyLimit int) (any, error) {
	return (&patcher{copyLimit: copyLimit}).apply(doc, patch)
}

// apply is applyPatch for a fresh patcher (which then reports what it met).
func (p *patcher) apply(doc any, patch any) (any, error) {
	ops, ok := patch.([]any)
	if !ok {
		return nil, patchErr("patch sequence must be an array")
	}
	if !inPlace(ops) {
		doc = deepClone(doc)
	}
	for i, o := range ops {
		op, ok := o.(map[string]any)
		if !ok {
			return nil, patchErr("operation %d is not an object", i)
		}
		nd, err := p.applyOperation(doc, op)
		if err != nil {
			return nil, err
		}
		doc = nd
	}
	return doc, nil
}

// inPlace reports whether a patch may be applied to the document itself instead of a deep
// copy: one add, replace, remove or test operation fails, if at all, before it changes
// anything (validation, the pointer walk and index checks come first), so the copy that keeps
// the old state on failure is not needed. The reducer owns its state exclusively (snapshots
// and patch values are decoded afresh, inserted values cloned), so no one else sees the
// change. move and copy are remove + add and can fail halfway; longer patches can fail at a
// later operation.
func inPlace(ops []any) bool {
	if len(ops) != 1 {
		return false
	}
	op, _ := ops[0].(map[string]any)
	switch op["op"] {
	case "add", "replace", "remove", "test":
		return true
	}
	return false
}

// isInteger mirrors fast-json-patch helpers.isInteger: only ASCII digits (the empty string
// counts as an integer too).
func isInteger(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// toInt32 mirrors JavaScript's ~~Number(s) for a digit string.
func toInt32(s string) int {
	if s == "" {
		return 0
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	u := uint64(int64(n)) // exact for the magnitudes that matter
	if n >= 1<<63 {
		return 0
	}
	return int(int32(uint32(u)))
}

// jsDefined mirrors obj[key] !== undefined for a decoded JSON value.
func jsDefined(obj any, key string) bool {
	switch o := obj.(type) {
	case map[string]any:
		if _, ok := o[key]; ok {
			return true
		}
		return objectProtoProps[key]
	case []any:
		if key == "length" {
			return true
		}
		if key == "" || !isInteger(key) || (len(key) > 1 && key[0] == '0') {
			return false
		}
		n, err := strconv.Atoi(key)
		return err == nil && n < len(o)
	case nil:
		return false
	}
	_, defined, _ := jsPrimitiveProp(obj, key)
	return defined
}

// jsGet mirrors obj[key] (for traversal).
func jsGet(obj any, key string) (any, bool) {
	switch o := obj.(type) {
	case map[string]any:
		if v, ok := o[key]; ok {
			return v, true
		}
		if objectProtoProps[key] {
			return jsFunction{}, true
		}
	case []any:
		if key == "length" {
			return float64(len(o)), true
		}
		if isInteger(key) && key != "" && (len(key) == 1 || key[0] != '0') {
			if n, err := strconv.Atoi(key); err == nil && n < len(o) {
				return o[n], true
			}
		}
	}
	return nil, false
}

func unescapeToken(k string) string {
	if !strings.Contains(k, "~") {
		return k
	}
	return strings.ReplaceAll(strings.ReplaceAll(k, "~1", "/"), "~0", "~")
}

// applyOperation mirrors fast-json-patch applyOperation(document, op, true, true, true), the
// validated call applyPatch makes for each operation (move and copy then make unvalidated inner
// calls: innerRemove, innerAdd).
// It mutates document (a private clone) and returns the new root.
func (p *patcher) applyOperation(document any, op map[string]any) (any, error) {
	name, _ := op["op"].(string)
	path, pathIsString := op["path"].(string)
	value, hasValue := op["value"]
	switch name {
	case "add", "remove", "replace", "move", "copy", "test":
	default:
		return nil, patchErr("operation op %q is not one of RFC 6902", name)
	}
	if !pathIsString {
		return nil, patchErr("operation path is not a string")
	}
	if path != "" && path[0] != '/' {
		return nil, patchErr("path %q must start with /", path)
	}
	if name == "move" || name == "copy" {
		if _, ok := op["from"].(string); !ok {
			return nil, patchErr("operation from is missing")
		}
	}
	if (name == "add" || name == "replace" || name == "test") && !hasValue {
		return nil, patchErr("operation value is missing")
	}
	from, _ := op["from"].(string)
	if path == "" { // root operations
		switch name {
		case "add", "replace":
			return deepClone(value), nil
		case "move", "copy":
			v, err := p.getValueByPointer(document, from)
			if err != nil {
				return nil, err
			}
			if name == "copy" {
				if err := p.countCopy(v); err != nil {
					return nil, err
				}
				v = deepClone(v)
			}
			return v, nil
		case "test":
			if !jsEqual(document, value) {
				return nil, patchErr("test operation failed")
			}
			return document, nil
		case "remove":
			return nil, nil
		}
		return document, nil
	}
	if document == nil {
		// obj[key] on null throws a TypeError in either build.
		return nil, patchErr("path %q into a null document", path)
	}
	keys := strings.Split(path, "/")
	obj := document
	t := 1
	n := len(keys)
	fragmentSet := false
	for {
		key := unescapeToken(keys[t])
		if key == "__proto__" || (key == "prototype" && t > 0 && keys[t-1] == "constructor") {
			return nil, patchErr("modifying __proto__ or constructor/prototype is banned")
		}
		if !fragmentSet {
			frag := ""
			if !jsDefined(obj, key) {
				frag, fragmentSet = strings.Join(keys[:t], "/"), true
			} else if t == n-1 {
				frag, fragmentSet = path, true
			}
			if fragmentSet {
				if err := p.validateAgainst(document, name, path, from, frag); err != nil {
					return nil, err
				}
			}
		}
		t++
		if arr, ok := obj.([]any); ok {
			idx := 0
			if key == "-" {
				idx = len(arr)
			} else if !isInteger(key) {
				return nil, patchErr("expected an unsigned base-10 integer array index, got %q", key)
			} else {
				idx = toInt32(key)
			}
			if t >= n {
				if name == "add" && idx > len(arr) {
					return nil, patchErr("index %d is greater than the number of elements", idx)
				}
				return p.arrOp(document, keys[:t-1], arr, idx, name, value, from, path)
			}
			if idx < 0 || idx >= len(arr) {
				return nil, patchErr("cannot perform operation at %q", path)
			}
			obj = arr[idx]
			if _, isObj := obj.(map[string]any); !isObj {
				if _, isArr := obj.([]any); !isArr {
					return nil, patchErr("cannot perform operation at the desired path %q", path)
				}
			}
			continue
		}
		switch o := obj.(type) {
		case map[string]any:
			if t >= n {
				return p.objOp(document, o, key, name, value, from, path)
			}
			obj, _ = jsGet(o, key)
		case nil:
			// obj[key] on undefined or null throws a TypeError in either build.
			return nil, patchErr("cannot read %q of undefined at %q", key, path)
		default:
			// Only the document itself can be a primitive here (the check below refuses to
			// walk into one), so this is a path of one token below a primitive document.
			if t >= n {
				return p.primitiveOp(document, o, key, name, value, from, path)
			}
			obj = nil
		}
		switch obj.(type) {
		case map[string]any, []any:
		default:
			// More tokens follow and the value is not a non-null object: fast-json-patch
			// throws OPERATION_PATH_UNRESOLVABLE (a string, number, boolean or method is never
			// walked into).
			return nil, patchErr("cannot perform operation at the desired path %q", path)
		}
	}
}

// primitiveOp mirrors objOps[op] called on a document that is a string, number or boolean
// (a path of one token, which validation let through: a property the primitive has, such as a
// string's index or length, or any property when the document is a falsy primitive). A test reads the property; an add, a replace, or a remove of a property the
// primitive owns is a write: strict mode (the browser build) throws and the client drops the
// delta, sloppy mode (the Node build) ignores it and goes on (primitiveWrite records either);
// deleting a property it does not own succeeds in both; move and copy make their inner calls.
func (p *patcher) primitiveOp(document, obj any, key, name string, value any, from, path string) (any, error) {
	switch name {
	case "test":
		v, defined, exact := jsPrimitiveProp(obj, key)
		if !exact {
			p.unmodeled = true
		}
		if !defined || !jsEqual(v, value) {
			return nil, patchErr("test operation failed at %q", path)
		}
		return document, nil
	case "move", "copy":
		return p.moveCopy(document, name, from, path)
	case "remove":
		if !primitiveOwns(obj, key) {
			return document, nil
		}
	}
	p.primitiveWrite = true
	if p.sloppy {
		return document, nil
	}
	return nil, errPrimitiveWrite
}

// validateAgainst mirrors validator(operation, 0, document, existingPathFragment).
func (p *patcher) validateAgainst(document any, name, path, from, frag string) error {
	if !jsTruthy(document) {
		return nil // validator checks paths only "else if (document)"
	}
	switch name {
	case "add":
		pl, el := strings.Count(path, "/")+1, strings.Count(frag, "/")+1
		if pl != el+1 && pl != el {
			return patchErr("cannot add at %q", path)
		}
	case "replace", "remove":
		if path != frag {
			return patchErr("path %q does not exist", path)
		}
	case "move", "copy":
		// validate([{op:"_get", path: from}], document) on a clone; only an unresolvable
		// path is reported (other validation failures of the probe are ignored by JS; we
		// treat them as failures too, a documented divergence on nonsensical input).
		if _, err := p.getValueByPointerValidated(document, from); err != nil {
			p.unmodeled = p.unmodeled || fromStepsOffIndex(document, from)
			return patchErr("from %q does not exist", from)
		}
	}
	return nil
}

// fromStepsOffIndex reports whether resolving ptr steps into an array with a token that is
// not an array index (where the client's probe fails with an error it ignores).
func fromStepsOffIndex(doc any, ptr string) bool {
	cur := doc
	for _, k := range strings.Split(ptr, "/")[1:] {
		k = unescapeToken(k)
		if a, ok := cur.([]any); ok {
			if !isInteger(k) {
				return true
			}
			cur = jsArrayGet(a, k)
			continue
		}
		v, ok := jsGet(cur, k)
		if !ok {
			return false
		}
		cur = v
	}
	return false
}

// getValueByPointerValidated resolves ptr requiring every token to exist (the _get probe).
func (p *patcher) getValueByPointerValidated(doc any, ptr string) (any, error) {
	if ptr == "" {
		return doc, nil
	}
	if ptr[0] != '/' {
		return nil, patchErr("bad pointer %q", ptr)
	}
	keys := strings.Split(ptr, "/")[1:]
	cur := doc
	for i, k := range keys {
		k = unescapeToken(k)
		if k == "__proto__" || (k == "prototype" && i > 0 && keys[i-1] == "constructor") {
			return nil, patchErr("banned path")
		}
		if _, isArr := cur.([]any); isArr && !isInteger(k) {
			return nil, patchErr("bad index")
		}
		v, ok := jsGet(cur, k)
		if !ok && len(keys) == 1 && cur != nil {
			// A pointer of one token into a document that is a primitive reads a property
			// of it (a string's index or length). Deeper, the walk refuses a primitive.
			pv, defined, exact := jsPrimitiveProp(cur, k)
			p.unmodeled = p.unmodeled || (defined && !exact)
			v, ok = pv, defined
		}
		if !ok {
			return nil, patchErr("unresolvable %q", ptr)
		}
		if _, isFn := v.(jsFunction); isFn {
			return nil, patchErr("inherited property %q", k)
		}
		cur = v
	}
	return cur, nil
}

// getValueByPointer mirrors the unvalidated _get (a missing intermediate is a TypeError).
func (p *patcher) getValueByPointer(doc any, ptr string) (any, error) {
	return p.getValueByPointerValidated(doc, ptr)
}

func (p *patcher) countCopy(v any) error {
	if p.copyLimit <= 0 {
		return nil
	}
	b, _ := marshalJS(v)
	p.copied += len(b)
	if p.copied > p.copyLimit {
		return &LimitError{Limit: "MaxCopyBytes", Value: p.copied, Max: p.copyLimit}
	}
	return nil
}

func (p *patcher) objOp(document any, m map[string]any, key, name string, value any, from, path string) (any, error) {
	switch name {
	case "add", "replace":
		m[key] = deepClone(value)
	case "remove":
		delete(m, key)
	case "test":
		v, ok := m[key]
		if !ok || !jsEqual(v, value) {
			return nil, patchErr("test operation failed at %q", path)
		}
	case "move", "copy":
		return p.moveCopy(document, name, from, path)
	}
	return document, nil
}

func (p *patcher) arrOp(document any, parent []string, arr []any, idx int, name string, value any, from, path string) (any, error) {
	switch name {
	case "add":
		if idx < 0 || idx > len(arr) {
			return nil, patchErr("index out of range at %q", path)
		}
		arr = append(arr, nil)
		copy(arr[idx+1:], arr[idx:])
		arr[idx] = deepClone(value)
		return setAt(document, parent, arr)
	case "remove":
		if idx < 0 || idx >= len(arr) {
			return nil, patchErr("index out of range at %q", path)
		}
		arr = append(arr[:idx:idx], arr[idx+1:]...)
		return setAt(document, parent, arr)
	case "replace":
		if idx < 0 || idx >= len(arr) {
			return nil, patchErr("index out of range at %q", path)
		}
		arr[idx] = deepClone(value)
	case "test":
		if idx < 0 || idx >= len(arr) || !jsEqual(arr[idx], value) {
			return nil, patchErr("test operation failed at %q", path)
		}
	case "move", "copy":
		return p.moveCopy(document, name, from, path)
	}
	return document, nil
}

// moveCopy mirrors objOps.move / objOps.copy: an inner remove of from (move) and an inner add
// at path, both without validation (innerRemove, innerAdd). copy deep-clones the value before
// inserting it, as _deepClone does, so a container copied into itself does not share storage
// with the copy.
func (p *patcher) moveCopy(document any, name, from, path string) (any, error) {
	if name == "move" && from == "" {
		// The inner remove of the root changes nothing (applyOperation only reports the
		// document as removed), and the inner add then puts the document inside itself: a
		// cycle in the client's state, which no JSON carries. The fold stops here.
		p.unmodeled = true
		return nil, patchErr("move of the whole document into %q", path)
	}
	v, err := p.getValueByPointer(document, from)
	if err != nil {
		return nil, err
	}
	if name == "copy" {
		if err := p.countCopy(v); err != nil {
			return nil, err
		}
		return p.innerAdd(document, path, deepClone(v))
	}
	doc, err := p.innerRemove(document, from)
	if err != nil {
		return nil, err
	}
	return p.innerAdd(doc, path, v)
}

// innerRemove mirrors applyOperation(document, {op: "remove", path}) without validation, for
// a path that the move's validation resolved (every token exists).
func (p *patcher) innerRemove(document any, path string) (any, error) {
	if path == "" {
		return nil, nil
	}
	keys := strings.Split(path, "/")
	parent, err := p.getValueByPointerValidated(document, strings.Join(keys[:len(keys)-1], "/"))
	if err != nil {
		return nil, err
	}
	last := unescapeToken(keys[len(keys)-1])
	switch c := parent.(type) {
	case map[string]any:
		delete(c, last)
		return document, nil
	case []any:
		idx := toInt32(last)
		if idx < 0 || idx >= len(c) {
			return nil, patchErr("index out of range at %q", path)
		}
		return setAt(document, keys[:len(keys)-1], append(c[:idx:idx], c[idx+1:]...))
	}
	return nil, patchErr("cannot remove %q", path)
}

// innerAdd mirrors applyOperation(document, {op: "add", path, value}) without validation, as
// move and copy call it after their inner remove changed the document:
//   - an integer index past the end of an array appends (Array.prototype.splice clamps), a
//     negative one (~~ of a huge index) counts from the end;
//   - a key that is not an integer on an array sets a property that JSON never shows: the
//     value vanishes;
//   - a write into a string, number or boolean throws in strict mode (errPrimitiveWrite; the
//     patcher records it), and a walk through undefined or null throws everywhere;
//   - __proto__ and constructor/prototype stay banned.
func (p *patcher) innerAdd(document any, path string, value any) (any, error) {
	if path == "" {
		return value, nil
	}
	keys := strings.Split(path, "/")
	obj := document
	for t := 1; t < len(keys); t++ {
		key := unescapeToken(keys[t])
		if key == "__proto__" || (key == "prototype" && keys[t-1] == "constructor") {
			return nil, patchErr("modifying __proto__ or constructor/prototype is banned")
		}
		final := t == len(keys)-1
		switch c := obj.(type) {
		case []any:
			if !final {
				obj = jsArrayGet(c, key)
				continue
			}
			if key != "-" && !isInteger(key) {
				p.unmodeled = true
				return document, nil // arr[key] = value: not an index, JSON drops it
			}
			idx := len(c)
			if key != "-" {
				idx = toInt32(key)
			}
			if idx < 0 {
				idx = max(len(c)+idx, 0)
			}
			idx = min(idx, len(c))
			c = append(c, nil)
			copy(c[idx+1:], c[idx:])
			c[idx] = value
			return setAt(document, keys[:t], c)
		case map[string]any:
			if final {
				c[key] = value
				return document, nil
			}
			obj, _ = jsGet(c, key)
		case jsFunction:
			if final {
				p.unmodeled = true
				return document, nil // a property of an inherited method: not in the JSON
			}
			obj = nil
		case nil:
			return nil, patchErr("cannot set %q of undefined at %q", key, path)
		default: // string, number, boolean
			if final {
				p.primitiveWrite = true
				if p.sloppy {
					return document, nil
				}
				return nil, errPrimitiveWrite
			}
			obj = jsPrimitiveGet(c, key)
		}
	}
	return document, nil
}

// jsArrayGet mirrors arr[key] while walking a path without validation ("-" and non-indices
// read undefined; ~~key for integers).
func jsArrayGet(arr []any, key string) any {
	if key == "length" {
		return float64(len(arr))
	}
	if key == "-" || !isInteger(key) {
		return nil
	}
	if i := toInt32(key); i >= 0 && i < len(arr) {
		return arr[i]
	}
	return nil
}

// jsPrimitiveGet mirrors v[key] for a string, number or boolean while walking a path (a
// value this mirror cannot carry reads undefined).
func jsPrimitiveGet(v any, key string) any {
	val, _, exact := jsPrimitiveProp(v, key)
	if !exact {
		return nil
	}
	return val
}

// jsPrimitiveProp mirrors v[key] for a string, number or boolean: a string has its UTF-16
// code units at indices and its length; every primitive inherits its prototype's methods
// (read as jsFunction). defined reports v[key] !== undefined; exact is false where the value
// is one this mirror does not carry (a lone surrogate half of a string, read as U+FFFD).
func jsPrimitiveProp(v any, key string) (val any, defined, exact bool) {
	if s, ok := v.(string); ok {
		if key == "length" {
			return float64(utf16Len(s)), true, true
		}
		if i, ok := arrayIndex(key); ok {
			units := utf16.Encode([]rune(s))
			if i >= len(units) {
				return nil, false, true
			}
			// A lone surrogate half has no Go string: it reads as U+FFFD, inexactly.
			return string(rune(units[i])), true, !utf16.IsSurrogate(rune(units[i]))
		}
		if stringProtoProps[key] || objectProtoProps[key] {
			return jsFunction{}, true, true
		}
		return nil, false, true
	}
	switch v.(type) {
	case float64:
		if numberProtoProps[key] || objectProtoProps[key] {
			return jsFunction{}, true, true
		}
	case bool:
		if key == "toString" || key == "valueOf" || objectProtoProps[key] {
			return jsFunction{}, true, true
		}
	}
	return nil, false, true
}

// primitiveOwns reports whether a primitive has key as a property of its own (what delete
// cannot remove): a string's indices and length.
func primitiveOwns(v any, key string) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	if key == "length" {
		return true
	}
	i, ok := arrayIndex(key)
	return ok && i < utf16Len(s)
}

// arrayIndex parses a canonical array index (digits, no leading zero).
func arrayIndex(key string) (int, bool) {
	if key == "" || !isInteger(key) || (len(key) > 1 && key[0] == '0') {
		return 0, false
	}
	i, err := strconv.Atoi(key)
	return i, err == nil
}

// jsTruthy mirrors JavaScript's truthiness for a decoded JSON value.
func jsTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	}
	return true
}

// numberProtoProps and stringProtoProps are the methods Number.prototype and String.prototype
// give every number and string (beside Object.prototype's), as Node 20 and current browsers
// have them.
var (
	numberProtoProps = map[string]bool{
		"toExponential": true, "toFixed": true, "toPrecision": true,
	}
	stringProtoProps = map[string]bool{
		"anchor": true, "at": true, "big": true, "blink": true, "bold": true, "charAt": true,
		"charCodeAt": true, "codePointAt": true, "concat": true, "endsWith": true,
		"fixed": true, "fontcolor": true, "fontsize": true, "includes": true, "indexOf": true,
		"isWellFormed": true, "italics": true, "lastIndexOf": true, "link": true,
		"localeCompare": true, "match": true, "matchAll": true, "normalize": true,
		"padEnd": true, "padStart": true, "repeat": true, "replace": true, "replaceAll": true,
		"search": true, "slice": true, "small": true, "split": true, "startsWith": true,
		"strike": true, "sub": true, "substr": true, "substring": true, "sup": true,
		"toLocaleLowerCase": true, "toLocaleUpperCase": true, "toLowerCase": true,
		"toUpperCase": true, "toWellFormed": true, "trim": true, "trimEnd": true,
		"trimLeft": true, "trimRight": true, "trimStart": true,
	}
)

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// setAt stores a re-sliced array back at the pointer tokens parent (the tokens before the
// array's own key). Go slices are values, so a length change must be written back.
func setAt(document any, tokens []string, arr []any) (any, error) {
	if len(tokens) <= 1 {
		return arr, nil
	}
	cur := document
	for i := 1; i < len(tokens)-1; i++ {
		k := unescapeToken(tokens[i])
		if a, ok := cur.([]any); ok {
			cur = jsArrayGet(a, k) // arr[~~key], as the walk that found the array
			continue
		}
		v, ok := jsGet(cur, k)
		if !ok {
			return nil, patchErr("lost path")
		}
		cur = v
	}
	last := unescapeToken(tokens[len(tokens)-1])
	switch c := cur.(type) {
	case map[string]any:
		c[last] = arr
	case []any:
		c[toInt32(last)] = arr
	}
	return document, nil
}

// jsEqual mirrors fast-json-patch _areEquals (fast-deep-equal) for decoded JSON.
func jsEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case nil:
		return b == nil
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

func deepClone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepClone(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepClone(e)
		}
		return a
	}
	return v
}
