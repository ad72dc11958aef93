// Node tests of @agui-proxy/client against the real agui-proxy and demo-agent binaries: runs
// whose connection is killed mid-frame (inside a text message, inside tool-call arguments,
// inside a state delta) end with exactly the events, messages and state of an uninterrupted
// run; a new agent object restores a thread with connectAgent() and follows a run in progress;
// the JSON helpers; giving up after the allowed attempts.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HttpAgent } from "@ag-ui/client";
import {
  ResumableHttpAgent,
  ResumeGaveUpError,
  SseParser,
  backoffDelay,
  parseEventId,
  RESUME_FAILED,
  RESUME_FAILED_CODE,
  REPLAY_COMPLETE,
} from "../dist/index.mjs";
import { normalizeEvents, scenarioInput, startRelay, startServers } from "./harness.mjs";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
console.warn = () => {};
console.debug = () => {};

let servers;
let relay;
before(async () => {
  servers = await startServers();
  relay = await startRelay(servers.proxyUrl);
});
after(async () => {
  await relay?.close();
  await servers?.stop();
});

let seq = 0;
const uniq = (p) => `${p}-${process.pid}-${++seq}`;

/** Runs scenario on a fresh thread with agent and returns what a subscriber saw. */
async function runWith(agent, runId, scenario, intervalMs, extra = {}) {
  const events = [];
  const input = scenarioInput(scenario, intervalMs);
  agent.setMessages(input.messages);
  const sub = { ...extra, onEvent: (p) => void (events.push(p.event), extra.onEvent?.(p)) };
  await agent.runAgent({ runId, forwardedProps: input.forwardedProps }, sub);
  return { events, messages: agent.messages, state: agent.state };
}

/** The uninterrupted run, through the proxy with the official HttpAgent. */
async function baseline(runId, scenario, intervalMs = 15) {
  const threadId = uniq("base");
  const agent = new HttpAgent({ url: servers.proxyUrl, threadId });
  const out = await runWith(agent, runId, scenario, intervalMs);
  return { ...out, threadId, events: normalizeEvents(out.events, threadId) };
}

describe("transparent resume of a run whose connection is killed", () => {
  const cases = [
    { name: "inside a text message", scenario: "tools", type: "TEXT_MESSAGE_CONTENT", n: 2 },
    { name: "inside tool-call arguments", scenario: "tools", type: "TOOL_CALL_ARGS", n: 2 },
    { name: "inside a state delta", scenario: "state", type: "STATE_DELTA", n: 5 },
    { name: "inside the first event", scenario: "tools", type: "RUN_STARTED", n: 1 },
  ];
  for (const c of cases) {
    test(`cut ${c.name} (${c.scenario})`, async () => {
      const runId = uniq("run");
      const want = await baseline(runId, c.scenario);
      const threadId = uniq("cut");
      const token = uniq("tok");
      const reconnects = [];
      const agent = new ResumableHttpAgent({
        url: relay.url,
        threadId,
        headers: { "x-test-cut": `${token};${c.type};${c.n}` },
        reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
        onReconnect: (info) => reconnects.push(info),
      });
      const got = await runWith(agent, runId, c.scenario, 15);
      const cut = relay.cuts.find((x) => x.token === token);
      assert.ok(cut, "the relay cut the connection");
      assert.match(cut.frame, new RegExp(`"type":"${c.type}"`), "the cut is inside the chosen event's frame");
      assert.ok(!cut.frame.endsWith("\n\n"), "the cut is mid-frame");
      assert.ok(reconnects.length >= 1, "onReconnect was called");
      assert.equal(reconnects[0].threadId, threadId);
      assert.equal(reconnects[0].runId, runId);
      if (c.type !== "RUN_STARTED") assert.ok(parseEventId(reconnects[0].lastEventId), "it resumed from an event id");
      const resumed = relay.requests.filter((r) => r.method === "POST" && r.lastEventId);
      if (c.type !== "RUN_STARTED") assert.ok(resumed.length >= 1, "the run was re-POSTed with Last-Event-ID");
      // Every event exactly once, in order: the same stream as the uninterrupted run.
      assert.deepEqual(normalizeEvents(got.events, threadId), want.events);
      assert.deepEqual(got.messages, want.messages);
      assert.deepEqual(got.state, want.state);
    });
  }
});

describe("connectAgent", () => {
  test("a new agent object restores a finished thread", async () => {
    const runId = uniq("run");
    const threadId = uniq("thread");
    const first = new ResumableHttpAgent({ url: servers.proxyUrl, threadId });
    const done = await runWith(first, runId, "state", 0);
    const second = new ResumableHttpAgent({ url: servers.proxyUrl, threadId });
    const customs = [];
    await second.connectAgent({}, { onCustomEvent: ({ event }) => void customs.push(event.name) });
    assert.deepEqual(second.messages, done.messages);
    assert.deepEqual(second.state, done.state);
    assert.ok(customs.includes(REPLAY_COMPLETE));
  });

  test("a reload mid-run: a new agent follows the run in progress to its end", { timeout: 20000 }, async () => {
    const runId = uniq("run");
    const want = await baseline(runId, "tools", 40);
    const threadId = uniq("reload");
    const page1 = new AbortController();
    const first = new ResumableHttpAgent({
      url: servers.proxyUrl,
      threadId,
      // The page goes away: its connection dies without a word to the agent.
      fetch: (url, init) => fetch(url, { ...init, signal: page1.signal }),
      reconnect: { maxAttempts: 0 },
    });
    let seen = 0;
    let sixth;
    const six = new Promise((resolve) => (sixth = resolve));
    const running = runWith(first, runId, "tools", 40, { onEvent: () => ++seen === 6 && sixth() }).catch(() => {});
    await six;
    page1.abort();
    await running;
    const second = new ResumableHttpAgent({ url: servers.proxyUrl, threadId });
    assert.equal(await second.proxy.isRunning(threadId, runId), true, "the run goes on without its client");
    const live = [];
    await second.connectAgent({}, { onEvent: ({ event }) => void live.push(event.type) });
    assert.deepEqual(second.messages, want.messages);
    assert.deepEqual(second.state, want.state);
    assert.ok(live.includes("TOOL_CALL_RESULT") || live.includes("TEXT_MESSAGE_CONTENT"), "it received live events");
    assert.equal(live.at(-1), "RUN_FINISHED");
  });

  test("an unknown thread connects to nothing", async () => {
    const agent = new ResumableHttpAgent({ url: servers.proxyUrl, threadId: uniq("none") });
    await agent.connectAgent();
    assert.deepEqual(agent.messages, []);
  });
});

describe("proxy endpoints", () => {
  test("runs tree, snapshot as of a run, export, stop, capabilities", async () => {
    const threadId = uniq("thread");
    const agent = new ResumableHttpAgent({ url: servers.proxyUrl, threadId });
    assert.deepEqual((await agent.getCapabilities()).transport, { streaming: true, resumable: true });
    const r1 = uniq("r1");
    await runWith(agent, r1, "chat", 0);
    const at1 = await agent.snapshot(r1);
    assert.equal(at1.runId, r1);
    assert.deepEqual(at1.messages, agent.messages);
    // A branch: a second run from the first run's parent (none: a sibling root) is not
    // possible, so branch from r1 twice.
    const r2 = uniq("r2");
    agent.addMessage({ id: "u2", role: "user", content: "tools" });
    await agent.runAgent({ runId: r2 });
    const r3 = uniq("r3");
    const branch = new ResumableHttpAgent({ url: servers.proxyUrl, threadId, initialMessages: at1.messages });
    branch.addMessage({ id: "u3", role: "user", content: "state" });
    // parentRunId set on the input makes a branch from r1.
    branch.requestInit = ((orig) => function (input) {
      return orig.call(this, { ...input, parentRunId: r1 });
    })(branch.requestInit);
    await branch.runAgent({ runId: r3 });
    const tree = await agent.runs();
    assert.equal(tree.headRunId, r3);
    const byId = Object.fromEntries(tree.runs.map((r) => [r.runId, r]));
    assert.equal(byId[r2].parentRunId, r1);
    assert.equal(byId[r3].parentRunId, r1);
    assert.equal(byId[r1].status, "finished");
    const at2 = await agent.snapshot(r2);
    assert.deepEqual(at2.messages, agent.messages, "time travel to r2 gives r2's messages");
    const doc = await agent.exportThread();
    assert.equal(doc.formatVersion, 1);
    assert.deepEqual(doc.runs.map((r) => r.runId).sort(), [r1, r2, r3].sort());

    // Stop a slow run through the helper.
    const slow = new ResumableHttpAgent({ url: servers.proxyUrl, threadId: uniq("slow") });
    const codes = [];
    const outcomes = [];
    const running = runWith(slow, uniq("slow"), "slow", 50, {
      onRunErrorEvent: ({ event }) => void codes.push(event.code),
      onRunFinishedEvent: ({ outcome }) => void outcomes.push(outcome),
    });
    for (let i = 0; i < 200 && !(await slow.proxy.isRunning(slow.threadId)); i++) await new Promise((r) => setTimeout(r, 10));
    await slow.stop();
    await running;
    assert.deepEqual(codes, [], "a stop is not an error");
    assert.deepEqual(outcomes, ["cancelled"], "the stopped run finishes with outcome cancelled");
    const list = await agent.threads({ limit: 100 });
    const mine = list.threads.find((t) => t.threadId === threadId);
    assert.ok(mine, "the thread list has the thread");
    assert.equal(mine.runCount, 3);
    assert.equal(mine.latestRunId, r3);
  });
});

describe("resume_failed", () => {
  test("an id the proxy cannot resume from exactly: the run is closed, resume_failed reaches the app, the history follows", async () => {
    const runId = uniq("run");
    const want = await baseline(runId, "tools", 15);
    const threadId = uniq("epoch");
    const token = uniq("tok");
    const agent = new ResumableHttpAgent({
      url: relay.url,
      threadId,
      // The first response's ids carry a foreign epoch (as after the store lost the run).
      headers: { "x-test-cut": `${token};TOOL_CALL_ARGS;2`, "x-test-epoch": token },
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    });
    const customs = [];
    const errors = [];
    await runWith(agent, runId, "tools", 15, {
      onCustomEvent: ({ event }) => void customs.push(event.name),
      onRunErrorEvent: ({ event }) => void errors.push(event.code),
    });
    assert.ok(relay.cuts.some((c) => c.token === token), "the relay cut the connection");
    const resumed = relay.requests.filter((r) => r.method === "POST" && r.lastEventId?.includes(":aaaaaaaa:"));
    assert.equal(resumed.length, 1, "the client resumed from the id it was given");
    assert.ok(customs.includes(RESUME_FAILED), `resume_failed reached the subscriber (customs: ${customs})`);
    assert.deepEqual(errors, [RESUME_FAILED_CODE], "the interrupted run was closed with RUN_ERROR RESUME_FAILED");
    // The full history replaces messages and state: the uninterrupted run's result.
    assert.deepEqual(agent.messages, want.messages);
    assert.deepEqual(agent.state, want.state);
  });
});

describe("giving up", () => {
  test("a proxy that stays down: bounded attempts, then ResumeGaveUpError", async () => {
    const local = await startRelay(servers.proxyUrl);
    const threadId = uniq("down");
    const attempts = [];
    const agent = new ResumableHttpAgent({
      url: local.url,
      threadId,
      reconnect: { maxAttempts: 3, initialDelayMs: 10, maxDelayMs: 40 },
      onReconnect: (info) => attempts.push(info),
    });
    let n = 0;
    const run = runWith(agent, uniq("run"), "slow", 30, {
      onEvent: () => {
        if (++n === 3) {
          local.refuse = true;
          local.close();
        }
      },
    });
    await assert.rejects(run, (e) => e instanceof ResumeGaveUpError && parseEventId(e.lastEventId) !== undefined);
    assert.equal(attempts.length, 3);
    assert.deepEqual(attempts.map((a) => a.attempt), [1, 2, 3]);
    for (const a of attempts) assert.ok(a.delayMs <= 40);
  });
});

describe("units", () => {
  test("parseEventId reads from the right", () => {
    assert.deepEqual(parseEventId("a:b:abcdefgh:12"), { runId: "a:b", epoch: "abcdefgh", seq: 12 });
    assert.equal(parseEventId("r1:abcdefgh:01"), undefined);
    assert.equal(parseEventId("r1:ABCDEFGH:1"), undefined);
    assert.equal(parseEventId(":abcdefgh:1"), undefined);
    assert.equal(parseEventId("nope"), undefined);
  });
  test("SseParser: CR, LF, CRLF, split chunks, comments, ids per frame, unfinished frames", () => {
    const p = new SseParser();
    const enc = new TextEncoder();
    const text = ": ping\r\nid: a\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\ndata: 2\rid: b\r\r\ndata: 3\n\nid: c\ndata: 4";
    const frames = [];
    for (const ch of text) frames.push(...p.push(enc.encode(ch)));
    assert.deepEqual(frames, [{ data: "{\"x\":\n1}", id: "a" }, { data: "2", id: "b" }, { data: "3" }]);
    assert.equal(p.pending(), true);
    assert.deepEqual(p.end(), [{ data: "4", id: "c" }]);
  });
  test("backoff is capped, grows, and jitters down only", () => {
    const o = { initialDelayMs: 100, maxDelayMs: 1000, multiplier: 2, jitter: 0.5 };
    assert.equal(backoffDelay(1, o, () => 0), 100);
    assert.equal(backoffDelay(3, o, () => 0), 400);
    assert.equal(backoffDelay(10, o, () => 0), 1000);
    assert.equal(backoffDelay(10, o, () => 1), 500);
  });
  test("the resume_failed name", () => assert.equal(RESUME_FAILED, "agui-proxy.resume_failed"));
});
