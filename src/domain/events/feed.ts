import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import Type, { type Static } from 'typebox';
import type { Sql } from '../../adapters/database.js';
import type { IntentStatus, OperationType } from '../model.js';
import { Currency, Money, Uuid } from '../wire-types.js';
import type { CursorSeal } from './cursor-seal.js';
import { comparePositions, encodeFeedCursor, FEED_START, type FeedPosition, laterOf } from './feed-cursor.js';

/**
 * The event feed (docs/EVENTS.md): every status change of every intent, read by cursor. Rows are
 * written once, by a trigger on the audit log in the transaction of the change itself, with their
 * place in the feed fixed then (sql/events/01-feed.sql); a reader takes only
 * the rows below its statement's horizon, the oldest transaction still running.
 */

/** One status change as the feed keeps it; `serviceId` names the intent's service (the NATS subject). */
export interface FeedEvent {
  readonly position: FeedPosition;
  /** The position in the plain internal form (webhook_deliveries); readers outside get it sealed (feedEventView). */
  readonly cursor: string;
  readonly serviceId: string;
  readonly intentId: string;
  /** A refund of the intent (docs/rules.md R57) rather than a status change of it; null: a status change. */
  readonly refundId: string | null;
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
  type: Type.Union([Type.Literal('intent'), Type.Literal('refund')], {
    description: "intent: a status change of the intent; refund: a refund of it (statusFrom null, statusTo the refund's status)",
  }),
  refundId: Type.Optional(Uuid),
  intentId: Uuid,
  operationType: Type.String(),
  statusFrom: Type.Union([Type.String(), Type.Null()], { description: 'null for the creation' }),
  statusTo: Type.String(),
  amount: Money,
  currency: Currency,
  occurredAt: Type.String({ format: 'date-time' }),
});

/** `cursors` seals the event's position for its own service (docs/rules.md R63). */
export function feedEventView(event: FeedEvent, cursors: CursorSeal): Static<typeof FeedEventView> {
  return {
    cursor: cursors.seal(event.serviceId, event.position),
    type: event.refundId === null ? ('intent' as const) : ('refund' as const),
    ...(event.refundId === null ? {} : { refundId: event.refundId }),
    intentId: event.intentId,
    operationType: event.operationType,
    statusFrom: event.statusFrom,
    statusTo: event.statusTo,
    amount: event.amount.toString(),
    currency: event.currency,
    occurredAt: event.occurredAt.toISOString(),
  };
}

export interface FeedPage {
  readonly events: FeedEvent[];
  /** Where the reader goes on from: the last event's place, or the horizon when the page is not full. */
  readonly next: FeedPosition;
  /**
   * The oldest transaction id still running when the page was read (its statement's snapshot):
   * every row below it is final, every row that commits later is at or above it.
   */
  readonly horizon: bigint;
  /** The end of the numbering before migration 020: a cursor (0, n) above it was never issued. */
  readonly numberedThroughSeq: bigint;
  /** Every event at or before this place was pruned: a reader behind it has missed events. */
  readonly prunedThrough: FeedPosition;
  /** The place of the newest event in the read's scope that its snapshot saw, committed; null: none. */
  readonly newest: FeedPosition | null;
}

export interface FeedQuery {
  /** Absent: every service's events (background readers). */
  readonly serviceId?: string;
  /** The place of the last event already read; null: from the oldest kept. */
  readonly after: FeedPosition | null;
  readonly limit: number;
}

/** The oldest transaction id still running in this statement's snapshot (docs/EVENTS.md). */
export const FEED_HORIZON_SQL = 'pg_snapshot_xmin(pg_current_snapshot())::text::bigint';

const FEED_COLUMNS = `xact, seq, service_id, intent_id, refund_id, operation_type, status_from, status_to, amount, currency, occurred_at`;
// Two texts rather than one with `$4 IS NULL OR service_id = $4`: a generic plan of that would not use the service's index.
const AFTER_AND_BELOW = `(xact, seq) > ($1, $2) AND xact < h.horizon ORDER BY xact, seq LIMIT $3`;
const SERVICE_PAGE_SQL = `SELECT ${FEED_COLUMNS} FROM event_feed WHERE service_id = $4 AND ${AFTER_AND_BELOW}`;
const ALL_PAGE_SQL = `SELECT ${FEED_COLUMNS} FROM event_feed WHERE ${AFTER_AND_BELOW}`;
const NEWEST = 'ORDER BY xact DESC, seq DESC LIMIT 1';
const SERVICE_NEWEST_SQL = `SELECT xact AS newest_xact, seq AS newest_seq FROM event_feed WHERE service_id = $4 ${NEWEST}`;
const ALL_NEWEST_SQL = `SELECT xact AS newest_xact, seq AS newest_seq FROM event_feed ${NEWEST}`;

interface FeedRow {
  xact: bigint | null;
  seq: bigint | null;
  service_id: string;
  intent_id: string;
  refund_id: string | null;
  operation_type: OperationType;
  status_from: IntentStatus | null;
  status_to: IntentStatus;
  amount: bigint;
  currency: string;
  occurred_at: Date;
}

/**
 * One page of the events after `after` that are below the horizon, in feed order. The page, the
 * horizon and the pruning mark come from one statement, so one snapshot: every row below the
 * horizon has committed (and is in this snapshot) or never will, and every row that commits later
 * is at or above it. So when the page is not full, the reader has every event before
 * `(horizon, 0)` and may move on to it (a reader of a quiet service keeps its cursor near the
 * end, clear of pruning); the rows at or above it come on a later page.
 */
export async function readFeed(sql: Sql, query: FeedQuery): Promise<FeedPage> {
  assert.ok(Number.isInteger(query.limit) && query.limit > 0, 'limit must be a positive integer');
  const after = query.after ?? FEED_START;
  const params: unknown[] = [after.xact.toString(), after.seq.toString(), query.limit];
  if (query.serviceId !== undefined) params.push(query.serviceId);
  const scoped = query.serviceId !== undefined;
  const { rows } = await sql.query<
    FeedRow & {
      horizon: bigint;
      last_seq: bigint;
      pruned_through_xact: bigint;
      pruned_through_seq: bigint;
      newest_xact: bigint | null;
      newest_seq: bigint | null;
    }
  >(
    `SELECT h.horizon, s.last_seq, s.pruned_through_xact, s.pruned_through_seq, n.newest_xact, n.newest_seq, page.*
       FROM (SELECT ${FEED_HORIZON_SQL} AS horizon) h
      CROSS JOIN event_feed_state s
       LEFT JOIN LATERAL (${scoped ? SERVICE_NEWEST_SQL : ALL_NEWEST_SQL}) n ON true
       LEFT JOIN LATERAL (${scoped ? SERVICE_PAGE_SQL : ALL_PAGE_SQL}) page ON true
      ORDER BY page.xact, page.seq`,
    params,
  );
  const first = rows[0];
  assert.ok(first !== undefined, 'event_feed_state has its one row');
  const events = rows.filter((row) => row.seq !== null).map(toFeedEvent);
  const last = events.at(-1);
  const next = last !== undefined && events.length === query.limit ? last.position : laterOf(after, { xact: first.horizon, seq: 0n });
  return {
    events,
    next,
    horizon: first.horizon,
    numberedThroughSeq: first.last_seq,
    prunedThrough: { xact: first.pruned_through_xact, seq: first.pruned_through_seq },
    newest: first.newest_xact === null || first.newest_seq === null ? null : { xact: first.newest_xact, seq: first.newest_seq },
  };
}

/**
 * How long a read waits for the horizon to pass events it could see committed (docs/EVENTS.md,
 * "Reading your own writes"): in normal operation the horizon trails the newest commit by
 * milliseconds, so a reader is answered with what committed before it asked; a transaction held
 * open longer only delays the answer by this much, which then stops short as before.
 */
export const FEED_SETTLE_MS = 1_000;
const SETTLE_PAUSE_MS = { first: 2, max: 50 };

/**
 * A page as readFeed answers it, read again until it is full or holds every event its snapshot saw
 * committed after `after`, for at most FEED_SETTLE_MS. Nothing else changes: each read is exact by
 * itself, and the last one is the answer.
 */
export async function readFeedSettled(sql: Sql, query: FeedQuery, settleMs = FEED_SETTLE_MS): Promise<FeedPage> {
  const deadline = performance.now() + settleMs;
  for (let pause = SETTLE_PAUSE_MS.first; ; pause = Math.min(pause * 2, SETTLE_PAUSE_MS.max)) {
    const page = await readFeed(sql, query);
    if (!heldBack(page, query) || performance.now() + pause > deadline) return page;
    await sleep(pause);
  }
}

/**
 * Whether the snapshot saw a committed event after `after` that the horizon kept out of a page that
 * is not full: the newest one is at or above the horizon. That also covers a cursor ahead of the
 * horizon that names a committed event (a live stream's id), which is then waited for, not refused.
 */
function heldBack(page: FeedPage, query: FeedQuery): boolean {
  if (page.events.length === query.limit || page.newest === null) return false;
  if (comparePositions(page.newest, { xact: page.horizon, seq: 0n }) < 0) return false;
  return query.after === null || comparePositions(query.after, page.newest) <= 0;
}

/**
 * Whether a page's reader could have been given `cursor`: no cursor is ever above the horizon it
 * was read at (an event's place is below it, a short page's end is `(horizon, 0)`), and horizons
 * only grow; before migration 020, no seq above the numbering's end.
 */
export function cursorIssuedBefore(cursor: FeedPosition, page: FeedPage): boolean {
  if (cursor.xact === 0n) return cursor.seq <= page.numberedThroughSeq;
  return comparePositions(cursor, { xact: page.horizon, seq: 0n }) <= 0;
}

/** Whether events right after `cursor` were pruned (410 CURSOR_EXPIRED). */
export function cursorPruned(cursor: FeedPosition, page: FeedPage): boolean {
  return comparePositions(cursor, page.prunedThrough) < 0;
}

function toFeedEvent(row: FeedRow): FeedEvent {
  assert.ok(row.seq !== null && row.xact !== null);
  const position = { xact: row.xact, seq: row.seq };
  return {
    position,
    cursor: encodeFeedCursor(position),
    serviceId: row.service_id,
    intentId: row.intent_id,
    refundId: row.refund_id,
    operationType: row.operation_type,
    statusFrom: row.status_from,
    statusTo: row.status_to,
    amount: row.amount,
    currency: row.currency,
    occurredAt: row.occurred_at,
  };
}

/**
 * One intent's status changes after `after` (null: all of them kept), in order, its refunds' events
 * left out (they are no change of its status); for a live stream that
 * resumes from a cursor. Scoped to the service, so a cursor names nothing of another tenant's.
 * No horizon: one intent's committed rows are always a prefix of its changes in feed order (a
 * change waits for the previous one's commit and is placed after it, docs/EVENTS.md), so a
 * later one never lands before a place already read.
 */
export async function readIntentFeed(
  sql: Sql,
  query: { readonly serviceId: string; readonly intentId: string; readonly after: FeedPosition | null },
): Promise<FeedEvent[]> {
  const after = query.after ?? FEED_START;
  const { rows } = await sql.query<FeedRow>(
    `SELECT ${FEED_COLUMNS} FROM event_feed WHERE intent_id = $1 AND service_id = $2 AND refund_id IS NULL AND (xact, seq) > ($3, $4) ORDER BY xact, seq LIMIT $5`,
    [query.intentId, query.serviceId, after.xact.toString(), after.seq.toString(), INTENT_EVENTS_MAX],
  );
  return rows.map(toFeedEvent);
}

/** An intent has a handful of status changes; the bound only keeps the read finite. */
const INTENT_EVENTS_MAX = 100;
