import { AsyncLocalStorage } from "node:async_hooks";
import { Observable } from "rxjs";
import type {
  AgentRunner,
  AgentRunnerConnectRequest,
  AgentRunnerIsRunningRequest,
  AgentRunnerRunRequest,
  AgentRunnerStopRequest,
} from "@copilotkit/runtime/v2";
import { readSse } from "./sse.js";

export { readSse } from "./sse.js";
export type { SseEvent } from "./sse.js";

/** An AG-UI event as CopilotKit's runner interface carries it. */
export type AgentEvent = ReturnType<AgentRunner["run"]> extends Observable<infer E> ? E : never;

/** Headers in any of the shapes a server framework hands them over. */
export type HeadersLike =
  | Headers
  | Record<string, string | string[] | undefined>
  | Iterable<[string, string]>;

/** Options of {@link AguiProxyAgentRunner}. */
export interface AguiProxyAgentRunnerOptions {
  /**
   * The agents given to the CopilotRuntime, each an AG-UI `HttpAgent` whose `url` is its route
   * on agui-proxy (the proxy, not the agent behind it). The runner reads every agent's `url` as
   * that agent's route. Use {@link routes} instead when the runtime's agents are a factory.
   */
  agents?: Record<string, unknown>;
  /** Route URL on agui-proxy per CopilotKit agent id (e.g. `{ default: "http://agui-proxy:8080/" }`). */
  routes?: Record<string, string>;
  /**
   * The proxy's attach prefix (`AGUI_ATTACH_PREFIX`) relative to a route: `agui/` by default,
   * so a route at `http://p:8080/agents/a/` has its endpoints under `http://p:8080/agents/a/agui/`.
   */
  attachPrefix?: string;
  /**
   * The proxy's `AGUI_IDENTITY_HEADER` (e.g. `x-agui-user`). The runner sends the caller's
   * identity in it on every request: taken from the inbound request bound with
   * {@link AguiProxyAgentRunner.bind} or {@link AguiProxyAgentRunner.runWith} (through
   * {@link identity}), else from the headers CopilotKit forwards to the agent.
   */
  identityHeader?: string;
  /**
   * Derives the caller's identity from the inbound request's headers (default: the value of
   * {@link identityHeader}). Return undefined when there is none.
   */
  identity?: (headers: Headers) => string | undefined | null;
  /** Headers sent on the runner's own requests to the proxy (attach, runs tree, stop). */
  headers?: Record<string, string>;
  /** The fetch to use (default: the global fetch). */
  fetch?: typeof fetch;
  /**
   * How many times in a row `connect` resumes a dropped attach stream from its last event id
   * before it fails (default 5; 0 never resumes).
   */
  reconnects?: number;
}

/** What {@link AguiProxyAgentRunner.bind} and {@link AguiProxyAgentRunner.runWith} remember of a request. */
interface RequestContext {
  headers: Headers;
}

/** A proxy answer that was not the expected one, with the RFC 9457 `code` when it had one. */
export class AguiProxyError extends Error {
  /** The HTTP status of the proxy's answer. */
  readonly status: number;
  /** The problem's `code` (e.g. `ThreadBusy`, `IdentityRequired`), or "" when absent. */
  readonly code: string;
  constructor(message: string, status: number, code: string) {
    super(message);
    this.name = "AguiProxyError";
    this.status = status;
    this.code = code;
  }
}

/** A run of the proxy's runs tree (`GET {prefix}threads/{thread}/runs`). */
interface RunView {
  runId: string;
  parentRunId?: string;
  status: string;
}

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);
const REPLAY_COMPLETE = "agui-proxy.replay_complete";

/**
 * A CopilotKit `AgentRunner` that keeps every thread in agui-proxy instead of process memory,
 * so threads survive runtime restarts and every runtime instance sees every thread.
 *
 * - `run` runs the request's agent, an `HttpAgent` pointed at the agent's route on the proxy:
 *   the proxy records the run, sets `parentRunId` and the normalized `input` on `RUN_STARTED`,
 *   and keeps reading the agent when the runtime goes away. CopilotKit's per-request middleware
 *   on the agent still applies.
 * - `connect` reads the thread's attach stream: the compacted history of the thread, then the
 *   live tail of a run in progress; it ends when that run ends (at once when none is running).
 * - `isRunning` and `stop` use the thread's runs tree and the proxy's stop endpoint, so a run
 *   started through one instance can be stopped through another.
 */
export class AguiProxyAgentRunner implements AgentRunner {
  private readonly routes = new Map<string, string>();
  private readonly attachPrefix: string;
  private readonly identityHeader?: string;
  private readonly identityOf: (headers: Headers) => string | undefined | null;
  private readonly staticHeaders: Record<string, string>;
  private readonly fetchImpl: typeof fetch;
  private readonly reconnects: number;
  private readonly context = new AsyncLocalStorage<RequestContext>();

  constructor(options: AguiProxyAgentRunnerOptions) {
    for (const [id, agent] of Object.entries(options.agents ?? {})) {
      const url = (agent as { url?: unknown } | null)?.url;
      if (typeof url !== "string") {
        throw new TypeError(`AguiProxyAgentRunner: agent "${id}" has no url: only an HttpAgent pointed at agui-proxy can run through it`);
      }
      this.routes.set(id, normalizeRoute(url, id));
    }
    for (const [id, url] of Object.entries(options.routes ?? {})) this.routes.set(id, normalizeRoute(url, id));
    if (this.routes.size === 0) throw new TypeError("AguiProxyAgentRunner: give agents or routes");
    this.attachPrefix = (options.attachPrefix ?? "agui/").replace(/^\/+/, "").replace(/\/*$/, "/");
    this.identityHeader = options.identityHeader?.toLowerCase();
    const header = this.identityHeader;
    this.identityOf = options.identity ?? ((h) => (header ? h.get(header) : undefined));
    this.staticHeaders = { ...(options.headers ?? {}) };
    const f = options.fetch ?? globalThis.fetch;
    this.fetchImpl = (input, init) => f(input, init);
    this.reconnects = Math.max(0, options.reconnects ?? 5);
  }

  /**
   * Wraps a fetch-style handler (what `createCopilotRuntimeHandler` returns) so the runner knows
   * the request it serves: `stop` and `isRunning` get no headers from CopilotKit, and the
   * identity is read from the inbound request here.
   */
  bind<A extends unknown[], R>(handler: (request: Request, ...rest: A) => R): (request: Request, ...rest: A) => R {
    return (request, ...rest) => this.runWith(request.headers, () => handler(request, ...rest));
  }

  /**
   * Runs fn (and everything it starts) with headers as the inbound request's, for servers that
   * are not fetch-style: `app.use((req, res, next) => runner.runWith(req.headers, next))`.
   */
  runWith<R>(headers: HeadersLike, fn: () => R): R {
    return this.context.run({ headers: toHeaders(headers) }, fn);
  }

  /** See AgentRunner.run: runs the request's agent through its route on the proxy. */
  run(request: AgentRunnerRunRequest): Observable<AgentEvent> {
    const agent = request.agent as AgentRunnerRunRequest["agent"] & { url?: unknown; headers?: Record<string, string> };
    const agentId = agent.agentId ?? "default";
    const route = this.routes.get(agentId);
    if (!route) throw new Error(`AguiProxyAgentRunner: no proxy route for agent "${agentId}"`);
    if (typeof agent.url !== "string" || normalizeRoute(agent.url, agentId) !== route) {
      throw new Error(`AguiProxyAgentRunner: agent "${agentId}" must be an HttpAgent with url ${route} (it has ${String(agent.url)})`);
    }
    // HttpAgent posts its own threadId, messages and state (CopilotKit's run handler sets them
    // from the input); the thread is the request's.
    agent.threadId = request.threadId;
    withCancelledAsRunError(agent as unknown as { fetch?: FetchLike });
    const identity = this.callerIdentity();
    if (this.identityHeader && identity) {
      agent.headers = withHeader(agent.headers ?? {}, this.identityHeader, identity);
    }
    return new Observable<AgentEvent>((sub) => {
      let ended = false;
      let done = false;
      const finish = (error?: unknown) => {
        if (done) return;
        done = true;
        if (!ended && error !== undefined) {
          sub.next(runError(error, request.input));
        }
        sub.complete();
      };
      agent
        .runAgent(request.input, {
          onEvent: ({ event }) => {
            if (TERMINAL.has(event.type)) ended = true;
            sub.next(event as AgentEvent);
          },
        })
        .then(
          () => finish(ended ? undefined : new Error("the agent's stream ended without RUN_FINISHED")),
          (err: unknown) => finish(err),
        );
      return () => {
        // The browser went away. The proxy reads the run to its end and records it, so the
        // runtime's own connection to the proxy is no longer needed.
        if (!done) {
          done = true;
          try {
            agent.abortRun();
          } catch {
            // already finished
          }
        }
      };
    });
  }

  /**
   * See AgentRunner.connect: the thread's compacted history, then the live tail of a run in
   * progress. A connection that drops in the live tail (an error, or the end of the stream
   * before the run's RUN_FINISHED/RUN_ERROR) is resumed from the last event id with
   * Last-Event-ID, after a short backoff, at most {@link AguiProxyAgentRunnerOptions.reconnects}
   * times in a row: no event is passed on twice and none is skipped. If the proxy cannot resume
   * exactly it sends the full history again with a CUSTOM `agui-proxy.resume_failed` event, which
   * is passed on.
   */
  connect(request: AgentRunnerConnectRequest): Observable<AgentEvent> {
    const route = this.routeFor(request.agentId);
    const url = this.attachUrl(route, request.threadId, "/events");
    return new Observable<AgentEvent>((sub) => {
      const abort = new AbortController();
      (async () => {
        let lastId = ""; // where a reconnect resumes: the last event id, or the prelude's cursor
        let ended = false; // the last event passed on ends a run
        for (let failures = 0; ; ) {
          const headers = this.proxyHeaders(request.headers);
          headers.set("accept", "text/event-stream");
          if (lastId) headers.set("last-event-id", lastId);
          let dropped: unknown;
          try {
            const res = await this.fetchImpl(url, { headers, signal: abort.signal });
            if (res.status === 404 && !lastId) {
              // Unknown, or another identity's (the proxy gives both the same answer): nothing to restore.
              await res.body?.cancel();
              sub.complete();
              return;
            }
            if (!res.ok || !res.body) throw await problem(res, `connect to thread ${request.threadId}`);
            for await (const ev of readSse(res.body)) {
              if (ev.id) lastId = ev.id;
              const event = JSON.parse(ev.data) as AgentEvent & { name?: unknown; value?: { cursor?: unknown } };
              failures = 0;
              if (event.type === "CUSTOM" && event.name === REPLAY_COMPLETE) {
                if (typeof event.value?.cursor === "string" && event.value.cursor) lastId = event.value.cursor;
                continue;
              }
              ended = TERMINAL.has(event.type);
              sub.next(cancelledAsRunError(event));
            }
            if (ended || !lastId) {
              sub.complete();
              return;
            }
            dropped = new Error(`the attach stream of thread ${request.threadId} ended before its run did`);
          } catch (err) {
            if (abort.signal.aborted) return;
            // A refusal or a malformed event is an answer, not a drop (a 5xx from a draining
            // replica or a load balancer is retried like a drop).
            if ((err instanceof AguiProxyError && err.status < 500) || err instanceof SyntaxError || !lastId) throw err;
            dropped = err;
          }
          if (++failures > this.reconnects) throw dropped;
          await sleep(Math.min(100 * 2 ** (failures - 1), 2000) * (0.5 + Math.random() / 2), abort.signal);
          if (abort.signal.aborted) return;
        }
      })().catch((err: unknown) => {
        if (!abort.signal.aborted) sub.error(err);
      });
      return () => abort.abort();
    });
  }

  /** See AgentRunner.isRunning: whether a run of the thread is running, on any instance. */
  async isRunning(request: AgentRunnerIsRunningRequest): Promise<boolean> {
    const found = await this.findThread(request.threadId);
    return !!found && found.runs.some((r) => r.status === "running");
  }

  /**
   * See AgentRunner.stop: stops the thread's running run (only `runId` when given) through the
   * proxy, which ends it as cancelled for every client following it; CopilotKit gets the
   * ending it knows, RUN_ERROR code CANCELLED (cancelledAsRunError: its @ag-ui/core 0.0.59
   * fails the 1.0 ending, RUN_FINISHED outcome cancelled). False when
   * nothing of the thread was running.
   */
  async stop(request: AgentRunnerStopRequest): Promise<boolean> {
    const found = await this.findThread(request.threadId);
    if (!found) return false;
    const running = found.runs.filter((r) => r.status === "running" && (request.runId === undefined || r.runId === request.runId));
    let stopped = false;
    for (const run of running) {
      const res = await this.fetchImpl(this.attachUrl(found.route, request.threadId, `/runs/${encodeURIComponent(run.runId)}/stop`), {
        method: "POST",
        headers: this.proxyHeaders(),
      });
      if (res.ok) {
        await res.body?.cancel();
        stopped = true;
        continue;
      }
      const err = await problem(res, `stop run ${run.runId}`);
      if (err.code !== "RunNotRunning" && res.status !== 409) throw err; // 409: it ended meanwhile
    }
    return stopped;
  }

  /** The route of agentId (the only route when the runtime has one agent). */
  private routeFor(agentId: string | undefined): string {
    const route = agentId !== undefined ? this.routes.get(agentId) : this.routes.size === 1 ? [...this.routes.values()][0] : undefined;
    if (!route) throw new Error(`AguiProxyAgentRunner: no proxy route for agent "${agentId ?? ""}"`);
    return route;
  }

  /** The thread's route and runs: the first route whose runs tree knows the thread, or null. */
  private async findThread(threadId: string): Promise<{ route: string; runs: RunView[] } | null> {
    for (const route of new Set(this.routes.values())) {
      const res = await this.fetchImpl(this.attachUrl(route, threadId, "/runs"), { headers: this.proxyHeaders() });
      if (res.status === 404 || res.status === 409) {
        await res.body?.cancel(); // unused on this route for this identity (each has its own thread ids)
        continue;
      }
      if (!res.ok) throw await problem(res, `runs of thread ${threadId}`);
      const body = (await res.json()) as { runs?: RunView[] };
      return { route, runs: body.runs ?? [] };
    }
    return null;
  }

  private attachUrl(route: string, threadId: string, tail: string): string {
    return `${route}${this.attachPrefix}threads/${encodeURIComponent(threadId)}${tail}`;
  }

  /** The caller's identity from the bound inbound request, if any. */
  private callerIdentity(): string | undefined {
    const ctx = this.context.getStore();
    return (ctx && this.identityOf(ctx.headers)) || undefined;
  }

  /**
   * Headers of the runner's own proxy requests: the static ones, then those CopilotKit forwards
   * (connect), then the caller's identity from the bound request. With an identity header
   * configured and no identity at all, the request is refused here rather than sent anonymous.
   */
  private proxyHeaders(forwarded?: Record<string, string>): Headers {
    const h = new Headers(this.staticHeaders);
    for (const [k, v] of Object.entries(forwarded ?? {})) h.set(k, v);
    if (this.identityHeader) {
      const identity = this.callerIdentity();
      if (identity) h.set(this.identityHeader, identity);
      if (!h.get(this.identityHeader)) {
        throw new AguiProxyError(
          `AguiProxyAgentRunner: no caller identity for ${this.identityHeader}: wrap the runtime's handler with runner.bind() (or runner.runWith())`,
          401,
          "IdentityRequired",
        );
      }
    }
    return h;
  }
}

/** Resolves after ms, or at once when signal aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}

function normalizeRoute(url: string, id: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    u = new URL("invalid:");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new TypeError(`AguiProxyAgentRunner: route of agent "${id}" is not an absolute http(s) URL: ${url}`);
  }
  if (!u.pathname.endsWith("/")) u.pathname += "/";
  u.search = "";
  u.hash = "";
  return u.toString();
}

function toHeaders(h: HeadersLike): Headers {
  if (h instanceof Headers) return h;
  if (Symbol.iterator in Object(h)) return new Headers([...(h as Iterable<[string, string]>)]);
  const out = new Headers();
  for (const [k, v] of Object.entries(h as Record<string, string | string[] | undefined>)) {
    if (Array.isArray(v)) for (const x of v) out.append(k, x);
    else if (v !== undefined) out.set(k, v);
  }
  return out;
}

/** headers with name (any case) replaced by value. */
function withHeader(headers: Record<string, string>, name: string, value: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() !== name) out[k] = v;
  out[name] = value;
  return out;
}

type FetchLike = (url: string, init: RequestInit) => Promise<Response>;

/** Marks an agent whose fetch withCancelledAsRunError wrapped. */
const translating = Symbol("agui-proxy.cancelledAsRunError");

/**
 * The proxy ends a stopped run as AG-UI 1.0 does, with RUN_FINISHED outcome "cancelled";
 * CopilotKit 1.75.0's @ag-ui/core 0.0.59 knows only the outcomes "success" and "interrupt" and
 * fails the whole run on it. CopilotKit gets the ending it knows instead: RUN_ERROR code
 * CANCELLED (what the proxy sends with AGUI_STOP_ENDING=error). Any other event is unchanged.
 */
export function cancelledAsRunError(event: AgentEvent): AgentEvent {
  const e = event as unknown as { type?: unknown; outcome?: { type?: unknown }; threadId?: unknown; runId?: unknown };
  if (e.type !== "RUN_FINISHED" || e.outcome?.type !== "cancelled") return event;
  return { type: "RUN_ERROR", message: "agui-proxy: the run was stopped on request", code: "CANCELLED" } as unknown as AgentEvent;
}

/**
 * Wraps agent.fetch (an HttpAgent's) once, so that the event streams it reads from the proxy
 * have their cancelled RUN_FINISHED turned into RUN_ERROR CANCELLED (cancelledAsRunError)
 * before the agent's own parser sees them. Frames are rewritten whole; every other byte is
 * passed on as it came.
 */
function withCancelledAsRunError(agent: { fetch?: FetchLike; [translating]?: boolean }): void {
  if (agent[translating] || typeof agent.fetch !== "function") return;
  const inner = agent.fetch.bind(agent);
  agent.fetch = async (url, init) => {
    const res = await inner(url, init);
    if (!res.body || !(res.headers.get("content-type") ?? "").includes("text/event-stream")) return res;
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let pending = "";
    const rewrite = (frame: string): string => {
      if (!frame.includes('"cancelled"')) return frame;
      const lines = frame.split("\n");
      const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      let event: AgentEvent;
      try {
        event = JSON.parse(data) as AgentEvent;
      } catch {
        return frame;
      }
      const out = cancelledAsRunError(event);
      if (out === event) return frame;
      return [`data: ${JSON.stringify(out)}`, ...lines.filter((l) => !l.startsWith("data:"))].join("\n");
    };
    const body = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          pending += decoder.decode(chunk, { stream: true });
          const frames = pending.split("\n\n");
          pending = frames.pop() ?? "";
          if (frames.length) controller.enqueue(encoder.encode(frames.map((f) => rewrite(f) + "\n\n").join("")));
        },
        flush(controller) {
          pending += decoder.decode();
          if (pending) controller.enqueue(encoder.encode(rewrite(pending)));
        },
      }),
    );
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  agent[translating] = true;
}

/**
 * The RUN_ERROR that ends a run whose stream failed without one: the proxy's problem code when
 * it refused the run (HttpAgent's errors carry the answer's status and body), else
 * AGUI_PROXY_RUN_FAILED.
 */
function runError(error: unknown, input: { threadId: string; runId: string }): AgentEvent {
  const message = error instanceof Error ? error.message : String(error);
  let code = "AGUI_PROXY_RUN_FAILED";
  const payload = (error as { payload?: unknown } | null)?.payload;
  if (typeof payload === "string") {
    try {
      const p = JSON.parse(payload) as { code?: unknown };
      if (typeof p.code === "string" && p.code) code = p.code;
    } catch {
      // not a problem document
    }
  }
  return { type: "RUN_ERROR", message, code, threadId: input.threadId, runId: input.runId } as unknown as AgentEvent;
}

async function problem(res: Response, what: string): Promise<AguiProxyError> {
  let code = "";
  let detail = "";
  try {
    const text = await res.text();
    try {
      const p = JSON.parse(text) as { code?: unknown; title?: unknown; detail?: unknown };
      code = typeof p.code === "string" ? p.code : "";
      detail = [p.title, p.detail].filter((x) => typeof x === "string").join(": ");
    } catch {
      detail = text.slice(0, 200);
    }
  } catch {
    // body unreadable: the status says enough
  }
  return new AguiProxyError(`agui-proxy: ${what}: ${res.status}${code ? " " + code : ""}${detail ? " (" + detail + ")" : ""}`, res.status, code);
}
