// compact-check.mjs <dir>: the cross-language proof for compact.Compact in a browser. The
// shared check (../compact-check-core.mjs) is bundled with esbuild the way a browser app is
// bundled (platform browser, the `module` main field first: @ag-ui/client's dist/index.mjs and
// fast-json-patch's ES module, which runs in strict mode), loaded as a module script into
// Debian's headless Chromium (playwright-core, no downloaded browser), and run on every case
// of <dir>. Prints "N passed, M failed" and exits non-zero on any failure.
//
// node compact-check.mjs <dir> [--chromium PATH]
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
if (!dir) {
  console.log("usage: node compact-check.mjs <dir> [--chromium PATH]");
  process.exit(2);
}
const cases = readdirSync(dir).filter((f) => f.endsWith(".json")).sort().map((f) => JSON.parse(readFileSync(join(dir, f), "utf8")));

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

// Cases handed to the page per evaluate.
const casesPerEvaluate = 200;

// The flags Chromium needs on this machine: no sandbox as root, and no background traffic.
const args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const profile = mkdtempSync(join(tmpdir(), "agui-compact-check-"));
let context;
let code_ = 1;
try {
  context = await chromium.launchPersistentContext(profile, { executablePath, headless: true, args, timeout: 60000 });
  const page = context.pages()[0] ?? (await context.newPage());
  const pageErrors = [];
  page.on("pageerror", (err) => pageErrors.push(String(err)));
  await page.addScriptTag({ content: `console.warn = () => {}; console.error = () => {};\n${code}`, type: "module" });
  await page.waitForFunction(() => globalThis.aguiCheck !== undefined, null, { timeout: 60000 });
  if (!(await page.evaluate(() => globalThis.aguiCheck.patchIsStrict()))) {
    console.log("FAIL: the browser bundle's fast-json-patch is not in strict mode");
  } else {
    // In slices: one evaluate of thousands of cases (go test -cross.streams) is more than the
    // page takes in one message, and the browser closes it.
    let passed = 0;
    let failed = 0;
    for (let i = 0; i < cases.length; i += casesPerEvaluate) {
      const r = await page.evaluate((cs) => globalThis.aguiCheck.runAll(cs, "browser"), cases.slice(i, i + casesPerEvaluate));
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
