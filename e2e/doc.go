// Package e2e holds the cross-language end-to-end tests, driven by Go tests that start the
// demo agent, the proxy (and Redis where needed) on real sockets and run node scripts with the
// official AG-UI packages (pinned in package.json, installed with `npm ci` here):
//
//   - run-scenarios.mjs: every demo scenario through the official HttpAgent, directly and
//     through agui-proxy; both must look the same to the client (proxy_e2e_test.go,
//     harness_test.go).
//   - compact-check.mjs and browser/compact-check.mjs: the official reducer ends with the same
//     messages and state on raw and compacted streams, and every compacted event passes the
//     @ag-ui/core schemas, under both module builds of the client: Node's CommonJS build, and
//     the ES module build bundled with esbuild as a browser app is, run in headless Chromium
//     (compact-check-core.mjs is the shared check; compact_e2e_test.go);
//     compact-bench.mjs is the side-by-side compaction benchmark.
//   - resume-scenarios.mjs: a client cut after K events reattaches (re-POST with Last-Event-ID,
//     or thread attach) and must end with the uninterrupted run's messages and state, on one
//     proxy (resume_test.go) or through another replica sharing Redis (replicas_test.go).
//   - long-thread-check.mjs: one client continues a thread for dozens of runs; every few runs
//     a fresh client attaches to the thread and must end with its messages and state, while
//     the proxy builds most checkpoints by folding only the run (long_thread_test.go);
//     hydrate-check.mjs: a reloaded client's next run reaches the agent with the whole branch
//     (hydrate_test.go).
//   - emitted-check.mjs: every event the proxy writes itself, on the run POST, the thread and
//     run attach and the resumes (a stop's closing events and RUN_FINISHED cancelled
//     included), passes @ag-ui/core 1.0.0's EventSchemas unchanged and the official client
//     without a warning, on every store (emitted_test.go).
//   - tanstack/: the real TanStack AI RunAgentInput server (@tanstack/ai, pinned in its own
//     package.json), with a scripted model adapter and a gated server tool, whose responses go
//     on after RUN_FINISHED; the proxy keeps them whole and resumes a client cut inside them
//     (tanstack_test.go).
//   - browser/: headless Chromium renders a resumed conversation from EventSource
//     (browser_test.go), and browser/inspector.mjs checks the thread inspector page on a
//     branched thread and a live run, with screenshots (inspector_test.go).
//
// The package has no non-test code. Missing node_modules or Chromium fail the tests with an
// install hint; `make test` installs them.
package e2e
