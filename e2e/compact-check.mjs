// compact-check.mjs <dir>: the cross-language proof for compact.Compact.
//
// Each <dir>/*.json file is {"name", "raw": [events], "compacted": [events]}: raw is the
// recorded stream with the ephemeral events already removed, compacted is the output of
// compact.Compact. Both are run through the official @ag-ui/client 1.0 pipeline exactly as
// HttpAgent runs a response (AbstractAgent.runAgent: enforce, chunk transform, verify,
// defaultApplyEvents) and must end with deep-equal messages and state. Every compacted event
// must also pass the official @ag-ui/core zod schemas (unknown types, which Compact
// passes through and the client drops, excepted). Prints "N passed, M failed" and exits
// non-zero on any failure.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { AbstractAgent } from "@ag-ui/client";
import { EventType } from "@ag-ui/core";
import { EventSchemas } from "@ag-ui/core/schemas";
import { Observable } from "rxjs";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
console.warn = () => {};
console.error = () => {};

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

const dir = process.argv[2];
if (!dir) {
  console.log("usage: node compact-check.mjs <dir>");
  process.exit(2);
}
let passed = 0;
let failed = 0;
for (const file of readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
  const c = JSON.parse(readFileSync(join(dir, file), "utf8"));
  const problems = [];
  const known = new Set(Object.values(EventType));
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
  if (!isDeepStrictEqual(got.messages, raw.messages)) {
    problems.push(`messages differ:\n  raw:       ${JSON.stringify(raw.messages).slice(0, 1500)}\n  compacted: ${JSON.stringify(got.messages).slice(0, 1500)}`);
  }
  if (!isDeepStrictEqual(got.state, raw.state)) {
    problems.push(`state differs:\n  raw:       ${JSON.stringify(raw.state)}\n  compacted: ${JSON.stringify(got.state)}`);
  }
  if (c.goMessages !== undefined && !isDeepStrictEqual(JSON.parse(JSON.stringify(c.goMessages)), raw.messages)) {
    problems.push(`Go Replay messages differ from the client:\n  client: ${JSON.stringify(raw.messages).slice(0, 1500)}\n  go:     ${JSON.stringify(c.goMessages).slice(0, 1500)}`);
  }
  if (c.goState !== undefined && !isDeepStrictEqual(c.goState, raw.state)) {
    problems.push(`Go Replay state differs from the client:\n  client: ${JSON.stringify(raw.state)}\n  go:     ${JSON.stringify(c.goState)}`);
  }
  if (problems.length === 0) {
    passed++;
  } else {
    failed++;
    console.log(`FAIL ${c.name}\n  ${problems.join("\n  ")}`);
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
