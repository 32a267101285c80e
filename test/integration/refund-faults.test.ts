import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import { LEDGER_CODE_REFUND } from '../../src/domain/model.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balance, createUser, topUp } from '../support/payments.js';

/** User ids of this file only: payer locks are advisory locks, shared by every schema on a server. */
const PAYER = 4931;
const PAYEES = [4932, 4933, 4934, 4935] as const;
const wallet = (userId: number) => `user.${userId}.THB`;

/** The original whose refunds' ledger call throws (the ledger failing mid-batch, not refusing). */
let poisoned: string | null = null;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    wrapLedger: (ledger) =>
      new Proxy(ledger, {
        get(target, name, receiver) {
          if (name !== 'createTransfers') return Reflect.get(target, name, receiver);
          return async (...args: Parameters<typeof target.createTransfers>) => {
            if (poisoned !== null && args[1].some((transfer) => transfer.userData128 === poisoned))
              throw new Error('injected ledger failure');
            return target.createTransfers(...args);
          };
        },
      }),
  });
  await createUser(t, PAYER);
  for (const payee of PAYEES) await createUser(t, payee);
  await topUp(t, PAYER, 1_000_000);
});
afterAll(async () => t?.close());
afterEach(async () => {
  poisoned = null;
  await expectLedgerInvariants(t.db);
  expect((await runAudit(t.db)).violations.map(formatViolation)).toEqual([]);
});

async function pay(to: number): Promise<string> {
  const res = await t.call('POST', '/intents', {
    user: PAYER,
    body: {
      idempotencyKey: randomUUID(),
      operationType: 'P2P_TRANSFER',
      amount: 10_000,
      recipientUserId: to,
      metadata: { tags: ['fee_exempt'] },
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json().status).toBe('SETTLED');
  return res.json().intentId as string;
}

describe('a refund whose ledger call fails', () => {
  it('moves nothing, keeps its remainder, leaves no reservation, answers 500, and the refunds batched with it settle', async () => {
    // One payer, so one payment at a time (docs/rules.md R22).
    const originals: string[] = [];
    for (const payee of PAYEES) originals.push(await pay(payee));
    const [bad, ...good] = originals as [string, ...string[]];
    poisoned = bad;
    const before = { payer: await balance(t, wallet(PAYER)), payee: await balance(t, wallet(PAYEES[0])) };
    // Sent together, so that the committer takes them in one batch behind the first to arrive.
    const answers = await Promise.all(
      [...originals, ...originals].map((id) =>
        t.call('POST', `/intents/${id}/refunds`, { user: 77, body: { idempotencyKey: randomUUID(), amount: 2_500, reason: 'fault' } }),
      ),
    );
    answers.forEach((res, index) => {
      if (originals[index % originals.length] === bad) {
        // An unexpected failure is 500 INTERNAL_ERROR (a fixed text in production); nothing is stored.
        expect(res.statusCode, res.body).toBe(500);
        expect(res.json().error).toBe('INTERNAL_ERROR');
      } else {
        expect(res.statusCode, res.body).toBe(201);
        expect(res.json()).toMatchObject({ status: 'SETTLED', amount: '2500' });
      }
    });
    expect(await balance(t, wallet(PAYER))).toBe(before.payer + 2n * 2_500n * BigInt(good.length));
    expect(await balance(t, wallet(PAYEES[0]))).toBe(before.payee);
    const listed = await t.call('GET', `/intents/${bad}/refunds`);
    expect(listed.json()).toEqual({ refunds: [] });
    expect((await t.call('GET', `/intents/${bad}`)).json().refundedAmount).toBe('0');
    for (const id of good) expect((await t.call('GET', `/intents/${id}`)).json().refundedAmount).toBe('5000');
    // Each settled refund made its reserve, post and credit, and nothing else: no pending
    // reservation of the failed one is left behind.
    const { rows } = await t.db.query<{ n: number; pending: number }>(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE pending_status = 'pending')::int AS pending
         FROM ledger_transfers WHERE code = $1`,
      [LEDGER_CODE_REFUND],
    );
    expect(rows[0]).toEqual({ n: 3 * 2 * good.length, pending: 0 });
    const totals = await t.db.query<{ refunded: string }>('SELECT refunded::text FROM refund_totals WHERE original_id = $1', [bad]);
    expect(totals.rows).toEqual([]);

    // The ledger back: the same original refunds in full what remains, as if the failure never was.
    poisoned = null;
    const after = await t.call('POST', `/intents/${bad}/refunds`, { user: 77, body: { idempotencyKey: randomUUID(), reason: 'retry' } });
    expect(after.statusCode, after.body).toBe(201);
    expect(after.json()).toMatchObject({ status: 'SETTLED', amount: '10000' });
  });
});
