/**
 * One event of a `text/event-stream`: its data (the `data:` lines joined with "\n") and the last
 * `id:` seen (ids carry over to later events, as in the WHATWG EventSource rules).
 */
export interface SseEvent {
  /** The event's data. */
  data: string;
  /** The last event id of the stream so far (empty when none was sent). */
  id: string;
}

/**
 * Reads a `text/event-stream` body incrementally and yields its events, following the WHATWG
 * event-stream rules: lines end with CRLF, LF or CR; `:` lines are comments; a blank line
 * dispatches the event; an event without data is not dispatched; one leading space of a value
 * is dropped; an `id` containing NUL is ignored.
 */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buf = "";
  let data: string[] = [];
  let id = "";
  let pendingCR = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      let chunk = decoder.decode(value, { stream: true });
      if (pendingCR && chunk.startsWith("\n")) chunk = chunk.slice(1); // CRLF split across chunks
      pendingCR = false;
      buf += chunk;
      let start = 0;
      for (let i = 0; i < buf.length; i++) {
        const c = buf.charCodeAt(i);
        if (c !== 10 && c !== 13) continue;
        const line = buf.slice(start, i);
        if (c === 13) {
          if (i + 1 < buf.length) {
            if (buf.charCodeAt(i + 1) === 10) i++;
          } else {
            pendingCR = true;
          }
        }
        start = i + 1;
        if (line === "") {
          if (data.length > 0) yield { data: data.join("\n"), id };
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? "" : line.slice(colon + 1);
        if (v.startsWith(" ")) v = v.slice(1);
        if (field === "data") data.push(v);
        else if (field === "id" && !v.includes("\0")) id = v;
      }
      buf = buf.slice(start);
    }
  } finally {
    reader.releaseLock();
  }
  // An event not terminated by a blank line at the end of the stream is not dispatched.
}
