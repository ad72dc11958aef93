// compact-check.mjs <dir>: the cross-language proof for compact.Compact under Node. Node loads
// @ag-ui/client's CommonJS build, which loads fast-json-patch's CommonJS module (sloppy mode);
// browser/compact-check.mjs runs the same cases in headless Chromium with the ES module build.
// Each <dir>/*.json file is a case (see compact-check-core.mjs). Prints "N passed, M failed"
// and exits non-zero on any failure.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { patchIsStrict, runAll } from "./compact-check-core.mjs";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
console.warn = () => {};
console.error = () => {};

const dir = process.argv[2];
if (!dir) {
  console.log("usage: node compact-check.mjs <dir>");
  process.exit(2);
}
if (await patchIsStrict()) {
  console.log("FAIL: Node loaded a strict-mode fast-json-patch; expected the CommonJS build");
  process.exit(1);
}
const cases = readdirSync(dir).filter((f) => f.endsWith(".json")).sort().map((f) => JSON.parse(readFileSync(join(dir, f), "utf8")));
const { passed, failed, report } = await runAll(cases, "node");
for (const r of report) console.log(r);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
