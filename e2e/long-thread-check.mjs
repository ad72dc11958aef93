#!/usr/bin/env node
// long-thread-check.mjs: a long thread through the proxy with the OFFICIAL AG-UI client
// (@ag-ui/client HttpAgent). One agent object runs --runs turns on one thread, each a user
// message and a demo-agent scenario (text, tool calls, state deltas, activity, reasoning,
// chunks, snapshots...), the way a chat client continues a conversation. Every --every runs,
// and after the last, a FRESH agent object (no messages, empty state) attaches to the thread
// (GET {prefix}threads/<thread>/events: the compacted prelude) and must end with exactly the
// messages and state the continuing agent holds. A long thread's checkpoints are built by
// folding each run onto the branch before it, so this is the official client's check of that
// path.
//
//   node long-thread-check.mjs --proxy http://127.0.0.1:8080/ [--runs 60] [--every 10]
//     [--prefix /agui/]
//
// Output: one line per check, then "N passed, M failed". Exit 0 only when all pass.

import { HttpAgent } from "@ag-ui/client";
import { isDeepStrictEqual } from "node:util";

console.warn = () => {};
console.error = () => {};
console.debug = () => {};

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const proxy = opt("--proxy");
if (!proxy) {
  process.stderr.write("long-thread-check: --proxy URL is required\n");
  process.exit(2);
}
const runs = Number(opt("--runs", "60"));
const every = Number(opt("--every", "10"));
const prefix = opt("--prefix", "/agui/");
if (!(runs > 0) || !(every > 0)) {
  process.stderr.write("long-thread-check: --runs and --every must be positive\n");
  process.exit(2);
}

// Scenarios that end their run (RUN_FINISHED) and keep the thread going.
const SCENARIOS = ["chat", "tools", "state", "activity", "reasoning", "chunks", "unicode", "parallel",
  "steps", "snapshot", "large", "custom"];
const threadId = `long-${process.pid}-${Date.now()}`;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const plain = (v) => JSON.parse(JSON.stringify(v ?? null));
// The messages compared: without the ones the client invents with random ids.
const messagesOf = (agent) => plain(agent.messages).filter((m) => !(m.role === "reasoning" && UUID.test(m.id)));

const agent = new HttpAgent({ url: proxy, threadId, initialState: {} });
let passed = 0;
let failed = 0;

async function attachCheck(afterRun) {
  const attachURL = new URL(`${prefix}threads/${encodeURIComponent(threadId)}/events`, proxy);
  const fresh = new HttpAgent({
    url: proxy,
    threadId,
    initialState: {},
    // The client POSTs a run; the thread attach is a GET of the same stream format.
    fetch: (_url, init) => fetch(attachURL, { method: "GET", headers: { Accept: "text/event-stream" }, signal: init?.signal }),
  });
  let error = null;
  try {
    await fresh.runAgent({ runId: `attach-${afterRun}` });
  } catch (e) {
    error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
  const want = { messages: messagesOf(agent), state: plain(agent.state) };
  const got = { messages: messagesOf(fresh), state: plain(fresh.state) };
  const label = `after run ${afterRun}: ${want.messages.length} messages`;
  if (error) {
    failed++;
    process.stdout.write(`FAIL ${label}: attach error ${error}\n`);
  } else if (!isDeepStrictEqual(got.messages, want.messages)) {
    failed++;
    process.stdout.write(`FAIL ${label}: messages differ (got ${got.messages.length})\n`);
  } else if (!isDeepStrictEqual(got.state, want.state)) {
    failed++;
    process.stdout.write(`FAIL ${label}: state differs: got ${JSON.stringify(got.state).slice(0, 200)}, want ${JSON.stringify(want.state).slice(0, 200)}\n`);
  } else {
    passed++;
    process.stdout.write(`ok   ${label}\n`);
  }
}

for (let i = 1; i <= runs; i++) {
  const scenario = SCENARIOS[(i - 1) % SCENARIOS.length];
  agent.addMessage({ id: `u${i}`, role: "user", content: `turn ${i}: ${scenario}` });
  try {
    await agent.runAgent({ runId: `r${i}`, forwardedProps: { scenario, intervalMs: 0 } });
  } catch (e) {
    failed++;
    process.stdout.write(`FAIL run ${i} (${scenario}): ${e instanceof Error ? e.message : String(e)}\n`);
    break;
  }
  if (i % every === 0 || i === runs) await attachCheck(i);
}
process.stdout.write(`${passed} passed, ${failed} failed\n`);
process.exit(failed === 0 ? 0 : 1);
