import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database, Tx } from '../../src/adapters/database.js';
import { PAYER_LOCK_CLASS, RECIPIENT_LIMIT_LOCK_CLASS } from '../../src/domain/intents/commit/payer-locks.js';
import { openTestDatabase } from '../support/database.js';

/**
 * intent_open_batch (sql/intents/03-open-batch.sql) inserts a run of intents with one statement: its answers must
 * be the ones intents opened one after the other get, above all where a limit counts an intent
 * opened earlier in the same batch, and where one idempotency key comes twice.
 */

let db: Database;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => db?.close());

const SINCE = '2000-01-01T00:00:00.000Z';
const onPostgres = (process.env.DATABASE_URL ?? '').startsWith('postgres');

interface Payment {
  readonly payer: number;
  readonly payee: number;
  readonly amount: number;
  readonly key?: string;
  readonly id?: string;
  /** The payer's AMOUNT limit since SINCE, as intent_guard reads it. */
  readonly payerLimit?: number;
  /** intent_guard's checks, instead of payerLimit's. */
  readonly checks?: readonly Check[];
  readonly operationType?: string;
  readonly currency?: string;
  /** FAILED: stored, never counted. */
  readonly status?: 'SETTLED' | 'AUTHORIZED' | 'FAILED';
  /** false: no payer, so no payer lock is tried. */
  readonly lockPayer?: boolean;
}

/** A check as intent_guard reads it (src/domain/intents/commit/guard.ts, checkJson). */
interface Check {
  readonly side: 'from' | 'to';
  readonly userId: number;
  readonly since: string | null;
  readonly currency: string;
  readonly operationType: string;
  readonly measure: 'AMOUNT' | 'COUNT';
  readonly requested: string;
  readonly limit: string;
}

function element({
  payer,
  payee,
  amount,
  key = randomUUID(),
  id = randomUUID(),
  payerLimit,
  checks,
  operationType = 'P2P_TRANSFER',
  currency = 'THB',
  status = 'SETTLED',
  lockPayer = true,
}: Payment) {
  return {
    intent: {
      id,
      idempotency_key: key,
      service_id: 'open-batch-test',
      request_fingerprint: 'f',
      user_id: payer,
      operation_type: operationType,
      channel: 'INTERNAL',
      from_account_name: `user.${payer}.THB`,
      to_account_name: `user.${payee}.THB`,
      from_user_id: payer,
      to_user_id: payee,
      amount: String(amount),
      pre_fee_amount: '0',
      post_fee_amount: '0',
      fee_splits: [],
      currency,
      status,
      metadata: {},
      live: false,
      transfer_ids: [],
    },
    payer: lockPayer ? payer : null,
    checks:
      checks ??
      (payerLimit === undefined
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
          ]),
  };
}

type Answer = Record<string, unknown>;

async function openBatchIn(tx: Tx, payments: readonly Payment[]): Promise<Answer[]> {
  const { rows } = await tx.query<{ opened: Answer[] }>('SELECT intent_open_batch($1, $2, $3::jsonb) AS opened', [
    PAYER_LOCK_CLASS,
    RECIPIENT_LIMIT_LOCK_CLASS,
    JSON.stringify(payments.map(element)),
  ]);
  return rows[0]!.opened;
}

const openBatch = (payments: readonly Payment[]) => db.transaction((tx) => openBatchIn(tx, payments));

/** What opening the payments one after the other answers: intent_guard, then the insert, per payment (migrations/007). */
async function openOneByOneIn(tx: Tx, payments: readonly Payment[]): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (const payment of payments) {
    const item = element(payment);
    const guarded = await tx.query<{ refusal: Answer | null }>('SELECT intent_guard($1, $2, $3, $4::jsonb) AS refusal', [
      PAYER_LOCK_CLASS,
      item.payer,
      item.intent.id,
      JSON.stringify(item.checks),
    ]);
    const refusal = guarded.rows[0]!.refusal;
    if (refusal !== null) {
      answers.push(refusal);
      continue;
    }
    const inserted = await tx.query<{ created_at: Date }>(
      `INSERT INTO intents (id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel, from_account_name,
                            to_account_name, from_user_id, to_user_id, amount, pre_fee_amount, post_fee_amount, fee_splits, currency,
                            status, metadata, live, transfer_ids)
       SELECT id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel, from_account_name,
              to_account_name, from_user_id, to_user_id, amount, pre_fee_amount, post_fee_amount, fee_splits, currency,
              status, metadata, live, transfer_ids
         FROM jsonb_populate_record(NULL::intents, $1::jsonb)
       ON CONFLICT (idempotency_key, service_id) DO NOTHING RETURNING created_at`,
      [JSON.stringify(item.intent)],
    );
    answers.push(inserted.rows.length === 1 ? { createdAt: 'stored' } : { duplicate: true });
  }
  return answers;
}

class RolledBack<T> extends Error {
  constructor(readonly value: T) {
    super('rolled back');
  }
}

/** Runs `work` in a transaction that is rolled back, and answers what it answered. */
async function rolledBack<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
  try {
    await db.transaction(async (tx) => {
      throw new RolledBack(await work(tx));
    });
  } catch (error) {
    if (error instanceof RolledBack) return error.value as T;
    throw error;
  }
  throw new Error('unreachable');
}

const stored = (answers: readonly Answer[]) => answers.map((answer) => ('createdAt' in answer ? { createdAt: 'stored' } : answer));

/** A check of the payer's side since SINCE, on any operation type, in THB, by amount, unless told otherwise. */
const check = (over: Partial<Check> & Pick<Check, 'userId' | 'requested' | 'limit'>): Check => ({
  side: 'from',
  since: SINCE,
  currency: 'THB',
  operationType: '*',
  measure: 'AMOUNT',
  ...over,
});

/** A small deterministic generator (mulberry32), so that a failing case can be run again. */
function random(seed: number) {
  let state = seed;
  return (n: number) => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
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

  it("reads each check as intent_guard does: the recipient's side, operation type, currency, count, per transaction, the first check over", async () => {
    await openBatch([
      { payer: 30, payee: 31, amount: 100 },
      { payer: 32, payee: 31, amount: 200, operationType: 'INVOICE_PAYMENT', status: 'AUTHORIZED' },
      { payer: 33, payee: 31, amount: 400, currency: 'USD' },
      { payer: 40, payee: 31, amount: 1_000, status: 'FAILED' },
    ]);
    const toPayee = (over: Partial<Check> & Pick<Check, 'requested' | 'limit'>) => check({ side: 'to', userId: 31, ...over });
    const opened = await openBatch([
      // 100 + 200 (any operation type, AUTHORIZED counts; USD and FAILED do not) + 250 <= 600.
      { payer: 34, payee: 31, amount: 250, checks: [toPayee({ requested: '250', limit: '600' })] },
      // The payment just before, to the same recipient in this batch, counts: 550 + 100 > 600.
      { payer: 35, payee: 31, amount: 100, checks: [toPayee({ requested: '100', limit: '600' })] },
      // P2P only: 100 + 250 + 50 <= 400; the refused one before is not stored.
      { payer: 36, payee: 31, amount: 50, checks: [toPayee({ requested: '50', operationType: 'P2P_TRANSFER', limit: '400' })] },
      // The first check passes (per transaction: nothing before counts), the second, in USD by count, does not.
      {
        payer: 37,
        payee: 31,
        amount: 1,
        checks: [
          check({ userId: 37, since: null, requested: '1', limit: '5' }),
          toPayee({ currency: 'USD', measure: 'COUNT', requested: '1', limit: '1' }),
        ],
      },
      // Per transaction, the request alone is over.
      { payer: 30, payee: 39, amount: 700, checks: [check({ userId: 30, since: null, requested: '700', limit: '500' })] },
    ]);
    expect(opened).toEqual([
      { createdAt: expect.any(String) },
      { refusal: 'limit', index: 0, current: '550' },
      { createdAt: expect.any(String) },
      { refusal: 'limit', index: 1, current: '1' },
      { refusal: 'limit', index: 0, current: '0' },
    ]);
    const { rows } = await db.query<{ from_user_id: bigint; amount: bigint }>(
      'SELECT from_user_id, amount FROM intents WHERE to_user_id = 31 AND from_user_id IN (34, 35, 36, 37) ORDER BY from_user_id',
    );
    expect(rows.map((row) => [Number(row.from_user_id), Number(row.amount)])).toEqual([
      [34, 250],
      [36, 50],
    ]);
    expect(await storedAmounts(30)).toEqual([100]);
  });

  // One connection on PGlite: a second transaction there would wait for the first.
  it.runIf(onPostgres)("refuses a payer whose lock another transaction holds, without reading that payer's limits", async () => {
    const opened = await db.transaction(async (holder) => {
      await holder.query(`SELECT pg_advisory_xact_lock($1, hashtext(current_schema() || ':' || $2::text))`, [PAYER_LOCK_CLASS, 51]);
      return openBatch([
        { payer: 50, payee: 52, amount: 10, payerLimit: 100 },
        { payer: 51, payee: 52, amount: 10, payerLimit: 1 },
        { payer: 53, payee: 52, amount: 10, payerLimit: 100 },
      ]);
    });
    expect(opened).toEqual([{ createdAt: expect.any(String) }, { refusal: 'locked' }, { createdAt: expect.any(String) }]);
    expect(await storedAmounts(51)).toEqual([]);
    expect(await storedAmounts(53)).toEqual([10]);
  });

  it('answers random batches as opening their payments one after the other does', async () => {
    const draw = random(20261127);
    const users = [70, 71, 72, 73, 74, 75];
    const user = () => users[draw(users.length)]!;
    const history: Payment[] = Array.from({ length: 40 }, () => ({
      payer: user(),
      payee: user(),
      amount: 1 + draw(300),
      operationType: draw(2) === 0 ? 'P2P_TRANSFER' : 'INVOICE_PAYMENT',
      currency: draw(5) === 0 ? 'USD' : 'THB',
      status: (['SETTLED', 'AUTHORIZED', 'FAILED'] as const)[draw(3)]!,
    }));
    await openBatch(history);
    const reused = [randomUUID(), randomUUID()];
    let refused = 0;
    for (let round = 0; round < 60; round++) {
      const payments: Payment[] = Array.from({ length: 1 + draw(12) }, () => {
        const payer = user();
        const payee = user();
        const amount = 1 + draw(300);
        const twice = draw(10) === 0 ? reused[draw(2)] : undefined;
        return {
          payer,
          payee,
          amount,
          operationType: draw(2) === 0 ? 'P2P_TRANSFER' : 'INVOICE_PAYMENT',
          lockPayer: draw(10) !== 0,
          ...(twice === undefined ? {} : { key: twice, id: twice }),
          checks: Array.from({ length: draw(4) }, () => {
            const side = draw(2) === 0 ? 'from' : 'to';
            const measure = draw(3) === 0 ? 'COUNT' : 'AMOUNT';
            return check({
              side,
              userId: side === 'from' ? payer : payee,
              since: draw(4) === 0 ? null : SINCE,
              currency: draw(6) === 0 ? 'USD' : 'THB',
              operationType: ['*', 'P2P_TRANSFER', 'INVOICE_PAYMENT'][draw(3)]!,
              measure,
              requested: measure === 'AMOUNT' ? String(amount) : '1',
              limit: String(measure === 'AMOUNT' ? 100 + draw(2_500) : 1 + draw(12)),
            });
          }),
        };
      });
      const batch = await rolledBack((tx) => openBatchIn(tx, payments));
      const oneByOne = await rolledBack((tx) => openOneByOneIn(tx, payments));
      expect(stored(batch), JSON.stringify(payments)).toEqual(oneByOne);
      if (batch.some((answer) => answer.refusal === 'limit')) refused++;
    }
    // The comparison means something only if limits refused some payments and let others through.
    expect(refused).toBeGreaterThan(10);
    expect(refused).toBeLessThan(60);
  });
});
