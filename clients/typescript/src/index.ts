/**
 * @agui-proxy/client: AG-UI front ends that survive dropped connections and page reloads
 * through agui-proxy. Use `ResumableHttpAgent` where you used `HttpAgent`.
 */
export { ResumableHttpAgent, type ResumableHttpAgentConfig } from "./agent.js";
export {
  AguiProxyClient,
  defaultAttachUrl,
  type AguiProxyClientOptions,
  type AttachOptions,
  type FetchFn,
  type RunInfo,
  type RunsTree,
  type ThreadExport,
  type ThreadList,
  type ThreadSummary,
  type ThreadSnapshot,
} from "./client.js";
export {
  resumableEventStream,
  backoffDelay,
  httpError,
  HttpError,
  ResumeGaveUpError,
  DEFAULT_RECONNECT,
  RESUME_FAILED,
  RESUME_FAILED_CODE,
  REPLAY_COMPLETE,
  RESUME_HEADER,
  type ReconnectInfo,
  type ReconnectOptions,
  type ResumableStreamOptions,
} from "./stream.js";
export { parseEventId, formatEventId, type EventId } from "./ids.js";
export { SseParser, type SseFrame } from "./sse.js";
