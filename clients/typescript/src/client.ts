import type { BaseEvent, Message, State } from "@ag-ui/client";
import type { Observable } from "rxjs";
import { httpError, resumableEventStream, type ReconnectInfo, type ReconnectOptions } from "./stream.js";

/** A fetch function, as HttpAgent takes it. */
export type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

/** One run of GET {prefix}threads/{thread}/runs. */
export interface RunInfo {
  runId: string;
  /** The run it continues; runs form a tree through it (branches share a parent). */
  parentRunId?: string;
  /** "running", "finished", "error", "interrupted", ... */
  status: string;
  /** Why the run ended as it did (a RUN_ERROR code), if known. */
  detail?: string;
  createdAt: string;
  updatedAt: string;
  /** Number of events recorded (the last sequence number). */
  events: number;
  /** Ranges of events the recorder could not store. */
  gaps?: Array<Record<string, unknown>>;
}

/** GET {prefix}threads/{thread}/runs. */
export interface RunsTree {
  threadId: string;
  /** The thread's latest run: the head of its current branch. */
  headRunId: string;
  /** Every run, in creation order. */
  runs: RunInfo[];
}

/** GET {prefix}threads/{thread}[?run=]: messages and state as of a run. */
export interface ThreadSnapshot {
  threadId: string;
  runId: string;
  status: string;
  messages: Message[];
  state: State;
}

/** GET {prefix}threads/{thread}/export (formatVersion 1). */
export interface ThreadExport {
  formatVersion: number;
  threadId: string;
  exportedAt: string;
  runs: Array<RunInfo & { eventList: BaseEvent[] }>;
}

/** One thread of GET {prefix}threads. */
export interface ThreadSummary {
  threadId: string;
  /** The first user message, cut. */
  title?: string;
  createdAt: string;
  /** The last activity (newest first in the list). */
  activeAt: string;
  updatedAt: string;
  runCount: number;
  latestRunId: string;
  latestStatus: string;
}

/** One page of the caller's threads (GET {prefix}threads), newest activity first. */
export interface ThreadList {
  threads: ThreadSummary[];
  /** Pass as `cursor` to get the next page; absent on the last page. */
  nextCursor?: string;
}

/** Options of AguiProxyClient. */
export interface AguiProxyClientOptions {
  /**
   * URL of the proxy's attach prefix, e.g. "http://localhost:8080/agui/" (with AGUI_ROUTES:
   * "<route prefix>/agui/"). A missing trailing slash is added.
   */
  baseUrl: string;
  /** Headers sent with every request (e.g. the identity header your gateway sets). */
  headers?: Record<string, string>;
  /** fetch to use (default: the global one). */
  fetch?: FetchFn;
}

/** Options of AguiProxyClient.attachThread. */
export interface AttachOptions {
  /** Resume after this event id instead of starting with the compacted history. */
  lastEventId?: string;
  /** Keep the stream open for the thread's next runs (?follow=1). */
  follow?: boolean;
  /** Aborting ends the stream (RUN_ERROR code "abort"). */
  signal?: AbortSignal;
  /** Reconnection pacing when the stream drops. */
  reconnect?: ReconnectOptions;
  /** Called before each reconnection. */
  onReconnect?: (info: ReconnectInfo) => void;
  /** Called with each event id as it is accepted. */
  onEventId?: (id: string) => void;
}

/**
 * A client of agui-proxy's own endpoints under its attach prefix: the runs tree, messages and
 * state as of a run, stop, export and import, the thread list where the proxy has one, and
 * the thread attach stream.
 */
export class AguiProxyClient {
  /** The attach prefix URL, ending with "/". */
  readonly baseUrl: string;
  /** Headers sent with every request. */
  headers: Record<string, string>;
  private readonly fetchFn: FetchFn;

  constructor(options: AguiProxyClientOptions) {
    this.baseUrl = options.baseUrl.endsWith("/") ? options.baseUrl : options.baseUrl + "/";
    this.headers = { ...(options.headers ?? {}) };
    this.fetchFn = options.fetch ?? ((url, init) => fetch(url, init));
  }

  /** URL of an endpoint under the prefix; path segments are escaped. */
  url(...segments: string[]): string {
    return this.baseUrl + segments.map(encodeURIComponent).join("/");
  }

  private async json<T>(url: string, init: RequestInit = {}): Promise<T> {
    const res = await this.fetchFn(url, {
      ...init,
      headers: { Accept: "application/json", ...this.headers, ...(init.headers as Record<string, string> | undefined) },
    });
    if (!res.ok) throw await httpError(res);
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** The thread's runs (a tree through parentRunId) with statuses, event counts and gaps. */
  runs(threadId: string): Promise<RunsTree> {
    return this.json(this.url("threads", threadId, "runs"));
  }

  /** Messages and state at the thread's head, or as of the end of `runId` (time travel). */
  thread(threadId: string, runId?: string): Promise<ThreadSnapshot> {
    const q = runId ? `?run=${encodeURIComponent(runId)}` : "";
    return this.json(this.url("threads", threadId) + q);
  }

  /** Stops a running run: the agent request is cancelled; the proxy closes what was open and ends the run with RUN_FINISHED outcome cancelled (AGUI_STOP_ENDING=error: RUN_ERROR code CANCELLED). */
  async stop(threadId: string, runId: string): Promise<void> {
    await this.json(this.url("threads", threadId, "runs", runId, "stop"), { method: "POST" });
  }

  /** The whole thread as one document (every run with its events). */
  export(threadId: string): Promise<ThreadExport> {
    return this.json(this.url("threads", threadId, "export"));
  }

  /** Loads an export into a thread that does not exist yet. */
  async import(threadId: string, doc: ThreadExport): Promise<void> {
    await this.json(this.url("threads", threadId, "import"), {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(doc),
    });
  }

  /**
   * The caller's threads, newest first (GET {prefix}threads), or undefined when this proxy
   * has no thread list.
   */
  async threads(params: { limit?: number; cursor?: string; since?: string; until?: string } = {}): Promise<ThreadList | undefined> {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
    const qs = q.toString();
    try {
      return await this.json<ThreadList>(this.baseUrl + "threads" + (qs ? `?${qs}` : ""));
    } catch (e) {
      const status = (e as { status?: number }).status;
      if (status === 404 || status === 405) return undefined;
      throw e;
    }
  }

  /** Whether the run is still running (from the runs tree). */
  async isRunning(threadId: string, runId?: string): Promise<boolean> {
    let tree: RunsTree;
    try {
      tree = await this.runs(threadId);
    } catch (e) {
      if ((e as { status?: number }).status === 404) return false;
      throw e;
    }
    const id = runId ?? tree.headRunId;
    return tree.runs.some((r) => r.runId === id && r.status === "running");
  }

  /** URL of the thread attach stream. */
  threadEventsUrl(threadId: string, options: { after?: string; follow?: boolean } = {}): string {
    const q = new URLSearchParams();
    if (options.after) q.set("after", options.after);
    if (options.follow) q.set("follow", "1");
    const qs = q.toString();
    return this.url("threads", threadId, "events") + (qs ? `?${qs}` : "");
  }

  /** URL of a run's attach stream (its raw events, then live until it ends). */
  runEventsUrl(threadId: string, runId: string): string {
    return this.url("threads", threadId, "runs", runId, "events");
  }

  /**
   * The thread attach as AG-UI events: the compacted history of the current branch (ending with
   * the CUSTOM event "agui-proxy.replay_complete"), then the live tail of a run in progress
   * until it ends. Drops are resumed from the last event id. A thread the proxy does not know
   * (404) gives an empty stream.
   */
  attachThread(threadId: string, options: AttachOptions = {}): Observable<BaseEvent> {
    let first = true;
    return resumableEventStream({
      signal: options.signal,
      reconnect: options.reconnect,
      onReconnect: options.onReconnect,
      onEventId: options.onEventId,
      open: async (lastEventId, _attempt, signal) => {
        const from = lastEventId ?? (first ? options.lastEventId : undefined);
        first = false;
        const headers: Record<string, string> = { Accept: "text/event-stream", ...this.headers };
        if (from) headers["Last-Event-ID"] = from;
        const res = await this.fetchFn(this.threadEventsUrl(threadId, { follow: options.follow }), { method: "GET", headers, signal });
        if (res.status === 404 && !from) {
          await res.body?.cancel();
          return new Response("", { status: 200, headers: { "Content-Type": "text/event-stream" } });
        }
        return res;
      },
    });
  }
}

/**
 * The attach prefix URL for an agent URL behind agui-proxy: the agent URL's directory plus
 * "agui/" (http://host:8080/ → http://host:8080/agui/, http://host:8080/agents/a →
 * http://host:8080/agents/a/agui/).
 */
export function defaultAttachUrl(agentUrl: string, prefix = "agui/"): string {
  const base = typeof location !== "undefined" ? location.href : undefined;
  const u = new URL(agentUrl, base);
  u.search = "";
  u.hash = "";
  if (!u.pathname.endsWith("/")) u.pathname += "/";
  return new URL(prefix.replace(/^\//, ""), u).toString();
}
