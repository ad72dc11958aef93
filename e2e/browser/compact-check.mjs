// compact-check.mjs <dir>: the cross-language proof for compact.Compact in a browser. The
// shared check (../compact-check-core.mjs) is bundled with esbuild the way a browser app is
// bundled (platform browser, the `module` main field first: @ag-ui/client's dist/index.mjs and
// fast-json-patch's ES module, which runs in strict mode), loaded as a module script into
// Debian's headless Chromium (playwright-core, no downloaded browser), and run on every case
// of <dir>. Prints "N passed, M failed" and exits non-zero on any failure.
//
// Each case goes to the page as its file's JSON text, parsed there, one page.evaluate per case:
// an object argument reaches the page as a DevTools protocol message in which Playwright wraps
// every object level of the value in 3 JSON levels and every array level in 2, and Chromium
// never answers a message nested more than 300 levels deep, so page.evaluate of a case holding
// a value ~100 levels deep (a valid event the client applies: seed 862's STATE_DELTA adds one
// of 121 levels) never returned. A string argument has no nesting. A case the page does not
// answer within --case-timeout seconds (default 30) fails by name, and the next case runs in
// a new page.
//
// node compact-check.mjs <dir> [--chromium PATH] [--case-timeout SECONDS]
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const dir = process.argv[2];
const ci = process.argv.indexOf("--chromium");
const executablePath = ci > 0 ? process.argv[ci + 1] : "/usr/bin/chromium";
const ti = process.argv.indexOf("--case-timeout");
const caseTimeout = 1000 * (ti > 0 ? Number(process.argv[ti + 1]) : 30);
if (!dir || !(caseTimeout > 0)) {
  console.log("usage: node compact-check.mjs <dir> [--chromium PATH] [--case-timeout SECONDS]");
  process.exit(2);
}
const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();

const bundle = await build({
  stdin: {
    contents: `import { runAll, patchIsStrict } from "./compact-check-core.mjs";
globalThis.aguiCheck = { runAll, patchIsStrict };`,
    resolveDir: join(here, ".."),
    sourcefile: "compact-check-entry.mjs",
  },
  bundle: true,
  write: false,
  format: "esm",
  platform: "browser",
  mainFields: ["browser", "module", "main"],
  conditions: ["import", "browser"],
  define: { "process.env.SUPPRESS_TRANSFORMATION_WARNINGS": '"true"' },
  logLevel: "error",
});
const code = bundle.outputFiles[0].text;
if (!code.includes("fast-json-patch/module/") && !/node_modules\/fast-json-patch\/index\.mjs/.test(code)) {
  // esbuild names each bundled file in a comment: the ES module build must be the one inside.
  console.log("FAIL: the bundle does not contain fast-json-patch's ES module");
  process.exit(1);
}

// The flags Chromium needs on this machine: no sandbox as root, and no background traffic.
const args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const profile = mkdtempSync(join(tmpdir(), "agui-compact-check-"));
let context;
let code_ = 1;
try {
  context = await chromium.launchPersistentContext(profile, { executablePath, headless: true, args, timeout: 60000 });
  const pageErrors = [];
  // newPage opens a page with the check loaded (the first one, and again after a case hung).
  const newPage = async () => {
    const page = await context.newPage();
    page.on("pageerror", (err) => pageErrors.push(String(err)));
    await page.addScriptTag({ content: `console.warn = () => {}; console.error = () => {};\n${code}`, type: "module" });
    await page.waitForFunction(() => globalThis.aguiCheck !== undefined, null, { timeout: 60000 });
    return page;
  };
  let page = await newPage();
  if (!(await page.evaluate(() => globalThis.aguiCheck.patchIsStrict()))) {
    console.log("FAIL: the browser bundle's fast-json-patch is not in strict mode");
  } else {
    let passed = 0;
    let failed = 0;
    for (const f of files) {
      const text = readFileSync(join(dir, f), "utf8");
      let timer;
      const hung = new Promise((resolve) => { timer = setTimeout(() => resolve(null), caseTimeout); });
      const run = page.evaluate((t) => globalThis.aguiCheck.runAll([JSON.parse(t)], "browser"), text);
      const r = await Promise.race([run.catch((e) => ({ error: String(e).split("\n")[0] })), hung]);
      clearTimeout(timer);
      if (r === null || r.error !== undefined) {
        failed++;
        const why = r === null ? `no answer from the page in ${caseTimeout / 1000}s (the case hung)` : `page.evaluate failed: ${r.error}`;
        console.log(`FAIL [browser] ${JSON.parse(text).name}\n  ${why}`);
        await page.close().catch(() => {});
        page = await newPage();
        continue;
      }
      for (const line of r.report) console.log(line);
      passed += r.passed;
      failed += r.failed;
    }
    for (const e of pageErrors) console.log(`page error: ${e}`);
    console.log(`${passed} passed, ${failed} failed`);
    code_ = failed === 0 && passed > 0 && pageErrors.length === 0 ? 0 : 1;
  }
} finally {
  await context?.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code_);
