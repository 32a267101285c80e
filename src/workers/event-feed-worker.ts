import type { Database } from '../adapters/database.js';
import type { Logger } from '../adapters/logger.js';
import { pruneFeed } from '../domain/events/feed-retention.js';

/**
 * Keeps the event feed within its retention: every workers process prunes on its own clock. The
 * feed needs nothing else to move: a row's place is fixed when it is written (docs/EVENTS.md).
 */
export interface EventFeedWorker {
  /** One pruning step; answers how many events it removed. */
  prune(): Promise<number>;
}

/** Rows one pruning statement removes at most. */
const PRUNE_BATCH_SIZE_MAX = 5_000;

export function createEventFeedWorker(deps: {
  readonly db: Database;
  readonly log: Logger;
  readonly retentionDays: number;
}): EventFeedWorker {
  const { db, log } = deps;
  return {
    async prune() {
      const removed = await pruneFeed(db, { retentionDays: deps.retentionDays, batchSizeMax: PRUNE_BATCH_SIZE_MAX });
      if (removed > 0)
        log.info({ event: 'event_feed_pruned', removed, retentionDays: deps.retentionDays }, 'pruned feed events past the retention');
      return removed;
    },
  };
}
