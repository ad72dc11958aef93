package agui

import (
	"errors"
	"fmt"
	"strings"
)

// ErrDuplicateMember is wrapped by CheckMembers' errors.
var ErrDuplicateMember = errors.New("duplicate member name")

// CheckMembers is the proxy's one rule for the JSON documents it reads (a run request's
// members, an import document, a backup line, an events file): no object may hold a member
// name twice, nor two names that differ only in case. Decoders disagree on such objects
// (encoding/json takes the last and matches names case-insensitively, other parsers the
// first or only the exact spelling), so the proxy refuses them instead of reading one of
// several meanings. data must be one valid JSON value (Valid). Values at the paths opaque
// reports are not looked into: the parts of a document the proxy keeps as they were sent
// (an event's JSON, a client's forwardedProps), whose readers are the agent and the client.
// A path is the member names from the top, with "*" for an array element.
//
// The error wraps ErrDuplicateMember and names the member and where it is.
func CheckMembers(data []byte, opaque func(path []string) bool) error {
	var path []string
	_, err := checkMembers(data, skipSpace(data, 0), &path, opaque)
	return err
}

// checkMembers checks the value at data[i] and returns the index after it.
func checkMembers(data []byte, i int, path *[]string, opaque func([]string) bool) (int, error) {
	if i >= len(data) {
		return i, nil
	}
	if opaque != nil && len(*path) > 0 && opaque(*path) {
		return skipValue(data, i), nil
	}
	switch data[i] {
	case '{':
		var seen map[string]string // folded name -> name
		for i = skipSpace(data, i+1); i < len(data) && data[i] != '}'; {
			end := skipString(data, i)
			key := string(data[i+1 : end-1])
			if strings.IndexByte(key, '\\') >= 0 {
				key = unquote(data[i:end])
			}
			fold := foldName(key)
			if prev, dup := seen[fold]; dup {
				where := "at the top level"
				if len(*path) > 0 {
					where = "in " + strings.Join(*path, ".")
				}
				if prev == key {
					return i, fmt.Errorf("%w: %q appears twice %s", ErrDuplicateMember, truncate(key), where)
				}
				return i, fmt.Errorf("%w: %q and %q differ only in case %s", ErrDuplicateMember, truncate(prev), truncate(key), where)
			}
			if seen == nil {
				seen = make(map[string]string, 8)
			}
			seen[fold] = key
			i = skipSpace(data, skipSpace(data, end)+1) // past the ':'
			*path = append(*path, key)
			end, err := checkMembers(data, i, path, opaque)
			*path = (*path)[:len(*path)-1]
			if err != nil {
				return end, err
			}
			if i = skipSpace(data, end); i < len(data) && data[i] == ',' {
				i = skipSpace(data, i+1)
			}
		}
		return i + 1, nil
	case '[':
		for i = skipSpace(data, i+1); i < len(data) && data[i] != ']'; {
			*path = append(*path, "*")
			end, err := checkMembers(data, i, path, opaque)
			*path = (*path)[:len(*path)-1]
			if err != nil {
				return end, err
			}
			if i = skipSpace(data, end); i < len(data) && data[i] == ',' {
				i = skipSpace(data, i+1)
			}
		}
		return i + 1, nil
	default:
		return skipValue(data, i), nil
	}
}

// foldName is the name encoding/json would match a struct field by: equal for names that
// differ only in case (Unicode simple folding, so "K" and the Kelvin sign agree).
func foldName(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || ('A' <= c && c <= 'Z') {
			return strings.ToLower(strings.ToUpper(s))
		}
	}
	return s
}
