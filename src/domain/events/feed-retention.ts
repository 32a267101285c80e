import assert from 'node:assert/strict';
import type { Sql } from '../../adapters/database.js';
import { FEED_HORIZON_SQL } from './feed.js';

export interface FeedRetention {
  /** Events older than this many days are removed from the feed (the audit log keeps them). */
  readonly retentionDays: number;
  /** Rows one step removes at most: one short statement. */
  readonly batchSizeMax: number;
}

/**
 * Removes the oldest events older than the retention, as one unbroken run from the start of the
 * feed (it stops at the first event still kept, and at the horizon: a row above it may still have
 * rows committing before it), and raises the pruning mark to the last place removed: a cursor
 * before the mark is answered 410 CURSOR_EXPIRED, never a silent gap. Answers how many it removed.
 */
export async function pruneFeed(sql: Sql, retention: FeedRetention): Promise<number> {
  assert.ok(retention.retentionDays > 0 && Number.isInteger(retention.batchSizeMax) && retention.batchSizeMax > 0);
  const { rows } = await sql.query<{ removed: bigint }>(
    `WITH head AS MATERIALIZED (
       SELECT xact, seq, bool_and(expired) OVER (ORDER BY xact, seq) AS all_expired
         FROM (SELECT xact, seq, occurred_at < now() - $1::float8 * interval '1 day' AS expired
                 FROM event_feed WHERE xact < ${FEED_HORIZON_SQL} ORDER BY xact, seq LIMIT $2) oldest
     ), upto AS MATERIALIZED (
       SELECT xact, seq FROM head WHERE all_expired ORDER BY xact DESC, seq DESC LIMIT 1
     ), gone AS (
       DELETE FROM event_feed f USING upto WHERE (f.xact, f.seq) <= (upto.xact, upto.seq) RETURNING f.xact
     ), mark AS (
       UPDATE event_feed_state s SET pruned_through_xact = upto.xact, pruned_through_seq = upto.seq
         FROM upto WHERE (upto.xact, upto.seq) > (s.pruned_through_xact, s.pruned_through_seq)
     )
     SELECT count(*) AS removed FROM gone`,
    [retention.retentionDays, retention.batchSizeMax],
  );
  return Number(rows[0]?.removed ?? 0n);
}
