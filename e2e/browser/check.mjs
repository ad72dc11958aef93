// Drives Debian's headless Chromium (playwright-core, no downloaded browser) to page.html
// served by agui-proxy's test server, and checks what a real browser EventSource gets from
// the thread attach endpoint:
//   1. the resumed conversation renders (MESSAGES_SNAPSHOT, then the "live" badge on
//      CUSTOM agui-proxy.replay_complete) with exactly the expected messages;
//   2. when the server ends the stream, the browser reconnects by itself (it sends
//      Last-Event-ID; the Go test checks the header) and no event arrives twice;
//   3. a new EventSource with ?after=<id> receives exactly the expected later events.
// Prints one JSON object with what it saw on stdout; exits 1 naming each failed check.
//
// node check.mjs --page URL --messages JSON --after ID --later JSON [--screenshot FILE] [--timeout MS]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { isDeepStrictEqual } from "node:util";
import { chromium } from "playwright-core";

const usage = "usage: node check.mjs --page URL --messages JSON --after ID --later JSON [--screenshot FILE] [--timeout MS] [--chromium PATH]";
let opts;
try {
  ({ values: opts } = parseArgs({
    options: {
      page: { type: "string" },
      messages: { type: "string" },
      after: { type: "string" },
      later: { type: "string" },
      screenshot: { type: "string" },
      timeout: { type: "string", default: "20000" },
      chromium: { type: "string", default: "/usr/bin/chromium" },
    },
  }));
} catch (err) {
  console.error(`${err.message}\n${usage}`);
  process.exit(2);
}
for (const name of ["page", "messages", "after", "later"]) {
  if (!opts[name]) {
    console.error(`--${name} is required\n${usage}`);
    process.exit(2);
  }
}
const wantMessages = JSON.parse(opts.messages); // [{role, content}]
const wantLater = JSON.parse(opts.later); // [{type, id}]
const timeout = Number(opts.timeout);

const failures = [];
const check = (ok, what, got, want) => {
  if (!ok) failures.push(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
};

// The flags Chromium needs on this machine: no sandbox as root, and no background traffic
// (the network is closed: Google's hosts cannot be reached and must not be tried).
const args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const profile = mkdtempSync(join(tmpdir(), "agui-browser-"));
const observed = {};
let context;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: opts.chromium, headless: true, args, timeout,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const pageErrors = [];
  page.on("pageerror", (err) => pageErrors.push(String(err)));

  // 1. The resumed conversation.
  await page.goto(opts.page, { timeout });
  await page.waitForFunction((n) => window.aguiPage.live && window.aguiPage.messages.length >= n,
    wantMessages.length, { timeout });
  const rendered = await page.$$eval("#messages li", (lis) =>
    lis.map((li) => ({ role: li.dataset.role, text: li.textContent })));
  observed.rendered = rendered;
  observed.badgeVisible = await page.isVisible("#badge");
  observed.prelude = await page.evaluate(() => window.aguiPage.received);
  check(isDeepStrictEqual(rendered, wantMessages.map((m) => ({ role: m.role, text: `${m.role}: ${m.content}` }))),
    "rendered messages", rendered, wantMessages);
  check(observed.badgeVisible, "live badge visible", observed.badgeVisible, true);
  if (opts.screenshot) await page.screenshot({ path: opts.screenshot, fullPage: true });

  // 2. The server ends a finished run's stream; EventSource reconnects with Last-Event-ID.
  await page.waitForFunction(() => window.aguiPage.opens >= 2, null, { timeout });
  const afterReconnect = await page.evaluate(() => window.aguiPage.received);
  const ids = afterReconnect.map((e) => e.id).filter((id) => id !== "");
  observed.reconnect = { events: afterReconnect.length, ids: ids.length };
  check(new Set(ids).size === ids.length, "no event id twice across the reconnect", ids, "unique ids");

  // 3. A fresh EventSource from an id: exactly the later events.
  await page.evaluate((after) => { window.aguiPage.reset(); window.aguiPage.connect(after); }, opts.after);
  const last = wantLater[wantLater.length - 1];
  await page.waitForFunction((id) => window.aguiPage.received.some((e) => e.id === id), last.id, { timeout });
  const later = await page.evaluate(() => window.aguiPage.received.map(({ type, id }) => ({ type, id })));
  observed.later = later;
  check(isDeepStrictEqual(later, wantLater), "events after " + opts.after, later, wantLater);
  const liveAfter = await page.evaluate(() => window.aguiPage.live);
  check(!liveAfter, "no replay_complete when resuming from an id", liveAfter, false);

  observed.pageErrors = pageErrors;
  check(pageErrors.length === 0, "page errors", pageErrors, []);
  const dataErrors = await page.evaluate(() => window.aguiPage.errors);
  check(dataErrors.length === 0, "events that are not AG-UI JSON", dataErrors, []);
} catch (err) {
  failures.push(`browser: ${err.message}`);
} finally {
  if (context) await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}

console.log(JSON.stringify(observed));
for (const f of failures) console.error("FAIL " + f);
process.exit(failures.length === 0 ? 0 : 1);
