import assert from 'node:assert/strict';
import Type, { type Static } from 'typebox';
import type { Database, Sql } from '../../adapters/database.js';
import type { IntentStatus, OperationType } from '../model.js';
import { Money, Uuid } from '../wire-types.js';
import { encodeFeedCursor } from './feed-cursor.js';

/**
 * The event feed (docs/EVENTS.md): every status change of every intent, numbered after commit by
 * one sequencer at a time, read by cursor. Rows are written by a trigger on the audit log
 * (migrations/013-event-feed.sql), in the transaction of the change itself.
 */

/** One status change as the feed keeps it; `serviceId` names the intent's service (the NATS subject). */
export interface FeedEvent {
  readonly seq: bigint;
  readonly cursor: string;
  readonly serviceId: string;
  readonly intentId: string;
  readonly operationType: OperationType;
  /** null for the creation. */
  readonly statusFrom: IntentStatus | null;
  readonly statusTo: IntentStatus;
  readonly amount: bigint;
  readonly currency: string;
  readonly occurredAt: Date;
}

/** An event as every reader outside gets it (docs/rules.md R54): GET /events, the event bus, webhooks. */
export const FeedEventView = Type.Object({
  cursor: Type.String({ description: 'opaque; `after` of a later call resumes right behind this event' }),
  intentId: Uuid,
  operationType: Type.String(),
  statusFrom: Type.Union([Type.String(), Type.Null()], { description: 'null for the creation' }),
  statusTo: Type.String(),
  amount: Money,
  currency: Type.String(),
  occurredAt: Type.String({ format: 'date-time' }),
});

export function feedEventView(event: FeedEvent): Static<typeof FeedEventView> {
  return {
    cursor: event.cursor,
    intentId: event.intentId,
    operationType: event.operationType,
    statusFrom: event.statusFrom,
    statusTo: event.statusTo,
    amount: event.amount.toString(),
    currency: event.currency,
    occurredAt: event.occurredAt.toISOString(),
  };
}

/** Rows one sequencer step numbers at most: one step stays a short transaction behind a burst. */
export const SEQUENCE_BATCH_SIZE_MAX = 5_000;

/**
 * The lock, and the numbering's join fixed to a merge join for this transaction. The rows waiting
 * to be numbered come and go by the thousand between ANALYZE runs, so the planner often believes
 * there is one; it then nested-looped the whole backlog against the batch, a step took minutes
 * behind a 560,000-row backlog and the backlog only grew (docs/PERFORMANCE.md, Log, 2026-11-26
 * night). Both sides of the merge come in event id order and it stops at the batch's end, so a
 * step costs its batch whatever the backlog and the statistics.
 *
 * Transaction-scoped, so it is released at COMMIT (also through a transaction-pooling PgBouncer)
 * and only after the step's numbers are visible to everyone; scoped to the schema like the
 * outbox's lock, so deployments sharing a server do not wait for each other.
 */
export const SEQUENCER_LOCK_SQL = `SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema() || '/payorch.event-feed', 0)) AS locked,
   set_config('enable_nestloop', 'off', true), set_config('enable_hashjoin', 'off', true)`;

/** One numbering step, $1 the most rows it takes; run after SEQUENCER_LOCK_SQL in its transaction. */
export const SEQUENCE_STEP_SQL = `WITH batch AS MATERIALIZED (
     SELECT event_id, row_number() OVER (ORDER BY event_id) AS n
       FROM (SELECT event_id FROM event_feed WHERE seq IS NULL ORDER BY event_id LIMIT $1) oldest
   ), counter AS (
     UPDATE event_feed_state SET last_seq = last_seq + (SELECT count(*) FROM batch)
      WHERE EXISTS (SELECT 1 FROM batch)
     RETURNING last_seq - (SELECT count(*) FROM batch) AS base
   ), numbered AS (
     UPDATE event_feed f SET seq = (SELECT base FROM counter) + batch.n
       FROM batch
      WHERE f.event_id = batch.event_id AND f.seq IS NULL
     RETURNING f.seq
   )
   SELECT (SELECT count(*) FROM numbered) AS numbered, (SELECT count(*) FROM batch) AS taken`;

/**
 * Numbers the rows that committed since the last step, in event id order, continuing the one
 * counter. Only one step runs at a time (the lock); its snapshot is taken after the lock, so it
 * sees every number given before. Answers how many rows it numbered, or null when another step
 * holds the lock (that one numbers them).
 */
export async function sequenceFeed(db: Database, batchSizeMax: number = SEQUENCE_BATCH_SIZE_MAX): Promise<number | null> {
  assert.ok(Number.isInteger(batchSizeMax) && batchSizeMax > 0, 'batchSizeMax must be a positive integer');
  return db.transaction(async (tx) => {
    const { rows: lock } = await tx.query<{ locked: boolean }>(SEQUENCER_LOCK_SQL);
    if (lock[0]?.locked !== true) return null;
    // A separate statement from the lock: in READ COMMITTED each statement takes a new snapshot,
    // and this one must be taken after the previous step's COMMIT.
    const { rows } = await tx.query<{ numbered: bigint }>(SEQUENCE_STEP_SQL, [batchSizeMax]);
    const row = rows[0] as { numbered: bigint; taken: bigint } | undefined;
    assert.ok(row !== undefined, 'the sequencer statement answers one row');
    // Under the lock nothing else numbers rows, and pruning only removes numbered ones.
    assert.equal(row.numbered, row.taken, 'every unsequenced row the step took was numbered');
    return Number(row.numbered);
  });
}

export interface FeedPage {
  readonly events: FeedEvent[];
  /** Where the reader goes on from: the last event's seq, or the feed's end when the page is not full. */
  readonly nextSeq: bigint;
  /** The highest seq given so far, in the same snapshot as the page. */
  readonly lastSeq: bigint;
  /** Every event with seq <= this was pruned: a reader behind it has missed events. */
  readonly prunedThroughSeq: bigint;
}

export interface FeedQuery {
  /** Absent: every service's events (background readers). */
  readonly serviceId?: string;
  /** The seq of the last event already read; null: from the oldest kept. */
  readonly afterSeq: bigint | null;
  readonly limit: number;
}

const FEED_COLUMNS = `seq, service_id, intent_id, operation_type, status_from, status_to, amount, currency, occurred_at`;
// Two texts rather than one with `$1 IS NULL OR service_id = $1`: a generic plan of that would not use the service's index.
const SERVICE_PAGE_SQL = `SELECT ${FEED_COLUMNS} FROM event_feed WHERE service_id = $3 AND seq > $1 ORDER BY seq LIMIT $2`;
const ALL_PAGE_SQL = `SELECT ${FEED_COLUMNS} FROM event_feed WHERE seq > $1 ORDER BY seq LIMIT $2`;

interface FeedRow {
  seq: bigint | null;
  service_id: string;
  intent_id: string;
  operation_type: OperationType;
  status_from: IntentStatus | null;
  status_to: IntentStatus;
  amount: bigint;
  currency: string;
  occurred_at: Date;
  last_seq: bigint;
  pruned_through_seq: bigint;
}

/**
 * One page of numbered events after `afterSeq`, in seq order. The page, the counter and the
 * pruning mark come from one statement, so one snapshot: when the page is not full, every event
 * numbered up to `lastSeq` is in it or before the cursor, and `nextSeq` may move on to `lastSeq`
 * (a reader of a quiet service keeps its cursor near the end, clear of pruning).
 */
export async function readFeed(sql: Sql, query: FeedQuery): Promise<FeedPage> {
  assert.ok(Number.isInteger(query.limit) && query.limit > 0, 'limit must be a positive integer');
  const params: unknown[] = [(query.afterSeq ?? 0n).toString(), query.limit];
  if (query.serviceId !== undefined) params.push(query.serviceId);
  const { rows } = await sql.query<FeedRow>(
    `SELECT s.last_seq, s.pruned_through_seq, page.*
       FROM event_feed_state s
       LEFT JOIN (${query.serviceId === undefined ? ALL_PAGE_SQL : SERVICE_PAGE_SQL}) page ON true
      ORDER BY page.seq`,
    params,
  );
  const first = rows[0];
  assert.ok(first !== undefined, 'event_feed_state has its one row');
  const events = rows.filter((row) => row.seq !== null).map(toFeedEvent);
  const last = events.at(-1);
  const after = query.afterSeq ?? 0n;
  const nextSeq = last !== undefined && events.length === query.limit ? last.seq : maxOf(after, first.last_seq);
  return { events, nextSeq, lastSeq: first.last_seq, prunedThroughSeq: first.pruned_through_seq };
}

function toFeedEvent(row: FeedRow): FeedEvent {
  assert.ok(row.seq !== null);
  return {
    seq: row.seq,
    cursor: encodeFeedCursor(row.seq),
    serviceId: row.service_id,
    intentId: row.intent_id,
    operationType: row.operation_type,
    statusFrom: row.status_from,
    statusTo: row.status_to,
    amount: row.amount,
    currency: row.currency,
    occurredAt: row.occurred_at,
  };
}

const maxOf = (a: bigint, b: bigint) => (a > b ? a : b);

/**
 * One intent's numbered events after `afterSeq` (null: all of them kept), in order; for a live
 * stream that resumes from a cursor. Scoped to the service, so a cursor names nothing of another
 * tenant's.
 */
export async function readIntentFeed(
  sql: Sql,
  query: { readonly serviceId: string; readonly intentId: string; readonly afterSeq: bigint | null },
): Promise<FeedEvent[]> {
  const { rows } = await sql.query<FeedRow>(
    `SELECT ${FEED_COLUMNS} FROM event_feed WHERE intent_id = $1 AND service_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`,
    [query.intentId, query.serviceId, (query.afterSeq ?? 0n).toString(), INTENT_EVENTS_MAX],
  );
  return rows.map(toFeedEvent);
}

/** An intent has a handful of status changes; the bound only keeps the read finite. */
const INTENT_EVENTS_MAX = 100;
