// compact-check.mjs <dir> [--case-timeout SECONDS]: the cross-language proof for
// compact.Compact under Node. Node loads @ag-ui/client's CommonJS build, which loads
// fast-json-patch's CommonJS module (sloppy mode); browser/compact-check.mjs runs the same cases
// in headless Chromium with the ES module build. Each <dir>/*.json file is a case (see
// compact-check-core.mjs). Prints "N passed, M failed" and exits non-zero on any failure.
//
// The cases run in a worker thread, one after the other. A case the worker does not finish
// within --case-timeout seconds (default 30: a loop in the client would otherwise hang the
// whole run) fails by name; the worker is stopped and a new one goes on with the next case.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { checkCase, patchIsStrict } from "./compact-check-core.mjs";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
console.warn = () => {};
console.error = () => {};

if (!isMainThread) {
  // The worker: check workerData.files from workerData.from on, telling the main thread when
  // each case starts and what it found.
  const { dir, files, from } = workerData;
  for (let i = from; i < files.length; i++) {
    const c = JSON.parse(readFileSync(join(dir, files[i]), "utf8"));
    parentPort.postMessage({ start: i, name: c.name });
    parentPort.postMessage({ done: i, name: c.name, problems: await checkCase(c, "node") });
  }
} else {
  const dir = process.argv[2];
  const ti = process.argv.indexOf("--case-timeout");
  const caseTimeout = 1000 * (ti > 0 ? Number(process.argv[ti + 1]) : 30);
  if (!dir || !(caseTimeout > 0)) {
    console.log("usage: node compact-check.mjs <dir> [--case-timeout SECONDS]");
    process.exit(2);
  }
  if (await patchIsStrict()) {
    console.log("FAIL: Node loaded a strict-mode fast-json-patch; expected the CommonJS build");
    process.exit(1);
  }
  const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
  let passed = 0;
  let failed = 0;
  // run checks files[from:] in one worker and resolves with the index to go on from (past a
  // case that hung or a worker that died), or files.length.
  const run = (from) => new Promise((resolve) => {
    const w = new Worker(new URL(import.meta.url), { workerData: { dir, files, from } });
    let current = from; // the case the worker is on
    let name = files[from];
    let next = from; // the first case without an answer
    let timer;
    const fail = async (why) => {
      clearTimeout(timer);
      failed++;
      console.log(`FAIL [node] ${name}\n  ${why}`);
      w.removeAllListeners();
      await w.terminate();
      resolve(current + 1);
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => fail(`no answer in ${caseTimeout / 1000}s (the case hung)`), caseTimeout);
    };
    arm();
    w.on("message", (m) => {
      next = m.done === undefined ? next : m.done + 1;
      if (m.start !== undefined) {
        current = m.start;
        name = m.name;
        arm();
        return;
      }
      if (m.problems.length === 0) {
        passed++;
      } else {
        failed++;
        console.log(`FAIL [node] ${m.name}\n  ${m.problems.join("\n  ")}`);
      }
    });
    w.on("error", (e) => fail(`the worker failed: ${e instanceof Error ? e.message : String(e)}`));
    w.on("exit", (code) => {
      if (next < files.length) return fail(`the worker exited (code ${code})`);
      clearTimeout(timer);
      resolve(files.length);
    });
  });
  for (let i = 0; i < files.length; ) i = await run(i);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}
