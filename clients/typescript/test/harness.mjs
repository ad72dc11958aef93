// Test harness: builds and starts the real agui-proxy and demo-agent binaries on free
// loopback ports, and a cutting relay in front of the proxy that kills a client connection in
// the middle of a chosen event's frame (the browser or Node client sees a network error; the
// proxy sees its client go away and keeps the run going).
import { execFileSync, spawn } from "node:child_process";
import { createReadStream, existsSync, mkdtempSync, statSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root (clients/typescript/test → ../../..). */
export const repoRoot = join(here, "..", "..", "..");

let binDir;
/** Builds cmd/agui-proxy and cmd/demo-agent once per process; returns their directory. */
export function buildBinaries() {
  if (binDir) return binDir;
  binDir = process.env.AGUI_BIN_DIR || mkdtempSync(join(tmpdir(), "agui-ts-bin-"));
  if (!existsSync(join(binDir, "agui-proxy")) || !process.env.AGUI_BIN_DIR) {
    execFileSync("go", ["build", "-o", binDir + "/", "./cmd/agui-proxy", "./cmd/demo-agent"], { cwd: repoRoot, stdio: "inherit" });
  }
  return binDir;
}

/** A free loopback port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitHealthy(url, child, name) {
  for (let i = 0; i < 400; i++) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`);
    try {
      const res = await fetch(url);
      if (res.ok || res.status === 404 || res.status === 405) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${name} did not answer at ${url}`);
}

/**
 * Starts demo-agent and agui-proxy (in-memory store unless env says otherwise). Returns the
 * proxy's URL and a stop function that ends both processes.
 */
export async function startServers(proxyEnv = {}) {
  const bin = buildBinaries();
  const agentPort = await freePort();
  const proxyPort = await freePort();
  const logs = [];
  const agent = spawn(join(bin, "demo-agent"), [], {
    env: { ...process.env, DEMO_LISTEN: `127.0.0.1:${agentPort}`, DEMO_LOG_LEVEL: "warn" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  agent.stderr.on("data", (d) => logs.push(`agent: ${d}`));
  const proxy = spawn(join(bin, "agui-proxy"), [], {
    env: {
      ...process.env,
      AGUI_UPSTREAM: `http://127.0.0.1:${agentPort}`,
      AGUI_LISTEN: `127.0.0.1:${proxyPort}`,
      AGUI_LOG_LEVEL: "warn",
      ...proxyEnv,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  proxy.stderr.on("data", (d) => logs.push(`proxy: ${d}`));
  const stop = async () => {
    for (const c of [proxy, agent]) {
      if (c.exitCode === null) {
        const exited = new Promise((r) => c.once("exit", r));
        c.kill("SIGKILL");
        await exited;
      }
    }
  };
  try {
    await waitHealthy(`http://127.0.0.1:${agentPort}/healthz`, agent, "demo-agent");
    await waitHealthy(`http://127.0.0.1:${proxyPort}/healthz`, proxy, "agui-proxy");
  } catch (e) {
    await stop();
    throw new Error(`${e.message}\n${logs.join("")}`);
  }
  return { proxyUrl: `http://127.0.0.1:${proxyPort}/`, logs, stop };
}

const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".map": "application/json" };

/**
 * A relay in front of target (the proxy). A request with the header
 * `x-test-cut: <token>;<EVENT_TYPE>;<n>` has its response cut in the middle of the n-th frame
 * of that event type: the bytes before are sent, then the client socket is destroyed. Each
 * token cuts once; later requests with it pass through (the resume). With
 * `x-test-epoch: <token>` as well, the ids of that first response get another epoch, as if the
 * store had lost and re-created the run: the resume cannot be exact. GET /__app/<file> serves
 * files from staticDir (the browser page), so the page and the proxy share an origin.
 * `refuse = true` makes it destroy every new connection (a proxy that is down).
 */
export async function startRelay(target, staticDir) {
  const t = new URL(target);
  const used = new Set();
  const cuts = [];
  const requests = [];
  const sockets = new Set();
  const relay = { refuse: false, cuts, requests };
  const server = http.createServer((req, res) => {
    if (staticDir && req.url.startsWith("/__app/")) {
      const file = normalize(join(staticDir, req.url.slice("/__app/".length).split("?")[0]));
      if (!file.startsWith(staticDir) || !existsSync(file) || !statSync(file).isFile()) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { "Content-Type": TYPES[extname(file)] ?? "application/octet-stream", "Cache-Control": "no-store" });
      createReadStream(file).pipe(res);
      return;
    }
    const spec = req.headers["x-test-cut"];
    let cut;
    if (typeof spec === "string") {
      const [token, type, n] = spec.split(";");
      if (!used.has(token)) {
        used.add(token);
        cut = { token, marker: Buffer.from(`"type":"${type}"`), n: Number(n) || 1 };
      }
    }
    const headers = { ...req.headers };
    delete headers["x-test-cut"];
    delete headers["x-test-epoch"];
    const rewrite = cut && req.headers["x-test-epoch"] !== undefined;
    let carry = "";
    // Rewrites complete lines only (an id line split across chunks waits for its end).
    const epochs = (chunk, end = false) => {
      if (!rewrite) return chunk;
      const text = carry + chunk.toString("utf8");
      const cutAt = end ? text.length : text.lastIndexOf("\n") + 1;
      carry = text.slice(cutAt);
      return Buffer.from(text.slice(0, cutAt).replace(/^(id: .*:)[a-z2-7]{8}(:\d+)$/gm, "$1aaaaaaaa$2"));
    };
    requests.push({ method: req.method, url: req.url, lastEventId: req.headers["last-event-id"], cut: !!cut });
    const up = http.request(
      { host: t.hostname, port: t.port, method: req.method, path: req.url, headers },
      (upRes) => {
        res.writeHead(upRes.statusCode, upRes.headers);
        res.flushHeaders();
        let seen = Buffer.alloc(0);
        let written = 0;
        upRes.on("data", (raw) => {
          const chunk = epochs(raw);
          if (!cut) {
            res.write(chunk);
            return;
          }
          seen = Buffer.concat([seen, chunk]);
          let at = -1;
          let from = 0;
          for (let k = 0; k < cut.n; k++) {
            at = seen.indexOf(cut.marker, from);
            if (at < 0) break;
            from = at + 1;
          }
          if (at < 0) {
            res.write(seen.subarray(written));
            written = seen.length;
            return;
          }
          // Cut inside the frame: after the marker, before the frame's end.
          const end = at + cut.marker.length + 3;
          if (end > written) res.write(seen.subarray(written, end));
          cuts.push({ token: cut.token, at: end, frame: seen.subarray(Math.max(0, seen.lastIndexOf("\n\n", at) + 2), end).toString() });
          cut = undefined;
          upRes.destroy();
          // Let the bytes reach the client, then kill the connection.
          setTimeout(() => req.socket.destroy(), 20);
        });
        upRes.on("end", () => res.end(epochs(Buffer.alloc(0), true)));
        upRes.on("error", () => res.destroy());
      },
    );
    up.on("error", () => res.destroy());
    req.pipe(up);
    res.on("close", () => up.destroy());
  });
  server.on("connection", (s) => {
    if (relay.refuse) {
      s.destroy();
      return;
    }
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  const port = await freePort();
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  relay.url = `http://127.0.0.1:${port}/`;
  relay.close = () =>
    new Promise((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
  return relay;
}

/** A run's RunAgentInput pieces for a demo-agent scenario, paced by intervalMs. */
export function scenarioInput(scenario, intervalMs = 15) {
  return {
    messages: [{ id: "u1", role: "user", content: scenario }],
    forwardedProps: { scenario, intervalMs },
  };
}

/** Replaces the thread id in events so runs of different threads compare equal. */
export function normalizeEvents(events, threadId) {
  return JSON.parse(JSON.stringify(events).split(JSON.stringify(threadId).slice(1, -1)).join("THREAD"));
}
