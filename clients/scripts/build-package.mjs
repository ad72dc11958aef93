// The build of every package under clients/: dist/index.mjs (ESM) and dist/index.cjs
// (CommonJS) bundled from src/index.ts with esbuild, type declarations by tsc (the package's
// tsconfig.json), and dist/index.d.cts beside dist/index.d.ts for `require` users. Each
// package's scripts/build.mjs names what stays external (its peer dependencies) and the
// platform; esbuild and typescript come from the package's own node_modules.
import { execFileSync } from "node:child_process";
import { copyFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Builds the package at root (a file: URL or path of its folder).
 * @param {URL | string} root
 * @param {{ external: string[], platform: "neutral" | "node" | "browser" }} options
 */
export async function buildPackage(root, { external, platform }) {
  const dir = root instanceof URL ? fileURLToPath(root) : root;
  const { build } = createRequire(join(dir, "package.json"))("esbuild");
  process.chdir(dir);
  rmSync("dist", { recursive: true, force: true });

  const common = {
    entryPoints: ["src/index.ts"],
    bundle: true,
    external,
    platform,
    target: "es2020",
    sourcemap: true,
    logLevel: "warning",
  };
  await build({ ...common, format: "esm", outfile: "dist/index.mjs" });
  await build({ ...common, format: "cjs", outfile: "dist/index.cjs" });

  execFileSync(process.execPath, [join(dir, "node_modules", "typescript", "bin", "tsc"), "-p", "."], { stdio: "inherit" });
  copyFileSync("dist/index.d.ts", "dist/index.d.cts");
  console.log("built dist/index.mjs, dist/index.cjs, dist/*.d.ts");
}
