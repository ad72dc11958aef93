package recorder

import (
	"fmt"
	"strings"

	"github.com/agui-proxy/agui-proxy/agui"
)

// Thread namespaces: every owner (identity) on every route has its own thread ids, so that two
// owners can both use thread id "t" and nothing another owner does with an id tells it whether
// the id is taken. A Store files each thread under its thread key (ThreadKey) and never sees the
// namespace otherwise: every threadID argument of a Store, Follower, Leaser or RunCompactor
// method, Run.ThreadID of a run to create or append, and Thread.ID, Run.ThreadID and
// ThreadSummary.ID of what a store returns are thread keys. thread.Service makes the keys;
// ThreadIDOf gives back the id a client knows.

// DefaultRoute is the route of a proxy configured with none (AGUI_ROUTE's default).
const DefaultRoute = "default"

// nsTagLen is the length of the namespace tag of a thread key (indexTag: 32 hex digits).
const nsTagLen = 32

// ThreadKey returns the key under which a store files thread threadID of owner ("" when
// single-tenant) on route: "<tag>/<threadId>", tag being the 32 hex digits of indexTag(owner,
// route) (a hash: the identity itself never appears in a key, as in the thread index), and
// threadID itself for the single-tenant default route, so such threads keep the key they had
// before namespaces existed. '/' is outside the id alphabet, so a key with a tag never equals
// a bare id, and a key with a tag splits one way only. On Redis the whole key is the thread's
// hash tag ("{<key>}"): a thread's keys stay in one Cluster slot, and the keys of one id of
// two namespaces are apart.
func ThreadKey(owner, route, threadID string) string {
	if owner == "" && route == DefaultRoute {
		return threadID
	}
	return indexTag(owner, route) + "/" + threadID
}

// ThreadIDOf returns the thread id key was made from (ThreadKey's threadID).
func ThreadIDOf(key string) string {
	return key[strings.LastIndexByte(key, '/')+1:]
}

// validateThreadKey checks a thread key: a valid id (agui.ValidateID), optionally after a
// namespace tag of 32 lower-case hex digits and '/'. It keeps every byte that could break a
// key template ('{', '}', whitespace, control and glob characters) out of storage commands.
func validateThreadKey(key string) error {
	id := key
	if i := strings.IndexByte(key, '/'); i >= 0 {
		if i != nsTagLen || strings.TrimLeft(key[:i], "0123456789abcdef") != "" {
			return fmt.Errorf("thread key %q: malformed namespace: %w", truncate(key, 80), agui.ErrInvalidID)
		}
		id = key[i+1:]
	}
	return agui.ValidateID("threadId", id)
}
