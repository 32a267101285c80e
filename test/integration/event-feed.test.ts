import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Tx } from '../../src/adapters/database.js';
import { comparePositions, encodeFeedCursor } from '../../src/domain/events/feed-cursor.js';
import { FEED_SETTLE_MS, readIntentFeed } from '../../src/domain/events/feed.js';
import { pruneFeed } from '../../src/domain/events/feed-retention.js';
import { storeReaderPosition } from '../../src/domain/events/feed-readers.js';
import { moveIntent } from '../../src/domain/intents/store/intent-writer.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { feedCaughtUp, feedCursors } from '../support/feed.js';
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
const sealing = () => feedCursors(t);
afterEach(async () => expectLedgerInvariants(t.db));

async function page(after: string | undefined, options: { service?: string; limit?: number } = {}) {
  const query = new URLSearchParams();
  if (after !== undefined) query.set('after', after);
  if (options.limit !== undefined) query.set('limit', String(options.limit));
  const res = await t.call('GET', `/events${query.size > 0 ? `?${query}` : ''}`, { service: options.service ?? 'wallet-api' });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { events: WireEvent[]; nextCursor: string };
}

/** Follows nextCursor until a page comes back empty, once every committed change is readable; answers the events and where it stopped. */
async function readAll(after: string | undefined, limit = 7): Promise<{ events: WireEvent[]; cursor: string }> {
  await feedCaughtUp(t.db);
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
      type: 'intent',
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
    const quiet = await page(await endCursor());
    expect(quiet.events).toEqual([]);
    const intentId = await pay(PAYERS[1] as number);
    const after = await readAll(await endCursor());
    expect(after.events).toEqual([]);
    const fromQuiet = await page(quiet.nextCursor, { limit: 500 });
    expect(fromQuiet.events.map((e) => e.intentId)).toEqual([intentId, intentId, intentId, intentId]);
  });

  it('refuses a cursor it did not issue or one ahead of the feed with 422, and a bad limit, changing nothing', async () => {
    const end = await endCursor();
    const endAt = sealing().open(end);
    expect(endAt).not.toBeNull();
    const raw = (text: string) => Buffer.from(text).toString('base64url');
    const refused = [
      ...['nope', 'ZTAx', raw('e-1'), raw('e01'), raw('e0.5'), raw('e5.'), raw('e5.x'), `${end}=`, 'e'.repeat(201)],
      // Ahead of the feed: past the horizon, at the horizon but behind an event, past the numbering before migration 020.
      sealing().seal({ xact: endAt.xact + 1_000_000n, seq: 0n }),
      sealing().seal({ xact: endAt.xact + 1_000_000n, seq: 1n }),
      sealing().seal({ xact: 0n, seq: 1_000_000_000n }),
    ];
    for (const after of refused) {
      const res = await t.call('GET', `/events?after=${encodeURIComponent(after)}`);
      expect(res.statusCode, after).toBe(422);
      expect(res.json().error).toBe('VALIDATION_ERROR');
    }
    for (const limit of ['0', '501', 'x', '1.5']) {
      const res = await t.call('GET', `/events?limit=${limit}`);
      expect(res.statusCode, limit).toBe(422);
    }
    expect((await t.call('GET', '/events?after=1&extra=1')).statusCode).toBe(422);
    // The horizon is the server's and moves with any transaction on it; the feed did not.
    expect((await readAll(end)).events).toEqual([]);
  });

  it('hands out sealed cursors: no readable counter, and a forged, altered, foreign or old plain one is 422 changing nothing (R63)', async () => {
    const before = await endCursor();
    await pay(PAYERS[0] as number);
    const { events, cursor: end } = await readAll(before);
    expect(events.length).toBeGreaterThan(0);
    const issued = [before, end, ...events.map((e) => e.cursor)];
    const position = sealing().open(end);
    for (const cursor of issued) {
      expect(cursor, 'one fixed length').toMatch(/^[A-Za-z0-9_-]{43}$/);
      // Neither the transaction counter nor the sequence shows, in any base or byte order.
      const bytes = Buffer.from(cursor, 'base64url');
      for (const number of [position.xact, position.seq].filter((n) => n > 255n)) {
        // Texts of four characters or more: a shorter one turns up in 43 random characters by
        // chance (two base-36 characters about once in a hundred cursors).
        for (const [text, form] of [
          [bytes.toString('latin1'), number.toString()],
          [cursor, number.toString(36)],
        ] as const) {
          if (form.length >= 4) expect(text).not.toContain(form);
        }
        const big = Buffer.alloc(8);
        big.writeBigUInt64BE(number);
        expect(bytes.includes(big.subarray(4))).toBe(false);
        big.writeBigUInt64LE(number);
        expect(bytes.includes(big.subarray(0, 4))).toBe(false);
      }
    }
    // The same position seals to the same text (a stable webhook key, a stable message id).
    expect((await page(before, { limit: 1 })).events[0]?.cursor).toBe(events[0]?.cursor);
    expect(sealing().seal(position)).toBe(end);
    const flip = (text: string, at: number) => {
      const bytes = Buffer.from(text, 'base64url');
      bytes[at] = (bytes[at] as number) ^ 1;
      return bytes.toString('base64url');
    };
    const otherTenant = (await page(undefined, { service: 'nfc-terminal', limit: 1 })).nextCursor;
    const refused = [
      flip(end, 0),
      flip(end, 20),
      flip(end, 31),
      `${end.slice(0, 42)}${end[42] === 'A' ? 'B' : 'A'}`,
      feedCursors(t, 'nfc-terminal').seal(position),
      otherTenant,
      // The unsealed form cursors had before: refused with its own message.
      encodeFeedCursor(position),
    ];
    for (const after of refused) {
      const res = await t.call('GET', `/events?after=${encodeURIComponent(after)}`);
      expect(res.statusCode, after).toBe(422);
      expect(res.json().error).toBe('VALIDATION_ERROR');
    }
    const old = await t.call('GET', `/events?after=${encodeFeedCursor(position)}`);
    expect(old.json().message).toMatch(/unsealed form of earlier versions.*read again without it/);
    expect((await readAll(end)).events).toEqual([]);
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
          if (!writing) {
            await feedCaughtUp(t.db);
            lastRound = true;
          }
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
    const positions = cursors.map((c) => sealing().open(c));
    expect([...positions].sort(comparePositions)).toEqual(positions);
    const trails = byIntent(seen);
    for (const intentId of paid) expect(trails.get(intentId), intentId).toEqual(SETTLED_TRAIL);
    for (const intentId of invoices) expect(trails.get(intentId), intentId).toEqual(['>CREATED', 'CREATED>CANCELED']);
    // Nothing else changed meanwhile; and a reader starting over from the same cursor sees the same.
    expect(trails.size).toBe(paid.length + invoices.length);
    const again = await readAll(start, 500);
    expect(again.events.filter((e) => trails.has(e.intentId))).toEqual(seen);
  });
});

async function gauge(name: string): Promise<number> {
  const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
}

describe('metrics', () => {
  it('/metrics shows how far a background reader is behind', async () => {
    const end = await endCursor();
    const intentId = await pay(PAYERS[2] as number);
    const { events } = await readAll(end, 500);
    expect(events.map((e) => e.intentId)).toEqual([intentId, intentId, intentId, intentId]);
    await storeReaderPosition(t.db, 'test-reader', sealing().open((events[0] as WireEvent).cursor));
    expect(await gauge('payorch_event_feed_reader_lag\\{reader="test-reader"\\}')).toBe(3);
    expect(await gauge('payorch_event_feed_held_back')).toBeGreaterThanOrEqual(0);
    await t.db.query(`DELETE FROM event_feed_readers WHERE reader = 'test-reader'`);
  });
});

class RolledBack extends Error {}

/** A transaction on a connection of its own that has taken its transaction id, held open until `end`. */
async function holdTransaction(): Promise<{ tx: Tx; xid: bigint; end(commit: boolean): Promise<void> }> {
  let release: (commit: boolean) => void = () => {};
  const released = new Promise<boolean>((resolve) => {
    release = resolve;
  });
  let opened: (held: { tx: Tx; xid: bigint }) => void = () => {};
  const open = new Promise<{ tx: Tx; xid: bigint }>((resolve) => {
    opened = resolve;
  });
  const done = t.db
    .transaction(async (tx) => {
      const { rows } = await tx.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid');
      opened({ tx, xid: BigInt(rows[0]?.xid ?? '0') });
      if (!(await released)) throw new RolledBack();
    })
    .catch((error: unknown) => {
      if (!(error instanceof RolledBack)) throw error;
    });
  const held = await Promise.race([open, done.then(() => Promise.reject(new Error('the held transaction ended early')))]);
  return {
    ...held,
    async end(commit) {
      release(commit);
      await done;
    },
  };
}

const onPostgres = (process.env.DATABASE_URL ?? '').startsWith('postgres');

// PGlite runs one transaction at a time: these need two open at once.
describe.skipIf(!onPostgres)('transaction ids against commit order, two connections (PostgreSQL)', () => {
  it('a change committed under a larger xid while a smaller one is open is held back, not skipped; both come once, in xid order', async () => {
    const [first, second] = await Promise.all([issueInvoice(1_000), issueInvoice(2_000)]);
    const from = await endCursor();
    const older = await holdTransaction();
    const younger = await holdTransaction();
    expect(younger.xid).toBeGreaterThan(older.xid);
    await moveIntent(younger.tx, second as string, { from: 'CREATED', to: 'CANCELED', changes: { cancelReason: 'USER_CANCELLED' } });
    await younger.end(true);

    // Committed, but behind the older transaction still open: a reader must not move past it.
    const between = await page(from, { limit: 500 });
    expect(between.events).toEqual([]);
    expect(comparePositions(sealing().open(between.nextCursor), { xact: older.xid, seq: 0n })).toBeLessThanOrEqual(0);

    await moveIntent(older.tx, first as string, { from: 'CREATED', to: 'CANCELED', changes: { cancelReason: 'USER_CANCELLED' } });
    await older.end(true);
    const rest = await readAll(between.nextCursor, 1);
    expect(rest.events.map((e) => `${e.intentId} ${e.statusTo}`)).toEqual([`${first} CANCELED`, `${second} CANCELED`]);
  });

  it("one intent changed by two transactions, the later change under the smaller xid: the intent's order is kept", async () => {
    const invoice = await issueInvoice(3_000);
    const from = await endCursor();
    const later = await holdTransaction();
    const earlier = await holdTransaction();
    expect(later.xid).toBeLessThan(earlier.xid);
    await moveIntent(earlier.tx, invoice, { from: 'CREATED', to: 'VALIDATED' });
    // The later change waits for the earlier one's row lock, as every move of an existing intent does.
    const locked = later.tx.query<{ status: string }>('SELECT status FROM intents WHERE id = $1 FOR UPDATE', [invoice]);
    await sleep(50);
    await earlier.end(true);
    expect((await locked).rows[0]?.status).toBe('VALIDATED');
    const failed = await moveIntent(later.tx, invoice, { from: 'VALIDATED', to: 'FAILED', changes: { failureReason: 'TEST_FAILED' } });
    expect(failed?.status).toBe('FAILED');
    await later.end(true);

    const { events } = await readAll(from, 1);
    expect(events.map((e) => `${e.statusFrom}>${e.statusTo}`)).toEqual(['CREATED>VALIDATED', 'VALIDATED>FAILED']);
    const [validated, failing] = events.map((e) => sealing().open(e.cursor));
    expect(validated?.xact).toBe(earlier.xid);
    // Raised from its own, smaller transaction id to the intent's previous row's.
    expect(failing?.xact).toBe(earlier.xid);
    // A live stream resuming from the first change gets the second.
    const resumed = await t.call('GET', `/intents/${invoice}/stream`, { headers: { 'last-event-id': (events[0] as WireEvent).cursor } });
    expect(resumed.body).toContain(`id: ${(events[1] as WireEvent).cursor}`);
  });

  it('a transaction held open with an xid holds every reader back, skipping nothing, and /metrics shows it', async () => {
    const from = await endCursor();
    const open = await holdTransaction();
    const paid = await pay(PAYERS[3] as number);
    const asked = performance.now();
    const held = await page(from, { limit: 500 });
    expect(held.events).toEqual([]);
    // It waited the settle time for the payment it saw committed, then answered without it.
    expect(performance.now() - asked).toBeGreaterThanOrEqual(FEED_SETTLE_MS - 50);
    expect(await gauge('payorch_event_feed_held_back')).toBeGreaterThanOrEqual(4);
    await sleep(20);
    expect(await gauge('payorch_event_feed_oldest_transaction_seconds')).toBeGreaterThan(0);
    const again = await page(held.nextCursor, { limit: 500 });
    expect(again.events).toEqual([]);
    await open.end(false);
    const { events } = await readAll(again.nextCursor, 3);
    expect(events.map((e) => `${e.intentId} ${e.statusFrom ?? ''}>${e.statusTo}`)).toEqual(SETTLED_TRAIL.map((step) => `${paid} ${step}`));
  });
});

describe.skipIf(!onPostgres)('reading your own writes (PostgreSQL)', () => {
  const trail = (events: readonly WireEvent[]) => events.map((e) => `${e.intentId} ${e.statusFrom ?? ''}>${e.statusTo}`);

  it('a page waits for a payment committed behind a transaction that ends within the settle time, and holds it', async () => {
    const from = await endCursor();
    const open = await holdTransaction();
    const paid = await pay(PAYERS[4] as number);
    const reading = page(from, { limit: 500 });
    await sleep(50);
    await open.end(false);
    expect(trail((await reading).events)).toEqual(SETTLED_TRAIL.map((step) => `${paid} ${step}`));
  });

  it("an event's own cursor ahead of the horizon (a live stream's id) is waited for, not refused", async () => {
    const open = await holdTransaction();
    const paid = await pay(PAYERS[5] as number);
    const [created] = await readIntentFeed(t.db, { serviceId: 'wallet-api', intentId: paid, after: null });
    // The id a live stream sends: the event's position sealed for its service.
    const reading = page(created === undefined ? undefined : sealing().seal(created.position), { limit: 500 });
    await sleep(50);
    await open.end(false);
    expect(trail((await reading).events)).toEqual(SETTLED_TRAIL.slice(1).map((step) => `${paid} ${step}`));
  });

  it('a cursor after every event the service has is refused at once, even while the feed is held back', async () => {
    const open = await holdTransaction();
    try {
      const ahead = sealing().seal({ xact: open.xid + 1_000_000n, seq: 1n });
      const asked = performance.now();
      const res = await t.call('GET', `/events?after=${ahead}`);
      expect(res.statusCode).toBe(422);
      expect(performance.now() - asked).toBeLessThan(FEED_SETTLE_MS);
    } finally {
      await open.end(false);
    }
  });
});

describe('pruning', () => {
  it('prunes events past the retention from the start of the feed; a cursor behind them gets 410 CURSOR_EXPIRED', async () => {
    const before = await readAll(undefined, 500);
    const oldest = before.events[0] as WireEvent;
    const fourth = before.events[3] as WireEvent;
    const fourthAt = sealing().open(fourth.cursor);
    // The first four events age past a 30-day retention.
    await t.db.query(`UPDATE event_feed SET occurred_at = now() - interval '31 days' WHERE (xact, seq) <= ($1, $2)`, [
      fourthAt.xact.toString(),
      fourthAt.seq.toString(),
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

  it('stops at the first event still kept, even when older ones follow it', async () => {
    const before = await readAll(undefined, 500);
    const second = before.events[1] as WireEvent;
    const secondAt = sealing().open(second.cursor);
    await t.db.query(`UPDATE event_feed SET occurred_at = now() - interval '31 days' WHERE (xact, seq) > ($1, $2)`, [
      secondAt.xact.toString(),
      secondAt.seq.toString(),
    ]);
    expect(await pruneFeed(t.db, { retentionDays: 30, batchSizeMax: 1_000 })).toBe(0);
    expect((await readAll(undefined, 500)).events.map((e) => e.cursor)).toEqual(before.events.map((e) => e.cursor));
    await t.db.query(`UPDATE event_feed SET occurred_at = now()`);
  });
});
