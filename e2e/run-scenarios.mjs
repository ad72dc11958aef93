#!/usr/bin/env node
// run-scenarios.mjs: differential e2e check with the OFFICIAL AG-UI client (@ag-ui/client
// HttpAgent, pinned in package.json). For each demo-agent scenario it runs the same run (same
// threadId, runId, messages and forwardedProps) once against --direct (the agent) and once
// against --proxy (agui-proxy in front of it), and requires that the client saw the same
// thing: the events it emitted to subscribers, its final messages and state, its warnings and
// its error (failure scenarios must fail, or not fail, the same way on both sides).
//
//   node run-scenarios.mjs --direct http://127.0.0.1:8000/ --proxy http://127.0.0.1:8080/agent \
//     [--scenarios chat,tools,...] [--timeout 30000] [--strict] [--verbose]
//
// Allowed difference (unless --strict): the proxy may add "input" and "parentRunId" to
// RUN_STARTED when the agent's RUN_STARTED lacks them (it records the run's lineage there);
// the reducer ignores RUN_STARTED.input messages already present, so messages must still match.
// Random ids the client invents (THINKING_* are translated with uuids) are renumbered by order
// of appearance on each side before comparing. In the bench scenario, timestamp and
// rawEvent.sentNs differ by nature and are blanked.
//
// Output: one line per scenario, then "N passed, M failed". Exit 0 only when all pass.

import { HttpAgent } from "@ag-ui/client";

const ALL = [
  "activity", "chat", "chunks", "crlf", "custom", "error", "large", "noend", "parallel",
  "reasoning", "slow", "snapshot", "state", "steps", "thinking", "tools", "unicode",
  "unterminated",
];

function parseArgs(argv) {
  const opts = { scenarios: ALL, timeout: 30000, strict: false, verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case "--direct": opts.direct = val(); break;
      case "--proxy": opts.proxy = val(); break;
      case "--scenarios": opts.scenarios = val().split(",").map((s) => s.trim()).filter(Boolean); break;
      case "--timeout": opts.timeout = Number(val()); break;
      case "--strict": opts.strict = true; break;
      case "--verbose": opts.verbose = true; break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  if (!opts.direct || !opts.proxy) throw new Error("--direct URL and --proxy URL are required");
  if (!(opts.timeout > 0)) throw new Error("--timeout must be a positive number of ms");
  if (opts.scenarios.length === 0) throw new Error("--scenarios is empty");
  return opts;
}

// Console output of the client (warnings about unknown fields, failed patches, deprecated
// events) is captured per run and compared: a transparent proxy produces the same warnings.
let captured = null;
for (const level of ["warn", "error", "debug", "log", "info"]) {
  const orig = console[level].bind(console);
  console[level] = (...args) => {
    if (captured) {
      captured.push(`${level}: ${args.map((a) => (typeof a === "string" ? a : a instanceof Error ? a.message : JSON.stringify(a))).join(" ")}`);
    } else {
      orig(...args);
    }
  };
}

async function runOnce(url, scenario, ids, timeoutMs) {
  const agent = new HttpAgent({
    url,
    threadId: ids.threadId,
    initialMessages: [{ id: `user-${ids.runId}`, role: "user", content: `scenario:${scenario}` }],
    initialState: {},
  });
  const events = [];
  const warnings = [];
  let error = null;
  const abortController = new AbortController();
  const timer = setTimeout(() => abortController.abort(), timeoutMs);
  captured = warnings;
  try {
    await agent.runAgent(
      { runId: ids.runId, forwardedProps: { scenario }, abortController },
      {
        onEvent({ event }) {
          events.push(structuredClone(event));
        },
      },
    );
  } catch (e) {
    error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  } finally {
    captured = null;
    clearTimeout(timer);
  }
  if (abortController.signal.aborted) error = `timeout after ${timeoutMs}ms (${error})`;
  return { events, messages: structuredClone(agent.messages), state: structuredClone(agent.state), warnings, error };
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

// renumberUUIDs replaces every uuid in strings by <uuid:N>, N by first appearance.
function renumberUUIDs(v, seen = new Map()) {
  if (typeof v === "string") {
    return v.replace(UUID, (u) => {
      if (!seen.has(u)) seen.set(u, seen.size + 1);
      return `<uuid:${seen.get(u)}>`;
    });
  }
  if (Array.isArray(v)) return v.map((x) => renumberUUIDs(x, seen));
  if (v && typeof v === "object") {
    const out = {};
    for (const k of Object.keys(v)) out[k] = renumberUUIDs(v[k], seen);
    return out;
  }
  return v;
}

function normalize(side, scenario) {
  const out = renumberUUIDs(side);
  if (scenario === "bench") {
    for (const ev of out.events) {
      if ("timestamp" in ev) ev.timestamp = 0;
      if (ev.rawEvent && "sentNs" in ev.rawEvent) ev.rawEvent.sentNs = 0;
    }
  }
  return out;
}

// allowEnrichment removes from the proxied RUN_STARTED events the members the proxy may add
// (input, parentRunId) when the direct event lacks them. Returns how many were removed.
function allowEnrichment(direct, proxied) {
  let n = 0;
  const count = Math.min(direct.events.length, proxied.events.length);
  for (let i = 0; i < count; i++) {
    const d = direct.events[i];
    const p = proxied.events[i];
    if (d.type !== "RUN_STARTED" || p.type !== "RUN_STARTED") continue;
    for (const k of ["input", "parentRunId"]) {
      if (!(k in d) && k in p) {
        delete p[k];
        n++;
      }
    }
  }
  return n;
}

// firstDiff returns the path of the first difference between a and b (keys compared as
// sets, arrays by index), or null when they are deep-equal.
function firstDiff(a, b, path = "") {
  if (Object.is(a, b)) return null;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") {
    return `${path || "/"}: ${short(a)} != ${short(b)}`;
  }
  if (Array.isArray(a) !== Array.isArray(b)) return `${path}: array vs object`;
  if (Array.isArray(a)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const d = firstDiff(a[i], b[i], `${path}/${i}`);
      if (d) return d;
    }
    return a.length === b.length ? null : `${path}: length ${a.length} != ${b.length} (next: ${short(a[b.length] ?? b[a.length])})`;
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of [...keys].sort()) {
    if (!(k in a) || !(k in b)) return `${path}/${k}: ${k in a ? "only direct" : "only proxied"} (${short(a[k] ?? b[k])})`;
    const d = firstDiff(a[k], b[k], `${path}/${k}`);
    if (d) return d;
  }
  return null;
}

function short(v) {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 160 ? `${s.slice(0, 160)}…` : s;
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`run-scenarios: ${e.message}`);
    process.exit(2);
  }
  const nonce = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  let passed = 0;
  let failed = 0;
  for (const scenario of opts.scenarios) {
    const ids = { threadId: `e2e-${nonce}-${scenario}`, runId: `e2e-run-${nonce}-${scenario}` };
    const started = Date.now();
    const direct = normalize(await runOnce(opts.direct, scenario, ids, opts.timeout), scenario);
    const proxied = normalize(await runOnce(opts.proxy, scenario, ids, opts.timeout), scenario);
    const enriched = opts.strict ? 0 : allowEnrichment(direct, proxied);
    const diff = firstDiff(direct, proxied);
    const ms = Date.now() - started;
    const summary = `${direct.events.length} events, ${direct.messages.length} messages` +
      (direct.error ? `, error both sides: ${short(direct.error)}` : "") +
      (enriched ? `, RUN_STARTED enriched (${enriched} member${enriched > 1 ? "s" : ""})` : "");
    if (direct.events.length === 0 && !direct.error) {
      failed++;
      console.log(`FAIL ${scenario}: the direct run emitted no event and no error (is --direct the demo agent?) [${ms}ms]`);
    } else if (diff) {
      failed++;
      console.log(`FAIL ${scenario}: proxied differs from direct at ${diff} [${ms}ms]`);
      if (opts.verbose) {
        console.log(`  direct:  ${short(direct)}`);
        console.log(`  proxied: ${short(proxied)}`);
      }
    } else {
      passed++;
      console.log(`ok   ${scenario}: ${summary} [${ms}ms]`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(`run-scenarios: ${e.stack ?? e}`);
  process.exit(1);
});
