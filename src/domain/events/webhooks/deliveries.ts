import type { Database, Sql } from '../../../adapters/database.js';
import type { CursorSeal } from '../cursor-seal.js';
import { decodeFeedCursor, encodeFeedCursor } from '../feed-cursor.js';
import { type FeedEvent, feedEventView, readFeed } from '../feed.js';

/**
 * The delivery state of webhooks (migrations/014-webhooks.sql): events taken from the feed into
 * deliveries, claimed by workers, acknowledged (deleted) or rescheduled, dead after the window.
 * docs/OPERATIONS.md, "Webhooks", states the guarantees these statements keep.
 */

/**
 * Takes one page of `serviceId`'s feed into deliveries and moves its cursor, in one transaction:
 * a crash keeps both or neither. Another worker taking the same service right now holds the
 * cursor row; this one then skips the service (0) rather than wait.
 */
export async function takeFeedPage(db: Database, serviceId: string, pageSizeMax: number, cursors: CursorSeal): Promise<number> {
  return db.transaction(async (tx) => {
    await tx.query('INSERT INTO webhook_cursors (service_id) VALUES ($1) ON CONFLICT (service_id) DO NOTHING', [serviceId]);
    const { rows } = await tx.query<{ feed_cursor: string | null }>(
      'SELECT feed_cursor FROM webhook_cursors WHERE service_id = $1 FOR UPDATE SKIP LOCKED',
      [serviceId],
    );
    const [cursorRow] = rows;
    if (cursorRow === undefined) return 0;
    const stored = cursorRow.feed_cursor;
    const after = stored === null ? null : decodeFeedCursor(stored);
    if (stored !== null && after === null) throw new Error(`stored webhook cursor of ${serviceId} is not a feed cursor`);
    const page = await readFeed(tx, { serviceId, after, limit: pageSizeMax });
    // The feed's next position may move past a quiet stretch of other services' events.
    const nextCursor = encodeFeedCursor(page.next);
    if (nextCursor === cursorRow.feed_cursor) return 0;
    if (page.events.length > 0) await insertDeliveries(tx, serviceId, page.events, cursors);
    const moved = await tx.query('UPDATE webhook_cursors SET feed_cursor = $2, updated_at = now() WHERE service_id = $1', [
      serviceId,
      nextCursor,
    ]);
    if (moved.rowCount !== 1) throw new Error(`webhook cursor of ${serviceId} vanished while locked`);
    return page.events.length;
  });
}

async function insertDeliveries(sql: Sql, serviceId: string, events: readonly FeedEvent[], cursors: CursorSeal): Promise<void> {
  // unnest keeps the page's order in the ids, and the ids are the per-intent order.
  await sql.query(
    `INSERT INTO webhook_deliveries (service_id, feed_cursor, intent_id, body, occurred_at)
       SELECT $1, e.feed_cursor, e.intent_id, e.body, e.occurred_at
         FROM unnest($2::text[], $3::uuid[], $4::text[], $5::timestamptz[]) WITH ORDINALITY
              AS e(feed_cursor, intent_id, body, occurred_at, position)
        ORDER BY e.position`,
    [
      serviceId,
      // The body carries the sealed cursor; the row keeps the internal position, for order and redelivery.
      events.map((event) => event.cursor),
      events.map((event) => event.intentId),
      events.map((event) => JSON.stringify(feedEventView(event, cursors))),
      events.map((event) => event.occurredAt.toISOString()),
    ],
  );
}

/** Services whose active key names a webhook: the only feeds taken into deliveries. */
export async function servicesWithWebhooks(sql: Sql): Promise<string[]> {
  const { rows } = await sql.query<{ service_id: string }>(
    `SELECT service_id FROM service_keys WHERE active AND permissions->'webhook'->>'url' IS NOT NULL ORDER BY service_id`,
  );
  return rows.map((row) => row.service_id);
}

/** A delivery claimed for one attempt. */
export interface ClaimedDelivery {
  readonly id: bigint;
  readonly serviceId: string;
  readonly cursor: string;
  readonly body: string;
  readonly url: string;
  /** This attempt's number, 1 for the first. */
  readonly attempt: number;
  /** Milliseconds from the first attempt to now, this attempt included. */
  readonly sinceFirstAttemptMs: number;
}

/**
 * Claims up to `batchSizeMax` due deliveries whose intent has no earlier event still owed (dead
 * ones included: an intent's events never overtake each other), counts the attempt, and leases
 * each row for `leaseMs` (renewed by renewDeliveryLeases while the attempt lasts) so that a worker
 * that dies mid-send leaves it to be tried again within one lease.
 * SKIP LOCKED lets workers in several processes claim side by side. `serviceId` claims only that
 * service's deliveries, so that one service's slow receiver never holds another's (docs/rules.md R61).
 */
export async function claimDueDeliveries(
  sql: Sql,
  batchSizeMax: number,
  leaseMs: number,
  serviceId: string | null = null,
): Promise<ClaimedDelivery[]> {
  const { rows } = await sql.query<{
    id: bigint;
    service_id: string;
    feed_cursor: string;
    body: string;
    url: string;
    attempts: number;
    since_first_ms: number;
  }>(
    `UPDATE webhook_deliveries d
        SET attempts = d.attempts + 1, first_attempt_at = COALESCE(d.first_attempt_at, now()), last_attempt_at = now(),
            next_attempt_at = now() + $2::float8 * interval '1 millisecond'
       FROM service_keys k
      WHERE k.service_id = d.service_id
        AND d.id IN (
          SELECT c.id FROM webhook_deliveries c
           WHERE c.dead_at IS NULL AND c.next_attempt_at <= now() AND ($3::text IS NULL OR c.service_id = $3::text)
             AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.intent_id = c.intent_id AND e.id < c.id)
             AND EXISTS (SELECT 1 FROM service_keys s
                          WHERE s.service_id = c.service_id AND s.active AND s.permissions->'webhook'->>'url' IS NOT NULL)
           ORDER BY c.next_attempt_at, c.id
           LIMIT $1
             FOR UPDATE SKIP LOCKED)
      RETURNING d.id, d.service_id, d.feed_cursor, d.body, k.permissions->'webhook'->>'url' AS url, d.attempts,
                (EXTRACT(EPOCH FROM now() - d.first_attempt_at) * 1000)::float8 AS since_first_ms`,
    [batchSizeMax, leaseMs, serviceId],
  );
  return rows.map((row) => ({
    id: row.id,
    serviceId: row.service_id,
    cursor: row.feed_cursor,
    body: row.body,
    url: row.url,
    attempt: row.attempts,
    sinceFirstAttemptMs: row.since_first_ms,
  }));
}

/**
 * The heartbeat of a live webhook worker: extends the leases of the deliveries it is still
 * attempting (each with the attempt it claimed) by `leaseMs`. A row claimed again meanwhile counts
 * a later attempt and is left alone, as is one acknowledged (gone) or dead.
 */
export async function renewDeliveryLeases(
  sql: Sql,
  held: { readonly ids: readonly string[]; readonly attempts: readonly number[] },
  leaseMs: number,
): Promise<number> {
  const { rowCount } = await sql.query(
    `UPDATE webhook_deliveries d SET next_attempt_at = now() + $3::float8 * interval '1 millisecond'
       FROM unnest($1::bigint[], $2::int[]) AS h (id, attempts)
      WHERE d.id = h.id AND d.attempts = h.attempts AND d.dead_at IS NULL`,
    [held.ids, held.attempts, leaseMs],
  );
  return rowCount;
}

/** The receiver answered 2xx: the event is no longer owed, and the intent's next event may go. */
export async function acknowledgeDelivery(sql: Sql, id: bigint): Promise<void> {
  await sql.query('DELETE FROM webhook_deliveries WHERE id = $1', [id]);
}

/** The bounded reasons an attempt failed, also the metric's outcome label. */
export const FAILED_OUTCOMES = ['http_error', 'timeout', 'network_error', 'no_secret'] as const;
export type FailedOutcome = (typeof FAILED_OUTCOMES)[number];

export interface FailedAttempt {
  readonly id: bigint;
  /** The attempt that failed: only its own claim may write (a later claim after the lease ran out owns the row then). */
  readonly attempt: number;
  readonly outcome: FailedOutcome;
  readonly httpStatus: number | undefined;
  readonly retryInMs: number;
  /** True when the next attempt would fall outside the retry window: the delivery is dead now. */
  readonly dead: boolean;
}

/** Schedules the next attempt, or marks the delivery dead; false when a later claim already owns the row. */
export async function recordFailedAttempt(sql: Sql, failed: FailedAttempt): Promise<boolean> {
  const { rowCount } = await sql.query(
    `UPDATE webhook_deliveries
        SET last_outcome = $3, last_http_status = $4::int, next_attempt_at = now() + $5::float8 * interval '1 millisecond',
            dead_at = CASE WHEN $6::boolean THEN now() END
      WHERE id = $1 AND attempts = $2::int AND dead_at IS NULL`,
    [failed.id, failed.attempt, failed.outcome, failed.httpStatus ?? null, failed.retryInMs, failed.dead],
  );
  return rowCount === 1;
}
