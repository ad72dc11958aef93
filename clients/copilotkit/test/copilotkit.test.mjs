// CopilotKit runtime instances backed by agui-proxy, driven by CopilotKit's own browser client
// (ProxiedCopilotRuntimeAgent from @copilotkit/core, speaking the runtime's HTTP API as a page
// does). Real parts: the pinned @copilotkit/runtime from npm in separate processes, the
// agui-proxy and demo-agent binaries built from this repository, a private redis-server.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { connect as netConnect, createServer as netServer } from "node:net";
import { HttpAgent } from "@ag-ui/client";
import { ProxiedCopilotRuntimeAgent } from "@copilotkit/core";
import { AguiProxyAgentRunner, readSse } from "../dist/index.mjs";
import { buildBinaries, kill, startDemo, startProxy, startRedis, startRuntime, stopAll } from "./harness.mjs";

const IDENTITY = "x-agui-user";
let proxy; // { url, child }
let infra; // { bin, redisUrl, upstream } behind proxy
let b; // runtime instance B, up for the whole suite
let a2; // a second instance "A", started while the first test runs

/** CopilotKit's browser-side agent for threadId, as user, against the runtime at runtimeUrl. */
function client(runtimeUrl, threadId, user) {
  return new ProxiedCopilotRuntimeAgent({ runtimeUrl, agentId: "default", threadId, headers: { [IDENTITY]: user } });
}

/** A user message the demo agent reads its scenario from. */
function say(agent, id, content) {
  agent.addMessage({ id, role: "user", content });
}

/** The proxy's own view of a thread's runs (as alice unless told). */
async function proxyRuns(threadId, user = "alice") {
  const res = await fetch(`${proxy.url}agui/threads/${threadId}/runs`, { headers: { [IDENTITY]: user } });
  return { status: res.status, body: await res.json() };
}

/** Resolves when pred() holds, polling every 20ms (fails after timeoutMs: a hung test, not a timing assertion). */
async function until(what, pred, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A TCP relay to port on 127.0.0.1 whose connections cut() destroys (a network drop between the
 * runtime and the proxy).
 */
function relay(port) {
  const sockets = new Set();
  let connections = 0;
  const srv = netServer((c) => {
    connections++;
    const u = netConnect(port, "127.0.0.1");
    sockets.add(c).add(u);
    const drop = () => {
      c.destroy();
      u.destroy();
      sockets.delete(c);
      sockets.delete(u);
    };
    for (const s of [c, u]) s.on("error", drop).on("close", drop);
    c.pipe(u);
    u.pipe(c);
  });
  return new Promise((resolve) =>
    srv.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${srv.address().port}/`,
        get connections() {
          return connections;
        },
        cut: () => {
          for (const s of sockets) s.destroy();
        },
        close: () =>
          new Promise((r) => {
            for (const s of sockets) s.destroy();
            srv.close(r);
          }),
      }),
    ),
  );
}

/** Messages without CopilotKit-local fields that a replay cannot know, for comparison. */
function plain(messages) {
  return JSON.parse(JSON.stringify(messages));
}

// One proxy (with its Redis and demo agent) for the whole file; threads are named per test.
before(async () => {
  const bin = buildBinaries();
  const redisUrl = await startRedis();
  const upstream = await startDemo(bin);
  proxy = await startProxy(bin, { upstream, redisUrl, identityHeader: IDENTITY });
  infra = { bin, redisUrl, upstream };
});
after(stopAll);

describe("AguiProxyAgentRunner with @copilotkit/runtime", () => {
  test("a thread run through instance A is restored by instance B after A is killed", async (t) => {
    // A binds requests with runner.bind (fetch handler), B with runner.runWith (node:http headers).
    const [a, started] = await Promise.all([startRuntime(proxy.url, IDENTITY), startRuntime(proxy.url, IDENTITY, "node")]);
    b = started;
    const x = client(a.url, "ck-restore", "alice");
    say(x, "u1", "state");
    await x.runAgent({ runId: "ck-restore-r1" });
    say(x, "u2", "tools");
    await x.runAgent({ runId: "ck-restore-r2" });
    say(x, "u3", "chat");
    await x.runAgent({ runId: "ck-restore-r3" });
    const want = { messages: plain(x.messages), state: plain(x.state) };
    assert.ok(want.messages.length >= 6, `three runs leave user and assistant messages: ${JSON.stringify(want.messages)}`);
    assert.equal(want.state.counter, 10, "the state scenario's final counter");
    await kill(a.child);
    a2 = startRuntime(proxy.url, IDENTITY); // awaited by the next tests

    const y = client(b.url, "ck-restore", "alice");
    await y.connectAgent();
    assert.deepEqual(plain(y.messages), want.messages);
    assert.deepEqual(plain(y.state), want.state);
    t.diagnostic(`B restored ${y.messages.length} messages (${y.messages.map((m) => m.role).join(",")}) and state ` +
      `${JSON.stringify(y.state).length} bytes (counter ${y.state.counter}, ${y.state.todos.length} todos), equal to A's client's`);
    const runs = await proxyRuns("ck-restore");
    assert.deepEqual(runs.body.runs.map((r) => [r.runId, r.parentRunId ?? "", r.status]), [
      ["ck-restore-r1", "", "finished"],
      ["ck-restore-r2", "ck-restore-r1", "finished"],
      ["ck-restore-r3", "ck-restore-r2", "finished"],
    ]);
  });

  test("a run started through A is stopped through B; A's client and B's follower both end", async () => {
    const a = await a2;
    const x = client(a.url, "ck-stop", "alice");
    say(x, "u1", "slow");
    let deltas = 0;
    const xErrors = [];
    const running = x
      .runAgent({ runId: "ck-stop-r1", forwardedProps: { events: 3000, intervalMs: 20 } }, {
        onTextMessageContentEvent: () => void deltas++,
        onRunErrorEvent: ({ event }) => void xErrors.push(event.code),
      })
      .catch((err) => err);
    await until("the run to stream", () => deltas >= 3);

    const runner = new AguiProxyAgentRunner({ routes: { default: proxy.url }, identityHeader: IDENTITY });
    const as = (user, fn) => runner.runWith({ [IDENTITY]: user }, fn);
    assert.equal(await as("alice", () => runner.isRunning({ threadId: "ck-stop" })), true);
    assert.equal(await as("bob", () => runner.isRunning({ threadId: "ck-stop" })), false, "another identity does not see the run");
    await assert.rejects(runner.isRunning({ threadId: "ck-stop" }), /no caller identity/, "no identity is refused, not sent anonymous");

    const y = client(b.url, "ck-stop", "alice");
    const yErrors = [];
    const following = y.connectAgent({}, { onRunErrorEvent: ({ event }) => void yErrors.push(event.code) });
    await until("B's follower to catch up", () => y.messages.some((m) => m.role === "assistant"));

    const second = client(b.url, "ck-stop", "alice");
    say(second, "u2", "chat");
    const busy = [];
    await second.runAgent({ runId: "ck-stop-r2" }, { onRunErrorEvent: ({ event }) => void busy.push(event.code) }).catch(() => {});
    assert.deepEqual(busy, ["ThreadBusy"], "a second run on the running thread is refused, through any instance");

    const stop = (user) =>
      fetch(`${b.url}/agent/default/stop/ck-stop`, {
        method: "POST",
        headers: { "content-type": "application/json", [IDENTITY]: user },
        body: "{}",
      }).then((r) => r.json());
    assert.equal((await stop("bob")).stopped, false, "bob cannot stop alice's run");
    assert.equal((await stop("alice")).stopped, true);
    await running;
    await following;
    assert.deepEqual(xErrors, ["CANCELLED"], "A's client sees the run cancelled");
    assert.deepEqual(yErrors, ["CANCELLED"], "B's follower sees the run cancelled");
    assert.ok(deltas < 3000, `the run was cut short (${deltas} deltas)`);
    assert.deepEqual(plain(y.messages), plain(x.messages), "A's client and B's follower end with the same messages");
    const runs = await proxyRuns("ck-stop");
    // The proxy ends the run as AG-UI 1.0 does (RUN_FINISHED cancelled, status cancelled);
    // CopilotKit's clients above got the ending they know, RUN_ERROR CANCELLED.
    assert.deepEqual(runs.body.runs.map((r) => r.status), ["cancelled"]);
    assert.equal(await as("alice", () => runner.isRunning({ threadId: "ck-stop" })), false);
    assert.equal((await stop("alice")).stopped, false, "nothing left to stop");
  });

  test("a run in progress started through A is followed to its end through B after A is killed", async () => {
    const props = { events: 80, intervalMs: 25 };
    const ref = client(b.url, "ck-ref", "alice");
    say(ref, "u1", "slow");
    await ref.runAgent({ runId: "ck-follow-r1", forwardedProps: props }); // same run id, other thread: same ids

    const a = await a2;
    // The page that started the run talks to A over the runtime's HTTP API; A dies under it.
    const res = await fetch(`${a.url}/agent/default/run`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", [IDENTITY]: "alice" },
      body: JSON.stringify({
        threadId: "ck-follow", runId: "ck-follow-r1", state: {}, tools: [], context: [], forwardedProps: props,
        messages: [{ id: "u1", role: "user", content: "slow" }],
      }),
    });
    assert.equal(res.status, 200);
    let deltas = 0;
    const reading = (async () => {
      for await (const ev of readSse(res.body)) if (JSON.parse(ev.data).type === "TEXT_MESSAGE_CONTENT") deltas++;
    })().catch((err) => err);
    await until("the run to stream", () => deltas >= 3);
    await kill(a.child);
    assert.ok((await reading) instanceof Error, "A's stream broke off");
    assert.ok(deltas < props.events, `A died mid-run (${deltas} deltas)`);
    assert.equal((await proxyRuns("ck-follow")).body.runs[0].status, "running", "the run goes on without A");

    const y = client(b.url, "ck-follow", "alice");
    await y.connectAgent();
    assert.equal((await proxyRuns("ck-follow")).body.runs[0].status, "finished", "B's connect ended with the run");
    assert.deepEqual(plain(y.messages), plain(ref.messages), "B's client has the uninterrupted run's messages");
    assert.deepEqual(plain(y.state), plain(ref.state));
  });

  test("a thread of another identity is invisible", async () => {
    const bob = client(b.url, "ck-restore", "bob");
    await bob.connectAgent();
    assert.deepEqual(bob.messages, [], "bob's connect restores nothing of alice's thread");
    assert.deepEqual(bob.state, {});
    assert.equal((await proxyRuns("ck-restore", "bob")).status, 404, "alice's thread id is unused for bob");
    // Each identity has its own namespace of thread ids: bob's run on the same id starts bob's
    // own thread, which holds nothing of alice's, and alice's thread is unchanged.
    say(bob, "u9", "chat");
    await bob.runAgent({ runId: "ck-bob-r1" });
    assert.deepEqual(bob.messages.filter((m) => m.role === "user").map((m) => m.id), ["u9"], "bob's thread holds only bob's messages");
    assert.equal((await proxyRuns("ck-restore", "bob")).body.runs.length, 1, "bob's own thread");
    assert.equal((await proxyRuns("ck-restore")).body.runs.length, 3, "alice's thread is unchanged");

    const own = client(b.url, "ck-bob", "bob");
    say(own, "u1", "chat");
    await own.runAgent({ runId: "ck-bob-r2" });
    const alice = client(b.url, "ck-bob", "alice");
    await alice.connectAgent();
    assert.deepEqual(alice.messages, [], "and the other way round");
    const again = client(b.url, "ck-bob", "bob");
    await again.connectAgent();
    assert.deepEqual(plain(again.messages), plain(own.messages));
  });
});

describe("AguiProxyAgentRunner in process", () => {
  let url;
  before(() => (url = proxy.url));

  /** Every event of an Observable, once it completes. */
  const collect = (obs) =>
    new Promise((resolve, reject) => {
      const out = [];
      obs.subscribe({ next: (e) => out.push(e), error: reject, complete: () => resolve(out) });
    });
  const input = (threadId, runId, content) => ({
    threadId, runId, state: {}, tools: [], context: [], forwardedProps: {},
    messages: [{ id: `${runId}-u`, role: "user", content }],
  });

  test("identity from the bound request (a session cookie), not from what the browser forwards", async () => {
    const agent = new HttpAgent({ url, headers: { [IDENTITY]: "mallory" } });
    const runner = new AguiProxyAgentRunner({
      agents: { default: agent },
      identityHeader: IDENTITY,
      identity: (h) => /(?:^|; )user=(\w+)/.exec(h.get("cookie") ?? "")?.[1],
    });
    const carol = { cookie: "theme=dark; user=carol" };
    const run = agent.clone();
    run.agentId = "default";
    run.threadId = "in-carol";
    run.setMessages(input("in-carol", "in-r1", "chat").messages);
    const events = await runner.runWith(carol, () => collect(runner.run({ threadId: "in-carol", agent: run, input: input("in-carol", "in-r1", "chat") })));
    assert.equal(events.at(-1).type, "RUN_FINISHED");
    assert.equal(events[0].type, "RUN_STARTED");
    assert.equal(events[0].input.messages[0].content, "chat", "the proxy put the normalized input on RUN_STARTED");
    const owner = async (user) => (await fetch(`${url}agui/threads/in-carol/runs`, { headers: { [IDENTITY]: user } })).status;
    assert.equal(await owner("carol"), 200);
    assert.equal(await owner("mallory"), 404, "the agent's configured header did not win over the caller's identity");

    const replay = await runner.runWith(carol, () => collect(runner.connect({ threadId: "in-carol", agentId: "default", headers: { [IDENTITY]: "mallory" } })));
    const snap = replay.find((e) => e.type === "MESSAGES_SNAPSHOT");
    assert.deepEqual(snap.messages.map((m) => m.role), ["user", "assistant"]);
    assert.ok(!replay.some((e) => e.type === "CUSTOM" && e.name === "agui-proxy.replay_complete"), "the proxy's prelude marker is not passed on");
    assert.equal(replay.at(-1).type, "RUN_FINISHED", "connect ends with the thread's last run");
    assert.deepEqual(await runner.runWith({ cookie: "user=dave" }, () => collect(runner.connect({ threadId: "in-carol", agentId: "default" }))), []);
    assert.deepEqual(await runner.runWith(carol, () => collect(runner.connect({ threadId: "in-nothing", agentId: "default" }))), [], "an unknown thread connects to nothing");
    assert.equal(await runner.runWith(carol, () => runner.stop({ threadId: "in-carol" })), false, "a finished thread has nothing to stop");
  });

  test("a refused run ends with RUN_ERROR carrying the proxy's answer", async () => {
    const agent = new HttpAgent({ url });
    const runner = new AguiProxyAgentRunner({ agents: { default: agent }, identityHeader: IDENTITY });
    const run = agent.clone();
    run.agentId = "default";
    const first = await runner.runWith({ [IDENTITY]: "erin" }, () => collect(runner.run({ threadId: "in-erin", agent: run, input: input("in-erin", "in-e1", "chat") })));
    assert.equal(first.at(-1).type, "RUN_FINISHED");
    const again = agent.clone();
    again.agentId = "default";
    const events = await runner.runWith({ [IDENTITY]: "erin" }, () => collect(runner.run({ threadId: "in-erin", agent: again, input: input("in-erin", "in-e1", "chat") })));
    assert.equal(events.length, 1);
    assert.equal(events[0].type, "RUN_ERROR");
    assert.match(events[0].message, /409/);
    assert.equal(events[0].code, "RunAlreadyStarted");
  });

  test("several agents: isRunning and stop find the thread's route by asking the proxy", async () => {
    const up = infra.upstream;
    const routed = await startProxy(infra.bin, { ...infra, identityHeader: IDENTITY, routes: `/agents/a=${up},/agents/b=${up}` });
    try {
      const agentA = new HttpAgent({ url: `${routed.url}agents/a/` });
      const agentB = new HttpAgent({ url: `${routed.url}agents/b` }); // the trailing slash is optional
      const runner = new AguiProxyAgentRunner({ agents: { a: agentA, b: agentB }, identityHeader: IDENTITY });
      const as = (fn) => runner.runWith({ [IDENTITY]: "frank" }, fn);
      const run = agentB.clone();
      run.agentId = "b";
      const slow = { ...input("in-routes", "in-rt1", "slow"), forwardedProps: { events: 3000, intervalMs: 20 } };
      run.setMessages(slow.messages);
      const events = [];
      let ended;
      const done = new Promise((resolve) => (ended = resolve));
      as(() => runner.run({ threadId: "in-routes", agent: run, input: slow })).subscribe({ next: (e) => events.push(e), complete: ended });
      await until("the run to stream", () => events.some((e) => e.type === "TEXT_MESSAGE_CONTENT"));
      assert.equal(await as(() => runner.isRunning({ threadId: "in-routes" })), true, "found on route b after asking route a");
      assert.equal(await as(() => runner.stop({ threadId: "in-routes", runId: "other-run" })), false, "only the named run is stopped");
      assert.equal(await as(() => runner.stop({ threadId: "in-routes", runId: "in-rt1" })), true);
      await done;
      assert.equal(events.at(-1).type, "RUN_ERROR");
      assert.equal(events.at(-1).code, "CANCELLED");
      assert.equal(await as(() => runner.isRunning({ threadId: "in-routes" })), false);
      const replay = await as(() => collect(runner.connect({ threadId: "in-routes", agentId: "b" })));
      assert.equal(replay.at(-1).code, "CANCELLED", "connect through route b replays the cancelled run");
      assert.deepEqual(await as(() => collect(runner.connect({ threadId: "in-routes", agentId: "a" }))), [],
        "each route has its own thread ids: on route a this id is unused, nothing to restore");
    } finally {
      await kill(routed.child);
    }
  });

  test("connect resumes a dropped attach stream from its last event id", async () => {
    const r = await relay(Number(new URL(url).port));
    try {
      const runner = new AguiProxyAgentRunner({ routes: { default: r.url }, identityHeader: IDENTITY });
      const headers = { [IDENTITY]: "gina" };
      // The run goes straight to the proxy, which reads it to its end whoever listens.
      const res = await fetch(url, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify({ ...input("in-cut", "in-c1", "slow"), forwardedProps: { events: 60, intervalMs: 30 } }),
      });
      const draining = res.text();
      const events = [];
      const deltas = () => events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").length;
      const done = new Promise((resolve, reject) =>
        runner.runWith(headers, () =>
          runner.connect({ threadId: "in-cut", agentId: "default" }).subscribe({ next: (e) => events.push(e), error: reject, complete: resolve }),
        ),
      );
      await until("the live tail", () => deltas() >= 5); // the prelude holds at most one delta
      r.cut();
      await until("the tail after the first cut", () => deltas() >= 15);
      r.cut();
      await done;
      await draining;
      assert.ok(r.connections >= 3, `the runner reconnected after each cut (${r.connections} connections)`);
      const thread = await (await fetch(`${url}agui/threads/in-cut`, { headers })).json();
      const text = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
      assert.equal(text, thread.messages.at(-1).content, "every delta once, none missing");
      assert.equal(events.filter((e) => e.type === "RUN_STARTED").length, 1);
      assert.equal(events.at(-1).type, "RUN_FINISHED");

      const once = new AguiProxyAgentRunner({ routes: { default: r.url }, identityHeader: IDENTITY, reconnects: 0 });
      const res2 = await fetch(url, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify({ ...input("in-cut2", "in-c2", "slow"), forwardedProps: { events: 60, intervalMs: 30 } }),
      });
      const draining2 = res2.text();
      let seen = 0;
      const failed = new Promise((resolve, reject) =>
        once.runWith(headers, () =>
          once.connect({ threadId: "in-cut2", agentId: "default" }).subscribe({ next: () => void seen++, error: resolve, complete: () => reject(new Error("completed")) }),
        ),
      );
      await until("the live tail", () => seen >= 6);
      r.cut();
      assert.ok((await failed) instanceof Error, "with reconnects: 0 a drop is an error");
      await draining2;
    } finally {
      await r.close();
    }
  });

  test("misconfiguration is a clear error", () => {
    assert.throws(() => new AguiProxyAgentRunner({}), /give agents or routes/);
    assert.throws(() => new AguiProxyAgentRunner({ agents: { default: {} } }), /has no url/);
    assert.throws(() => new AguiProxyAgentRunner({ routes: { default: "agui-proxy:8080" } }), /not an absolute http\(s\) URL/);
    const runner = new AguiProxyAgentRunner({ routes: { default: url } });
    const direct = new HttpAgent({ url: "http://127.0.0.1:1/agent" });
    direct.agentId = "default";
    assert.throws(() => runner.run({ threadId: "t", agent: direct, input: input("t", "r", "chat") }), /must be an HttpAgent with url/);
    const other = new HttpAgent({ url });
    other.agentId = "other";
    assert.throws(() => runner.run({ threadId: "t", agent: other, input: input("t", "r", "chat") }), /no proxy route for agent "other"/);
  });
});

describe("builds", () => {
  test("the CommonJS build exports the same runner", () => {
    const cjs = createRequire(import.meta.url)("../dist/index.cjs");
    assert.equal(typeof cjs.AguiProxyAgentRunner, "function");
    assert.equal(typeof cjs.readSse, "function");
    const r = new cjs.AguiProxyAgentRunner({ routes: { default: "http://127.0.0.1:8080/agents/a" } });
    for (const m of ["run", "connect", "isRunning", "stop", "bind", "runWith"]) assert.equal(typeof r[m], "function", m);
  });
});

describe("readSse", () => {
  const stream = ": comment\r\nid: r1:e:1\r\ndata: {\"a\":1}\r\n\r\ndata: line1\ndata:line2\n\nid: r1:e:2\rdata: x\r\rdata: no-blank-line-at-end";
  const want = [
    { data: '{"a":1}', id: "r1:e:1" },
    { data: "line1\nline2", id: "r1:e:1" },
    { data: "x", id: "r1:e:2" },
  ];
  const read = async (chunks) => {
    const enc = new TextEncoder();
    const body = new ReadableStream({
      start(c) {
        for (const ch of chunks) c.enqueue(enc.encode(ch));
        c.close();
      },
    });
    const out = [];
    for await (const ev of readSse(body)) out.push(ev);
    return out;
  };

  test("WHATWG framing: CRLF, LF and CR line ends, comments, multi-line data, ids carried over", async () => {
    assert.deepEqual(await read([stream]), want);
  });

  test("any split of the bytes into chunks gives the same events", async () => {
    let seed = 7;
    const rand = (n) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let i = 0; i < 200; i++) {
      const chunks = [];
      for (let at = 0; at < stream.length; ) {
        const n = 1 + rand(6);
        chunks.push(stream.slice(at, at + n));
        at += n;
      }
      assert.deepEqual(await read(chunks), want, JSON.stringify(chunks));
    }
  });
});
