// compact-check-core.mjs: the cross-language check of one compact case, shared by the Node
// runner (compact-check.mjs, which loads @ag-ui/client's CommonJS build and so fast-json-patch's
// CommonJS module: sloppy mode) and the browser runner (browser/compact-check.mjs, which
// bundles this file with esbuild the way a browser app is bundled, picking the ES modules:
// strict mode, and runs it in headless Chromium).
//
// A case is {"name", "raw": [events], "compacted": [events], "goMessages", "goState",
// "goNodeMessages", "goNodeState"}: raw is the recorded stream without ephemeral events,
// compacted is compact.Compact's output, go* are compact.Replay (the browser's answer) and
// compact.ReplayCommonJS (Node's). Both streams run through the official client exactly as
// HttpAgent runs a response (AbstractAgent.runAgent: enforce, chunk transform, verify,
// defaultApplyEvents) and must end with equal messages and state, the matching Go replay must
// agree with the client, and every compacted event must pass the @ag-ui/core schemas.
import { AbstractAgent } from "@ag-ui/client";
import { EventType } from "@ag-ui/core";
import { EventSchemas } from "@ag-ui/core/schemas";
import { Observable } from "rxjs";

class ReplayAgent extends AbstractAgent {
  constructor(events) {
    super({ threadId: "t1" });
    this.events = events;
  }
  run() {
    return new Observable((sub) => {
      for (const e of this.events) sub.next(structuredClone(e));
      sub.complete();
    });
  }
}

async function replay(events) {
  const agent = new ReplayAgent(events);
  let error;
  try {
    await agent.runAgent({ runId: "replay" });
  } catch (e) {
    error = e instanceof Error ? e.message : String(e);
  }
  return { messages: JSON.parse(JSON.stringify(agent.messages)), state: JSON.parse(JSON.stringify(agent.state ?? null)), error };
}

// deepEqual compares JSON values (object key order ignored), the same in both builds.
export function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual(a[k], b[k]));
}

const known = new Set(Object.values(EventType));

// checkCase returns the problems of one case ([] when it passes). build is "node" or
// "browser": it picks the Go replay the client is compared with.
export async function checkCase(c, build) {
  const problems = [];
  c.compacted.forEach((e, i) => {
    // Unknown types pass through Compact untouched by design (the client drops them).
    if (!known.has(e.type)) return;
    const r = EventSchemas.safeParse(e);
    if (!r.success) problems.push(`compacted event ${i} (${e.type}) fails the schema: ${r.error.message.slice(0, 300)}`);
  });
  const raw = await replay(c.raw);
  const got = await replay(c.compacted);
  if (raw.error) problems.push(`raw stream rejected by the client: ${raw.error}`);
  if (got.error) problems.push(`compacted stream rejected by the client: ${got.error}`);
  if (!deepEqual(got.messages, raw.messages)) {
    problems.push(`messages differ:\n  raw:       ${JSON.stringify(raw.messages).slice(0, 1500)}\n  compacted: ${JSON.stringify(got.messages).slice(0, 1500)}`);
  }
  if (!deepEqual(got.state, raw.state)) {
    problems.push(`state differs:\n  raw:       ${JSON.stringify(raw.state)}\n  compacted: ${JSON.stringify(got.state)}`);
  }
  const goMessages = build === "node" ? c.goNodeMessages : c.goMessages;
  const goState = build === "node" ? c.goNodeState : c.goState;
  if (goMessages !== undefined && !deepEqual(goMessages, raw.messages)) {
    problems.push(`Go replay messages differ from the client:\n  client: ${JSON.stringify(raw.messages).slice(0, 1500)}\n  go:     ${JSON.stringify(goMessages).slice(0, 1500)}`);
  }
  if (goState !== undefined && !deepEqual(goState, raw.state)) {
    problems.push(`Go replay state differs from the client:\n  client: ${JSON.stringify(raw.state)}\n  go:     ${JSON.stringify(goState)}`);
  }
  return problems;
}

// strictMode reports whether fast-json-patch as bundled here throws on a write into a
// primitive (the ES module, strict) or ignores it (the CommonJS module, sloppy): each runner
// asserts the build it claims to test.
export async function patchIsStrict() {
  const agent = new ReplayAgent([
    { type: "RUN_STARTED", threadId: "t1", runId: "probe" },
    { type: "STATE_SNAPSHOT", snapshot: { l: [{}, "s"] } },
    { type: "STATE_DELTA", delta: [{ op: "move", from: "/l/0", path: "/l/0/x" }] },
    { type: "RUN_FINISHED", threadId: "t1", runId: "probe" },
  ]);
  await agent.runAgent({ runId: "probe" });
  return agent.state.l.length === 2;
}

// runAll checks every case and returns {passed, failed, report}.
export async function runAll(cases, build) {
  let passed = 0;
  let failed = 0;
  const report = [];
  for (const c of cases) {
    const problems = await checkCase(c, build);
    if (problems.length === 0) {
      passed++;
    } else {
      failed++;
      report.push(`FAIL [${build}] ${c.name}\n  ${problems.join("\n  ")}`);
    }
  }
  return { passed, failed, report };
}
