import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { migrate } from '../../src/adapters/migrations.js';
import { decodeFeedCursor, encodeFeedCursor, type FeedPosition } from '../../src/domain/events/feed-cursor.js';
import { loadReaderPosition } from '../../src/domain/events/feed-readers.js';
import { cursorIssuedBefore, cursorPruned, type FeedEvent, readFeed } from '../../src/domain/events/feed.js';
import { createTestSchema, type TestSchema, testPoolMode } from '../support/database.js';
import { feedCaughtUp } from '../support/feed.js';

/**
 * Migration 020 on a database with a feed in use: rows numbered by the sequencer of the release
 * before, rows not numbered yet, a background reader's position, a cursor a client holds, and a
 * pruning mark. After it every old cursor reads on from the same place, and every change comes once.
 */

const BEFORE = '019-settled-payee-index-merchants-only';
const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;

let schema: TestSchema | undefined;
let db: Database;
beforeAll(async () => {
  schema = pgUrl === undefined ? undefined : await createTestSchema(pgUrl, 'feedupg');
  db = await openDatabase(schema?.url ?? 'memory://', '', testPoolMode);
  expect(await migrate(db, { through: BEFORE })).toContain(BEFORE);
});
afterAll(async () => {
  await db?.close();
  await schema?.drop();
});

/** An intent and its creation's audit event, in one statement as every writer creates them. */
async function storeIntent(): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `WITH created AS (
       INSERT INTO intents (id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel, to_account_name, amount, status)
       VALUES (gen_random_uuid(), gen_random_uuid(), 'upgrade-test', 'f', 1, 'INVOICE_PAYMENT', 'INTERNAL', 'user.2.THB', 5, 'CREATED')
       RETURNING id
     ), event AS (INSERT INTO intent_events (intent_id, status_to) SELECT id, 'CREATED' FROM created)
     SELECT id FROM created`,
  );
  return rows[0]?.id as string;
}

async function change(id: string, from: string | null, to: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('UPDATE intents SET status = $2 WHERE id = $1', [id, to]);
    await tx.query('INSERT INTO intent_events (intent_id, status_from, status_to) VALUES ($1, $2, $3)', [id, from, to]);
  });
}

/** The sequencer step of the release before 020: numbers every unnumbered row in event id order. */
const numberAsBefore = () =>
  db.query(
    `WITH batch AS MATERIALIZED (
       SELECT event_id, row_number() OVER (ORDER BY event_id) AS n FROM event_feed WHERE seq IS NULL
     ), counter AS (
       UPDATE event_feed_state SET last_seq = last_seq + (SELECT count(*) FROM batch) RETURNING last_seq - (SELECT count(*) FROM batch) AS base
     )
     UPDATE event_feed f SET seq = (SELECT base FROM counter) + batch.n FROM batch WHERE f.event_id = batch.event_id`,
  );

const trail = (events: readonly FeedEvent[]) => events.map((e) => `${e.intentId.slice(0, 8)} ${e.statusFrom ?? ''}>${e.statusTo}`);

async function readToEnd(after: FeedPosition | null, limit: number): Promise<{ events: FeedEvent[]; next: FeedPosition | null }> {
  await feedCaughtUp(db);
  const events: FeedEvent[] = [];
  let cursor = after;
  for (;;) {
    const page = await readFeed(db, { serviceId: 'upgrade-test', after: cursor, limit });
    expect(cursor === null || cursorIssuedBefore(cursor, page)).toBe(true);
    events.push(...page.events);
    cursor = page.next;
    if (page.events.length === 0) return { events, next: cursor };
  }
}

describe('migration 020 on a feed in use', () => {
  it('keeps every cursor given before it, numbers what was waiting, and every change comes once, in order', async () => {
    // Before: four changes numbered 1..4, a client's cursor after the second, a reader's after the
    // third, the end of the feed as a quiet reader holds it, and the first event pruned.
    const a = await storeIntent();
    const b = await storeIntent();
    const c = await storeIntent();
    await change(a, 'CREATED', 'VALIDATED');
    await numberAsBefore();
    const numbered = await db.query<{ seq: string }>('SELECT seq::text FROM event_feed ORDER BY seq');
    expect(numbered.rows.map((r) => r.seq)).toEqual(['1', '2', '3', '4']);
    const clientCursor = Buffer.from('e2').toString('base64url');
    const quietEnd = Buffer.from('e4').toString('base64url');
    await db.query("INSERT INTO event_feed_readers (reader, after_seq) VALUES ('nats:UPGRADE', 3)");
    await db.query('DELETE FROM event_feed WHERE seq = 1');
    await db.query('UPDATE event_feed_state SET pruned_through_seq = 1');
    // Two changes committed and not numbered yet when the release before stops.
    await change(b, 'CREATED', 'CANCELED');
    await change(c, 'CREATED', 'EXPIRED');

    expect(await migrate(db)).toContain('020-event-feed-written-once');

    // After: one more change of an intent from before, and a new intent.
    await change(a, 'VALIDATED', 'FAILED');
    const d = await storeIntent();

    const fromClient = await readToEnd(decodeFeedCursor(clientCursor), 1);
    expect(trail(fromClient.events)).toEqual(
      trail([
        { intentId: c, statusFrom: null, statusTo: 'CREATED' },
        { intentId: a, statusFrom: 'CREATED', statusTo: 'VALIDATED' },
        { intentId: b, statusFrom: 'CREATED', statusTo: 'CANCELED' },
        { intentId: c, statusFrom: 'CREATED', statusTo: 'EXPIRED' },
        { intentId: a, statusFrom: 'VALIDATED', statusTo: 'FAILED' },
        { intentId: d, statusFrom: null, statusTo: 'CREATED' },
      ] as FeedEvent[]),
    );
    // Rows numbered before keep their cursors; the waiting ones continue the numbering; new ones are after all of them.
    expect(fromClient.events.slice(0, 4).map((e) => e.cursor)).toEqual(
      ['e3', 'e4', 'e5', 'e6'].map((text) => Buffer.from(text).toString('base64url')),
    );
    for (const event of fromClient.events.slice(4)) expect(event.position.xact).toBeGreaterThan(0n);
    expect(new Set(fromClient.events.map((e) => e.cursor)).size).toBe(6);

    // The quiet reader's end of the feed sees exactly what came after it.
    const fromQuiet = await readToEnd(decodeFeedCursor(quietEnd), 500);
    expect(fromQuiet.events).toEqual(fromClient.events.slice(2));
    // The background reader's stored seq is the same place.
    expect(await loadReaderPosition(db, 'nats:UPGRADE')).toEqual({ xact: 0n, seq: 3n });
    // Pruned before stays pruned: a cursor behind the mark is expired; a seq past the old numbering was never issued.
    const page = await readFeed(db, { after: { xact: 0n, seq: 0n }, limit: 1 });
    expect(cursorPruned({ xact: 0n, seq: 0n }, page)).toBe(true);
    expect(cursorPruned(decodeFeedCursor(clientCursor) as FeedPosition, page)).toBe(false);
    expect(cursorIssuedBefore({ xact: 0n, seq: 6n }, page)).toBe(true);
    expect(cursorIssuedBefore({ xact: 0n, seq: 7n }, page)).toBe(false);
    expect(encodeFeedCursor({ xact: 0n, seq: 6n })).toBe(Buffer.from('e6').toString('base64url'));

    // Applying it again (as after a lost record) changes nothing.
    await db.query("DELETE FROM schema_migrations WHERE version = '020-event-feed-written-once'");
    expect(await migrate(db)).toContain('020-event-feed-written-once');
    expect((await readToEnd(decodeFeedCursor(clientCursor), 500)).events).toEqual(fromClient.events);
  });
});
