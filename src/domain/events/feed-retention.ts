import assert from 'node:assert/strict';
import type { Sql } from '../../adapters/database.js';

export interface FeedRetention {
  /** Events older than this many days are removed from the feed (the audit log keeps them). */
  readonly retentionDays: number;
  /** Rows one step removes at most: one short statement. */
  readonly batchSizeMax: number;
}

/**
 * Removes the oldest numbered events older than the retention, as one unbroken run from the start
 * of the feed (it stops at the first event still kept), and raises the pruning mark to the last
 * seq removed: a cursor below the mark is answered 410 CURSOR_EXPIRED, never a silent gap.
 * Unnumbered rows are never removed (the sequencer counts on that). Answers how many it removed.
 */
export async function pruneFeed(sql: Sql, retention: FeedRetention): Promise<number> {
  assert.ok(retention.retentionDays > 0 && Number.isInteger(retention.batchSizeMax) && retention.batchSizeMax > 0);
  const { rows } = await sql.query<{ removed: bigint }>(
    `WITH head AS MATERIALIZED (
       SELECT seq, occurred_at < now() - $1::float8 * interval '1 day' AS expired
         FROM event_feed WHERE seq IS NOT NULL ORDER BY seq LIMIT $2
     ), upto AS (
       SELECT coalesce((SELECT min(seq) - 1 FROM head WHERE NOT expired), (SELECT max(seq) FROM head)) AS seq
     ), gone AS (
       DELETE FROM event_feed f USING upto WHERE f.seq <= upto.seq RETURNING f.seq
     ), mark AS (
       UPDATE event_feed_state SET pruned_through_seq = greatest(pruned_through_seq, (SELECT max(seq) FROM gone))
        WHERE EXISTS (SELECT 1 FROM gone)
     )
     SELECT count(*) AS removed FROM gone`,
    [retention.retentionDays, retention.batchSizeMax],
  );
  return Number(rows[0]?.removed ?? 0n);
}
