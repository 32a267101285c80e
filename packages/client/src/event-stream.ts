import type { IntentStatusMessage } from './types.js';

/** One event larger than this is not a status message; the stream is given up rather than buffered without bound. */
export const EVENT_CHARS_MAX = 64 * 1024;

/** A dispatched Server-Sent Event, as the HTML standard's EventSource would fire it. */
export interface ServerSentEvent {
  /** `message` when the block named none. */
  readonly event: string;
  readonly data: string;
  /** The last `id` seen so far on the stream (it carries over to later events), '' when none. */
  readonly lastEventId: string;
}

export interface EventStreamParser {
  /** Decoded text in any chunking; returns the events its complete blocks dispatch. */
  feed(text: string): ServerSentEvent[];
  /** The last valid `retry` field, in milliseconds; undefined until one arrives. */
  readonly retryMs: number | undefined;
}

/**
 * The text/event-stream interpretation of the HTML standard (section 9.2.6), with no dependency:
 * lines end in CRLF, LF or a lone CR (also when a CRLF is split across chunks); a line starting
 * with ':' is a comment; a line without a colon is a field with an empty value; one space after
 * the colon is dropped; `data` lines join with '\n'; an `id` holding NUL and a `retry` that is
 * not all digits are ignored; a block without `data` dispatches nothing; an unterminated block
 * at the end is dropped. The leading BOM is the TextDecoder's to strip (it does by default).
 */
export function createEventStreamParser(): EventStreamParser {
  let pending = '';
  let skipLineFeed = false;
  let data = '';
  let hasData = false;
  let eventType = '';
  let lastEventId = '';
  let retryMs: number | undefined;

  function line(text: string, dispatched: ServerSentEvent[]): void {
    if (text === '') {
      if (hasData) dispatched.push({ event: eventType === '' ? 'message' : eventType, data, lastEventId });
      data = '';
      hasData = false;
      eventType = '';
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    const value = colon === -1 ? '' : text.slice(colon + (text[colon + 1] === ' ' ? 2 : 1));
    switch (field) {
      case 'event':
        eventType = value;
        break;
      case 'data':
        data = hasData ? `${data}\n${value}` : value;
        hasData = true;
        break;
      case 'id':
        if (!value.includes('\0')) lastEventId = value;
        break;
      case 'retry':
        if (/^[0-9]+$/.test(value)) retryMs = Number(value);
        break;
    }
  }

  return {
    feed(text) {
      const dispatched: ServerSentEvent[] = [];
      // An empty chunk must not reset skipLineFeed: the LF of a split CRLF may still come.
      if (text === '') return dispatched;
      let start = 0;
      if (skipLineFeed && text.startsWith('\n')) start = 1;
      skipLineFeed = false;
      for (let at = start; at < text.length; at++) {
        const char = text[at];
        if (char !== '\r' && char !== '\n') continue;
        line(pending + text.slice(start, at), dispatched);
        pending = '';
        if (char === '\r') {
          if (at + 1 === text.length) skipLineFeed = true;
          else if (text[at + 1] === '\n') at++;
        }
        start = at + 1;
      }
      pending += text.slice(start);
      if (pending.length + data.length > EVENT_CHARS_MAX) throw new Error(`event stream: an event exceeds ${EVENT_CHARS_MAX} characters`);
      return dispatched;
    },
    get retryMs() {
      return retryMs;
    },
  };
}

/** The events of a text/event-stream body until the server ends it. A reader, not async iteration, which some browsers lack on streams. */
export async function* serverSentEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  const parser = createEventStreamParser();
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      yield* parser.feed(decoder.decode(value, { stream: true }));
    }
  } finally {
    // Also when the consumer stops early: the connection is released instead of left open.
    await reader.cancel().catch(() => {});
  }
}

function statusMessageOf(data: string): IntentStatusMessage | null {
  try {
    const value = JSON.parse(data) as Partial<Record<keyof IntentStatusMessage, unknown>>;
    if (typeof value.intentId !== 'string' || typeof value.status !== 'string' || typeof value.updatedAt !== 'string') return null;
    return value as IntentStatusMessage;
  } catch {
    return null;
  }
}

/** The `status` events of a text/event-stream body (Server-Sent Events), until the server ends it. */
export async function* statusEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<IntentStatusMessage> {
  for await (const { event, data } of serverSentEvents(body)) {
    const message = event === 'status' ? statusMessageOf(data) : null;
    if (message !== null) yield message;
  }
}
