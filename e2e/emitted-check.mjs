#!/usr/bin/env node
// emitted-check.mjs: every event agui-proxy writes itself, on every endpoint, must pass the
// @ag-ui/core 1.0.0 schemas unchanged (EventSchemas.safeParse succeeds and strips nothing) and
// read through the official client (@ag-ui/client 1.0.0 HttpAgent: its parser, verifier and
// reducer) without an error or a console warning. The flows, on thread ids made from --prefix:
//   live        POST a "tools" run (the enriched RUN_STARTED) and a "noend" run (the appended
//               RUN_ERROR UPSTREAM_ENDED; the only run allowed to end in an error);
//   stop        POST a "slow" run and stop it after three events: what the proxy closes and
//               RUN_FINISHED outcome cancelled (the subscriber must see outcome "cancelled");
//   thread      GET the thread attach stream (prelude, snapshots, replay_complete marker);
//   run         GET the stopped run's attach stream (its raw events);
//   failed      GET the thread attach from an id of another epoch (resume_failed marker);
//   resume      re-POST the stopped run with Last-Event-ID (the resume stream);
//   stop-open   with --open-scenario S --open-events N: POST scenario S, whose agent leaves
//               much open after N events, and stop it (every kind of closing event).
// Every stream the client reads is also read raw (fetch is teed) for the schema check.
//
//   node emitted-check.mjs --proxy http://127.0.0.1:8080/ --prefix p1
//
// Prints one line per flow and "N passed, M failed"; exits 0 only when all pass.

import { HttpAgent } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
if (!args.proxy || !args.prefix) {
  console.error("usage: node emitted-check.mjs --proxy URL --prefix ID");
  process.exit(2);
}
const base = args.proxy.replace(/\/$/, "");

// Console output of the client is a failure: capture it per flow.
let captured = [];
for (const level of ["warn", "error", "debug", "log", "info"]) {
  const orig = console[level].bind(console);
  console[level] = (...a) => {
    if (captured) captured.push(`${level}: ${a.map((x) => (typeof x === "string" ? x : x instanceof Error ? x.message : JSON.stringify(x))).join(" ")}`);
    else orig(...a);
  };
}

// Every response the client reads is teed: raw holds the data of each of its events.
let raw = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (...a) => {
  const res = await realFetch(...a);
  if (!res.body || !(res.headers.get("content-type") ?? "").includes("text/event-stream")) return res;
  const [mine, theirs] = res.body.tee();
  const text = new Response(mine).text().then((t) => {
    for (const block of t.split("\n\n")) {
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (data) raw.push(data);
    }
  });
  pending.push(text);
  return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
};
let pending = [];

// canonical renders v with sorted keys, to compare an event with what the schema kept of it.
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}`;
  return JSON.stringify(v);
}

// schemaProblems checks every raw event against EventSchemas.
function schemaProblems(datas) {
  const out = [];
  for (const d of datas) {
    let ev;
    try {
      ev = JSON.parse(d);
    } catch (e) {
      out.push(`not JSON: ${d.slice(0, 120)}`);
      continue;
    }
    const r = EventSchemas.safeParse(ev);
    if (!r.success) out.push(`${ev.type}: ${r.error.issues.map((i) => `${i.path.join(".")} ${i.message}`).join("; ")}`);
    else if (canonical(r.data) !== canonical(ev)) out.push(`${ev.type}: the schema changes it: ${canonical(ev)} -> ${canonical(r.data)}`);
  }
  return out;
}

// An HttpAgent that GETs an attach stream instead of POSTing a run (same parser, verifier and
// reducer), with extra headers.
class AttachAgent extends HttpAgent {
  constructor(url, headers = {}) {
    super({ url, headers });
  }
  requestInit() {
    return { method: "GET", headers: { ...this.headers, Accept: "text/event-stream" } };
  }
}

const results = [];
async function flow(name, fn, { allowError = false } = {}) {
  captured = [];
  raw = [];
  pending = [];
  const seen = { events: [], outcomes: [], errors: [] };
  let error = null;
  try {
    await fn(seen);
  } catch (e) {
    error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
  await Promise.all(pending);
  const problems = [...schemaProblems(raw), ...captured.map((c) => `client console ${c}`)];
  if (error && !(allowError && seen.errors.length > 0)) problems.push(`error: ${error}`);
  if (raw.length === 0) problems.push("no event read");
  const wrong = seen.check?.();
  if (wrong) problems.push(wrong);
  results.push({ name, ok: problems.length === 0, problems, events: raw.length });
  captured = null;
  console.log(`${problems.length === 0 ? "ok  " : "FAIL"} ${name}: ${raw.length} events${problems.length ? "\n  " + problems.join("\n  ") : ""}`);
  captured = [];
  return seen;
}

function subscriber(seen) {
  return {
    onEvent: ({ event }) => void seen.events.push(event),
    onRunFinishedEvent: ({ outcome }) => void seen.outcomes.push(outcome),
    onRunErrorEvent: ({ event }) => void seen.errors.push(event.code),
  };
}

const thread = `${args.prefix}-t`;
const run = (id, content, props = {}, headers = {}) => {
  const agent = new HttpAgent({ url: base + "/", threadId: thread, headers, initialMessages: [{ id: `u-${id}`, role: "user", content }] });
  return { agent, input: { runId: id, forwardedProps: props } };
};

await flow("live", async (seen) => {
  const a = run(`${args.prefix}-r1`, "tools", { scenario: "tools" });
  await a.agent.runAgent(a.input, subscriber(seen));
  seen.check = () => (seen.outcomes.join() === "success" ? "" : `outcomes ${seen.outcomes}`);
});
await flow("live-noend", async (seen) => {
  const agent = new HttpAgent({ url: base + "/", threadId: `${thread}-noend`, initialMessages: [{ id: "u-noend", role: "user", content: "noend" }] });
  await agent.runAgent({ runId: `${args.prefix}-noend`, forwardedProps: { scenario: "noend" } }, subscriber(seen));
  seen.check = () => (seen.errors.join() === "UPSTREAM_ENDED" ? "" : `RUN_ERROR codes ${seen.errors}, want UPSTREAM_ENDED`);
}, { allowError: true });

let stopCursor = "";
await flow("stop", async (seen) => {
  const id = `${args.prefix}-r2`;
  const a = run(id, "slow", { scenario: "slow", events: 200, intervalMs: 20 });
  let stopped = false;
  const sub = subscriber(seen);
  await a.agent.runAgent(a.input, {
    ...sub,
    onEvent: (p) => {
      sub.onEvent(p);
      if (!stopped && seen.events.length >= 3) {
        stopped = true;
        realFetch(`${base}/agui/threads/${thread}/runs/${id}/stop`, { method: "POST" }).then((r) => r.body?.cancel());
      }
    },
  });
  seen.check = () => {
    const types = seen.events.map((e) => e.type);
    if (seen.outcomes.join() !== "cancelled") return `outcomes ${seen.outcomes}, want cancelled`;
    if (seen.errors.length) return `RUN_ERROR ${seen.errors}`;
    if (types.at(-2) !== "TEXT_MESSAGE_END") return `ends with ${types.slice(-3)}, want TEXT_MESSAGE_END then RUN_FINISHED`;
    return "";
  };
});
if (args["open-scenario"]) {
  // An agent that opens a subagent, steps, reasoning, a text message and a tool
  // call (--open-scenario names the scenario that does; it sends --open-events events, then
  // waits): the stop closes all of it in an order the client's verifier accepts.
  await flow("stop-open", async (seen) => {
    const id = `${args.prefix}-r-open`;
    const agent = new HttpAgent({ url: base + "/", threadId: `${thread}-open`, initialMessages: [{ id: "u-open", role: "user", content: "open" }] });
    let stopped = false;
    const sub = subscriber(seen);
    await agent.runAgent({ runId: id, forwardedProps: { scenario: args["open-scenario"] } }, {
      ...sub,
      onEvent: (p) => {
        sub.onEvent(p);
        if (!stopped && seen.events.length >= Number(args["open-events"])) {
          stopped = true;
          realFetch(`${base}/agui/threads/${thread}-open/runs/${id}/stop`, { method: "POST" }).then((r) => r.body?.cancel());
        }
      },
    });
    seen.check = () => (seen.outcomes.join() === "cancelled" && !seen.errors.length ? "" : `outcomes ${seen.outcomes}, errors ${seen.errors}, want cancelled`);
  });
}
// The stopped run's third event id, for the resume (ids are on the raw stream).
{
  const res = await realFetch(`${base}/agui/threads/${thread}/runs/${args.prefix}-r2/events`);
  const ids = (await res.text()).split("\n").filter((l) => l.startsWith("id: ")).map((l) => l.slice(4));
  stopCursor = ids[2] ?? "";
}
await flow("thread", async (seen) => {
  await new AttachAgent(`${base}/agui/threads/${thread}/events`).runAgent({}, subscriber(seen));
});
await flow("run", async (seen) => {
  await new AttachAgent(`${base}/agui/threads/${thread}/runs/${args.prefix}-r2/events`).runAgent({}, subscriber(seen));
  seen.check = () => (seen.outcomes.join() === "cancelled" ? "" : `outcomes ${seen.outcomes}, want cancelled`);
});
await flow("failed", async (seen) => {
  const other = stopCursor.replace(/:[^:]+:/, ":zzzzzzzz:");
  await new AttachAgent(`${base}/agui/threads/${thread}/events?after=${encodeURIComponent(other)}`).runAgent({}, subscriber(seen));
  seen.check = () => (seen.events.some((e) => e.type === "CUSTOM" && e.name === "agui-proxy.resume_failed") ? "" : "no resume_failed marker");
});
await flow("resume", async (seen) => {
  if (!stopCursor) throw new Error("no event id of the stopped run");
  const a = run(`${args.prefix}-r2`, "slow", { scenario: "slow", events: 200, intervalMs: 20 }, { "Last-Event-ID": stopCursor });
  await a.agent.runAgent(a.input, subscriber(seen));
  seen.check = () => (seen.outcomes.join() === "cancelled" ? "" : `outcomes ${seen.outcomes}, want cancelled`);
});

const failed = results.filter((r) => !r.ok).length;
captured = null;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
