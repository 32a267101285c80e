import type { Database } from '../adapters/database.js';
import type { Logger } from '../adapters/logger.js';
import { pruneFeed } from '../domain/events/feed-retention.js';
import { SEQUENCE_BATCH_SIZE_MAX, sequenceFeed } from '../domain/events/feed.js';

/**
 * Keeps the event feed moving without readers: numbers what committed (every workers process
 * tries; the sequencer's lock lets one through at a time, the others skip) and, on its own
 * slower clock, prunes what is past the retention.
 */
export interface EventFeedWorker {
  /** Numbers every row that committed, a batch at a time; answers how many. */
  sequence(): Promise<number>;
  /** One pruning step; answers how many events it removed. */
  prune(): Promise<number>;
}

/** Rows one pruning statement removes at most. */
const PRUNE_BATCH_SIZE_MAX = 5_000;
/** Batches one sequence() call numbers at most, so a huge backlog cannot hold the loop forever. */
const SEQUENCE_BATCHES_MAX = 20;

export function createEventFeedWorker(deps: {
  readonly db: Database;
  readonly log: Logger;
  readonly retentionDays: number;
}): EventFeedWorker {
  const { db, log } = deps;
  return {
    async sequence() {
      let total = 0;
      for (let batch = 0; batch < SEQUENCE_BATCHES_MAX; batch += 1) {
        const numbered = await sequenceFeed(db);
        if (numbered === null) break;
        total += numbered;
        if (numbered < SEQUENCE_BATCH_SIZE_MAX) break;
      }
      return total;
    },
    async prune() {
      const removed = await pruneFeed(db, { retentionDays: deps.retentionDays, batchSizeMax: PRUNE_BATCH_SIZE_MAX });
      if (removed > 0)
        log.info({ event: 'event_feed_pruned', removed, retentionDays: deps.retentionDays }, 'pruned feed events past the retention');
      return removed;
    },
  };
}
