// Package compact turns the recorded events of an AG-UI thread into the smallest stream that
// the official client (@ag-ui/client 1.0) replays to exactly the same messages and state.
//
// The package is pure and synchronous: no I/O, no goroutines, no global state. Every function
// is safe for concurrent use on distinct inputs.
//
// Four entry points share one lossless event model (Event keeps the JSON exactly as received):
//
//   - Compact folds complete text messages, tool calls, tool results, reasoning and activity
//     into one MESSAGES_SNAPSHOT, and every STATE_SNAPSHOT / STATE_DELTA of the whole thread
//     into one STATE_SNAPSHOT, keeping run boundaries and re-opening whatever is still
//     streaming at the end, so that a live tail can continue it.
//   - Concat is the narrower delta-merging compaction of the official TypeScript compactEvents.
//   - A Fold is Compact for a stream that arrives in parts (a thread, run after run): Feed the
//     events, Events answers what Compact answers for everything fed so far, byte for byte,
//     and a message no event changed since the last answer is copied, not rendered again.
//   - Replay is a Go mirror of the official client's pipeline (chunk transform, verifier,
//     defaultApplyEvents) that returns the final messages and state. The property tests use it
//     as the oracle; the cross-language test in e2e/ checks it against the real client.
//
// The mirror is one file per function of @ag-ui/client 1.0.0 (pinned in e2e/package.json; its
// TypeScript source ships in e2e/node_modules/@ag-ui/client/dist/index.js.map), each naming
// the source file it follows: reducer.go runs the pipeline of AbstractAgent.runAgent;
// enforce.go is enforceEvents with the @ag-ui/core schema rules; chunks.go is
// transformChunks; verify.go is verifyEvents; apply.go is defaultApplyEvents; patch.go is
// fast-json-patch's applyOperation as the client calls it. hotpath.go, the fast path for
// content deltas, mirrors nothing: it ends exactly where verify + apply would. Event types
// are package agui's Kind table.
//
// JSON Patch follows the client (fast-json-patch 3.1.1 as called by applyPatch(state, delta,
// true, false)), not RFC-pure semantics: see patch.go for every divergence from
// github.com/evanphx/json-patch/v5 and why the fold does not use that library's defaults.
//
// Which clients the output is proven for: the snapshot is folded only from deltas that every
// client applies alike. Where the browser build of the client (fast-json-patch's ES module,
// strict mode), its Node build (the CommonJS module, sloppy mode) or an RFC 6902 client
// (github.com/evanphx/json-patch/v5 as the second opinion) could end differently, the fold
// stops and the remaining deltas travel raw (fold.go). The cross-language test
// (e2e/compact_e2e_test.go) replays every golden and generated case under both JavaScript
// builds, the browser one in headless Chromium; clients that are not JavaScript are covered
// to the extent evanphx/json-patch stands for their library (docs/compaction.md).
//
// Speed: ParseEvent validates with json.Valid's rules and finds the type in one pass (scan.go,
// eight bytes at a time); the reducer switches on small integer types, keeps the lookups of the
// stream a delta continues, and recognises the next delta of that stream as the same bytes
// around a new string (fastDelta), so a content delta is one validation pass, one comparison
// and an append, without allocating. BenchmarkCompact (bytes in to bytes out) reports events
// per second and per CPU-second; e2e/compact-bench.mjs reports the same for the official
// compactEvents on the same bytes.
package compact
