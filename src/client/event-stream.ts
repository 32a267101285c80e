import type { IntentStatusMessage } from './types.js';

/** One event larger than this is not a status message; the stream is given up rather than buffered without bound. */
export const EVENT_CHARS_MAX = 64 * 1024;

function dataOf(block: string): { event: string; data: string } {
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    // Lines starting with ':' are comments (the service's heartbeats).
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  return { event, data: data.join('\n') };
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
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true }).replaceAll('\r\n', '\n');
    let end = buffer.indexOf('\n\n');
    while (end !== -1) {
      const { event, data } = dataOf(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      const message = event === 'status' ? statusMessageOf(data) : null;
      if (message !== null) yield message;
      end = buffer.indexOf('\n\n');
    }
    if (buffer.length > EVENT_CHARS_MAX) throw new Error(`event stream: an event exceeds ${EVENT_CHARS_MAX} characters`);
  }
}
