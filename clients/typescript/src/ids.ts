/**
 * Event ids of agui-proxy streams: `<runId>:<epoch>:<seq>`. The run id may itself contain
 * colons, so an id is read from the right, as the proxy does (recorder.ParseCursor).
 */
export interface EventId {
  /** The run the event belongs to. */
  runId: string;
  /** The run's epoch: it changes when the store lost or re-created the run's records. */
  epoch: string;
  /** The event's position in the run, from 1. */
  seq: number;
}

const EPOCH = /^[a-z2-7]{8}$/;
const SEQ = /^(0|[1-9][0-9]{0,17})$/;

/** Parses an agui-proxy event id; undefined when `id` is not one. */
export function parseEventId(id: string | undefined | null): EventId | undefined {
  if (!id) return undefined;
  const i = id.lastIndexOf(":");
  if (i < 0) return undefined;
  const seqText = id.slice(i + 1);
  if (!SEQ.test(seqText)) return undefined;
  const rest = id.slice(0, i);
  const j = rest.lastIndexOf(":");
  if (j <= 0) return undefined;
  const epoch = rest.slice(j + 1);
  if (!EPOCH.test(epoch)) return undefined;
  return { runId: rest.slice(0, j), epoch, seq: Number(seqText) };
}

/** Formats an event id. */
export function formatEventId(id: EventId): string {
  return `${id.runId}:${id.epoch}:${id.seq}`;
}
