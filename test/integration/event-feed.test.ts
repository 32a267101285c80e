import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decodeFeedCursor, encodeFeedCursor } from '../../src/domain/events/feed-cursor.js';
import { pruneFeed } from '../../src/domain/events/feed-retention.js';
import { readFeed, SEQUENCE_STEP_SQL, SEQUENCER_LOCK_SQL, sequenceFeed } from '../../src/domain/events/feed.js';
import { storeReaderPosition } from '../../src/domain/events/feed-readers.js';
import { moveIntent } from '../../src/domain/intents/store/intent-writer.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createMerchant, createUser, intentBody, topUp } from '../support/payments.js';

/**
 * GET /events (docs/EVENTS.md): every status change of the calling service's intents, once and in
 * order for a reader that follows nextCursor, also while other transactions are still open.
 */

interface WireEvent {
  cursor: string;
  intentId: string;
  operationType: string;
  statusFrom: string | null;
  statusTo: string;
  amount: string;
  currency: string;
  occurredAt: string;
}

const PAYERS = Array.from({ length: 40 }, (_, i) => 7001 + i);
const RECIPIENT = 7100;
const MERCHANT = 7200;
const MERCHANT_ACCOUNT = `merchant.${MERCHANT}.THB`;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  for (const user of [...PAYERS, RECIPIENT]) await createUser(t, user);
  await createMerchant(t, MERCHANT);
  for (const payer of PAYERS) await topUp(t, payer, 100_000);
});
afterAll(async () => t?.close());
afterEach(async () => expectLedgerInvariants(t.db));

async function page(after: string | undefined, options: { service?: string; limit?: number } = {}) {
  const query = new URLSearchParams();
  if (after !== undefined) query.set('after', after);
  if (options.limit !== undefined) query.set('limit', String(options.limit));
  const res = await t.call('GET', `/events${query.size > 0 ? `?${query}` : ''}`, { service: options.service ?? 'wallet-api' });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { events: WireEvent[]; nextCursor: string };
}

/** Follows nextCursor until a page comes back empty; answers the events and where it stopped. */
async function readAll(after: string | undefined, limit = 7): Promise<{ events: WireEvent[]; cursor: string }> {
  const events: WireEvent[] = [];
  let cursor = after;
  for (;;) {
    const body = await page(cursor, { limit });
    events.push(...body.events);
    cursor = body.nextCursor;
    if (body.events.length === 0) return { events, cursor };
  }
}

async function endCursor(): Promise<string> {
  return (await readAll(undefined, 500)).cursor;
}

async function pay(payer: number, amount = 100): Promise<string> {
  const res = await t.call('POST', '/intents', {
    user: payer,
    body: intentBody({ operationType: 'P2P_TRANSFER', amount, recipientUserId: RECIPIENT }),
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().intentId as string;
}

async function issueInvoice(amount: number): Promise<string> {
  const res = await t.call('POST', '/intents', {
    user: MERCHANT,
    body: { idempotencyKey: randomUUID(), operationType: 'INVOICE_PAYMENT', amount, toLedgerAccountId: ledgerAccountId(MERCHANT_ACCOUNT) },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().intentId as string;
}

/** Each intent's events, in feed order. */
function byIntent(events: readonly WireEvent[]): Map<string, string[]> {
  const trails = new Map<string, string[]>();
  for (const event of events)
    trails.set(event.intentId, [...(trails.get(event.intentId) ?? []), `${event.statusFrom ?? ''}>${event.statusTo}`]);
  return trails;
}

const SETTLED_TRAIL = ['>CREATED', 'CREATED>VALIDATED', 'VALIDATED>AUTHORIZED', 'AUTHORIZED>SETTLED'];

describe('GET /events', () => {
  it("lists a payment's status changes in order, in the shape of docs/rules.md R54, to its own service only", async () => {
    const start = await endCursor();
    const intentId = await pay(PAYERS[0] as number, 250);
    const { events } = await readAll(start);
    expect(events.map((e) => `${e.statusFrom ?? ''}>${e.statusTo}`)).toEqual(SETTLED_TRAIL);
    expect(events[0]).toEqual({
      cursor: expect.any(String),
      intentId,
      operationType: 'P2P_TRANSFER',
      statusFrom: null,
      statusTo: 'CREATED',
      amount: '250',
      currency: 'THB',
      occurredAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect(new Set(events.map((e) => e.cursor)).size).toBe(4);
    const other = await t.call('GET', '/events?limit=500', { service: 'nfc-terminal' });
    expect(other.statusCode).toBe(200);
    expect(other.json().events.filter((e: WireEvent) => e.intentId === intentId)).toEqual([]);
  });

  it('from the start without after, and a cursor resumes right behind its event', async () => {
    const all = (await readAll(undefined, 3)).events;
    expect(all.length).toBeGreaterThanOrEqual(4);
    const middle = all[1] as WireEvent;
    const resumed = await page(middle.cursor, { limit: 2 });
    expect(resumed.events).toEqual(all.slice(2, 4));
  });

  it('a quiet reader gets a nextCursor at the end of the feed, which sees the next change and only it', async () => {
    const quiet = await page(undefined, { service: 'nfc-terminal' });
    expect(quiet.events).toEqual([]);
    const intentId = await pay(PAYERS[1] as number);
    const after = await readAll(await endCursor());
    expect(after.events).toEqual([]);
    const fromQuiet = await page(quiet.nextCursor, { limit: 500 });
    expect(fromQuiet.events.map((e) => e.intentId)).toEqual([intentId, intentId, intentId, intentId]);
  });

  it('refuses a cursor it did not issue or one ahead of the feed with 422, and a bad limit, changing nothing', async () => {
    const end = await endCursor();
    const endSeq = decodeFeedCursor(end);
    expect(endSeq).not.toBeNull();
    for (const after of ['nope', 'ZTAx', encodeFeedCursor(-1n), `${end}=`, encodeFeedCursor((endSeq ?? 0n) + 1000n), 'e'.repeat(201)]) {
      const res = await t.call('GET', `/events?after=${encodeURIComponent(after)}`);
      expect(res.statusCode, after).toBe(422);
      expect(res.json().error).toBe('VALIDATION_ERROR');
    }
    for (const limit of ['0', '501', 'x', '1.5']) {
      const res = await t.call('GET', `/events?limit=${limit}`);
      expect(res.statusCode, limit).toBe(422);
    }
    expect((await t.call('GET', '/events?after=1&extra=1')).statusCode).toBe(422);
    expect(await endCursor()).toBe(end);
  });

  it('needs a signature', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/events' });
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('UNAUTHORIZED');
  });
});

describe('exactly once, in order, under concurrent writers', () => {
  it('40 concurrent payments, invoices canceled in transactions held open across reads: each change once, no gap, per-intent order', async () => {
    const start = await endCursor();
    const invoices = await Promise.all([issueInvoice(1_000), issueInvoice(2_000), issueInvoice(3_000)]);
    const seen: WireEvent[] = [];
    let cursor = start;
    let writing = true;
    let holding = 0;
    let readWhileHeld = 0;
    const reader = (async () => {
      // Reads in a loop while the writers run, then once more after they are done.
      for (let lastRound = false; ; ) {
        const body = await page(cursor, { limit: 5 });
        seen.push(...body.events);
        cursor = body.nextCursor;
        if (holding > 0) readWhileHeld += body.events.length;
        if (body.events.length === 0) {
          if (lastRound) return;
          if (!writing) lastRound = true;
          await sleep(5);
        }
      }
    })();
    // Each cancel is written, then held uncommitted while payments commit and the reader reads.
    const held = invoices.map((intentId, i) =>
      t.db.transaction(async (tx) => {
        await sleep(10 * i);
        const moved = await moveIntent(tx, intentId, { from: 'CREATED', to: 'CANCELED', changes: { cancelReason: 'USER_CANCELLED' } });
        expect(moved?.status).toBe('CANCELED');
        holding += 1;
        await sleep(300);
        holding -= 1;
      }),
    );
    const payments = Promise.all(PAYERS.map((payer) => pay(payer)));
    const [paid] = await Promise.all([payments, Promise.all(held)]);
    writing = false;
    await reader;
    // PGlite runs one transaction at a time, so only PostgreSQL commits payments behind an open one.
    if (t.db.kind === 'postgres') expect(readWhileHeld, 'the reader moved on while the cancels were uncommitted').toBeGreaterThan(0);

    const cursors = seen.map((e) => e.cursor);
    expect(new Set(cursors).size, 'no event twice').toBe(cursors.length);
    const seqs = cursors.map((c) => decodeFeedCursor(c) as bigint);
    expect([...seqs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(seqs);
    const trails = byIntent(seen);
    for (const intentId of paid) expect(trails.get(intentId), intentId).toEqual(SETTLED_TRAIL);
    for (const intentId of invoices) expect(trails.get(intentId), intentId).toEqual(['>CREATED', 'CREATED>CANCELED']);
    // Nothing else changed meanwhile; and a reader starting over from the same cursor sees the same.
    expect(trails.size).toBe(paid.length + invoices.length);
    const again = await readAll(start, 500);
    expect(again.events.filter((e) => trails.has(e.intentId))).toEqual(seen);
  });
});

describe('metrics', () => {
  it('/metrics shows the changes not yet numbered and how far a background reader is behind', async () => {
    const gauge = async (name: string) => {
      const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
      return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    };
    await endCursor();
    const { rows } = await t.db.query<{ last_seq: bigint }>('SELECT last_seq FROM event_feed_state');
    await storeReaderPosition(t.db, 'test-reader', (rows[0]?.last_seq ?? 0n) - 3n);
    expect(await gauge('payorch_event_feed_unnumbered')).toBe(0);
    expect(await gauge('payorch_event_feed_reader_lag\\{reader="test-reader"\\}')).toBe(3);
    await pay(PAYERS[2] as number);
    expect(await gauge('payorch_event_feed_unnumbered')).toBe(4);
    await sequenceFeed(t.db);
    expect(await gauge('payorch_event_feed_unnumbered')).toBe(0);
    expect(await gauge('payorch_event_feed_reader_lag\\{reader="test-reader"\\}')).toBe(7);
    await t.db.query(`DELETE FROM event_feed_readers WHERE reader = 'test-reader'`);
  });
});

describe('the sequencer and pruning', () => {
  it('numbers nothing twice when steps race, and one step at a time (the other finds the lock taken or nothing left)', async () => {
    const start = decodeFeedCursor(await endCursor()) as bigint;
    await Promise.all(PAYERS.slice(0, 5).map((payer) => pay(payer)));
    const results = await Promise.all([sequenceFeed(t.db), sequenceFeed(t.db), sequenceFeed(t.db)]);
    expect(results.reduce<number>((sum, n) => sum + (n ?? 0), 0)).toBeLessThanOrEqual(20);
    const all = await readFeed(t.db, { afterSeq: start, limit: 500 });
    expect(all.events).toHaveLength(20);
    expect(all.events.map((e) => e.seq)).toEqual(all.events.map((_, i) => start + 1n + BigInt(i)));
  });

  it('a step reads only its batch, however large the backlog behind it and however stale the statistics', async () => {
    const backlog = 20_000;
    const batch = 500;
    await t.db.exec('ANALYZE event_feed');
    const rowsRead = await t.db
      .transaction(async (tx) => {
        // A burst the statistics have not seen: the planner still believes nothing waits.
        await tx.query(
          `INSERT INTO event_feed (event_id, intent_id, service_id, operation_type, status_to, amount, currency, occurred_at)
           SELECT 1000000000 + n, gen_random_uuid(), 'wallet-api', 'P2P_TRANSFER', 'SETTLED', 1, 'THB', now()
             FROM generate_series(1, $1::integer) AS n`,
          [backlog],
        );
        await tx.query(SEQUENCER_LOCK_SQL);
        const { rows } = await tx.query<{ 'QUERY PLAN': unknown }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${SEQUENCE_STEP_SQL.replace('$1', String(batch))}`,
        );
        throw new PlanRead(feedRowsReadByUpdate(rows[0]?.['QUERY PLAN']));
      })
      .catch((error: unknown) => {
        if (error instanceof PlanRead) return error.rows;
        throw error;
      });
    // Before: the whole backlog, each row matched by a scan of the batch; now the batch and the row behind it.
    expect(rowsRead).toBeLessThanOrEqual(batch + 1);
  });

  it('prunes events past the retention from the start of the feed; a cursor behind them gets 410 CURSOR_EXPIRED', async () => {
    const before = await readAll(undefined, 500);
    const oldest = before.events[0] as WireEvent;
    const fourth = before.events[3] as WireEvent;
    // The first four events age past a 30-day retention.
    await t.db.query(`UPDATE event_feed SET occurred_at = now() - interval '31 days' WHERE seq <= $1`, [
      (decodeFeedCursor(fourth.cursor) as bigint).toString(),
    ]);
    expect(await pruneFeed(t.db, { retentionDays: 30, batchSizeMax: 1_000 })).toBe(4);
    expect(await pruneFeed(t.db, { retentionDays: 30, batchSizeMax: 1_000 })).toBe(0);
    const expired = await t.call('GET', `/events?after=${oldest.cursor}`);
    expect(expired.statusCode).toBe(410);
    expect(expired.json()).toEqual({ error: 'CURSOR_EXPIRED', message: expect.any(String) });
    const atMark = await page(fourth.cursor, { limit: 500 });
    expect(atMark.events).toEqual(before.events.slice(4));
    expect((await readAll(undefined, 500)).events).toEqual(before.events.slice(4));
    // The audit log keeps everything.
    const audit = await t.call('GET', `/intents/${oldest.intentId}/events`);
    expect(audit.json().events.length).toBeGreaterThan(0);
  });
});

/** Carries a plan's reading out of a transaction that must roll back. */
class PlanRead extends Error {
  constructor(readonly rows: number) {
    super('plan read');
  }
}

/** Rows the numbering UPDATE's scans of event_feed returned, over all their loops. */
function feedRowsReadByUpdate(plan: unknown): number {
  const root = (typeof plan === 'string' ? JSON.parse(plan) : plan) as Array<{ Plan: PlanNode }>;
  interface PlanNode {
    'Node Type': string;
    'Relation Name'?: string;
    'Actual Rows': number;
    'Actual Loops': number;
    Plans?: PlanNode[];
  }
  const nodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodes)];
  const update = nodes(root[0]!.Plan).find((n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === 'event_feed');
  expect(update, 'the plan updates event_feed').toBeDefined();
  return nodes(update!)
    .slice(1)
    .filter((n) => n['Relation Name'] === 'event_feed')
    .reduce((sum, n) => sum + n['Actual Rows'] * n['Actual Loops'], 0);
}
