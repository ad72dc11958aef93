// Headless Chromium (Debian's /usr/bin/chromium driven by playwright-core; no browser
// download) runs an app that bundles @agui-proxy/client with esbuild, against the real
// agui-proxy and demo-agent behind a relay that kills the browser's connection in the middle of
// a chosen event's frame. The final messages and state must equal an uninterrupted run's; a
// page reload mid-run must restore the thread with connectAgent() and follow the run to its end.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { build } from "esbuild";
import { chromium } from "playwright-core";
import { HttpAgent } from "@ag-ui/client";
import { normalizeEvents, scenarioInput, startRelay, startServers } from "./harness.mjs";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
console.warn = () => {};

const here = dirname(fileURLToPath(import.meta.url));
const pkgRoot = join(here, "..");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
// No sandbox as root, and no background traffic: this machine's network is closed.
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

let servers, relay, context, appDir, profile;
before(async () => {
  appDir = mkdtempSync(join(tmpdir(), "agui-ts-app-"));
  // Bundle the app the way an app bundles the package: "@agui-proxy/client" resolved through
  // the package's exports ("import" condition → dist/index.mjs), its peers from node_modules.
  await build({
    entryPoints: [join(here, "app", "app.mjs")],
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "chrome120",
    outfile: join(appDir, "app.js"),
    alias: { "@agui-proxy/client": pkgRoot },
    nodePaths: [join(pkgRoot, "node_modules")],
    logLevel: "warning",
  });
  const { copyFileSync } = await import("node:fs");
  copyFileSync(join(here, "app", "index.html"), join(appDir, "index.html"));
  servers = await startServers();
  relay = await startRelay(servers.proxyUrl, appDir);
  profile = mkdtempSync(join(tmpdir(), "agui-ts-chromium-"));
  context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 30000 });
});
after(async () => {
  await context?.close();
  await relay?.close();
  await servers?.stop();
  for (const d of [appDir, profile]) if (d) rmSync(d, { recursive: true, force: true });
});

let seq = 0;
const uniq = (p) => `${p}-${process.pid}-${++seq}`;

async function baseline(runId, scenario, intervalMs) {
  const threadId = uniq("base");
  const agent = new HttpAgent({ url: servers.proxyUrl, threadId });
  const input = scenarioInput(scenario, intervalMs);
  agent.setMessages(input.messages);
  const events = [];
  await agent.runAgent({ runId, forwardedProps: input.forwardedProps }, { onEvent: ({ event }) => void events.push(event) });
  return { messages: agent.messages, state: agent.state, events: normalizeEvents(events, threadId) };
}

async function openPage() {
  const page = await context.newPage();
  page.setDefaultTimeout(90000); // this machine is shared and often loaded; nothing here is timed
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(relay.url + "__app/index.html");
  await page.waitForFunction(() => document.getElementById("status").textContent === "ready");
  return { page, errors };
}

describe("in Chromium", () => {
  const cases = [
    { name: "inside a text message", scenario: "tools", type: "TEXT_MESSAGE_CONTENT", n: 3 },
    { name: "inside tool-call arguments", scenario: "tools", type: "TOOL_CALL_ARGS", n: 3 },
    { name: "inside a state delta", scenario: "state", type: "STATE_DELTA", n: 7 },
  ];
  for (const c of cases) {
    test(`connection killed ${c.name}: the run resumes to the uninterrupted result`, async () => {
      const runId = uniq("run");
      const want = await baseline(runId, c.scenario, 15);
      const threadId = uniq("cut");
      const token = uniq("tok");
      const { page, errors } = await openPage();
      try {
        const got = await page.evaluate((o) => window.app.run(o), { threadId, runId, scenario: c.scenario, intervalMs: 15, cut: `${token};${c.type};${c.n}` });
        const st = await page.evaluate(() => window.app.state);
        const cut = relay.cuts.find((x) => x.token === token);
        assert.ok(cut, "the relay killed the browser's connection");
        assert.match(cut.frame, new RegExp(`"type":"${c.type}"`));
        assert.equal(st.error, undefined);
        assert.ok(st.reconnects.length >= 1, "onReconnect ran in the page");
        assert.deepEqual(normalizeEvents(st.events, threadId), want.events, "every event once, in order");
        assert.deepEqual(got.messages, want.messages);
        assert.deepEqual(got.state, want.state);
        assert.deepEqual(errors, []);
      } finally {
        await page.close();
      }
    });
  }

  test("page reload mid-run: connectAgent() restores the thread and follows the run to its end", async () => {
    const runId = uniq("run");
    const want = await baseline(runId, "tools", 40);
    const threadId = uniq("reload");
    const { page, errors } = await openPage();
    try {
      // Start the run and do not wait for it: the page is reloaded in the middle.
      await page.evaluate((o) => void window.app.run(o), { threadId, runId, scenario: "tools", intervalMs: 40 });
      await page.waitForFunction(() => window.app.state.events.length >= 6);
      const before = await page.evaluate(() => window.app.state.events.length);
      await page.reload();
      await page.waitForFunction(() => document.getElementById("status").textContent === "ready");
      const got = await page.evaluate(() => window.app.connect());
      const st = await page.evaluate(() => window.app.state);
      assert.ok(before < want.events.length, "the reload came before the run ended");
      assert.equal(got.replayComplete, true, "the prelude ended with agui-proxy.replay_complete");
      assert.equal(st.events.at(-1).type, "RUN_FINISHED", "the live tail ran to the run's end");
      assert.deepEqual(got.messages, want.messages);
      assert.deepEqual(got.state, want.state);
      assert.deepEqual(errors, []);
    } finally {
      await page.close();
    }
  });
});
