import { Observable } from "rxjs";
import { EventType, type BaseEvent } from "@ag-ui/client";
import { parseEventId, type EventId } from "./ids.js";
import { SseParser } from "./sse.js";

/** Name of the CUSTOM event agui-proxy sends when it cannot resume exactly (the full history follows). */
export const RESUME_FAILED = "agui-proxy.resume_failed";
/** Name of the CUSTOM event that ends an attach stream's compacted prelude (what follows is live). */
export const REPLAY_COMPLETE = "agui-proxy.replay_complete";
/** `code` of the RUN_ERROR this package emits to close a run it could not resume exactly. */
export const RESUME_FAILED_CODE = "RESUME_FAILED";
/** Response header in which agui-proxy says how it resumed: "exact" or "full-history". */
export const RESUME_HEADER = "X-Agui-Resume";

/** How reconnection attempts are paced. Every field has a default. */
export interface ReconnectOptions {
  /** Consecutive failed attempts before the run fails (default 8). Reset by any new event. */
  maxAttempts?: number;
  /** Delay before the first attempt, in ms (default 200). */
  initialDelayMs?: number;
  /** Cap of the delay, in ms (default 5000). */
  maxDelayMs?: number;
  /** Growth factor between attempts (default 2). */
  multiplier?: number;
  /** Fraction of each delay that is random, 0..1 (default 0.5): delay·(1−jitter) … delay. */
  jitter?: number;
}

/** What the onReconnect hook is told before each attempt. */
export interface ReconnectInfo {
  /** 1 for the first attempt after a drop. */
  attempt: number;
  /** The pause before this attempt, in ms. */
  delayMs: number;
  /** The id of the last event received (what the attempt resumes from), if any. */
  lastEventId?: string;
  /** Why the previous connection ended. */
  error: unknown;
}

/** Everything `resumableEventStream` needs. */
export interface ResumableStreamOptions {
  /**
   * Opens one connection. `lastEventId` is undefined on the first attempt and after a drop
   * that came before any event id; `attempt` is 0 on the first try.
   */
  open(lastEventId: string | undefined, attempt: number, signal: AbortSignal): Promise<Response>;
  /** Aborting it ends the stream with RUN_ERROR code "abort", as the official HttpAgent does. */
  signal?: AbortSignal;
  /** Backoff settings. */
  reconnect?: ReconnectOptions;
  /** Called before every reconnection attempt. */
  onReconnect?: (info: ReconnectInfo) => void;
  /** Called with each event id as it is accepted (after the duplicate check). */
  onEventId?: (id: string) => void;
}

/** The defaults of ReconnectOptions. */
export const DEFAULT_RECONNECT: Required<ReconnectOptions> = {
  maxAttempts: 8,
  initialDelayMs: 200,
  maxDelayMs: 5000,
  multiplier: 2,
  jitter: 0.5,
};

/** The delay before attempt `attempt` (1-based): capped exponential growth with jitter. */
export function backoffDelay(attempt: number, opts: ReconnectOptions = {}, random: () => number = Math.random): number {
  const o = { ...DEFAULT_RECONNECT, ...opts };
  const base = Math.min(o.maxDelayMs, o.initialDelayMs * Math.pow(o.multiplier, Math.max(0, attempt - 1)));
  const j = Math.min(1, Math.max(0, o.jitter));
  return Math.round(base * (1 - j * random()));
}

/** An HTTP answer that is not a stream, shaped like the official client's errors. */
export class HttpError extends Error {
  /** The HTTP status. */
  status: number;
  /** The body, parsed when it was JSON (agui-proxy answers RFC 9457 problems). */
  payload: unknown;
  constructor(status: number, payload: unknown) {
    super(`HTTP ${status}: ${typeof payload === "string" ? payload : JSON.stringify(payload)}`);
    this.name = "HttpError";
    this.status = status;
    this.payload = payload;
  }
  /** The problem's `code` (e.g. "RunAlreadyStarted"), if the body was a problem. */
  get code(): string | undefined {
    const p = this.payload as { code?: unknown } | null;
    return p && typeof p === "object" && typeof p.code === "string" ? p.code : undefined;
  }
}

/** Thrown when a dropped stream could not be resumed within the allowed attempts. */
export class ResumeGaveUpError extends Error {
  /** The last connection error. */
  cause: unknown;
  /** The id the attempts tried to resume from. */
  lastEventId?: string;
  constructor(attempts: number, lastEventId: string | undefined, cause: unknown) {
    super(`agui-proxy: gave up resuming after ${attempts} attempts (last event id ${lastEventId ?? "none"}): ${String((cause as Error)?.message ?? cause)}`);
    this.name = "ResumeGaveUpError";
    this.cause = cause;
    this.lastEventId = lastEventId;
  }
}

/** Reads an error answer into an HttpError. */
export async function httpError(res: Response): Promise<HttpError> {
  const text = await res.text().catch(() => "");
  let payload: unknown = text;
  if ((res.headers.get("content-type") ?? "").includes("json")) {
    try {
      payload = JSON.parse(text);
    } catch {
      /* keep the text */
    }
  }
  return new HttpError(res.status, payload);
}

const RETRYABLE_STATUS = new Set([502, 503, 504]);

function isAbort(err: unknown): boolean {
  return (err as { name?: string } | null)?.name === "AbortError";
}

/** Where the stream stands, as the consumer (the agent's verifier) saw it. */
interface Position {
  last?: EventId;
  lastRaw?: string;
  /** A RUN_STARTED was delivered and its run has not ended. */
  active: boolean;
  /** At least one event carried an agui-proxy id: the source can be resumed. */
  resumable: boolean;
}

/**
 * An AG-UI event stream over HTTP+SSE that survives dropped connections: it reconnects with
 * the last event id it delivered (capped exponential backoff with jitter, a bounded number of
 * consecutive attempts), passes on only events whose id comes after that one (so none is
 * applied twice), and relies on agui-proxy's exact resume (header X-Agui-Resume: exact) for
 * none to be missed.
 *
 * When the proxy cannot resume exactly (X-Agui-Resume: full-history: the events after the id
 * were trimmed or lost), the run in progress is closed with a RUN_ERROR whose code is
 * RESUME_FAILED_CODE, and the proxy's stream follows as is: a new RUN_STARTED, the CUSTOM
 * event "agui-proxy.resume_failed", the thread's full compacted history (snapshots, which
 * replace messages and state) and the live tail. A stream whose events carry no agui-proxy
 * ids (not served by the proxy) is never retried after its first event.
 */
export function resumableEventStream(options: ResumableStreamOptions): Observable<BaseEvent> {
  const rc = { ...DEFAULT_RECONNECT, ...options.reconnect };
  return new Observable<BaseEvent>((subscriber) => {
    const stop = new AbortController(); // unsubscribe
    const pos: Position = { active: false, resumable: false };
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;

    const emit = (ev: BaseEvent) => {
      if (ev.type === EventType.RUN_STARTED) pos.active = true;
      else if (ev.type === EventType.RUN_FINISHED || ev.type === EventType.RUN_ERROR) pos.active = false;
      subscriber.next(ev);
    };

    const aborted = () => options.signal?.aborted === true;

    const sleep = (ms: number) =>
      new Promise<void>((resolve) => {
        const t = setTimeout(done, ms);
        function done() {
          clearTimeout(t);
          stop.signal.removeEventListener("abort", done);
          options.signal?.removeEventListener("abort", done);
          resolve();
        }
        stop.signal.addEventListener("abort", done);
        options.signal?.addEventListener("abort", done);
      });

    // One connection: resolves "done" at the stream's natural end, "dropped" when it ended
    // before its run did. Throws for errors that must not be retried.
    const connect = async (attempt: number): Promise<"done" | "dropped"> => {
      const ctrl = new AbortController();
      const abort = () => ctrl.abort();
      stop.signal.addEventListener("abort", abort);
      options.signal?.addEventListener("abort", abort);
      if (stop.signal.aborted || aborted()) ctrl.abort();
      try {
        const resumeFrom = pos.lastRaw;
        const res = await options.open(resumeFrom, attempt, ctrl.signal);
        answered = true;
        if (!res.ok) {
          const err = await httpError(res);
          if (RETRYABLE_STATUS.has(res.status)) throw Object.assign(err, { retryable: true });
          throw err;
        }
        if (!res.body) throw new Error("the response has no body");
        // agui-proxy names the run it serves, and attach streams say how they resumed: such a
        // stream can be resumed even when it drops before its first event id.
        if (res.headers.has("X-Agui-Run-Id") || res.headers.has(RESUME_HEADER)) pos.resumable = true;
        let filter = false; // skip what the consumer already has
        if (resumeFrom !== undefined) {
          const mode = res.headers.get(RESUME_HEADER);
          if (mode === "exact") {
            filter = true;
          } else {
            // Not an exact resume: close the run in progress, then take the proxy's stream
            // (RUN_STARTED, resume_failed, the full compacted history, the live tail) as is.
            if (pos.active) {
              emit({
                type: EventType.RUN_ERROR,
                message: `agui-proxy could not resume exactly from ${resumeFrom} (${mode ?? "no resume header"}); the thread's full history follows`,
                code: RESUME_FAILED_CODE,
              } as BaseEvent);
            }
            pos.last = undefined;
          }
        }
        const parser = new SseParser();
        reader = res.body.getReader();
        const handle = (frames: ReturnType<SseParser["push"]>) => {
          for (const f of frames) {
            const id = parseEventId(f.id);
            if (filter) {
              if (!id) continue; // the prelude of an exact resume: the consumer has it
              const last = pos.last;
              if (last && id.runId === last.runId && id.epoch === last.epoch && id.seq <= last.seq) continue;
              filter = false;
            }
            if (id) {
              const last = pos.last;
              if (last && id.runId === last.runId && id.epoch === last.epoch && id.seq <= last.seq) continue; // never twice
            }
            let ev: unknown;
            try {
              ev = JSON.parse(f.data);
            } catch (e) {
              throw new Error(`invalid event JSON: ${(e as Error).message}`);
            }
            if (typeof ev !== "object" || ev === null || Array.isArray(ev) || typeof (ev as { type?: unknown }).type !== "string") {
              throw new Error("Invalid event: the frame carries no event type.");
            }
            if (id) {
              pos.last = id;
              pos.lastRaw = f.id;
              pos.resumable = true;
              attemptsSinceProgress = 0;
              options.onEventId?.(f.id!);
            }
            emit(ev as BaseEvent);
          }
        };
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          handle(parser.push(value));
        }
        handle(parser.end());
        return pos.active && pos.resumable ? "dropped" : "done";
      } finally {
        stop.signal.removeEventListener("abort", abort);
        options.signal?.removeEventListener("abort", abort);
        reader = undefined;
      }
    };

    let attemptsSinceProgress = 0;
    let answered = false; // some connection got an HTTP answer
    (async () => {
      let attempt = 0;
      for (;;) {
        let err: unknown;
        try {
          const r = await connect(attempt);
          if (r === "done") {
            subscriber.complete();
            return;
          }
          err = new Error("the stream ended before its run did");
        } catch (e) {
          err = e;
        }
        if (stop.signal.aborted) return; // unsubscribed
        if (aborted() || isAbort(err)) {
          if (aborted()) {
            emit({ type: EventType.RUN_ERROR, message: "Request aborted", code: "abort" } as BaseEvent);
            subscriber.complete();
          } else {
            subscriber.error(err);
          }
          return;
        }
        const retryable =
          (err as { retryable?: boolean })?.retryable === true ||
          // A dropped connection of a proxied stream (its events carry ids), or a request that
          // never got an answer (nothing can have started twice).
          (!(err instanceof HttpError) && (pos.resumable || !answered));
        if (!retryable) {
          subscriber.error(err);
          return;
        }
        attemptsSinceProgress++;
        if (attemptsSinceProgress > rc.maxAttempts) {
          subscriber.error(new ResumeGaveUpError(rc.maxAttempts, pos.lastRaw, err));
          return;
        }
        attempt++;
        const delayMs = backoffDelay(attemptsSinceProgress, rc);
        try {
          options.onReconnect?.({ attempt: attemptsSinceProgress, delayMs, lastEventId: pos.lastRaw, error: err });
        } catch {
          /* a hook's failure does not stop the resume */
        }
        await sleep(delayMs);
        if (stop.signal.aborted) return;
      }
    })().catch((e) => {
      if (!stop.signal.aborted) subscriber.error(e);
    });

    return () => {
      stop.abort();
      reader?.cancel().catch(() => {});
    };
  });
}
