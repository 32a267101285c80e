import assert from 'node:assert/strict';
import type { Sql } from '../../../adapters/database.js';
import type { IntentFilter } from '@payorch/client';
import { INTENT_SELECT, type Intent, toIntent } from './intent-store.js';

/** Admin listing of intents across services, newest first, with keyset (cursor) paging. */

export const LIST_LIMIT_MAX = 200;
export const LIST_LIMIT_DEFAULT = 50;

/** The filter of GET /admin/intents, as the client sends it. */
export type { IntentFilter } from '@payorch/client';

/**
 * The position after the last row of a page. created_at is kept in whole microseconds (the
 * column's precision): a JavaScript Date holds milliseconds only, and rounding would skip or
 * repeat rows created in the same millisecond.
 */
interface Cursor {
  readonly createdAtUs: bigint;
  readonly id: string;
}

export interface IntentPage {
  readonly intents: Intent[];
  /** null on the last page. */
  readonly nextCursor: string | null;
}

const CURSOR_PATTERN = /^(0|[1-9][0-9]{0,17})\.([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;
/**
 * The last microsecond of year 9999: any cursor we issue is far below, and the timestamp SQL
 * builds from it stays inside PostgreSQL's range (a larger one was a 500, "out of range").
 */
const CURSOR_TIME_US_MAX = 253_402_300_799_999_999n;

/** Opaque to clients: base64url of `createdAtMicroseconds.id`. */
export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(`${cursor.createdAtUs}.${cursor.id}`).toString('base64url');
}

/**
 * null when the text is not a cursor this service issues: exactly the bytes encodeCursor writes
 * (no padding, no other alphabet, no trailing text), a time in range and a lower-case UUID.
 * A cursor names only a position in a listing its bearer may read whole, so the format is the
 * check; there is nothing to forge (docs/SECURITY.md §6).
 */
export function decodeCursor(text: string): Cursor | null {
  const match = CURSOR_PATTERN.exec(Buffer.from(text, 'base64url').toString('latin1'));
  if (match?.[1] === undefined || match[2] === undefined) return null;
  const cursor = { createdAtUs: BigInt(match[1]), id: match[2] };
  if (cursor.createdAtUs > CURSOR_TIME_US_MAX || encodeCursor(cursor) !== text) return null;
  return cursor;
}

/** Microseconds since the epoch → timestamptz, in integer arithmetic (a float would round). */
const US_TO_TIMESTAMP = (param: string) => `(timestamptz 'epoch' + ${param}::bigint * interval '1 microsecond')`;

/**
 * One page, read with `(created_at, id) < cursor` on the (created_at, id) order: rows inserted
 * while a client pages are newer than its cursor, so they neither shift nor repeat what follows.
 * (A row whose transaction began before the first page but committed after it carries the older
 * created_at and can be missed by a walk already past it; the next walk sees it.)
 */
export async function listIntents(sql: Sql, filter: IntentFilter, page: { limit: number; cursor: string | null }): Promise<IntentPage> {
  assert.ok(Number.isInteger(page.limit) && page.limit >= 1 && page.limit <= LIST_LIMIT_MAX, 'page limit out of range');
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (condition: (placeholder: string) => string, value: unknown) => {
    params.push(value);
    where.push(condition(`$${params.length}`));
  };
  if (filter.status !== undefined) add((p) => `status = ${p}`, filter.status);
  if (filter.operationType !== undefined) add((p) => `operation_type = ${p}`, filter.operationType);
  if (filter.channel !== undefined) add((p) => `channel = ${p}`, filter.channel);
  if (filter.serviceId !== undefined) add((p) => `service_id = ${p}`, filter.serviceId);
  if (filter.createdFrom !== undefined) add((p) => `created_at >= ${p}::timestamptz`, filter.createdFrom);
  if (filter.createdTo !== undefined) add((p) => `created_at < ${p}::timestamptz`, filter.createdTo);
  if (page.cursor !== null) {
    const cursor = decodeCursor(page.cursor);
    assert.ok(cursor !== null, 'the caller checks the cursor before listing');
    params.push(cursor.createdAtUs.toString(), cursor.id);
    where.push(`(created_at, id) < (${US_TO_TIMESTAMP(`$${params.length - 1}`)}, $${params.length}::uuid)`);
  }
  // EXTRACT yields numeric (exact) since PostgreSQL 14, so the cursor keeps every microsecond.
  // One row more than the page tells whether another page follows, without a count.
  params.push(page.limit + 1);
  const { rows } = await sql.query<Record<string, unknown> & { created_at_us: bigint }>(
    `SELECT ${INTENT_SELECT}, (EXTRACT(EPOCH FROM created_at) * 1000000)::bigint AS created_at_us
       FROM intents ${where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`}
      ORDER BY created_at DESC, id DESC
      LIMIT $${params.length}`,
    params,
  );
  const pageRows = rows.slice(0, page.limit);
  const last = pageRows.at(-1);
  const nextCursor =
    rows.length > page.limit && last !== undefined ? encodeCursor({ createdAtUs: BigInt(last.created_at_us), id: String(last.id) }) : null;
  return { intents: pageRows.map(toIntent), nextCursor };
}
