#!/usr/bin/env node
// resume-scenarios.mjs: cross-language resume check with the OFFICIAL AG-UI client
// (@ag-ui/client HttpAgent, pinned in package.json) against agui-proxy.
//
// For each demo-agent scenario it first runs the run uninterrupted through --proxy (proxy A)
// and keeps the client's final messages, state and error. Then, for several cut points K, it
// runs the same run (same runId, messages and forwardedProps, on a fresh thread) through proxy
// A, tees the response body and aborts the request right after the K-th `data:` frame,
// remembering the last `id:` seen. It then reattaches through --reattach (proxy B; the same
// proxy when omitted) in both ways, at once (while the run goes on) and again once the run has
// finished on the server:
//
//   resume  a FRESH HttpAgent (initialMessages = the same input messages) re-POSTs the same run
//           with the header `Last-Event-ID: <K-th id>`;
//   attach  a FRESH HttpAgent (no messages, empty state) whose fetch turns its POST into
//           GET {reattach}{prefix}threads/<thread>/events (the thread attach, SSE).
//
// Each must end with the uninterrupted run's messages and state (messages the 1.0 client makes
// from the retired THINKING_* events are left out: it gives them random ids, and the proxy's
// history drops those ephemeral events), fail the same way (RUN_ERROR or not), and receive the
// CUSTOM event "agui-proxy.replay_complete" (end of the prelude; a stream that is only the
// run's raw events from its first has no prelude: the proxy records asynchronously and had
// stored nothing yet, which the summary line counts). The cut points are: 1, the
// middle of the stream, inside a TOOL_CALL_ARGS burst, inside a STATE_DELTA burst, and the event
// before the terminal RUN_FINISHED/RUN_ERROR.
//
//   node resume-scenarios.mjs --proxy http://127.0.0.1:8080/ [--reattach http://127.0.0.1:8081/]
//     [--prefix /agui/] [--scenarios chat,tools,...] [--interval 5] [--timeout 30000]
//     [--concurrency 4] [--cuts some|all] [--verbose]
//
// --cuts all cuts after every event instead of the points above (a scenario of n events: n - 1
// cuts, each reattached twice). --proxy is the URL the agent runs are POSTed to; --reattach is the base URL of the proxy
// that serves the reattachments (its run URL is the same path as --proxy's).
// Output: one line per scenario, then "N passed, M failed". Exit 0 only when all pass.

import { isDeepStrictEqual } from "node:util";
import { HttpAgent } from "@ag-ui/client";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
console.warn = () => {};
console.error = () => {};
console.debug = () => {};

const ALL = [
  "activity", "chat", "chunks", "crlf", "custom", "error", "large", "noend", "parallel",
  "reasoning", "slow", "snapshot", "state", "steps", "thinking", "tools", "unicode",
  "unterminated",
];

const REPLAY_COMPLETE = "agui-proxy.replay_complete";

function parseArgs(argv) {
  const opts = { scenarios: ALL, timeout: 30000, interval: 5, concurrency: 4, prefix: "/agui/", verbose: false, cuts: "some" };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case "--proxy": opts.proxy = val(); break;
      case "--reattach": opts.reattach = val(); break;
      case "--prefix": opts.prefix = val(); break;
      case "--scenarios": opts.scenarios = val().split(",").map((s) => s.trim()).filter(Boolean); break;
      case "--interval": opts.interval = Number(val()); break;
      case "--timeout": opts.timeout = Number(val()); break;
      case "--concurrency": opts.concurrency = Number(val()); break;
      case "--verbose": opts.verbose = true; break;
      case "--cuts": opts.cuts = val(); break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  if (!opts.proxy) throw new Error("--proxy URL is required");
  opts.reattach ??= opts.proxy;
  for (const k of ["proxy", "reattach"]) {
    try {
      opts[k] = new URL(opts[k]);
    } catch {
      throw new Error(`--${k} ${opts[k]} is not a URL`);
    }
  }
  if (!opts.prefix.startsWith("/") || !opts.prefix.endsWith("/")) throw new Error("--prefix must start and end with /");
  if (!(opts.timeout > 0)) throw new Error("--timeout must be a positive number of ms");
  if (!(opts.interval >= 0)) throw new Error("--interval must be a number of ms >= 0");
  if (!(opts.concurrency >= 1)) throw new Error("--concurrency must be >= 1");
  if (opts.scenarios.length === 0) throw new Error("--scenarios is empty");
  if (opts.cuts !== "some" && opts.cuts !== "all") throw new Error("--cuts must be some or all");
  return opts;
}

// SSEFrames splits a byte stream into SSE events the way the spec's parser does (CRLF, CR or
// LF line ends; data lines joined by LF; the last id kept across events). Each complete
// event with data is returned as {id, data, type}.
class SSEFrames {
  constructor() {
    this.decoder = new TextDecoder("utf-8");
    this.pending = "";
    this.data = null;
    this.lastId = "";
  }
  push(bytes, end = false) {
    this.pending += end ? this.decoder.decode() : this.decoder.decode(bytes, { stream: true });
    const out = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.pending);
      if (!m || (m[0] === "\r" && m.index === this.pending.length - 1 && !end)) break;
      const line = this.pending.slice(0, m.index);
      this.pending = this.pending.slice(m.index + m[0].length);
      this.line(line, out);
    }
    if (end) {
      if (this.pending !== "") this.line(this.pending, out);
      this.pending = "";
      this.line("", out);
    }
    return out;
  }
  line(line, out) {
    if (line === "") {
      if (this.data !== null) {
        let type = null;
        try {
          type = JSON.parse(this.data).type ?? null;
        } catch {}
        out.push({ id: this.lastId, data: this.data, type });
      }
      this.data = null;
      return;
    }
    if (line.startsWith(":")) return;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data = this.data === null ? value : `${this.data}\n${value}`;
    else if (field === "id" && !value.includes("\0")) this.lastId = value;
  }
}

function encodeFrame(f) {
  return `${f.id ? `id: ${f.id}\n` : ""}${f.data.split("\n").map((l) => `data: ${l}`).join("\n")}\n\n`;
}

class CutError extends Error {
  constructor(k) {
    super(`connection cut after ${k} events`);
    this.name = "AbortError";
  }
}

// teeingFetch returns a fetch for HttpAgent that re-frames the response body event by event
// into tap.frames (and the client), and, when cutAfter is set, hands the client exactly
// cutAfter events, then aborts the request (the TCP connection closes; the proxy sees a
// disconnect) and errors the body. rewrite may turn the request into another one.
function teeingFetch(tap, { cutAfter = Infinity, abort = null, rewrite = null } = {}) {
  return async (url, init) => {
    if (rewrite) [url, init] = rewrite(url, init);
    const res = await fetch(url, init);
    tap.status = res.status;
    tap.headers = res.headers;
    if (!res.ok || !res.body) return res;
    const reader = res.body.getReader();
    const sse = new SSEFrames();
    const enc = new TextEncoder();
    let done = false;
    const body = new ReadableStream({
      async pull(controller) {
        while (!done) {
          let r;
          try {
            r = await reader.read();
          } catch (e) {
            done = true;
            controller.error(e);
            return;
          }
          const frames = sse.push(r.value, r.done);
          let chunk = "";
          for (const f of frames) {
            tap.frames.push(f);
            chunk += encodeFrame(f);
            if (tap.frames.length >= cutAfter) {
              done = true;
              tap.cutId = f.id;
              controller.enqueue(enc.encode(chunk));
              abort?.abort(new CutError(cutAfter));
              reader.cancel().catch(() => {});
              controller.error(new CutError(cutAfter));
              return;
            }
          }
          if (r.done) {
            done = true;
            if (chunk) controller.enqueue(enc.encode(chunk));
            controller.close();
            return;
          }
          if (chunk) {
            controller.enqueue(enc.encode(chunk));
            return;
          }
        }
      },
      cancel() {
        done = true;
        return reader.cancel().catch(() => {});
      },
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

function userMessages(runId, scenario) {
  return [{ id: `user-${runId}`, role: "user", content: `scenario:${scenario}` }];
}

// runClient runs one official HttpAgent to its end and returns what it ended with.
async function runClient({ url, threadId, runId, scenario, opts, initialMessages, headers = {}, cutAfter, rewrite }) {
  const tap = { frames: [], cutId: "", status: 0, headers: null };
  const abortController = new AbortController();
  const agent = new HttpAgent({
    url: url.href,
    threadId,
    headers,
    initialMessages,
    initialState: {},
    fetch: teeingFetch(tap, { cutAfter, abort: abortController, rewrite }),
  });
  const customs = [];
  let error = null;
  const timer = setTimeout(() => abortController.abort(new Error(`timeout after ${opts.timeout}ms`)), opts.timeout);
  try {
    await agent.runAgent(
      { runId, forwardedProps: { scenario, intervalMs: opts.interval }, abortController },
      { onCustomEvent({ event }) { customs.push({ name: event.name, value: event.value }); } },
    );
  } catch (e) {
    error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  } finally {
    clearTimeout(timer);
  }
  const timedOut = abortController.signal.aborted && !(abortController.signal.reason instanceof CutError);
  return {
    messages: JSON.parse(JSON.stringify(agent.messages)),
    state: JSON.parse(JSON.stringify(agent.state ?? null)),
    error: timedOut ? `timeout after ${opts.timeout}ms (${error})` : error,
    customs,
    tap,
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// outcome is what the comparison looks at: messages (without the ones the client invents from
// THINKING_* events), state, and whether the run failed.
function outcome(r) {
  return {
    messages: r.messages.filter((m) => !(m.role === "reasoning" && UUID.test(m.id))),
    state: r.state,
    failed: r.error !== null,
  };
}

// cutPoints picks K values from the uninterrupted run's wire frames: 1, the middle, the middle
// of the first TOOL_CALL_ARGS and STATE_DELTA bursts (the K-th and the next event both of that
// type), and the event before the terminal one; with all, every K. Every K leaves at least one
// event to resume.
function cutPoints(frames, all = false) {
  const n = frames.length;
  let term = -1;
  frames.forEach((f, i) => {
    if (f.type === "RUN_FINISHED" || f.type === "RUN_ERROR") term = i;
  });
  const ks = new Map();
  const add = (label, k) => {
    if (k >= 1 && k < n && ![...ks.values()].includes(k)) ks.set(label, k);
  };
  if (all) {
    for (let k = 1; k < n; k++) add(`k${k}`, k);
    return ks;
  }
  add("first", 1);
  add("middle", Math.floor(n / 2));
  for (const type of ["TOOL_CALL_ARGS", "STATE_DELTA"]) {
    const inside = [];
    for (let k = 1; k < n; k++) {
      if (frames[k - 1].type === type && frames[k].type === type) inside.push(k);
    }
    if (inside.length > 0) add(`in ${type}`, inside[Math.floor(inside.length / 2)]);
  }
  add("before end", term > 0 ? term : n - 1);
  return ks;
}

async function waitRunDone(opts, threadId, runId) {
  const url = new URL(`${opts.prefix}threads/${encodeURIComponent(threadId)}/runs`, opts.reattach);
  const deadline = Date.now() + opts.timeout;
  for (;;) {
    const res = await fetch(url);
    if (res.ok) {
      const tree = await res.json();
      const run = (tree.runs ?? []).find((r) => r.runId === runId);
      if (run && run.status !== "running") return run;
    }
    if (Date.now() > deadline) throw new Error(`run ${runId} still running after ${opts.timeout}ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

// firstDiff returns the path of the first difference between a and b, or null.
function firstDiff(a, b, path = "") {
  if (Object.is(a, b)) return null;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") {
    return `${path || "/"}: want ${short(a)}, got ${short(b)}`;
  }
  if (Array.isArray(a) !== Array.isArray(b)) return `${path || "/"}: array vs object`;
  if (Array.isArray(a)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const d = firstDiff(a[i], b[i], `${path}/${i}`);
      if (d) return d;
    }
    return a.length === b.length ? null : `${path || "/"}: length want ${a.length}, got ${b.length} (first extra or missing: ${short(a[b.length] ?? b[a.length])})`;
  }
  for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
    if (!(k in a) || !(k in b)) return `${path}/${k}: ${k in a ? "missing" : "unexpected"} (${short(a[k] ?? b[k])})`;
    const d = firstDiff(a[k], b[k], `${path}/${k}`);
    if (d) return d;
  }
  return null;
}

function short(v) {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 200 ? `${s.slice(0, 200)}…` : s;
}

// withoutPrelude reports a stream that is nothing but the run's raw events from its first:
// the proxy had stored none of them yet when the reattachment arrived (it records
// asynchronously), so there was no prelude to mark the end of.
function withoutPrelude(got) {
  const first = got.tap.frames[0];
  return first !== undefined && first.type === "RUN_STARTED" && /:1$/.test(first.id);
}

// check compares one reattachment with the uninterrupted run; it returns a problem or null.
function check(label, base, got) {
  if (got.tap.status !== 200) return `${label}: HTTP ${got.tap.status} (${got.error})`;
  const why = got.error && !base.error ? ` (client error: ${short(got.error)})` : "";
  const want = outcome(base);
  const have = outcome(got);
  if (!isDeepStrictEqual(have.messages, want.messages)) {
    return `${label}: messages differ at ${firstDiff(want.messages, have.messages)}${why}`;
  }
  if (!isDeepStrictEqual(have.state, want.state)) {
    return `${label}: state differs at ${firstDiff(want.state, have.state)}${why}`;
  }
  if (have.failed !== want.failed) return `${label}: error ${short(got.error)}, uninterrupted run: ${short(base.error)}`;
  if (!got.customs.some((c) => c.name === REPLAY_COMPLETE) && !withoutPrelude(got)) {
    return `${label}: no CUSTOM ${REPLAY_COMPLETE} (customs: ${short(got.customs)})`;
  }
  return null;
}

async function reattach(opts, scenario, threadId, runId, cutId, when) {
  const runURL = new URL(opts.proxy.pathname + opts.proxy.search, opts.reattach);
  const attachURL = new URL(`${opts.prefix}threads/${encodeURIComponent(threadId)}/events`, opts.reattach);
  const [resume, attach] = await Promise.all([
    runClient({
      url: runURL, threadId, runId, scenario, opts,
      initialMessages: userMessages(runId, scenario),
      headers: { "Last-Event-ID": cutId },
    }),
    runClient({
      url: attachURL, threadId, runId, scenario, opts, initialMessages: [],
      rewrite: (url, init) => [url, { method: "GET", headers: { Accept: "text/event-stream" }, signal: init.signal }],
    }),
  ]);
  return [[`resume ${when}`, resume], [`attach ${when}`, attach]];
}

async function runScenario(opts, scenario, nonce) {
  const runId = `resume-run-${nonce}-${scenario}`;
  const base = await runClient({
    url: opts.proxy, threadId: `resume-${nonce}-${scenario}-base`, runId, scenario, opts,
    initialMessages: userMessages(runId, scenario),
  });
  if (base.tap.status !== 200 || base.tap.frames.length < 2) {
    return [`uninterrupted run: HTTP ${base.tap.status}, ${base.tap.frames.length} events, error ${base.error}`];
  }
  if (base.error?.startsWith("timeout")) return [`uninterrupted run: ${base.error}`];
  const baseStatus = (await waitRunDone(opts, `resume-${nonce}-${scenario}-base`, runId)).status;
  const problems = [];
  const killed = [];
  let reattached = 0;
  let joinedLive = 0; // reattachments whose prelude ended while the run was still going
  let noPrelude = 0; // reattachments that came before the run's first event was stored
  const ks = cutPoints(base.tap.frames, opts.cuts === "all");
  for (const [label, k] of ks) {
    const threadId = `resume-${nonce}-${scenario}-k${k}`;
    const cut = await runClient({
      url: opts.proxy, threadId, runId, scenario, opts,
      initialMessages: userMessages(runId, scenario), cutAfter: k,
    });
    if (cut.tap.frames.length !== k || !cut.tap.cutId) {
      problems.push(`K=${k} (${label}): the cut client got ${cut.tap.frames.length} events, last id ${short(cut.tap.cutId)}, error ${cut.error}`);
      continue;
    }
    const results = await reattach(opts, scenario, threadId, runId, cut.tap.cutId, "live");
    let status;
    try {
      const run = await waitRunDone(opts, threadId, runId);
      status = run.status;
      if (status !== baseStatus) {
        // Not a resume failure: the run itself ended differently once its client was cut
        // (a proxy bug this harness reports apart, with the run's detail).
        killed.push(`K=${k} (${label}): RUN-KILLED the run ended ${status} (${run.detail ?? ""}) after its client was cut; uninterrupted: ${baseStatus}`);
        continue;
      }
    } catch (e) {
      problems.push(`K=${k} (${label}): ${e.message}`);
      continue;
    }
    results.push(...(await reattach(opts, scenario, threadId, runId, cut.tap.cutId, `after ${status}`)));
    for (const [what, got] of results) {
      reattached++;
      if (got.customs.some((c) => c.name === REPLAY_COMPLETE && c.value?.live === true)) joinedLive++;
      if (withoutPrelude(got)) noPrelude++;
      const p = check(what, base, got);
      if (p) problems.push(`K=${k} (${label}, id ${cut.tap.cutId}) ${p}`);
      if (p && opts.verbose) {
        problems.push(`  uninterrupted stream:\n      ${base.tap.frames.map((f) => `${f.id} ${f.data}`).join("\n      ")}`);
        problems.push(`  ${what} stream:\n      ${got.tap.frames.map((f) => `${f.id} ${f.data}`).join("\n      ")}`);
      }
    }
  }
  return problems.length > 0 ? problems : { events: base.tap.frames.length, cuts: [...ks.values()], joinedLive, noPrelude, reattached, killed };
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`resume-scenarios: ${e.message}\n`);
    process.exit(2);
  }
  const nonce = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  let passed = 0;
  let failed = 0;
  const queue = [...opts.scenarios];
  const worker = async () => {
    for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
      const started = Date.now();
      let res;
      try {
        res = await runScenario(opts, s, nonce);
      } catch (e) {
        res = [`harness error: ${e.stack ?? e}`];
      }
      const ms = Date.now() - started;
      if (Array.isArray(res)) {
        failed++;
        process.stdout.write(`FAIL ${s}: [${ms}ms]\n  ${res.join("\n  ")}\n`);
      } else {
        passed++;
        process.stdout.write(`ok   ${s}: ${res.events} events, cut after ${res.cuts.join(",")}, ${res.reattached} reattachments (${res.joinedLive} joined the run live${res.noPrelude ? `, ${res.noPrelude} before anything was stored` : ""}) [${ms}ms]\n`);
        for (const k of res.killed) process.stdout.write(`  ${k}\n`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency, queue.length) }, worker));
  process.stdout.write(`${passed} passed, ${failed} failed\n`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}

main().catch((e) => {
  process.stderr.write(`resume-scenarios: ${e.stack ?? e}\n`);
  process.exit(1);
});
