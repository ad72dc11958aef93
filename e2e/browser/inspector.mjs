// Drives Debian's headless Chromium (playwright-core, no downloaded browser) to agui-proxy's
// thread inspector page and checks what it shows:
//   1. a branched thread: the runs tree nests both children under their common parent, marks
//      the head and the branch point; selecting each run shows that run's messages and state
//      (time travel), its status (an interrupted run's RUN_ERROR code) and its raw events with
//      their sequence numbers 1..N, in order;
//   2. a live run (started here, by POSTing the slow demo scenario to --run-url, so that the
//      page sees it young): its events keep arriving on the page while the run streams (the count
//      grows, the LIVE badge shows), then the Stop button ends it: the page shows the
//      TEXT_MESSAGE_END and RUN_FINISHED outcome cancelled events and the run's new status;
//   3. the Export link downloads the thread's export document; the thread list offers the thread.
// Takes a screenshot of each view. Prints one JSON object with what it saw on stdout; exits 1
// naming each failed check.
//
// node inspector.mjs --page URL --thread ID --expect JSON --run-url URL --live-thread ID
//   --live-run ID --shots DIR [--timeout MS] [--chromium PATH]
// --expect: {"head": "r3", "shot": "r2", "runs": {"r1": {"parent": "", "status": "finished", "events": 8,
//   "messages": [...], "state": {...}}, ...}} (status as the page shows it: "error (UPSTREAM_ENDED)")
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual, parseArgs } from "node:util";
import { chromium } from "playwright-core";

const { values: opts } = parseArgs({
  options: {
    page: { type: "string" },
    thread: { type: "string" },
    expect: { type: "string" },
    "live-thread": { type: "string" },
    "live-run": { type: "string" },
    "run-url": { type: "string" },
    shots: { type: "string" },
    timeout: { type: "string", default: "90000" },
    chromium: { type: "string", default: "/usr/bin/chromium" },
  },
});
for (const k of ["page", "thread", "expect", "run-url", "live-thread", "live-run", "shots"]) {
  if (!opts[k]) {
    console.error(`--${k} is required`);
    process.exit(2);
  }
}
const timeout = Number(opts.timeout);
const expect = JSON.parse(opts.expect);
const failures = [];
const check = (ok, what) => {
  if (!ok) failures.push(what);
};

const args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const profile = mkdtempSync(join(tmpdir(), "agui-inspector-"));
const observed = { runs: {}, live: {} };
let context;
let liveRequest;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: opts.chromium, headless: true, args, timeout, viewport: { width: 1280, height: 860 },
    acceptDownloads: true,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(timeout);
  const pageErrors = [];
  page.on("pageerror", (err) => pageErrors.push(String(err)));
  page.on("response", (r) => r.status() >= 400 && pageErrors.push(`${r.status()} ${r.request().method()} ${r.url()}`));

  // 1. The branched thread.
  await page.goto(`${opts.page}?thread=${encodeURIComponent(opts.thread)}`);
  const runIds = Object.keys(expect.runs);
  await page.waitForFunction((n) => document.querySelectorAll("#runs li[data-run]").length === n, runIds.length);
  observed.tree = await page.$$eval("#runs li[data-run]", (lis) =>
    lis.map((li) => ({
      run: li.dataset.run,
      // The run whose list item this one is nested in: the tree as drawn.
      nestedIn: li.parentElement.closest("li[data-run]")?.dataset.run ?? "",
      head: !!li.querySelector(":scope > button .tag.head"),
      branches: li.querySelector(":scope > button .tag.branch")?.textContent ?? "",
      status: li.dataset.status,
    })));
  // The thread list (GET {prefix}threads) offers the thread.
  await page.waitForFunction((t) => [...document.querySelectorAll("#thread-list option")].some((o) => o.value === t), opts.thread);
  observed.listed = await page.$$eval("#thread-list option", (os) => os.map((o) => o.value).filter(Boolean));
  for (const [id, want] of Object.entries(expect.runs)) {
    const node = observed.tree.find((n) => n.run === id);
    check(node, `run ${id} is in the tree`);
    if (!node) continue;
    check(node.nestedIn === want.parent, `run ${id} is drawn under ${want.parent || "the root"} (got ${node.nestedIn || "the root"})`);
    check(node.head === (id === expect.head), `run ${id} head mark is ${id === expect.head}`);
  }
  const parents = Object.values(expect.runs).map((r) => r.parent).filter(Boolean);
  for (const p of new Set(parents)) {
    const n = parents.filter((x) => x === p).length;
    if (n > 1) check(observed.tree.find((x) => x.run === p)?.branches === `${n} branches`, `run ${p} is marked as a branch point of ${n}`);
  }
  for (const [id, want] of Object.entries(expect.runs)) {
    await page.click(`#runs li[data-run="${id}"] > button`);
    await page.waitForFunction(
      ({ id, n, events }) =>
        window.inspector.run === id &&
        document.querySelectorAll("#messages li").length === n &&
        document.querySelectorAll("#events tbody tr[data-seq]").length === events,
      { id, n: want.messages.length, events: want.events },
    );
    const shown = await page.evaluate(() => ({
      messages: [...document.querySelectorAll("#messages li")].map((li) => ({ id: li.dataset.id, role: li.dataset.role })),
      state: JSON.parse(document.getElementById("state").textContent),
      seqs: [...document.querySelectorAll("#events tbody tr[data-seq]")].map((tr) => Number(tr.dataset.seq)),
      types: [...document.querySelectorAll("#events tbody tr[data-seq]")].map((tr) => tr.dataset.type),
      gaps: document.querySelectorAll("#events tbody tr.gap").length,
      title: document.getElementById("run-title").textContent,
      status: document.getElementById("run-status").textContent,
      meta: document.getElementById("run-meta").textContent,
      at: [...document.querySelectorAll("#events tbody tr[data-seq] td.at")].map((td) => td.textContent),
    }));
    observed.runs[id] = shown;
    // The demo's chat events carry no timestamp: a recorded run's arrival is not known, and is
    // not shown as "+0 ms".
    check(shown.at.every((a) => a === "—"), `run ${id}: no made-up arrival times (${shown.at.join(" ")})`);
    check(shown.meta.includes(" lasted ") && !shown.meta.includes("running for"), `run ${id}: the line under the badge says how long it lasted (${shown.meta})`);
    check(isDeepStrictEqual(shown.messages, want.messages.map((m) => ({ id: m.id, role: m.role }))), `run ${id}: the messages as of the run`);
    check(isDeepStrictEqual(shown.state, want.state), `run ${id}: the state as of the run`);
    check(isDeepStrictEqual(shown.seqs, Array.from({ length: want.events }, (_, i) => i + 1)), `run ${id}: events 1..${want.events} in order`);
    const end = want.status.startsWith("error") ? "RUN_ERROR" : "RUN_FINISHED";
    check(shown.types[0] === "RUN_STARTED" && shown.types.at(-1) === end, `run ${id}: events from RUN_STARTED to ${end}`);
    check(shown.status === want.status, `run ${id}: status ${want.status} shown (got ${shown.status})`);
    check(shown.gaps === 0, `run ${id}: no gap shown`);
  }
  // The screenshot: a branch selected (not the head), so both branches and time travel show.
  const branchRun = expect.shot ?? runIds[1];
  await page.click(`#runs li[data-run="${branchRun}"] > button`);
  await page.waitForFunction((id) => window.inspector.run === id && document.querySelectorAll("#events tbody tr").length > 0, branchRun);
  await page.screenshot({ path: join(opts.shots, "inspector-branched.png"), fullPage: false });

  // 3. Export.
  const exportHref = await page.getAttribute("#export", "href");
  const doc = await page.evaluate(async (href) => (await fetch(href)).json(), exportHref);
  check(doc.formatVersion === 1 && doc.runs?.length === runIds.length, "the export link gives the thread's export document");

  // 2. The live run: started now, read (and dropped) in the background; the proxy runs it on.
  const liveBody = JSON.stringify({
    threadId: opts["live-thread"], runId: opts["live-run"],
    messages: [{ id: "u1", role: "user", content: "slow" }], forwardedProps: { events: 3000, intervalMs: 40 },
  });
  liveRequest = new AbortController();
  const res = await fetch(opts["run-url"], {
    method: "POST", body: liveBody, signal: liveRequest.signal,
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
  });
  check(res.ok, `the live run started (${res.status})`);
  res.body.pipeTo(new WritableStream()).catch(() => {});
  await page.goto(`${opts.page}?thread=${encodeURIComponent(opts["live-thread"])}`);
  await page.waitForFunction((id) => window.inspector.run === id, opts["live-run"]);
  await page.waitForFunction(() => document.querySelectorAll("#events tbody tr[data-seq]").length >= 3);
  const n1 = await page.$$eval("#events tbody tr[data-seq]", (r) => r.length);
  await page.waitForFunction((n) => document.querySelectorAll("#events tbody tr[data-seq]").length >= n + 3, n1);
  const n2 = await page.$$eval("#events tbody tr[data-seq]", (r) => r.length);
  observed.live.grew = [n1, n2];
  check(n2 > n1, "live events keep arriving");
  check(await page.isVisible("#live"), "the LIVE badge shows");
  check(await page.isVisible("#stop"), "the Stop button shows for a running run");
  await page.waitForFunction(() => document.querySelector("#messages li[data-role=assistant]")?.textContent.length > 40);
  await page.screenshot({ path: join(opts.shots, "inspector-live.png"), fullPage: false });
  observed.live.beforeStop = await page.evaluate(() => ({ status: document.getElementById("run-status").textContent, stopHidden: document.getElementById("stop").hidden }));
  // A DOM click: on a loaded machine Playwright's actionability checks (stable for two animation
  // frames) can starve while the page renders a fast stream; visibility is checked above.
  await page.evaluate(() => document.getElementById("stop").click());
  await page.waitForFunction(() => document.querySelector('#events tbody tr[data-type="RUN_FINISHED"]'));
  await page.waitForFunction(() => !document.getElementById("run-status").textContent.startsWith("running"));
  observed.live.end = await page.textContent('#events tbody tr[data-type="RUN_FINISHED"] td.detail');
  observed.live.status = await page.textContent("#run-status");
  check(observed.live.end.includes("outcome cancelled"), "the stopped run shows RUN_FINISHED outcome cancelled");
  check(observed.live.status === "cancelled", `the stopped run's status shows cancelled (got ${observed.live.status})`);
  const closed = await page.$$eval("#events tbody tr[data-seq]", (rows) => rows.slice(-2).map((r) => r.dataset.type));
  check(closed[0] === "TEXT_MESSAGE_END", `the streaming message is closed before RUN_FINISHED (got ${closed.join(", ")})`);
  check(!(await page.isVisible("#live")) && !(await page.isVisible("#stop")), "LIVE and Stop are gone once the run ended");
  const seqs = await page.$$eval("#events tbody tr[data-seq]", (rows) => rows.map((r) => Number(r.dataset.seq)));
  check(seqs.every((s, i) => s === i + 1), "live events in order, none twice");
  observed.live.events = seqs.length;
  await page.waitForFunction(() => document.getElementById("run-meta").textContent.includes(" lasted "));
  observed.live.meta = await page.textContent("#run-meta");
  check(!observed.live.meta.includes("running for"), `the ended live run's line says how long it lasted (${observed.live.meta})`);

  // 3. A finished run whose events carry timestamps (the demo's bench scenario, 10 deltas
  // 30 ms apart): the "at" column shows their pacing, from the first timestamped event.
  const stampedThread = `${opts["live-thread"]}-stamped`;
  const stamped = await fetch(opts["run-url"], {
    method: "POST",
    body: JSON.stringify({ threadId: stampedThread, runId: "s1", messages: [{ id: "u1", role: "user", content: "bench" }], forwardedProps: { events: 10, intervalMs: 30 } }),
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
  });
  await stamped.text(); // to its end: the run is recorded whole
  await page.goto(`${opts.page}?thread=${encodeURIComponent(stampedThread)}`);
  await page.waitForFunction(() => window.inspector.run === "s1" && document.querySelector('#events tbody tr[data-type="RUN_FINISHED"]'));
  const at = await page.$$eval("#events tbody tr[data-seq] td.at", (tds) => tds.map((td) => td.textContent));
  const ms = at.filter((a) => a.startsWith("+")).map((a) => Number(a.slice(1, -3)));
  observed.stamped = at;
  check(ms.length >= 10 && ms[0] === 0 && ms.every((m, i) => i === 0 || m >= ms[i - 1]) && ms.at(-1) > 0,
    `a finished run's timestamped events show their pacing (${at.join(" ")})`);
  observed.pageErrors = pageErrors;
  check(pageErrors.length === 0, `no page errors: ${pageErrors.join("; ")}`);
} catch (err) {
  failures.push(`exception: ${err.stack ?? err}`);
} finally {
  liveRequest?.abort();
  await context?.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(observed));
if (failures.length) {
  console.error(failures.map((f) => `FAIL ${f}`).join("\n"));
  process.exit(1);
}
