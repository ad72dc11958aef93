import { HttpAgent, type AgentCapabilities, type BaseEvent, type HttpAgentConfig, type RunAgentInput } from "@ag-ui/client";
import type { Observable } from "rxjs";
import {
  AguiProxyClient,
  defaultAttachUrl,
  type RunsTree,
  type ThreadExport,
  type ThreadList,
  type ThreadSnapshot,
} from "./client.js";
import { httpError, resumableEventStream, type ReconnectInfo, type ReconnectOptions } from "./stream.js";

/** HttpAgent's configuration plus how to reach the proxy's own endpoints and how to reconnect. */
export interface ResumableHttpAgentConfig extends HttpAgentConfig {
  /**
   * URL of the proxy's attach prefix. Default: the agent URL's directory plus "agui/"
   * (http://host:8080/ → http://host:8080/agui/; with AGUI_ROUTES, http://host/agents/a →
   * http://host/agents/a/agui/).
   */
  attachUrl?: string;
  /** Pacing of reconnection attempts. */
  reconnect?: ReconnectOptions;
  /** Called before each reconnection attempt (of a run or of connectAgent's stream). */
  onReconnect?: (info: ReconnectInfo & { threadId: string; runId?: string }) => void;
  /** Extra capabilities to declare beside transport.streaming and transport.resumable. */
  capabilities?: AgentCapabilities;
}

/**
 * An HttpAgent for agents behind agui-proxy that survives dropped connections and page reloads.
 *
 * - `runAgent()`: when the run's connection drops (network error, proxy restart, idle cut) the
 *   agent re-POSTs the same run with `Last-Event-ID` set to the last event id it received, with
 *   capped exponential backoff and jitter, and passes on only the events after that id: none is
 *   applied twice, and the proxy's exact resume guarantees none is missed.
 * - `connectAgent()` (AG-UI 1.0's restore path) attaches to the thread through the proxy: the
 *   compacted history of the current branch, then the live tail of a run in progress, so a new
 *   agent object after a page reload gets the messages and state back and follows the run.
 * - When the proxy cannot resume exactly, the CUSTOM event "agui-proxy.resume_failed" reaches
 *   the subscribers (onCustomEvent) together with the thread's full history.
 * - `runs()`, `snapshot()`, `stop()`, `exportThread()`, `threads()` call the proxy's JSON
 *   endpoints with the agent's headers.
 */
export class ResumableHttpAgent extends HttpAgent {
  /** URL of the proxy's attach prefix (see ResumableHttpAgentConfig.attachUrl). */
  attachUrl: string;
  /** Reconnection pacing. */
  reconnect: ReconnectOptions;
  /** Called before each reconnection attempt. */
  onReconnect?: ResumableHttpAgentConfig["onReconnect"];
  /** The last event id received by the current or last run or connect stream. */
  lastEventId?: string;
  /** The run id of the current or last run. */
  lastRunId?: string;
  /** Extra capabilities declared by getCapabilities(). */
  capabilities?: AgentCapabilities;

  constructor(config: ResumableHttpAgentConfig) {
    super(config);
    this.attachUrl = config.attachUrl ?? defaultAttachUrl(config.url);
    this.reconnect = { ...(config.reconnect ?? {}) };
    this.onReconnect = config.onReconnect;
    this.capabilities = config.capabilities;
  }

  /** The proxy's own endpoints, with this agent's current headers and fetch. */
  get proxy(): AguiProxyClient {
    return new AguiProxyClient({ baseUrl: this.attachUrl, headers: this.headers, fetch: this.fetch });
  }

  /** Starts (or, after a drop, resumes) the run: see the class documentation. */
  run(input: RunAgentInput): Observable<BaseEvent> {
    this.lastRunId = input.runId;
    this.lastEventId = undefined;
    const signal = this.abortController.signal;
    return resumableEventStream({
      signal,
      reconnect: this.reconnect,
      onReconnect: (info) => this.onReconnect?.({ ...info, threadId: input.threadId, runId: input.runId }),
      onEventId: (id) => (this.lastEventId = id),
      open: async (lastEventId, attempt, sig) => {
        const init = this.requestInit(input);
        const headers: Record<string, string> = { ...(init.headers as Record<string, string>) };
        if (lastEventId) headers["Last-Event-ID"] = lastEventId;
        const res = await this.fetch(this.url, { ...init, headers, signal: sig });
        if (attempt === 0 || lastEventId || res.status !== 409) return res;
        // A retry of a POST whose answer was lost before any event: if the first POST reached
        // the proxy the run exists (409 RunAlreadyStarted), so read it from its start through
        // the run attach instead.
        const err = await httpError(res);
        if (err.code !== "RunAlreadyStarted") throw err;
        return this.fetch(this.proxy.runEventsUrl(input.threadId, input.runId), {
          method: "GET",
          headers: { ...this.headers, Accept: "text/event-stream" },
          signal: sig,
        });
      },
    });
  }

  /**
   * Attaches to the thread through the proxy (used by `connectAgent()`): the compacted history
   * of the current branch, the CUSTOM event "agui-proxy.replay_complete", then the live tail
   * of the run in progress until it ends. A thread the proxy does not know yields nothing.
   */
  protected connect(input: RunAgentInput): Observable<BaseEvent> {
    this.lastEventId = undefined;
    return this.proxy.attachThread(input.threadId, {
      signal: this.abortController.signal,
      reconnect: this.reconnect,
      onReconnect: (info) => this.onReconnect?.({ ...info, threadId: input.threadId }),
      onEventId: (id) => (this.lastEventId = id),
    });
  }

  /**
   * Declares what this agent supports: AG-UI's capabilities have `transport.resumable`, which
   * the AG-UI HTTP+SSE binding does not provide by itself; agui-proxy and this client do.
   */
  async getCapabilities(): Promise<AgentCapabilities> {
    const extra = this.capabilities ?? {};
    return { ...extra, transport: { ...(extra.transport ?? {}), streaming: true, resumable: true } };
  }

  /** The thread's runs tree (parentRunId links, statuses, event counts, gaps). */
  runs(): Promise<RunsTree> {
    return this.proxy.runs(this.threadId);
  }

  /** The thread's messages and state at its head, or as of the end of `runId`. */
  snapshot(runId?: string): Promise<ThreadSnapshot> {
    return this.proxy.thread(this.threadId, runId);
  }

  /** Stops a run on the proxy (default: the last run this agent started). */
  async stop(runId?: string): Promise<void> {
    const id = runId ?? this.lastRunId;
    if (!id) throw new Error("stop: no run id (this agent has started no run)");
    await this.proxy.stop(this.threadId, id);
  }

  /** The whole thread as one export document. */
  exportThread(): Promise<ThreadExport> {
    return this.proxy.export(this.threadId);
  }

  /** The caller's threads, or undefined when the proxy has no thread list. */
  threads(params?: { limit?: number; cursor?: string; since?: string; until?: string }): Promise<ThreadList | undefined> {
    return this.proxy.threads(params);
  }

  /** A copy with the same configuration (as HttpAgent.clone). */
  clone(): ResumableHttpAgent {
    const c = super.clone() as ResumableHttpAgent;
    c.attachUrl = this.attachUrl;
    c.reconnect = { ...this.reconnect };
    c.onReconnect = this.onReconnect;
    c.capabilities = this.capabilities;
    return c;
  }
}
