import type { Database } from '../adapters/database.js';
import type { BusMessage, EventBus } from '../adapters/event-bus.js';
import type { Logger } from '../adapters/logger.js';
import { type CursorSeal, EVENT_BUS_SCOPE } from '../domain/events/cursor-seal.js';
import { comparePositions, decodeFeedCursor, encodeFeedCursor, FEED_START, type FeedPosition } from '../domain/events/feed-cursor.js';
import { loadReaderPosition, storeReaderPosition } from '../domain/events/feed-readers.js';
import { type FeedEvent, feedEventView, readFeed } from '../domain/events/feed.js';

/**
 * Publishes every feed event to the event bus (docs/EVENTS.md), in feed order, from its own
 * stored position: publish, wait for the stream's acknowledgements, then store the position. A
 * crash between the two repeats the publications, and the stream drops them by `Nats-Msg-Id`
 * (the position, sealed: docs/rules.md R63). On taking over, it first moves its position up to the stream's newest message,
 * so a repeat after a long outage (past the duplicate window) is not published again either.
 * Runs in the outbox leader only (workers/index.ts), so one process publishes at a time.
 */
export interface EventBusPublisher {
  /** One batch as the publisher; answers how many events the stream acknowledged. */
  runOnce(): Promise<number>;
  /** Not the leader (any more): lets the connection go, and resumes from the stream when leading again. */
  standBy(): Promise<void>;
}

export interface EventBusPublisherDeps {
  readonly db: Database;
  readonly connect: () => Promise<EventBus>;
  readonly log: Logger;
  /** Seals message ids and the events' cursors; the ids are opened again to resume. */
  readonly cursors: CursorSeal;
  readonly settings: {
    /** Subjects are `{subjectPrefix}.{serviceId}`. */
    readonly subjectPrefix: string;
    /** The publisher's row in event_feed_readers (one per stream). */
    readonly readerName: string;
    readonly batchSizeMax: number;
  };
}

export const EVENT_BUS_BATCH_SIZE_MAX = 500;

export function createEventBusPublisher(deps: EventBusPublisherDeps): EventBusPublisher {
  const { db, log, settings } = deps;
  let bus: EventBus | null = null;
  let position: FeedPosition | null = null;

  const release = async () => {
    const open = bus;
    bus = null;
    position = null;
    await open?.close().catch(() => {});
  };

  /** The stored position, moved up to the stream's newest message when that is ahead of it. */
  const resume = async (open: EventBus): Promise<FeedPosition> => {
    const stored = (await loadReaderPosition(db, settings.readerName)) ?? FEED_START;
    const lastId = await open.lastMessageId();
    // A stream written before ids were sealed ends in a plain one: it is our own, so it is trusted.
    const published = lastId === null ? null : (deps.cursors.open(EVENT_BUS_SCOPE, lastId) ?? decodeFeedCursor(lastId));
    if (published === null || comparePositions(published, stored) <= 0) return stored;
    await storeReaderPosition(db, settings.readerName, published);
    log.info(
      { event: 'event_bus_resumed', stored: encodeFeedCursor(stored), published: lastId },
      'event bus publisher resumes behind the stream',
    );
    return published;
  };

  const toMessage = (event: FeedEvent): BusMessage => ({
    subject: `${settings.subjectPrefix}.${event.serviceId}`,
    id: deps.cursors.seal(EVENT_BUS_SCOPE, event.position),
    data: JSON.stringify(feedEventView(event, deps.cursors)),
  });

  return {
    async runOnce() {
      try {
        bus ??= await deps.connect();
        position ??= await resume(bus);
        const page = await readFeed(db, { after: position, limit: settings.batchSizeMax });
        if (page.events.length === 0) return 0;
        const acknowledged = await bus.publish(page.events.map(toMessage));
        const last = page.events[acknowledged - 1];
        if (last !== undefined) {
          await storeReaderPosition(db, settings.readerName, last.position);
          position = last.position;
        }
        return acknowledged;
      } catch (error) {
        log.warn({ event: 'event_bus_publish_failed', err: error }, 'publishing feed events failed; tried again at the next tick');
        await release();
        return 0;
      }
    },
    standBy: release,
  };
}
