import type { EventPage, EventQuery, FeedEvent } from './types.js';

export interface EventIterationOptions extends EventQuery {
  /** true: at the end of the feed, wait `pollIntervalMs` and ask again, until `signal` aborts. false (default): stop there. */
  readonly follow?: boolean;
  readonly pollIntervalMs?: number;
  readonly signal?: AbortSignal;
}

/** A followed feed asks again this often once it is at the end. */
export const EVENT_POLL_INTERVAL_MS = 1_000;

/**
 * Every event after `after`, page by page, following `nextCursor`: each change once, in the
 * feed's order. A consumer that stores each event's `cursor` once it has handled the event resumes
 * there after a restart without missing or repeating one.
 */
export async function* iterateEvents(
  list: (query: EventQuery) => Promise<EventPage>,
  options: EventIterationOptions,
): AsyncGenerator<FeedEvent> {
  let after = options.after;
  const pollIntervalMs = options.pollIntervalMs ?? EVENT_POLL_INTERVAL_MS;
  const aborted = () => options.signal?.aborted === true;
  while (!aborted()) {
    const page = await list({
      ...(after === undefined ? {} : { after }),
      ...(options.limit === undefined ? {} : { limit: options.limit }),
    });
    for (const event of page.events) {
      yield event;
      if (aborted()) return;
    }
    after = page.nextCursor;
    // A short page (or, without a limit of the caller's, an empty one) is the end of the feed for now.
    const full = page.events.length > 0 && (options.limit === undefined || page.events.length >= options.limit);
    if (full) continue;
    if (options.follow !== true) return;
    await abortableWait(pollIntervalMs, options.signal);
  }
}

function abortableWait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
