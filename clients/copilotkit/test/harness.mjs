// Real parts for the tests: the agui-proxy and demo-agent binaries built from this repository
// (go build), a private redis-server on a free port, and CopilotKit runtime instances as child
// processes (runtime-server.mjs). Every process is started here and stopped by the test that
// owns it (stopAll in an after hook).
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, "..", "..", "..");
const children = new Set();
const tmpDirs = [];
// A test process that dies without its after hooks still takes its children with it.
process.on("exit", () => {
  for (const c of children) c.kill("SIGKILL");
});

/** A free TCP port on 127.0.0.1 (released before it is used: fine on a test machine). */
export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Builds cmd/agui-proxy and cmd/demo-agent into a temporary directory and returns it. */
export function buildBinaries() {
  const dir = mkdtempSync(join(tmpdir(), "agui-ck-bin-"));
  tmpDirs.push(dir);
  execFileSync("go", ["build", "-o", dir + "/", "./cmd/agui-proxy", "./cmd/demo-agent"], { cwd: repoRoot, stdio: "inherit" });
  return dir;
}

/**
 * Starts a child process and resolves once a line of its output matches ready (the match is
 * returned); rejects if it exits first or does not get ready within timeoutMs.
 */
export function start(name, cmd, args, { env = {}, ready, timeoutMs = 60000 } = {}) {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  child.name = name;
  child.output = "";
  child.exited = new Promise((resolve) => child.once("exit", (code, signal) => {
    children.delete(child);
    resolve({ code, signal });
  }));
  return new Promise((resolve, reject) => {
    if (!ready) {
      child.stdout.setEncoding("utf8").on("data", (c) => (child.output += c));
      child.stderr.setEncoding("utf8").on("data", (c) => (child.output += c));
      resolve({ child, match: null });
      return;
    }
    const timer = setTimeout(() => reject(new Error(`${name} not ready after ${timeoutMs}ms:\n${child.output}`)), timeoutMs);
    const onData = (chunk) => {
      child.output += chunk;
      const m = ready && child.output.match(ready);
      if (m) {
        clearTimeout(timer);
        resolve({ child, match: m });
      }
    };
    child.stdout.setEncoding("utf8").on("data", onData);
    child.stderr.setEncoding("utf8").on("data", onData);
    child.exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${child.output}`));
    });
  });
}

/** Polls url until it answers 200 (any status with anyStatus). */
export async function waitHttp(url, { timeoutMs = 30000, anyStatus = false } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(url);
      await res.body?.cancel();
      if (res.ok || anyStatus) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not answer 200 within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Kills child with signal and waits for it to exit. */
export async function kill(child, signal = "SIGKILL") {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  await child.exited;
}

/** Starts redis-server (no persistence) on a free port; returns its redis:// URL. */
export async function startRedis() {
  const port = await freePort();
  await start("redis-server", "redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    ready: /Ready to accept connections/,
  });
  return `redis://127.0.0.1:${port}/0`;
}

/** Starts the demo agent; returns its URL. */
export async function startDemo(bin) {
  const port = await freePort();
  const { child } = await start("demo-agent", join(bin, "demo-agent"), [], { env: { DEMO_LISTEN: `127.0.0.1:${port}` } });
  const url = `http://127.0.0.1:${port}/`;
  await waitHttp(url, { anyStatus: true }).catch((err) => {
    throw new Error(`${err.message}\n${child.output}`);
  });
  return url;
}

/**
 * Starts agui-proxy in front of upstream with the Redis store (routes: AGUI_ROUTES instead,
 * e.g. "/agents/a=http://...,/agents/b=http://..."); returns its URL.
 */
export async function startProxy(bin, { upstream, redisUrl, identityHeader, routes = "" }) {
  const port = await freePort();
  const { child } = await start("agui-proxy", join(bin, "agui-proxy"), [], {
    env: {
      AGUI_LISTEN: `127.0.0.1:${port}`,
      AGUI_UPSTREAM: upstream,
      AGUI_REDIS_URL: redisUrl,
      AGUI_IDENTITY_HEADER: identityHeader,
      AGUI_ROUTES: routes,
      AGUI_LOG_LEVEL: "warn",
    },
  });
  const url = `http://127.0.0.1:${port}/`;
  await waitHttp(url + "readyz").catch((err) => {
    throw new Error(`${err.message}\n${child.output}`);
  });
  return { url, child };
}

/**
 * Starts one CopilotKit runtime instance (runtime-server.mjs; bind: "fetch" or "node", how the
 * runner learns the inbound request); returns { url, child }.
 */
export async function startRuntime(proxyUrl, identityHeader, bind = "fetch") {
  const { child, match } = await start(
    "copilotkit-runtime",
    process.execPath,
    [join(here, "runtime-server.mjs"), "--proxy", proxyUrl, "--identity-header", identityHeader, "--bind", bind],
    { env: { COPILOTKIT_TELEMETRY_DISABLED: "true", DO_NOT_TRACK: "1", NODE_ENV: "production" }, ready: /listening (\S+)/ },
  );
  return { url: match[1], child };
}

/** Kills every process still running and removes the temporary directories. */
export async function stopAll() {
  await Promise.all([...children].map((c) => kill(c, "SIGKILL")));
  for (const d of tmpDirs.splice(0)) rmSync(d, { recursive: true, force: true });
}
