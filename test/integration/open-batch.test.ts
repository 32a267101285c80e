import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/database.js';
import { PAYER_LOCK_CLASS, RECIPIENT_LIMIT_LOCK_CLASS } from '../../src/domain/intents/create/payer-locks.js';
import { openTestDatabase } from '../support/database.js';

/**
 * intent_open_batch (migrations/016) inserts a run of intents with one statement: its answers must
 * be the ones intents opened one after the other get, above all where a limit counts an intent
 * opened earlier in the same batch, and where one idempotency key comes twice.
 */

let db: Database;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => db?.close());

const SINCE = '2000-01-01T00:00:00.000Z';

interface Payment {
  readonly payer: number;
  readonly payee: number;
  readonly amount: number;
  readonly key?: string;
  readonly id?: string;
  /** The payer's AMOUNT limit since SINCE, as intent_guard reads it. */
  readonly payerLimit?: number;
}

function element({ payer, payee, amount, key = randomUUID(), id = randomUUID(), payerLimit }: Payment) {
  return {
    intent: {
      id,
      idempotency_key: key,
      service_id: 'open-batch-test',
      request_fingerprint: 'f',
      user_id: payer,
      operation_type: 'P2P_TRANSFER',
      channel: 'INTERNAL',
      from_account_name: `user.${payer}.THB`,
      to_account_name: `user.${payee}.THB`,
      from_user_id: payer,
      to_user_id: payee,
      amount: String(amount),
      pre_fee_amount: '0',
      post_fee_amount: '0',
      fee_splits: [],
      currency: 'THB',
      status: 'SETTLED',
      metadata: {},
      live: false,
      transfer_ids: [],
    },
    payer,
    checks:
      payerLimit === undefined
        ? []
        : [
            {
              side: 'from',
              userId: payer,
              since: SINCE,
              currency: 'THB',
              operationType: '*',
              measure: 'AMOUNT',
              requested: String(amount),
              limit: String(payerLimit),
            },
          ],
  };
}

async function openBatch(payments: readonly Payment[]): Promise<Array<Record<string, unknown>>> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ opened: Array<Record<string, unknown>> }>('SELECT intent_open_batch($1, $2, $3::jsonb) AS opened', [
      PAYER_LOCK_CLASS,
      RECIPIENT_LIMIT_LOCK_CLASS,
      JSON.stringify(payments.map(element)),
    ]);
    return rows[0]!.opened;
  });
}

const storedAmounts = async (payer: number) =>
  (await db.query<{ amount: string }>('SELECT amount::text FROM intents WHERE from_user_id = $1 ORDER BY amount', [payer])).rows.map(
    (row) => Number(row.amount),
  );

describe('intent_open_batch', () => {
  it('opens a batch of unrelated payments in one go, answering each in order', async () => {
    const opened = await openBatch([1, 2, 3].map((payer) => ({ payer, payee: 100 + payer, amount: 10 * payer })));
    expect(opened).toEqual([1, 2, 3].map(() => ({ createdAt: expect.any(String) })));
    for (const payer of [1, 2, 3]) expect(await storedAmounts(payer)).toEqual([10 * payer]);
  });

  it('counts a payment opened earlier in the same batch in a later payment of that payer against its limit', async () => {
    const opened = await openBatch([
      { payer: 10, payee: 11, amount: 600, payerLimit: 1_000 },
      { payer: 12, payee: 13, amount: 700, payerLimit: 1_000 },
      { payer: 10, payee: 14, amount: 600, payerLimit: 1_000 },
      { payer: 10, payee: 15, amount: 400, payerLimit: 1_000 },
    ]);
    expect(opened).toEqual([
      { createdAt: expect.any(String) },
      { createdAt: expect.any(String) },
      { refusal: 'limit', index: 0, current: '600' },
      { createdAt: expect.any(String) },
    ]);
    expect(await storedAmounts(10)).toEqual([400, 600]);
    expect(await storedAmounts(12)).toEqual([700]);
  });

  it('stores the first of two payments with one idempotency key and answers the second, and a stored key, as duplicates', async () => {
    const key = randomUUID();
    const id = randomUUID();
    const stored = randomUUID();
    await openBatch([{ payer: 20, payee: 21, amount: 5, key: stored }]);
    const opened = await openBatch([
      { payer: 22, payee: 23, amount: 7, key, id },
      { payer: 24, payee: 25, amount: 9, key: stored },
      { payer: 22, payee: 23, amount: 7, key, id },
      { payer: 26, payee: 27, amount: 8, key, id: randomUUID() },
    ]);
    expect(opened).toEqual([{ createdAt: expect.any(String) }, { duplicate: true }, { duplicate: true }, { duplicate: true }]);
    expect(await storedAmounts(22)).toEqual([7]);
    expect(await storedAmounts(24)).toEqual([]);
    expect(await storedAmounts(26)).toEqual([]);
  });

  it('answers an empty batch with an empty list', async () => {
    expect(await openBatch([])).toEqual([]);
  });
});
