import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { moveIntent, moveIntents } from '../../src/domain/intents/store/intent-writer.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createMerchant } from '../support/payments.js';
import { trailOf } from '../support/workers.js';

/**
 * The one writer of intent state (src/domain/intents/store/intent-writer.ts): a move outside the
 * transition tables is a bug and writes nothing; a move whose guard no longer holds answers null
 * and writes nothing; and no other file updates the intents table.
 */

const MERCHANT = 9301;
let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
  await createMerchant(t, MERCHANT);
});
afterAll(async () => t?.close());

async function invoice(): Promise<string> {
  const res = await t.call('POST', '/intents', {
    user: MERCHANT,
    body: {
      idempotencyKey: randomUUID(),
      operationType: 'INVOICE_PAYMENT',
      amount: 700,
      toLedgerAccountId: ledgerAccountId(`merchant.${MERCHANT}.THB`),
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().intentId as string;
}

const statusOf = async (id: string) =>
  (await t.db.query<{ status: string; psp_state: string | null }>('SELECT status, psp_state FROM intents WHERE id = $1', [id])).rows[0];
const openJobs = async (id: string) =>
  Number((await t.db.query<{ n: bigint }>('SELECT count(*) AS n FROM outbox WHERE intent_id = $1', [id])).rows[0]?.n);

describe('moveIntent', () => {
  it("moves along the table, with its event, in the caller's transaction", async () => {
    const id = await invoice();
    const moved = await t.db.transaction((tx) =>
      moveIntent(tx, id, { from: 'CREATED', to: 'CANCELED', reason: 'test', changes: { cancelReason: 'test' } }),
    );
    expect(moved).toMatchObject({ id, status: 'CANCELED', cancelReason: 'test' });
    expect(await trailOf(t, id)).toEqual([
      [null, 'CREATED'],
      ['CREATED', 'CANCELED'],
    ]);
  });

  it.each([
    ['a step the table does not have', { from: 'CREATED', to: 'SETTLED' }],
    [
      'a trail that skips a step',
      {
        from: 'CREATED',
        to: 'SETTLED',
        trail: [
          { from: 'CREATED', to: 'VALIDATED' },
          { from: 'AUTHORIZED', to: 'SETTLED' },
        ],
      },
    ],
    ['a trail that ends elsewhere', { from: 'CREATED', to: 'SETTLED', trail: [{ from: 'CREATED', to: 'VALIDATED' }] }],
    [
      'a sub-state move the table does not have',
      { from: 'AUTHORIZED', to: 'AUTHORIZED', subState: { from: 'NEW', to: 'CONFIRMED', leaseOwner: randomUUID(), leaseMs: 1000 } },
    ],
    [
      'a sub-state move that would move the intent elsewhere',
      { from: 'AUTHORIZED', to: 'SETTLED', subState: { from: 'INQUIRING', to: 'MANUAL_REVIEW', leaseOwner: randomUUID(), leaseMs: 1000 } },
    ],
  ] as const)('refuses %s and writes nothing', async (_, move) => {
    const id = await invoice();
    await expect(t.db.transaction((tx) => moveIntent(tx, id, move))).rejects.toThrow(/transition table|trail|moves the intent/);
    expect(await statusOf(id)).toEqual({ status: 'CREATED', psp_state: null });
    expect(await trailOf(t, id)).toEqual([[null, 'CREATED']]);
  });

  it('answers null and writes nothing, neither event nor job, when the intent is no longer where the move starts', async () => {
    const id = await invoice();
    await t.db.transaction((tx) => moveIntent(tx, id, { from: 'CREATED', to: 'EXPIRED' }));
    const lost = await t.db.transaction((tx) =>
      moveIntent(tx, id, {
        from: 'CREATED',
        to: 'CANCELED',
        changes: { cancelReason: 'late' },
        job: { kind: 'void_pending', payload: { reason: 'late' } },
      }),
    );
    expect(lost).toBeNull();
    expect(await statusOf(id)).toEqual({ status: 'EXPIRED', psp_state: null });
    expect(await trailOf(t, id)).toEqual([
      [null, 'CREATED'],
      ['CREATED', 'EXPIRED'],
    ]);
    expect(await openJobs(id)).toBe(0);
  });

  it('answers null when a condition does not hold: an invoice still open is not expired', async () => {
    const id = await invoice();
    expect(
      await t.db.transaction((tx) => moveIntent(tx, id, { from: 'CREATED', to: 'EXPIRED', conditions: { expiredInvoice: true } })),
    ).toBeNull();
    expect(await trailOf(t, id)).toEqual([[null, 'CREATED']]);
  });

  it('moves many at once, each with its own event, and only those still where the move starts', async () => {
    const [a, b, c] = [await invoice(), await invoice(), await invoice()];
    await t.db.transaction((tx) => moveIntent(tx, b, { from: 'CREATED', to: 'CANCELED', changes: { cancelReason: 'first' } }));
    const moved = await t.db.transaction((tx) => moveIntents(tx, [a, b, c], { from: 'CREATED', to: 'EXPIRED' }));
    expect(moved.map((intent) => intent.id).sort()).toEqual([a, c].sort());
    for (const id of [a, c]) expect((await trailOf(t, id)).at(-1)).toEqual(['CREATED', 'EXPIRED']);
    expect((await trailOf(t, b)).at(-1)).toEqual(['CREATED', 'CANCELED']);
  });
});

describe('one writer', () => {
  const writesIntents = /\b(update\s+intents|delete\s+from\s+intents)\b/i;
  const filesUnder = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)],
    );
  const writersUnder = (root: string) =>
    filesUnder(root)
      .filter((file) => writesIntents.test(readFileSync(file, 'utf8')))
      .map((file) => relative(root, file))
      .sort();

  it('no file but the writer and its batch statements (new intents closed, invoices redeemed) updates or deletes intents', () => {
    expect(writersUnder(join(import.meta.dirname, '../../src'))).toEqual([
      'domain/intents/store/intent-batch-writer.ts',
      'domain/intents/store/intent-writer.ts',
    ]);
  });

  it('no SQL function updates or deletes intents, and only intent_open_batch inserts them', async () => {
    expect(writersUnder(join(import.meta.dirname, '../../sql'))).toEqual([]);
    // The functions as the database holds them after every migration and sql/ file: their
    // current text, wherever it was written.
    const { rows } = await t.db.query<{ name: string; source: string }>(
      `SELECT p.proname AS name, p.prosrc AS source
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema()`,
    );
    expect(rows.length).toBeGreaterThan(10);
    expect(rows.filter((row) => writesIntents.test(row.source)).map((row) => row.name)).toEqual([]);
    expect(rows.filter((row) => /\binsert\s+into\s+intents\b/i.test(row.source)).map((row) => row.name)).toEqual(['intent_open_batch']);
  });
});
