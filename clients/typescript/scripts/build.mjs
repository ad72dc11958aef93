// Builds dist/: index.mjs (ESM) and index.cjs (CommonJS) with esbuild, type declarations with
// tsc. @ag-ui/client and rxjs stay external (peer dependencies).
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { copyFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
process.chdir(root);
rmSync("dist", { recursive: true, force: true });

const common = {
  entryPoints: ["src/index.ts"],
  bundle: true,
  external: ["@ag-ui/client", "rxjs"],
  platform: "neutral",
  target: "es2020",
  sourcemap: true,
  logLevel: "warning",
};
await build({ ...common, format: "esm", outfile: "dist/index.mjs" });
await build({ ...common, format: "cjs", outfile: "dist/index.cjs" });

execFileSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "."], { stdio: "inherit" });
copyFileSync("dist/index.d.ts", "dist/index.d.cts");
console.log("built dist/index.mjs, dist/index.cjs, dist/*.d.ts");
