// Package hostile holds the hostile-input suite: black-box tests that drive a real proxy
// (proxy.New behind an httptest.Server) over real sockets, on the in-memory store, the disk
// store and a private redis-server (internal/redistest), with careless and malicious requests and a
// scripted upstream that misbehaves on purpose.
//
// Every case belongs to a class (malformed bodies, oversized bodies, events and runs, invalid
// JSON, invalid UTF-8, hostile ids, foreign identities, bad patches, events after the terminal
// event, orphan events, CR-only framing, hostile upstreams, a paused Redis, limits, bytes that
// are not SSE, the agent's retry and event fields, duplicate member names, client errors
// that must stay 4xx, long run chains, big imports, the bulk export's end line, a snapshot
// with one bad message). The cases
// only use HTTP and the exported configuration, so they keep holding whatever the packages
// behind the handler become. The table of classes and the invariants each case checks are in
// hostile_test.go; the package has no code outside its tests.
package hostile
