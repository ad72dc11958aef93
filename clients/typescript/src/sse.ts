/**
 * A small WHATWG event-stream parser that keeps each event's `id:`. The official
 * `@ag-ui/client` parser drops ids (the AG-UI HTTP binding does not use them); resuming needs
 * them.
 */

/** One dispatched server-sent event. */
export interface SseFrame {
  /** The `data:` lines joined with "\n". */
  data: string;
  /** The `id:` of this frame, if it had one. */
  id?: string;
  /** The `event:` field, if any. */
  event?: string;
}

/** Largest amount of undispatched text kept before the stream is refused (as the official client). */
export const MAX_PENDING_CHARS = 10 * 1024 * 1024;

/**
 * Feeds decoded text in; complete frames come out. A frame is complete at a blank line; what
 * remains at a broken connection is an incomplete frame and is dropped (`pending()` tells).
 */
export class SseParser {
  private buf = "";
  private data: string[] = [];
  private hasData = false;
  private id: string | undefined;
  private event: string | undefined;
  private decoder = new TextDecoder("utf-8");

  /** Feeds bytes; returns the frames they complete. */
  push(chunk: Uint8Array): SseFrame[] {
    return this.feed(this.decoder.decode(chunk, { stream: true }));
  }

  /** Ends a cleanly closed stream: a last frame without its blank line is dispatched (as the official client does). */
  end(): SseFrame[] {
    const out = this.feed(this.decoder.decode() + "\n\n");
    return out;
  }

  /** Whether a frame has started and not been dispatched. */
  pending(): boolean {
    return this.buf.length > 0 || this.hasData || this.id !== undefined;
  }

  private feed(text: string): SseFrame[] {
    this.buf += text;
    const out: SseFrame[] = [];
    let start = 0;
    for (;;) {
      let nl = -1;
      let next = -1;
      for (let k = start; k < this.buf.length; k++) {
        const c = this.buf.charCodeAt(k);
        if (c === 10) {
          nl = k;
          next = k + 1;
          break;
        }
        if (c === 13) {
          if (k + 1 >= this.buf.length) break; // a CR at the end: wait for a possible LF
          nl = k;
          next = this.buf.charCodeAt(k + 1) === 10 ? k + 2 : k + 1;
          break;
        }
      }
      if (nl < 0) break;
      const line = this.buf.slice(start, nl);
      start = next;
      this.line(line, out);
    }
    this.buf = this.buf.slice(start);
    if (this.buf.length > MAX_PENDING_CHARS) {
      throw new Error(`SSE frame larger than ${MAX_PENDING_CHARS / (1024 * 1024)} MB`);
    }
    return out;
  }

  private line(line: string, out: SseFrame[]): void {
    if (line === "") {
      if (this.hasData) {
        const f: SseFrame = { data: this.data.join("\n") };
        if (this.id !== undefined) f.id = this.id;
        if (this.event !== undefined) f.event = this.event;
        out.push(f);
      }
      this.data = [];
      this.hasData = false;
      this.id = undefined;
      this.event = undefined;
      return;
    }
    if (line.charCodeAt(0) === 58) return; // ":" comment (heartbeat)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (field) {
      case "data":
        this.data.push(value);
        this.hasData = true;
        break;
      case "id":
        if (!value.includes("\0")) this.id = value;
        break;
      case "event":
        this.event = value;
        break;
    }
  }
}
