// The proxy restarts under a run (SIGKILL, then a new process on the same port and the same
// disk store, AGUI_STORE_PATH): the client retries while the port refuses, resumes from its
// last id, and receives the rest of what was stored and the RUN_ERROR INTERRUPTED the new
// process appended for the run the old one was pumping. The agent ends with what the proxy
// holds, no event twice.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ResumableHttpAgent, parseEventId } from "../dist/index.mjs";
import { buildBinaries, freePort, scenarioInput } from "./harness.mjs";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
console.warn = () => {};

async function healthy(url) {
  for (let i = 0; i < 800; i++) {
    try {
      await fetch(url); // any answer: it listens
      return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${url} did not answer`);
}

function start(bin, env) {
  return spawn(join(bin, env.DEMO_LISTEN ? "demo-agent" : "agui-proxy"), [], { env: { ...process.env, ...env }, stdio: "ignore" });
}

async function kill(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGKILL");
  await exited;
}

test("proxy killed and restarted mid-run (disk store): the client resumes and ends with what the proxy holds", async () => {
  const bin = buildBinaries();
  const dir = mkdtempSync(join(tmpdir(), "agui-ts-store-"));
  const agentPort = await freePort();
  const proxyPort = await freePort();
  const agent = start(bin, { DEMO_LISTEN: `127.0.0.1:${agentPort}`, DEMO_LOG_LEVEL: "warn" });
  const proxyEnv = {
    AGUI_UPSTREAM: `http://127.0.0.1:${agentPort}`,
    AGUI_LISTEN: `127.0.0.1:${proxyPort}`,
    AGUI_STORE_PATH: dir,
    AGUI_DURABILITY: "sync", // an event reaches the client only once stored: a kill loses none it saw
    AGUI_LOG_LEVEL: "warn",
  };
  let proxy = start(bin, proxyEnv);
  try {
    await healthy(`http://127.0.0.1:${agentPort}/healthz`);
    await healthy(`http://127.0.0.1:${proxyPort}/healthz`);
    const url = `http://127.0.0.1:${proxyPort}/`;
    const threadId = `restart-${process.pid}`;
    const a = new ResumableHttpAgent({
      url,
      threadId,
      reconnect: { maxAttempts: 40, initialDelayMs: 50, maxDelayMs: 250 },
      onReconnect: (info) => reconnects.push(info),
    });
    const reconnects = [];
    const events = [];
    const input = scenarioInput("slow", 40);
    input.forwardedProps.events = 60;
    a.setMessages(input.messages);
    let restarted;
    let n = 0;
    const run = a.runAgent(
      { runId: "r1", forwardedProps: input.forwardedProps },
      {
        onEvent: ({ event }) => {
          events.push(event);
          if (++n === 10) {
            restarted = (async () => {
              await kill(proxy);
              proxy = start(bin, proxyEnv);
            })();
          }
        },
      },
    );
    await run;
    await restarted;
    assert.ok(reconnects.length >= 1, "the client reconnected");
    assert.ok(parseEventId(reconnects[0].lastEventId), "from an event id");
    const last = events.at(-1);
    assert.equal(last.type, "RUN_ERROR");
    assert.equal(last.code, "INTERRUPTED", "the restarted proxy ended the run the old one was pumping");
    const contents = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT");
    const held = await a.snapshot();
    assert.deepEqual(a.messages, held.messages, "the agent holds what the proxy holds");
    assert.equal(held.messages.at(-1).content, contents.map((e) => e.delta).join(""), "every stored delta once");
    assert.ok(contents.length >= 8 && contents.length < 60, `the run was cut by the restart (${contents.length} deltas)`);
  } finally {
    await kill(proxy);
    await kill(agent);
    rmSync(dir, { recursive: true, force: true });
  }
});
