import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { demoConfigFile, startTestApp, type TestApp } from '../support/app.js';
import { feedCaughtUp } from '../support/feed.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balance, createMerchant, createUser, topUp } from '../support/payments.js';

/** User ids of this file only: payer locks are advisory locks, shared by every schema on a server. */
const [A, B, C, D, E] = [4901, 4902, 4903, 4904, 4905] as const;
const MERCHANT = 4911;
const MERCHANT_ACCOUNT = `merchant.${MERCHANT}.THB`;
const REVENUE = 'system.revenue.THB';
const wallet = (userId: number) => `user.${userId}.THB`;
/** P2P payments tagged so carry no fee (the rules below exclude the tag). */
const NO_FEES = { tags: ['fee_exempt'] };
const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') === true;
/** docs: 200 on PostgreSQL as the issue asks; PGlite runs one statement at a time, so fewer there. */
const RACE_REPEATS = Number(process.env.REFUND_RACE_REPEATS ?? (onPostgres ? 200 : 10));
const RACERS = 64;

let t: TestApp;
beforeAll(async () => {
  const file = demoConfigFile();
  // A second service allowed to refund, to show it cannot reach wallet-api's intents.
  const nfc = file.serviceKeys.find((key) => key.serviceId === 'nfc-terminal');
  if (nfc === undefined) throw new Error('the demo config lacks nfc-terminal');
  (nfc.permissions as { refunds?: boolean }).refunds = true;
  t = await startTestApp({ file });
  await createMerchant(t, MERCHANT);
  for (const user of [A, B, C, D, E]) await createUser(t, user);
  await topUp(t, A, 100_000_000);
  await topUp(t, C, 1_000_000);
  await t.db.query(
    `INSERT INTO fee_rules (name, operation_type, expression, timing, tags_exclude) VALUES
       ('p2p sender fee', 'P2P_TRANSFER', '[{account: ''system.revenue.THB'', amount: amount * 7 / 100}]', 'PRE', '{fee_exempt}'),
       ('p2p receiver fee', 'P2P_TRANSFER', '[{account: ''system.revenue.THB'', amount: amount / 33}]', 'POST', '{fee_exempt}')`,
  );
});
afterAll(async () => t?.close());
afterEach(async () => {
  await expectLedgerInvariants(t.db);
  expect((await runAudit(t.db)).violations.map(formatViolation)).toEqual([]);
});

async function pay(from: number, to: number, amount: number, metadata: Record<string, unknown> = NO_FEES): Promise<string> {
  const res = await t.call('POST', '/intents', {
    user: from,
    body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount, recipientUserId: to, metadata },
  });
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json().status).toBe('SETTLED');
  return res.json().intentId as string;
}

const refundBody = (extra: Record<string, unknown> = {}) => ({ idempotencyKey: randomUUID(), reason: 'customer asked', ...extra });

function refund(intentId: string, body: unknown = refundBody(), options: { service?: string; user?: number } = {}) {
  return t.call('POST', `/intents/${intentId}/refunds`, { service: options.service ?? 'wallet-api', user: options.user ?? 77, body });
}

async function refunded(intentId: string, body: Record<string, unknown> = refundBody()) {
  const res = await refund(intentId, body);
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json().status).toBe('SETTLED');
  return res.json() as { refundId: string; amount: string; feeAmount: string };
}

async function storedRefunds(): Promise<number> {
  const { rows } = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM refunds');
  return rows[0]!.n;
}

async function refundedAmount(intentId: string): Promise<bigint> {
  const res = await t.call('GET', `/intents/${intentId}`);
  expect(res.statusCode, res.body).toBe(200);
  return BigInt(res.json().refundedAmount as string);
}

describe('refunds of a settled intent (docs/rules.md R57)', () => {
  it('P2P: a partial refund, then the rest by default, put the money back exactly', async () => {
    const [a0, b0] = [await balance(t, wallet(A)), await balance(t, wallet(B))];
    const intentId = await pay(A, B, 10_000);
    const first = await refunded(intentId, refundBody({ amount: 2_500, metadata: { ticket: 'T-1' } }));
    expect(first).toMatchObject({ amount: '2500', feeAmount: '0' });
    expect([await balance(t, wallet(A)), await balance(t, wallet(B))]).toEqual([a0 - 7_500n, b0 + 7_500n]);
    expect(await refundedAmount(intentId)).toBe(2_500n);

    const rest = await refunded(intentId);
    expect(rest.amount).toBe('7500');
    expect([await balance(t, wallet(A)), await balance(t, wallet(B))]).toEqual([a0, b0]);
    expect(await refundedAmount(intentId)).toBe(10_000n);

    const list = await t.call('GET', `/intents/${intentId}/refunds`);
    expect(list.statusCode).toBe(200);
    expect(list.json().refunds.map((r: { refundId: string }) => r.refundId)).toEqual([first.refundId, rest.refundId]);
    const one = await t.call('GET', `/refunds/${first.refundId}`);
    expect(one.json()).toMatchObject({
      refundId: first.refundId,
      intentId,
      amount: '2500',
      currency: 'THB',
      status: 'SETTLED',
      reason: 'customer asked',
      failureReason: null,
      requestedByUserId: 77,
      metadata: { ticket: 'T-1' },
    });
    // Nothing is left: even one satang more is refused and stores nothing.
    const before = await storedRefunds();
    const over = await refund(intentId, refundBody({ amount: 1 }));
    expect(over.statusCode, over.body).toBe(409);
    expect(over.json()).toMatchObject({ error: 'REFUND_EXCEEDS_REMAINING', remaining: '0' });
    expect(await storedRefunds()).toBe(before);
  });

  it('the transfers carry the REFUND code, and history rows name the refund and the original operation', async () => {
    const intentId = await pay(A, B, 1_000);
    const { refundId } = await refunded(intentId, refundBody({ amount: 400 }));
    const { rows } = await t.db.query<{ code: number }>(
      'SELECT t.code FROM ledger_transfers t JOIN refunds r ON t.id = ANY (r.transfer_ids) WHERE r.id = $1',
      [refundId],
    );
    expect(rows.length).toBeGreaterThanOrEqual(3);
    expect(new Set(rows.map((r) => r.code))).toEqual(new Set([12]));
    const history = await t.db.query<{
      account_name: string;
      direction: string;
      amount: bigint;
      operation_type: string;
      intent_id: string;
    }>('SELECT account_name, direction, amount, operation_type, intent_id FROM transactions WHERE refund_id = $1 ORDER BY direction', [
      refundId,
    ]);
    expect(history.rows).toEqual([
      { account_name: wallet(A), direction: 'CREDIT', amount: 400n, operation_type: 'P2P_TRANSFER', intent_id: intentId },
      { account_name: wallet(B), direction: 'DEBIT', amount: 400n, operation_type: 'P2P_TRANSFER', intent_id: intentId },
    ]);
  });

  it('each refund enters the event feed as a `refund` event of its original; intent events say `intent`', async () => {
    const intentId = await pay(A, B, 800);
    const { refundId } = await refunded(intentId, refundBody({ amount: 300 }));
    await feedCaughtUp(t.db);
    const events: Array<Record<string, unknown>> = [];
    for (let after: string | undefined; ; ) {
      const page = await t.call('GET', `/events?limit=500${after === undefined ? '' : `&after=${after}`}`);
      expect(page.statusCode, page.body).toBe(200);
      events.push(...page.json().events);
      if (page.json().events.length < 500) break;
      after = page.json().nextCursor as string;
    }
    const ofIntent = events.filter((e) => e.intentId === intentId).map(({ cursor: _, occurredAt: __, ...rest }) => rest);
    expect(ofIntent.at(-1)).toEqual({
      type: 'refund',
      refundId,
      intentId,
      operationType: 'P2P_TRANSFER',
      statusFrom: null,
      statusTo: 'SETTLED',
      amount: '300',
      currency: 'THB',
    });
    expect(ofIntent.slice(0, -1).map((e) => [e.type, e.statusTo])).toEqual([
      ['intent', 'CREATED'],
      ['intent', 'VALIDATED'],
      ['intent', 'AUTHORIZED'],
      ['intent', 'SETTLED'],
    ]);
  });

  it('MINIAPP_CHARGE: refunded from the merchant back to the customer', async () => {
    const res = await t.call('POST', '/intents', {
      user: D,
      body: { idempotencyKey: randomUUID(), operationType: 'MINIAPP_CHARGE', amount: 700, metadata: { customerUserId: C } },
    });
    expect(res.statusCode, res.body).toBe(201);
    const intentId = res.json().intentId as string;
    const [c0, d0] = [await balance(t, wallet(C)), await balance(t, wallet(D))];
    await refunded(intentId, refundBody({ amount: 200 }));
    await refunded(intentId);
    expect([await balance(t, wallet(C)), await balance(t, wallet(D))]).toEqual([c0 + 700n, d0 - 700n]);
  });

  it('a confirmed invoice: refunded from the merchant to the payer who confirmed it', async () => {
    const issued = await t.call('POST', '/intents', {
      user: MERCHANT,
      body: {
        idempotencyKey: randomUUID(),
        operationType: 'INVOICE_PAYMENT',
        amount: 5_000,
        toLedgerAccountId: ledgerAccountId(MERCHANT_ACCOUNT),
      },
    });
    expect(issued.statusCode, issued.body).toBe(201);
    const intentId = issued.json().intentId as string;
    const created = await refund(intentId);
    expect(created.statusCode, created.body).toBe(422);
    expect(created.json().error).toBe('NOT_REFUNDABLE');
    const confirmed = await t.call('POST', `/intents/${intentId}/confirm`, {
      user: C,
      body: { payerLedgerAccountId: ledgerAccountId(wallet(C)), payerUserId: C, idempotencyKey: randomUUID() },
    });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    const [c0, m0] = [await balance(t, wallet(C)), await balance(t, MERCHANT_ACCOUNT)];
    await refunded(intentId, refundBody({ amount: 1_000 }));
    await refunded(intentId);
    expect([await balance(t, wallet(C)), await balance(t, MERCHANT_ACCOUNT)]).toEqual([c0 + 5_000n, m0 - 5_000n]);
  });

  /** The accounts a P2P payment with fees moves money between: payer, payee, the fees' account. */
  const feePaymentBalances = async () => [await balance(t, wallet(A)), await balance(t, wallet(B)), await balance(t, REVENUE)];

  /** A pays B 10,007 with both fees (7 % PRE, 1/33 POST). */
  async function payWithFees() {
    const intentId = await pay(A, B, 10_007, {});
    const intent = (await t.call('GET', `/intents/${intentId}`)).json();
    const [pre, post] = [BigInt(intent.preFeeAmount), BigInt(intent.postFeeAmount)];
    expect([pre, post]).toEqual([700n, 303n]);
    return { intentId, pre, post, refundable: 10_007n - post };
  }

  it('refundFees: PRE and POST fees come back to the satang over several partial refunds', async () => {
    const [a0, b0, r0] = await feePaymentBalances();
    const { intentId, pre, post, refundable } = await payWithFees();
    const parts = [3_001n, 1_234n, 17n];
    const fees: bigint[] = [];
    for (const part of parts)
      fees.push(BigInt((await refunded(intentId, refundBody({ amount: Number(part), refundFees: true }))).feeAmount));
    const last = await refunded(intentId, refundBody({ refundFees: true }));
    expect(BigInt(last.amount)).toBe(refundable - parts.reduce((s, p) => s + p, 0n));
    fees.push(BigInt(last.feeAmount));
    // Each partial share is floored: never more than the proportion, the last one takes the rest.
    const proportional = ((pre + post) * 3_001n) / refundable;
    expect(fees[0]).toBeGreaterThanOrEqual(proportional - 1n);
    expect(fees[0]).toBeLessThanOrEqual(proportional);
    expect(fees.reduce((s, f) => s + f, 0n)).toBe(pre + post);
    expect(await feePaymentBalances()).toEqual([a0, b0, r0]);
    expect(await refundedAmount(intentId)).toBe(refundable);
  });

  it('a to-account short of funds: 422 INSUFFICIENT_FUNDS, the refund stored FAILED, the replay the same', async () => {
    const intentId = await pay(A, D, 3_000);
    const spend = await t.call('POST', '/intents', {
      user: D,
      body: {
        idempotencyKey: randomUUID(),
        operationType: 'P2P_TRANSFER',
        amount: Number(await balance(t, wallet(D))),
        recipientUserId: C,
        metadata: NO_FEES,
      },
    });
    expect(spend.statusCode, spend.body).toBe(201);
    const body = refundBody({ amount: 1_000 });
    const first = await refund(intentId, body);
    expect(first.statusCode, first.body).toBe(422);
    expect(first.json()).toMatchObject({ error: 'INSUFFICIENT_FUNDS', failureReason: 'insufficient_funds' });
    const refundId = first.json().refundId as string;
    const replay = await refund(intentId, body);
    expect(replay.statusCode).toBe(422);
    expect(replay.json()).toMatchObject({ error: 'INSUFFICIENT_FUNDS', refundId });
    const stored = await t.call('GET', `/refunds/${refundId}`);
    expect(stored.json()).toMatchObject({ status: 'FAILED', failureReason: 'insufficient_funds', amount: '1000' });
    expect(await refundedAmount(intentId)).toBe(0n);
    // The failed refund gave its amount back: once funded, the whole payment can be refunded.
    await pay(A, D, 3_000);
    expect((await refunded(intentId)).amount).toBe('3000');
  });

  /**
   * A refund of another original sent first: its batch is in flight while the rest arrive, so the
   * committer takes them together in the next one.
   */
  async function behindABatch(refunds: ReadonlyArray<() => Promise<LightMyRequestResponse>>): Promise<LightMyRequestResponse[]> {
    const leader = await pay(C, E, 500);
    const [lead, ...answers] = await Promise.all([refund(leader, refundBody({ amount: 100 })), ...refunds.map((send) => send())]);
    expect(lead!.statusCode, lead!.body).toBe(201);
    return answers;
  }

  it('partial refunds of one payment sent together: each settles, and its fees come back to the satang', async () => {
    const before = await feePaymentBalances();
    const { intentId, pre, post, refundable } = await payWithFees();
    const parts = [3_001n, 1_234n, 17n, 4_001n];
    parts.push(refundable - parts.reduce((s, p) => s + p, 0n));
    const answers = await behindABatch(parts.map((part) => () => refund(intentId, refundBody({ amount: Number(part), refundFees: true }))));
    for (const res of answers) expect([res.statusCode, res.json().status], res.body).toEqual([201, 'SETTLED']);
    expect(answers.reduce((sum, res) => sum + BigInt(res.json().feeAmount as string), 0n)).toBe(pre + post);
    expect(await feePaymentBalances()).toEqual(before);
    expect(await refundedAmount(intentId)).toBe(refundable);
  });

  it('a refund refused for funds gives its amount back to the refunds of its payment sent with it', async () => {
    const intentId = await pay(A, D, 3_000);
    const keep = 1_000n;
    const spare = (await balance(t, wallet(D))) - keep;
    if (spare > 0n) await pay(D, C, Number(spare));
    // 2,500 is more than D holds: refused, it gives its 2,500 back, and 1,000 of the 3,000 fits.
    // Had the 1,000 come first, the 2,500 would exceed what remains instead.
    const [big, small] = await behindABatch([
      () => refund(intentId, refundBody({ amount: 2_500 })),
      () => refund(intentId, refundBody({ amount: 1_000 })),
    ]);
    expect([small!.statusCode, small!.json().amount], small!.body).toEqual([201, '1000']);
    expect([
      [422, 'INSUFFICIENT_FUNDS'],
      [409, 'REFUND_EXCEEDS_REMAINING'],
    ]).toContainEqual([big!.statusCode, big!.json().error]);
    expect(await refundedAmount(intentId)).toBe(1_000n);
    expect(await balance(t, wallet(D))).toBe(0n);
  });

  it('replays by key: the same body is 200 with the stored refund, another body is 409 CONFLICT', async () => {
    const intentId = await pay(A, B, 900);
    const body = refundBody({ amount: 100 });
    const first = await refund(intentId, body);
    expect(first.statusCode).toBe(201);
    const again = await refund(intentId, body);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(first.json());
    const other = await refund(intentId, { ...body, amount: 101 });
    expect(other.statusCode).toBe(409);
    expect(other.json().error).toBe('CONFLICT');
    expect(await refundedAmount(intentId)).toBe(100n);
  });

  it('is refused, storing nothing: no permission 403, another service 404, not refundable 422', async () => {
    const intentId = await pay(A, B, 500);
    const before = await storedRefunds();
    expect((await refund(intentId, refundBody(), { service: 'mobile-gateway' })).json().error).toBe('FORBIDDEN');
    const foreign = await refund(intentId, refundBody(), { service: 'nfc-terminal' });
    expect([foreign.statusCode, foreign.json().error]).toEqual([404, 'NOT_FOUND']);
    expect((await refund(randomUUID())).statusCode).toBe(404);
    expect((await t.call('GET', `/refunds/${randomUUID()}`)).statusCode).toBe(404);
    expect((await t.call('GET', `/intents/${intentId}/refunds`, { service: 'nfc-terminal' })).statusCode).toBe(404);
    // A top-up comes from a provider's nostro account, not held here.
    const topUpRes = await t.call('POST', '/intents', {
      user: A,
      body: { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: 10 },
    });
    const nostro = await refund(topUpRes.json().intentId as string);
    expect([nostro.statusCode, nostro.json().error]).toEqual([422, 'NOT_REFUNDABLE']);
    // A withdrawal to the provider: not SETTLED here (AUTHORIZED, the PSP worker's), and its to-account is a nostro.
    const out = await t.call('POST', '/intents', {
      user: A,
      body: { idempotencyKey: randomUUID(), operationType: 'WITHDRAWAL', amount: 10, externalRef: 'bank-1' },
    });
    expect(out.statusCode, out.body).toBe(201);
    expect((await refund(out.json().intentId as string)).json().error).toBe('NOT_REFUNDABLE');
    expect(await storedRefunds()).toBe(before);
  });

  it.each([
    ['amount 0', { amount: 0 }],
    ['a negative amount', { amount: -5 }],
    ['a fractional amount', { amount: 1.5 }],
    ['an unsafe integer', { amount: 2 ** 53 }],
    ['an amount as a string', { amount: '100' }],
    ['a reason of 101 characters', { reason: 'x'.repeat(101) }],
    ['an empty reason', { reason: '' }],
    ['no reason', { reason: undefined }],
    ['an unknown field', { toAccountName: wallet(C) }],
    ['refundFees not a boolean', { refundFees: 'yes' }],
    ['metadata not an object', { metadata: [1] }],
    ['a key that is not a UUID v4', { idempotencyKey: 'k1' }],
  ])('a hostile body (%s) is 422 VALIDATION_ERROR and changes nothing', async (_, extra) => {
    const intentId = await pay(A, B, 300);
    const before = [await storedRefunds(), await balance(t, wallet(A)), await balance(t, wallet(B))];
    const res = await refund(intentId, refundBody(extra));
    expect([res.statusCode, res.json().error]).toEqual([422, 'VALIDATION_ERROR']);
    expect([await storedRefunds(), await balance(t, wallet(A)), await balance(t, wallet(B))]).toEqual(before);
  });

  it(`${RACERS} concurrent 60 % refunds of one payment refund it once, ${RACE_REPEATS} times over`, async () => {
    for (let round = 0; round < RACE_REPEATS; round += 1) {
      const intentId = await pay(A, B, 1_000);
      const answers = await Promise.all(Array.from({ length: RACERS }, () => refund(intentId, refundBody({ amount: 600 }))));
      const statuses = answers.map((a) => a.statusCode).sort();
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 409)).toHaveLength(RACERS - 1);
      const { rows } = await t.db.query<{ total: bigint; n: number }>(
        `SELECT coalesce(sum(amount), 0)::bigint AS total, count(*)::int AS n FROM refunds WHERE intent_id = $1 AND status = 'SETTLED'`,
        [intentId],
      );
      expect(rows[0]).toEqual({ total: 600n, n: 1 });
    }
  }, 600_000);

  it(`${RACERS} concurrent refunds with one key make one refund, ${RACE_REPEATS} times over`, async () => {
    for (let round = 0; round < RACE_REPEATS; round += 1) {
      const intentId = await pay(A, B, 1_000);
      const body = refundBody({ amount: 600 });
      const answers: LightMyRequestResponse[] = await Promise.all(Array.from({ length: RACERS }, () => refund(intentId, body)));
      expect(answers.filter((a) => a.statusCode === 201)).toHaveLength(1);
      expect(answers.filter((a) => a.statusCode === 200)).toHaveLength(RACERS - 1);
      expect(new Set(answers.map((a) => a.json().refundId))).toHaveProperty('size', 1);
      const { rows } = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM refunds WHERE intent_id = $1', [intentId]);
      expect(rows[0]!.n).toBe(1);
    }
  }, 600_000);
});
