// `npm pack` produces a tarball an app can install: it is installed into a fresh app directory
// (its peer dependencies come along), then imported as ESM and required as CommonJS, and a
// TypeScript file using it type-checks under both "bundler" and "node16" resolution.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, test } from "node:test";

const pkgRoot = join(dirname(fileURLToPath(import.meta.url)), "..");
const work = mkdtempSync(join(tmpdir(), "agui-ts-pack-"));
after(() => rmSync(work, { recursive: true, force: true }));

const npm = (args, cwd) => execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

test("the README's install lines name the tarball npm pack writes and the peer dependencies", () => {
  const pkg = JSON.parse(readFileSync(join(pkgRoot, "package.json"), "utf8"));
  const readme = readFileSync(join(pkgRoot, "README.md"), "utf8");
  const tarball = `${pkg.name.replace(/^@/, "").replace("/", "-")}-${pkg.version}.tgz`;
  assert.ok(readme.includes(`npm pack    # writes ${tarball} here`), `the README says npm pack writes ${tarball}`);
  const install = readme.split("\n").find((l) => l.startsWith("npm install ") && l.includes(".tgz"));
  assert.ok(install, "the README has an npm install line for the tarball");
  assert.ok(install.includes(`/clients/typescript/${tarball}`), `it installs ${tarball}: ${install}`);
  for (const [dep, range] of Object.entries(pkg.peerDependencies)) {
    assert.ok(install.includes(`${dep}@${range}`), `it installs the peer dependency ${dep}@${range}: ${install}`);
  }
});

test("npm pack → npm install → import, require, type-check", () => {
  npm(["pack", "--pack-destination", work], pkgRoot);
  const tarball = readdirSync(work).find((f) => f.endsWith(".tgz"));
  assert.ok(tarball, "npm pack wrote a tarball");
  const pkg = JSON.parse(readFileSync(join(pkgRoot, "package.json"), "utf8"));
  assert.ok(readFileSync(join(pkgRoot, "README.md"), "utf8").includes(`clients/typescript/${tarball} `), `the README installs ${tarball}, the file npm pack wrote (${pkg.version})`);
  const files = execFileSync("tar", ["-tzf", join(work, tarball)], { encoding: "utf8" }).split("\n");
  for (const f of ["package/dist/index.mjs", "package/dist/index.cjs", "package/dist/index.d.ts", "package/dist/index.d.cts", "package/README.md"]) {
    assert.ok(files.includes(f), `the tarball has ${f}`);
  }
  assert.ok(!files.some((f) => f.startsWith("package/test/") || f.startsWith("package/src/")), "no tests or sources in the tarball");
  const app = join(work, "app");
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  npm(["install", "--no-audit", "--no-fund", "--prefer-offline", join(work, tarball), "@ag-ui/client@1.0.0", "typescript@7.0.2"], app);
  const esm = execFileSync(process.execPath, ["--input-type=module", "-e",
    `import { ResumableHttpAgent } from "@agui-proxy/client"; import { HttpAgent } from "@ag-ui/client";
     const a = new ResumableHttpAgent({ url: "http://127.0.0.1:1/agents/a" });
     console.log(JSON.stringify({ sub: a instanceof HttpAgent, attach: a.attachUrl, caps: await a.getCapabilities() }));`], { cwd: app, encoding: "utf8" });
  assert.deepEqual(JSON.parse(esm), { sub: true, attach: "http://127.0.0.1:1/agents/a/agui/", caps: { transport: { streaming: true, resumable: true } } });
  const cjs = execFileSync(process.execPath, ["-e",
    `const { ResumableHttpAgent, parseEventId } = require("@agui-proxy/client"); const { HttpAgent } = require("@ag-ui/client");
     console.log(JSON.stringify({ sub: new ResumableHttpAgent({ url: "http://x/" }) instanceof HttpAgent, id: parseEventId("r:abcdefgh:3") }));`], { cwd: app, encoding: "utf8" });
  assert.deepEqual(JSON.parse(cjs), { sub: true, id: { runId: "r", epoch: "abcdefgh", seq: 3 } });
  writeFileSync(join(app, "use.ts"), `import { ResumableHttpAgent, type ReconnectInfo } from "@agui-proxy/client";
const agent = new ResumableHttpAgent({ url: "http://localhost:8080/", threadId: "t", onReconnect: (i: ReconnectInfo) => console.log(i.attempt) });
export async function main(): Promise<number> {
  await agent.runAgent({ runId: "r1" });
  const tree = await agent.runs();
  const caps = await agent.getCapabilities();
  return tree.runs.length + (caps.transport?.resumable ? 1 : 0);
}
`);
  for (const resolution of [["--module", "esnext", "--moduleResolution", "bundler"], ["--module", "node16", "--moduleResolution", "node16"]]) {
    execFileSync(process.execPath, [join(app, "node_modules", "typescript", "bin", "tsc"), "--noEmit", "--strict", "--skipLibCheck", "--lib", "es2022,dom", ...resolution, "use.ts"], { cwd: app, encoding: "utf8" });
  }
});
