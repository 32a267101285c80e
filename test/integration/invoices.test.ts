import { createHmac, randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createBroker } from '../../src/adapters/broker.js';
import type { Database } from '../../src/adapters/database.js';
import { ApiError } from '../../src/domain/errors.js';
import { type ConfirmAnswer, confirmInvoice } from '../../src/domain/invoices/confirm-invoice.js';
import { createFeeEngine, type FeeEngine } from '../../src/domain/rules/fees/index.js';
import { sharedAccountLookup } from '../../src/domain/accounts/accounts.js';
import { IntentCommitter } from '../../src/domain/intents/commit/intent-commit.js';
import { PayerLocks } from '../../src/domain/intents/commit/payer-locks.js';
import { StatusPublisher } from '../../src/domain/intents/store/status-publisher.js';
import { sharedIntentLookup } from '../../src/domain/intents/store/intent-store.js';
import type { Logger } from '../../src/adapters/logger.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { type ExpirySweep, startExpirySweep } from '../../src/workers/expiry-sweep.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { openTestDatabase } from '../support/database.js';
import { type GoneAtBegin, goneAtNextBegin } from '../support/gone-at-begin.js';
import { type ItemsOf, type LostCommitAnswers, losingCommitAnswers } from '../support/lost-commit-answers.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balances, createMerchant, createUser, topUp } from '../support/payments.js';
import { recording, until } from '../support/recording-broker.js';

const quiet: Logger = { info: () => {}, warn: () => {}, error: () => {}, child: () => quiet };

/**
 * User ids of this file only. The payer lock (docs/rules.md R22) is a PostgreSQL advisory lock, which is
 * database-wide: test files that share a server in separate schemas would trip over each
 * other's payers if they used the same ids.
 */
const [U1, U2, U3, U4, U5, U6] = [4101, 4102, 4103, 4104, 4105, 4106] as const;
const MERCHANT = 4107;
const MERCHANT_ACCOUNT = `merchant.${MERCHANT}.THB`;
const ISSUER_SERVICE = 'wallet-api';
const REVENUE = 'system.revenue.THB';
const TRANSIT = 'system.transit.MERCHANT_INVOICE.THB';
const PRE_FEE = 50n;
/** The POST rule below takes 1 % of the amount, floored. */
const postFeeOf = (amount: number) => BigInt(Math.floor(amount / 100));
const wallet = (userId: number) => `user.${userId}.THB`;

/** The invoices a statement claims: the claim's items, its second parameter (confirm-commit.ts). */
const claimsInvoices: ItemsOf = (text, params) =>
  text.includes('FOR UPDATE OF i') ? (JSON.parse(String(params?.[1])) as unknown[]).length : null;

const tap = recording(createBroker(process.env.REDIS_URL));
let t: TestApp;
let lost: LostCommitAnswers;
let gone: GoneAtBegin;
let sweep: ExpirySweep;
beforeAll(async () => {
  lost = losingCommitAnswers(await openTestDatabase(), claimsInvoices);
  gone = goneAtNextBegin(lost.db);
  t = await startTestApp({ broker: tap.broker, db: gone.db });
  await createMerchant(t, MERCHANT);
  for (const user of [U1, U2, U3, U4, U5, U6]) await createUser(t, user);
  await topUp(t, U1, 1_000_000);
  await topUp(t, U2, 1_000_000);
  await topUp(t, U4, 1_000);
  await topUp(t, U5, 1_000_000);
  await topUp(t, U6, 1_000_000);
  await t.db.query(
    `INSERT INTO fee_rules (name, operation_type, expression, timing, tags_exclude) VALUES
       ('invoice service fee', 'INVOICE_PAYMENT', '[{account: ''system.revenue.THB'', amount: 50}]', 'PRE', '{fee_exempt}'),
       ('invoice merchant discount', 'INVOICE_PAYMENT', '[{account: ''system.revenue.THB'', amount: amount / 100}]', 'POST', '{fee_exempt}')`,
  );
  sweep = startExpirySweep({ db: t.db, publisher: new StatusPublisher(tap.broker, quiet), log: quiet, intervalMs: 3_600_000 });
});
afterAll(async () => {
  await sweep?.stop();
  await t?.close();
});
afterEach(async () => expectLedgerInvariants(t.db));

async function issue(amount: number, extra: Record<string, unknown> = {}): Promise<LightMyRequestResponse> {
  return t.call('POST', '/intents', {
    service: ISSUER_SERVICE,
    user: MERCHANT,
    body: {
      idempotencyKey: randomUUID(),
      operationType: 'INVOICE_PAYMENT',
      amount,
      toLedgerAccountId: ledgerAccountId(MERCHANT_ACCOUNT),
      ...extra,
    },
  });
}

async function issued(amount: number, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await issue(amount, extra);
  expect(res.statusCode, res.body).toBe(201);
  return res.json().intentId as string;
}

interface ConfirmOptions {
  payer?: number;
  account?: string;
  key?: string;
  user?: number | string | null;
  ifMatch?: string;
  service?: string;
  body?: unknown;
}

function confirm(intentId: string, o: ConfirmOptions = {}) {
  const payer = o.payer ?? U1;
  const body = o.body ?? {
    payerLedgerAccountId: ledgerAccountId(o.account ?? wallet(payer)),
    payerUserId: payer,
    idempotencyKey: o.key ?? randomUUID(),
  };
  const user = o.user === undefined ? payer : o.user;
  return t.call('POST', `/intents/${intentId}/confirm`, {
    service: o.service ?? ISSUER_SERVICE,
    ...(user === null ? {} : { user }),
    body,
    ...(o.ifMatch === undefined ? {} : { headers: { 'if-match': o.ifMatch } }),
  });
}

function cancel(intentId: string, o: { user?: number | string | null; body?: unknown; rawBody?: string; service?: string } = {}) {
  const user = o.user === undefined ? MERCHANT : o.user;
  return t.call('POST', `/intents/${intentId}/cancel`, {
    service: o.service ?? ISSUER_SERVICE,
    ...(user === null ? {} : { user }),
    ...(o.body === undefined ? {} : { body: o.body }),
    ...(o.rawBody === undefined ? {} : { rawBody: o.rawBody }),
  });
}

async function trail(intentId: string): Promise<Array<[string | null, string, string | null]>> {
  const res = await t.call('GET', `/intents/${intentId}/events`);
  expect(res.statusCode).toBe(200);
  return res
    .json()
    .events.map((e: { statusFrom: string | null; statusTo: string; reason: string | null }) => [e.statusFrom, e.statusTo, e.reason]);
}

async function stored(intentId: string) {
  const { rows } = await t.db.query<Record<string, unknown>>(
    `SELECT status, version, user_id, from_account_name, from_user_id, redeemed_by_user_id, redeemed_at, issued_by_user_id,
            cancel_reason, canceled_at, failure_reason, metadata, transfer_ids
       FROM intents WHERE id = $1`,
    [intentId],
  );
  return rows[0];
}

const SETTLED_TRAIL = [
  [null, 'CREATED', null],
  ['CREATED', 'VALIDATED', null],
  ['VALIDATED', 'AUTHORIZED', null],
  ['AUTHORIZED', 'SETTLED', null],
];

/** The dependencies of one simulated instance: its own in-process locks and its own group commit. */
const instance = (fees: FeeEngine, observeBatch?: (size: number) => void) => ({
  db: t.db,
  ledger: t.ledger,
  fees,
  publisher: new StatusPublisher(tap.broker, quiet),
  locks: new PayerLocks(),
  committer: new IntentCommitter(t.db, t.ledger, observeBatch),
  accounts: sharedAccountLookup(t.db),
  intents: sharedIntentLookup(t.db),
  settings: t.config,
});

const delta = (after: Record<string, string>, before: Record<string, string>, name: string) =>
  BigInt(after[name] ?? '0') - BigInt(before[name] ?? '0');

describe('issue (POST /intents, INVOICE_PAYMENT)', () => {
  it('stays CREATED with expiresAt, a qrSignature (docs/rules.md R16), no payer, no fees and no money moved', async () => {
    const before = await balances(t, [MERCHANT_ACCOUNT, TRANSIT]);
    const res = await issue(12_345);
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      intentId: expect.any(String),
      status: 'CREATED',
      channel: 'MERCHANT_INVOICE',
      preFeeAmount: '0',
      postFeeAmount: '0',
      requiresMonitoring: false,
      createdAt: expect.stringMatching(/Z$/),
      expiresAt: expect.stringMatching(/Z$/),
      qrSignature: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
      version: 0,
    });
    const ttlMs = Date.parse(body.expiresAt) - Date.parse(body.createdAt);
    expect(ttlMs).toBeGreaterThan(599_000);
    expect(ttlMs).toBeLessThan(601_000);
    const expected = createHmac('sha256', 'test-qr-secret')
      .update(`${body.intentId}|12345|THB|${MERCHANT_ACCOUNT}|${body.expiresAt}`)
      .digest()
      .subarray(0, 16)
      .toString('base64url');
    expect(body.qrSignature).toBe(expected);
    expect(await stored(body.intentId)).toMatchObject({
      status: 'CREATED',
      version: 0,
      user_id: BigInt(MERCHANT),
      issued_by_user_id: BigInt(MERCHANT),
      from_account_name: null,
      redeemed_by_user_id: null,
      metadata: { appScope: 'a' },
    });
    expect(await trail(body.intentId)).toEqual([[null, 'CREATED', null]]);
    expect((await t.call('GET', `/intents/${body.intentId}`)).json()).toMatchObject({
      fromAccount: null,
      toAccount: MERCHANT_ACCOUNT,
      status: 'CREATED',
    });
    expect(await balances(t, [MERCHANT_ACCOUNT, TRANSIT])).toEqual(before);
  });

  it('takes ttlSeconds up to the maximum and keeps the metadata as given', async () => {
    const metadata = {
      appScope: 'w',
      note: 'n'.repeat(500),
      posTerminalId: 'p'.repeat(100),
      ttlSeconds: 3600,
      qrIssuedAt: '2030-01-01T00:00:00.000Z',
    };
    const res = await issue(100, { metadata });
    expect(res.statusCode, res.body).toBe(201);
    const ttlMs = Date.parse(res.json().expiresAt) - Date.parse(res.json().createdAt);
    expect(Math.abs(ttlMs - 3_600_000)).toBeLessThan(1_000);
    expect((await stored(res.json().intentId))?.metadata).toEqual(metadata);
  });

  it.each([
    ['ttlSeconds over INVOICE_MAX_TTL_SECONDS', { ttlSeconds: 3601 }],
    ['ttlSeconds 0', { ttlSeconds: 0 }],
    ['a fractional ttlSeconds', { ttlSeconds: 1.5 }],
    ['a note over 500', { note: 'n'.repeat(501) }],
    ['a posTerminalId over 100', { posTerminalId: 'p'.repeat(101) }],
    ['an appScope outside w, c, a', { appScope: 'x' }],
    ['a qrIssuedAt that is no timestamp', { qrIssuedAt: 'yesterday' }],
  ])('400 BAD_REQUEST for %s', async (_name, metadata) => {
    const res = await issue(100, { metadata });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ error: 'BAD_REQUEST', message: expect.any(String) });
  });
});

describe('confirm (POST /intents/{id}/confirm)', () => {
  it('settles: payer pays amount + preFee, the merchant gets amount − postFee, revenue both fees', async () => {
    const intentId = await issued(10_000);
    const names = [wallet(U1), MERCHANT_ACCOUNT, REVENUE, TRANSIT];
    const before = await balances(t, names);
    const key = randomUUID();
    const res = await confirm(intentId, { key });
    expect(res.statusCode, res.body).toBe(200);
    const createdAt = (await t.call('GET', `/intents/${intentId}`)).json().createdAt;
    expect(res.json()).toEqual({ intentId, status: 'SETTLED', channel: 'MERCHANT_INVOICE', createdAt, version: 1, replayed: false });
    const after = await balances(t, names);
    expect(delta(after, before, wallet(U1))).toBe(-(10_000n + PRE_FEE));
    expect(delta(after, before, MERCHANT_ACCOUNT)).toBe(10_000n - postFeeOf(10_000));
    expect(delta(after, before, REVENUE)).toBe(PRE_FEE + postFeeOf(10_000));
    expect(delta(after, before, TRANSIT)).toBe(0n);
    expect(await trail(intentId)).toEqual(SETTLED_TRAIL);
    expect((await t.call('GET', `/intents/${intentId}`)).json()).toMatchObject({
      status: 'SETTLED',
      fromAccount: wallet(U1),
      toAccount: MERCHANT_ACCOUNT,
      preFeeAmount: '50',
      postFeeAmount: '100',
      version: 1,
      failureReason: null,
    });
    expect(await stored(intentId)).toMatchObject({
      user_id: BigInt(U1),
      from_user_id: BigInt(U1),
      redeemed_by_user_id: BigInt(U1),
      redeemed_at: expect.any(Date),
      issued_by_user_id: BigInt(MERCHANT),
    });
    const debit = (await t.call('GET', `/accounts/${wallet(U1)}/transactions?limit=1`)).json().transactions[0];
    expect(debit).toMatchObject({ intentId, operationType: 'INVOICE_PAYMENT', direction: 'DEBIT', amount: '10000', feeAmount: '50' });
    const credit = (await t.call('GET', `/accounts/${MERCHANT_ACCOUNT}/transactions?limit=1`)).json().transactions[0];
    expect(credit).toMatchObject({ intentId, direction: 'CREDIT', amount: '10000', feeAmount: '100' });

    const replay = await confirm(intentId, { key });
    expect(replay.statusCode).toBe(200);
    expect(replay.json()).toEqual({ ...res.json(), replayed: true });
    for (const other of [{ key: randomUUID() }, { key, payer: U2 }]) {
      const again = await confirm(intentId, other);
      expect(again.statusCode).toBe(409);
      expect(again.json()).toEqual({ error: 'ALREADY_PROCESSED', status: 'SETTLED' });
    }
    expect(await balances(t, names)).toEqual(after);
  });

  it('a fee_exempt invoice settles without fees', async () => {
    const intentId = await issued(3_000, { metadata: { tags: ['fee_exempt'] } });
    const before = await balances(t, [wallet(U2), MERCHANT_ACCOUNT]);
    const res = await confirm(intentId, { payer: U2 });
    expect(res.json()).toMatchObject({ status: 'SETTLED' });
    const after = await balances(t, [wallet(U2), MERCHANT_ACCOUNT]);
    expect([delta(after, before, wallet(U2)), delta(after, before, MERCHANT_ACCOUNT)]).toEqual([-3_000n, 3_000n]);
  });

  it('X-User-Id 0 confirms for a payer (admin bypass)', async () => {
    const intentId = await issued(200);
    const res = await confirm(intentId, { payer: U2, user: 0 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().status).toBe('SETTLED');
    expect(await stored(intentId)).toMatchObject({ user_id: BigInt(U2), redeemed_by_user_id: BigInt(U2) });
  });

  it('If-Match: the current version passes (plain or quoted), another is 409 VERSION_MISMATCH with currentVersion', async () => {
    const intentId = await issued(300);
    const mismatch = await confirm(intentId, { ifMatch: '5' });
    expect(mismatch.statusCode).toBe(409);
    expect(mismatch.json()).toEqual({ error: 'VERSION_MISMATCH', currentVersion: 0 });
    expect(await stored(intentId)).toMatchObject({ status: 'CREATED', version: 0 });
    const ok = await confirm(intentId, { ifMatch: '"0"' });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json(), ok.body).toMatchObject({ status: 'SETTLED', version: 1 });
    const plain = await confirm(await issued(300), { ifMatch: '0' });
    expect(plain.json(), plain.body).toMatchObject({ status: 'SETTLED', version: 1 });
  });

  describe('refusals change nothing', () => {
    let intentId: string;
    let before: Record<string, string>;
    beforeAll(async () => {
      intentId = await issued(500);
      before = await balances(t, [wallet(U1), wallet(U3), MERCHANT_ACCOUNT]);
    });
    afterEach(async () => {
      expect(await stored(intentId)).toMatchObject({ status: 'CREATED', version: 0, redeemed_by_user_id: null });
      expect(await balances(t, [wallet(U1), wallet(U3), MERCHANT_ACCOUNT])).toEqual(before);
    });

    it('404 INTENT_NOT_FOUND for an unknown id and for another service’s invoice', async () => {
      for (const res of [await confirm(randomUUID()), await confirm(intentId, { service: 'mobile-gateway' })]) {
        expect(res.statusCode).toBe(404);
        expect(res.json()).toEqual({ error: 'INTENT_NOT_FOUND', message: expect.any(String) });
      }
    });

    it('400 BAD_REQUEST for an intent that is no invoice (docs/rules.md R30), which stays as it was', async () => {
      const p2p = await t.call('POST', '/intents', {
        user: U1,
        body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 10, recipientUserId: U3 },
      });
      const p2pId = p2p.json().intentId as string;
      const afterP2p = await balances(t, [wallet(U1), wallet(U3), MERCHANT_ACCOUNT]);
      const res = await confirm(p2pId);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'BAD_REQUEST', message: expect.any(String) });
      expect(await stored(p2pId)).toMatchObject({ status: 'SETTLED', version: 0 });
      expect(await balances(t, [wallet(U1), wallet(U3), MERCHANT_ACCOUNT])).toEqual(afterP2p);
      before = afterP2p;
    });

    it('404 PAYER_ACCOUNT_NOT_FOUND for an unknown payer account', async () => {
      const res = await confirm(intentId, { body: { payerLedgerAccountId: randomUUID(), payerUserId: U1, idempotencyKey: randomUUID() } });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: 'PAYER_ACCOUNT_NOT_FOUND', message: expect.any(String) });
    });

    it.each([
      ['the account belongs to another user', { payer: U1, account: wallet(U3) }],
      ['the account belongs to nobody (a system account)', { payer: U1, account: REVENUE }],
      ['X-User-Id is neither the payer nor 0', { payer: U1, user: U3 }],
    ])('400 PAYER_ACCOUNT_USER_MISMATCH when %s', async (_name, options) => {
      const res = await confirm(intentId, options);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'PAYER_ACCOUNT_USER_MISMATCH', message: expect.any(String) });
    });

    it('400 BAD_REQUEST when the merchant pays its invoice from the receiving account itself', async () => {
      const res = await confirm(intentId, { payer: MERCHANT, account: MERCHANT_ACCOUNT });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('BAD_REQUEST');
    });

    it.each([
      ['no body', { body: null }],
      ['payerUserId missing', { body: { payerLedgerAccountId: ledgerAccountId(wallet(U1)), idempotencyKey: randomUUID() } }],
      ['payerUserId 0', { body: { payerLedgerAccountId: ledgerAccountId(wallet(U1)), payerUserId: 0, idempotencyKey: randomUUID() } }],
      [
        'payerUserId as a string',
        { body: { payerLedgerAccountId: ledgerAccountId(wallet(U1)), payerUserId: '1', idempotencyKey: randomUUID() } },
      ],
      ['payerLedgerAccountId not a UUID', { body: { payerLedgerAccountId: wallet(U1), payerUserId: U1, idempotencyKey: randomUUID() } }],
      [
        'idempotencyKey not a UUID',
        { body: { payerLedgerAccountId: ledgerAccountId(wallet(U1)), payerUserId: U1, idempotencyKey: 'k-1' } },
      ],
      [
        'an unknown field',
        { body: { payerLedgerAccountId: ledgerAccountId(wallet(U1)), payerUserId: U1, idempotencyKey: randomUUID(), tip: 1 } },
      ],
      ['X-User-Id missing', { user: null }],
      ['X-User-Id not an integer', { user: 'abc' }],
      ['If-Match not an integer', { ifMatch: 'v1' }],
    ])('400 VALIDATION_ERROR for %s (docs/rules.md R6, R29)', async (_name, options) => {
      const { body, ...rest } = options as ConfirmOptions & { body?: unknown };
      const res =
        body === null
          ? await t.call('POST', `/intents/${intentId}/confirm`, { user: U1 })
          : await confirm(intentId, { ...rest, ...(body === undefined ? {} : { body }) });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ error: 'VALIDATION_ERROR', message: expect.any(String) });
    });

    it('400 VALIDATION_ERROR for an id that is not a UUID', async () => {
      const res = await confirm('not-a-uuid');
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('VALIDATION_ERROR');
    });
  });

  it('409 EXPIRED past expiresAt, before and after the sweep', async () => {
    const intentId = await issued(400);
    await t.db.query("UPDATE intents SET expires_at = now() - interval '1 second' WHERE id = $1", [intentId]);
    const res = await confirm(intentId);
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual({ error: 'EXPIRED' });
    expect(await stored(intentId)).toMatchObject({ status: 'CREATED', version: 0 });
    await sweep.runOnce();
    expect((await confirm(intentId)).json()).toEqual({ error: 'EXPIRED' });
  });

  it('docs/rules.md R27: a payer without the funds gets 200 FAILED, version + 1, and nothing moves', async () => {
    const intentId = await issued(5_000);
    const names = [wallet(U4), MERCHANT_ACCOUNT, REVENUE, TRANSIT];
    const before = await balances(t, names);
    const key = randomUUID();
    const res = await confirm(intentId, { payer: U4, key });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ intentId, status: 'FAILED', version: 1, replayed: false });
    expect(await balances(t, names)).toEqual(before);
    expect(await trail(intentId)).toEqual([
      [null, 'CREATED', null],
      ['CREATED', 'VALIDATED', null],
      ['VALIDATED', 'FAILED', 'insufficient_funds'],
    ]);
    expect((await t.call('GET', `/intents/${intentId}`)).json()).toMatchObject({
      status: 'FAILED',
      failureReason: 'insufficient_funds',
      fromAccount: wallet(U4),
    });
    expect(
      (await t.call('GET', `/accounts/${wallet(U4)}/transactions`))
        .json()
        .transactions.some((row: { intentId: string }) => row.intentId === intentId),
    ).toBe(false);
    expect((await confirm(intentId, { payer: U4, key })).json()).toMatchObject({ status: 'FAILED', replayed: true });
    const other = await confirm(intentId, { payer: U1 });
    expect(other.statusCode).toBe(409);
    expect(other.json()).toEqual({ error: 'ALREADY_PROCESSED', status: 'FAILED' });
  });

  it('docs/rules.md R27: a limit that blocks the payer gets 200 FAILED with the rule as the reason', async () => {
    await t.db.query(
      `INSERT INTO limit_rules (name, operation_type, direction, time_window, limit_type, limit_value, currency)
       VALUES ('invoice per payment', 'INVOICE_PAYMENT', 'DEBIT', 'PER_TRANSACTION', 'AMOUNT', 50000, 'THB')`,
    );
    try {
      const intentId = await issued(60_000);
      const before = await balances(t, [wallet(U1), MERCHANT_ACCOUNT]);
      const res = await confirm(intentId);
      expect(res.json(), res.body).toMatchObject({ status: 'FAILED', version: 1 });
      expect(await balances(t, [wallet(U1), MERCHANT_ACCOUNT])).toEqual(before);
      expect(await trail(intentId)).toEqual([
        [null, 'CREATED', null],
        ['CREATED', 'VALIDATED', null],
        ['VALIDATED', 'FAILED', 'limit_exceeded: invoice per payment'],
      ]);
      expect((await confirm(await issued(50_000))).json().status).toBe('SETTLED');
    } finally {
      await t.db.query("UPDATE limit_rules SET active = false WHERE name = 'invoice per payment'");
    }
  });

  it('a settlement the ledger refuses voids the reservation and ends FAILED (200)', async () => {
    // A fee account in the account map without a ledger account: the reservation applies, the settlement chain cannot.
    await t.db.query(
      `INSERT INTO accounts (account_name, ledger_account_id, account_type, user_id) VALUES ('service.999991.THB', $1, 'SERVICE_ACCOUNT', 999991)`,
      [randomUUID()],
    );
    await t.db.query(
      `INSERT INTO fee_rules (name, operation_type, expression, timing, tags_include) VALUES ('ghost fee', 'INVOICE_PAYMENT', '[{account: ''service.999991.THB'', amount: 1}]', 'PRE', '{ghost}')`,
    );
    try {
      const intentId = await issued(700, { metadata: { tags: ['ghost'] } });
      const names = [wallet(U1), MERCHANT_ACCOUNT, REVENUE, TRANSIT];
      const before = await balances(t, names);
      const res = await confirm(intentId);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ status: 'FAILED', version: 1 });
      expect(await balances(t, names)).toEqual(before);
      const events = await trail(intentId);
      expect(events.map(([from, to]) => [from, to])).toEqual([
        [null, 'CREATED'],
        ['CREATED', 'VALIDATED'],
        ['VALIDATED', 'AUTHORIZED'],
        ['AUTHORIZED', 'FAILED'],
      ]);
      expect(events[3]?.[2]).toMatch(/^ledger_transfer_error: .*credit_account_not_found/);
      const { rows } = await t.db.query<{ pending_status: string }>(
        'SELECT t.pending_status FROM ledger_transfers t JOIN intents i ON t.id = ANY(i.transfer_ids) WHERE i.id = $1 AND t.pending_status IS NOT NULL',
        [intentId],
      );
      expect(rows.map((row) => row.pending_status)).toEqual(['voided']);
    } finally {
      await t.db.query("UPDATE fee_rules SET active = false WHERE name = 'ghost fee'");
    }
  });
});

describe('cancel (POST /intents/{id}/cancel)', () => {
  it('the issuer cancels: 200, reason merchant_canceled by default, audit CREATED → CANCELED, not twice', async () => {
    const intentId = await issued(900);
    const res = await cancel(intentId);
    expect(res.statusCode, res.body).toBe(200);
    const createdAt = (await t.call('GET', `/intents/${intentId}`)).json().createdAt;
    expect(res.json()).toEqual({
      intentId,
      status: 'CANCELED',
      channel: 'MERCHANT_INVOICE',
      preFeeAmount: '0',
      postFeeAmount: '0',
      requiresMonitoring: false,
      createdAt,
    });
    expect(await trail(intentId)).toEqual([
      [null, 'CREATED', null],
      ['CREATED', 'CANCELED', 'merchant_canceled'],
    ]);
    expect(await stored(intentId)).toMatchObject({
      status: 'CANCELED',
      cancel_reason: 'merchant_canceled',
      canceled_at: expect.any(Date),
      version: 0,
    });
    const again = await cancel(intentId);
    expect(again.statusCode).toBe(409);
    expect(again.json()).toEqual({ error: 'CANNOT_CANCEL', status: 'CANCELED' });
    const late = await confirm(intentId);
    expect(late.statusCode).toBe(409);
    expect(late.json()).toEqual({ error: 'ALREADY_PROCESSED', status: 'CANCELED' });
  });

  it('X-User-Id 0 cancels with a reason of 50 characters; an empty body object is fine too', async () => {
    const reason = 'r'.repeat(50);
    const intentId = await issued(900);
    expect((await cancel(intentId, { user: 0, body: { reason } })).statusCode).toBe(200);
    expect(await trail(intentId)).toEqual([
      [null, 'CREATED', null],
      ['CREATED', 'CANCELED', reason],
    ]);
    const second = await issued(900);
    expect((await cancel(second, { body: {} })).statusCode).toBe(200);
  });

  it('403 UNAUTHORIZED_ACTOR for anyone but the issuer or 0', async () => {
    const intentId = await issued(900);
    const res = await cancel(intentId, { user: U1 });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ error: 'UNAUTHORIZED_ACTOR' });
    expect(await stored(intentId)).toMatchObject({ status: 'CREATED' });
  });

  it('400 VALIDATION_ERROR without a usable X-User-Id (docs/rules.md R29)', async () => {
    const intentId = await issued(900);
    for (const user of [null, 'abc', '-1']) {
      const res = await cancel(intentId, { user });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'VALIDATION_ERROR', message: expect.any(String) });
    }
    expect(await stored(intentId)).toMatchObject({ status: 'CREATED' });
  });

  it.each([
    ['an empty reason', { reason: '' }],
    ['a reason of 51 characters', { reason: 'r'.repeat(51) }],
    ['a reason that is no string', { reason: 5 }],
    ['an unknown field', { reason: 'x', why: 'y' }],
  ])('422 VALIDATION_ERROR for %s (docs/rules.md R29)', async (_name, body) => {
    const intentId = await issued(900);
    const res = await cancel(intentId, { body });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({ error: 'VALIDATION_ERROR', message: expect.any(String) });
    expect(await stored(intentId)).toMatchObject({ status: 'CREATED' });
  });

  it('400 CANCEL_NOT_SUPPORTED for a single-phase intent; 404 INTENT_NOT_FOUND for unknown or foreign ids', async () => {
    const p2p = await t.call('POST', '/intents', {
      user: U1,
      body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 10, recipientUserId: U3 },
    });
    const notSupported = await cancel(p2p.json().intentId, { user: U1 });
    expect(notSupported.statusCode).toBe(400);
    expect(notSupported.json()).toEqual({ error: 'CANCEL_NOT_SUPPORTED' });
    const intentId = await issued(900);
    for (const res of [await cancel(randomUUID()), await cancel(intentId, { service: 'mobile-gateway' })]) {
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: 'INTENT_NOT_FOUND' });
    }
  });

  it('409 CANNOT_CANCEL with the status of a settled invoice', async () => {
    const intentId = await issued(900);
    expect((await confirm(intentId)).json().status).toBe('SETTLED');
    const res = await cancel(intentId);
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual({ error: 'CANNOT_CANCEL', status: 'SETTLED' });
  });
});

describe('expiry sweep', () => {
  it('expires an invoice of ttlSeconds 1 once it has passed, and only that', async () => {
    const shortLived = await issued(100, { metadata: { ttlSeconds: 1 } });
    const longLived = await issued(100);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(await sweep.runOnce()).toBeGreaterThanOrEqual(1);
    expect(await stored(shortLived)).toMatchObject({ status: 'EXPIRED', version: 0 });
    expect(await stored(longLived)).toMatchObject({ status: 'CREATED' });
    expect(await trail(shortLived)).toEqual([
      [null, 'CREATED', null],
      ['CREATED', 'EXPIRED', null],
    ]);
    expect((await confirm(shortLived)).json()).toEqual({ error: 'EXPIRED' });
    const late = await cancel(shortLived);
    expect(late.statusCode).toBe(409);
    expect(late.json()).toEqual({ error: 'CANNOT_CANCEL', status: 'EXPIRED' });
    expect(await sweep.runOnce()).toBe(0);
  });

  it('works through more than one batch, and two sweeps at once expire each invoice once', async () => {
    const ids = await Promise.all(Array.from({ length: 7 }, () => issued(100)));
    await t.db.query("UPDATE intents SET expires_at = now() - interval '1 minute' WHERE id = ANY($1::uuid[])", [ids]);
    const instances = [0, 1].map(() =>
      startExpirySweep({ db: t.db, publisher: new StatusPublisher(tap.broker, quiet), log: quiet, intervalMs: 3_600_000, batchSizeMax: 2 }),
    );
    try {
      const counts = await Promise.all(instances.map((instance) => instance.runOnce()));
      expect(counts[0]! + counts[1]!).toBe(7);
    } finally {
      await Promise.all(instances.map((instance) => instance.stop()));
    }
    const { rows } = await t.db.query<{ n: bigint }>(
      "SELECT count(*) AS n FROM intent_events WHERE intent_id = ANY($1::uuid[]) AND status_to = 'EXPIRED'",
      [ids],
    );
    expect(rows[0]?.n).toBe(7n);
  });

  it('the timer runs the sweep every intervalMs until stopped', async () => {
    const intentId = await issued(100);
    await t.db.query("UPDATE intents SET expires_at = now() - interval '1 minute' WHERE id = $1", [intentId]);
    const timed = startExpirySweep({ db: t.db, publisher: new StatusPublisher(tap.broker, quiet), log: quiet, intervalMs: 20 });
    try {
      for (let waitedMs = 0; waitedMs < 2_000 && (await stored(intentId))?.status !== 'EXPIRED'; waitedMs += 20) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await timed.stop();
    }
    expect(await stored(intentId)).toMatchObject({ status: 'EXPIRED' });
  });
});

describe('live status messages of confirm, cancel and expiry', () => {
  const { statusesOf } = tap;

  it('publishes each transition of a live invoice, and nothing for one without live', async () => {
    const settled = await issued(100, { live: true });
    await confirm(settled);
    await until(() => statusesOf(settled).length === 4);
    expect(statusesOf(settled)).toEqual(['CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLED']);

    const canceled = await issued(100, { live: true });
    await cancel(canceled);
    await until(() => statusesOf(canceled).length === 2);
    expect(statusesOf(canceled)).toEqual(['CREATED', 'CANCELED']);

    const expired = await issued(100, { live: true });
    await t.db.query("UPDATE intents SET expires_at = now() - interval '1 second' WHERE id = $1", [expired]);
    await sweep.runOnce();
    await until(() => statusesOf(expired).length === 2);
    expect(statusesOf(expired)).toEqual(['CREATED', 'EXPIRED']);

    const quietOne = await issued(100);
    await confirm(quietOne);
    await new Promise((r) => setTimeout(r, 50));
    expect(statusesOf(quietOne)).toEqual([]);
  });
});

describe('races (docs/rules.md R26)', () => {
  it('30 concurrent confirms with different keys: one SETTLED, one ledger movement, 29 × 409 ALREADY_PROCESSED', async () => {
    const amount = 2_000;
    const intentId = await issued(amount);
    const names = [wallet(U5), MERCHANT_ACCOUNT, REVENUE];
    const before = await balances(t, names);
    const answers = await Promise.all(Array.from({ length: 30 }, () => confirm(intentId, { payer: U5 })));
    const winners = answers.filter((a) => a.statusCode === 200);
    expect(winners.map((a) => a.json().status)).toEqual(['SETTLED']);
    const losers = answers.filter((a) => a.statusCode !== 200);
    expect(losers).toHaveLength(29);
    for (const loser of losers) {
      expect(loser.statusCode).toBe(409);
      expect(loser.json()).toEqual({ error: 'ALREADY_PROCESSED', status: 'SETTLED' });
    }
    const after = await balances(t, names);
    expect(delta(after, before, wallet(U5))).toBe(-(BigInt(amount) + PRE_FEE));
    expect(delta(after, before, MERCHANT_ACCOUNT)).toBe(BigInt(amount) - postFeeOf(amount));
    expect(await trail(intentId)).toEqual(SETTLED_TRAIL);
    const { rows } = await t.db.query<{ n: bigint }>('SELECT count(*) AS n FROM transactions WHERE intent_id = $1', [intentId]);
    expect(rows[0]?.n).toBe(2n);
  });

  it('30 confirms from 30 simulated instances (own in-process locks): the conditional update alone picks one', async () => {
    const amount = 1_500;
    const intentId = await issued(amount);
    const before = await balances(t, [wallet(U6), MERCHANT_ACCOUNT]);
    const fees: FeeEngine = await createFeeEngine();
    try {
      const outcomes = await Promise.allSettled(
        Array.from({ length: 30 }, () =>
          confirmInvoice(instance(fees), {
            serviceId: ISSUER_SERVICE,
            intentId,
            actor: U6,
            expectedVersion: null,
            payerLedgerAccountId: ledgerAccountId(wallet(U6)),
            payerUserId: U6,
            idempotencyKey: randomUUID(),
            log: quiet,
          }),
        ),
      );
      const settled = outcomes.filter((o) => o.status === 'fulfilled');
      expect(settled.map((o) => o.value.intent.status)).toEqual(['SETTLED']);
      const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason] : []));
      expect(refused).toHaveLength(29);
      for (const reason of refused) {
        expect(reason).toBeInstanceOf(ApiError);
        expect((reason as ApiError).toBody()).toEqual({ error: 'ALREADY_PROCESSED', status: 'SETTLED' });
      }
    } finally {
      await fees.dispose();
    }
    const after = await balances(t, [wallet(U6), MERCHANT_ACCOUNT]);
    expect(delta(after, before, wallet(U6))).toBe(-(BigInt(amount) + PRE_FEE));
    expect(delta(after, before, MERCHANT_ACCOUNT)).toBe(BigInt(amount) - postFeeOf(amount));
    expect(await trail(intentId)).toEqual(SETTLED_TRAIL);
  });

  it('confirms committed in one batch, racing cancels and another instance: one winner per invoice, money moved once per SETTLED', async () => {
    const amount = 1_000;
    // The payers of this test only: one without funds, and the other instance's own, so that no
    // payer's lock (docs/rules.md R22) is contended and every refusal below comes from the invoice's race.
    const payers = Array.from({ length: 12 }, (_, i) => 4120 + i);
    const rivals = Array.from({ length: 12 }, (_, i) => 4140 + i);
    for (const user of [...payers, ...rivals]) await createUser(t, user);
    for (const user of [...payers.slice(1), ...rivals]) await topUp(t, user, 100_000);
    const invoices: string[] = [];
    for (let i = 0; i < payers.length; i += 1) invoices.push(await issued(amount));
    const names = [...payers.map(wallet), ...rivals.map(wallet), MERCHANT_ACCOUNT];
    const batches: number[] = [];
    let before: Record<string, string> = {};
    const fees: FeeEngine = await createFeeEngine();
    const confirmBy = (deps: ReturnType<typeof instance>, intentId: string, payer: number) =>
      confirmInvoice(deps, {
        serviceId: ISSUER_SERVICE,
        intentId,
        actor: payer,
        expectedVersion: 0,
        payerLedgerAccountId: ledgerAccountId(wallet(payer)),
        payerUserId: payer,
        idempotencyKey: randomUUID(),
        log: quiet,
      });
    let outcomes: Array<{
      mine: PromiseSettledResult<ConfirmAnswer>;
      rival?: PromiseSettledResult<ConfirmAnswer>;
      canceled?: LightMyRequestResponse;
    }>;
    try {
      const main = instance(fees, (size) => batches.push(size));
      const other = instance(fees);
      // One confirm first, so that the batch sizes below are those of the race alone.
      expect((await confirmBy(main, await issued(amount), rivals[0]!)).intent.status).toBe('SETTLED');
      batches.length = 0;
      before = await balances(t, names);
      // Invoice i: 0 mod 3 confirmed alone, 1 mod 3 raced by a cancel, 2 mod 3 raced by a confirm of another instance.
      outcomes = await Promise.all(
        invoices.map(async (intentId, i) => {
          const [mine, rival, canceled] = await Promise.all([
            Promise.allSettled([confirmBy(main, intentId, payers[i]!)]),
            i % 3 === 2 ? Promise.allSettled([confirmBy(other, intentId, rivals[i]!)]) : undefined,
            i % 3 === 1 ? cancel(intentId) : undefined,
          ]);
          return { mine: mine[0]!, ...(rival === undefined ? {} : { rival: rival[0]! }), ...(canceled === undefined ? {} : { canceled }) };
        }),
      );
    } finally {
      await fees.dispose();
    }
    expect(Math.max(...batches), `confirm batches ${batches.join(', ')}`).toBeGreaterThan(1);
    const after = await balances(t, names);
    const paid = -(BigInt(amount) + PRE_FEE);
    let settled = 0n;
    for (const [i, intentId] of invoices.entries()) {
      const { mine, rival, canceled } = outcomes[i]!;
      const row = await stored(intentId);
      const path = (await trail(intentId)).map(([, to]) => to);
      const answer = (o: PromiseSettledResult<ConfirmAnswer> | undefined) =>
        o?.status === 'fulfilled' ? o.value.intent.status : (o?.reason as ApiError | undefined)?.toBody();
      if (i === 0) {
        // No funds: the batch's ledger call refused this reservation alone.
        expect(row).toMatchObject({ status: 'FAILED', failure_reason: 'insufficient_funds', version: 1 });
        expect(answer(mine)).toBe('FAILED');
        expect(path).toEqual(['CREATED', 'VALIDATED', 'FAILED']);
        continue;
      }
      if (row?.status === 'CANCELED') {
        expect(canceled?.statusCode).toBe(200);
        expect(answer(mine)).toEqual({ error: 'ALREADY_PROCESSED', status: 'CANCELED' });
        expect(path).toEqual(['CREATED', 'CANCELED']);
        expect(delta(after, before, wallet(payers[i]!))).toBe(0n);
        continue;
      }
      expect(row?.status, `invoice ${i}`).toBe('SETTLED');
      expect(path).toEqual(['CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLED']);
      settled += 1n;
      if (canceled !== undefined) expect(canceled.json()).toEqual({ error: 'CANNOT_CANCEL', status: 'SETTLED' });
      const winner = Number(row?.redeemed_by_user_id);
      const contenders: Array<[number, PromiseSettledResult<ConfirmAnswer>]> = [[payers[i]!, mine]];
      if (rival !== undefined) contenders.push([rivals[i]!, rival]);
      for (const [payer, outcome] of contenders) {
        const won = payer === winner;
        expect(answer(outcome)).toEqual(won ? 'SETTLED' : { error: 'ALREADY_PROCESSED', status: 'SETTLED' });
        expect(delta(after, before, wallet(payer))).toBe(won ? paid : 0n);
      }
    }
    expect(delta(after, before, MERCHANT_ACCOUNT)).toBe(settled * (BigInt(amount) - postFeeOf(amount)));
    console.info(`confirm batches on ${t.db.kind}: ${batches.join(', ')}; ${settled} of ${invoices.length} invoices SETTLED`);
  });

  it('confirm racing cancel racing the sweep around expiresAt: exactly one wins, the trail is a valid path', async () => {
    const winners: Record<string, number> = { SETTLED: 0, CANCELED: 0, EXPIRED: 0 };
    const amount = 100;
    const before = await balances(t, [wallet(U2)]);
    // expiresAt is 10 ms ahead; each schedule (confirm, cancel, sweep start in ms) lets another one reach the row first.
    const schedules = [
      [0, 0, 11],
      [0, 4, 11],
      [12, 12, 12],
      [25, 25, 12],
      [9, 10, 10],
      [4, 0, 11],
    ] as const;
    for (let trial = 0; trial < 12; trial += 1) {
      const intentId = await issued(amount);
      const [confirmAtMs, cancelAtMs, sweepAtMs] = schedules[trial % schedules.length] ?? [0, 0, 0];
      await t.db.query("UPDATE intents SET expires_at = now() + interval '10 milliseconds' WHERE id = $1", [intentId]);
      const at = <T>(ms: number, work: () => Promise<T>) =>
        new Promise<T>((resolve, reject) => setTimeout(() => work().then(resolve, reject), ms));
      const [confirmed, canceled] = await Promise.all([
        at(confirmAtMs, () => confirm(intentId, { payer: U2 })),
        at(cancelAtMs, () => cancel(intentId)),
        at(sweepAtMs, () => sweep.runOnce()),
      ]);
      const final = (await stored(intentId))?.status as string;
      const path = (await trail(intentId)).map(([, to]) => to);
      switch (final) {
        case 'SETTLED':
          expect(confirmed.json()).toMatchObject({ status: 'SETTLED' });
          expect(canceled.json()).toEqual({ error: 'CANNOT_CANCEL', status: 'SETTLED' });
          expect(path).toEqual(['CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLED']);
          break;
        case 'CANCELED':
          expect(canceled.statusCode).toBe(200);
          expect([{ error: 'ALREADY_PROCESSED', status: 'CANCELED' }, { error: 'EXPIRED' }]).toContainEqual(confirmed.json());
          expect(path).toEqual(['CREATED', 'CANCELED']);
          break;
        case 'EXPIRED':
          expect(confirmed.json()).toEqual({ error: 'EXPIRED' });
          expect(canceled.json()).toEqual({ error: 'CANNOT_CANCEL', status: 'EXPIRED' });
          expect(path).toEqual(['CREATED', 'EXPIRED']);
          break;
        default:
          throw new Error(`trial ${trial} ended ${final}, trail ${path.join(' → ')}`);
      }
      winners[final] = (winners[final] ?? 0) + 1;
    }
    expect(Object.values(winners).reduce((sum, n) => sum + n, 0)).toBe(12);
    const after = await balances(t, [wallet(U2)]);
    expect(delta(after, before, wallet(U2))).toBe(-BigInt(winners.SETTLED ?? 0) * (BigInt(amount) + PRE_FEE));
    console.info(`confirm/cancel/expiry race winners on ${t.db.kind}: ${JSON.stringify(winners)}`);
  });
});

describe('a confirm whose COMMIT answer is lost (docs/RELIABILITY.md, G2)', () => {
  it('is answered 200 as the confirm it is, not 5xx, with its live message; the rival key is 409 ALREADY_PROCESSED; money moves once; its key then replays', async () => {
    const amount = 4_000;
    const intentId = await issued(amount, { live: true });
    const names = [wallet(U1), wallet(U2), MERCHANT_ACCOUNT, REVENUE, TRANSIT];
    const before = await balances(t, names);
    const keys = { [U1]: randomUUID(), [U2]: randomUUID() };
    lost.arm();
    const answers = await Promise.all([U1, U2].map((payer) => confirm(intentId, { payer, key: keys[payer] })));
    expect(lost.armed, 'a confirm met the lost answer').toBe(false);
    const won = answers.findIndex((a) => a.statusCode === 200);
    const [winner, loser] = won === 0 ? [U1, U2] : [U2, U1];
    const createdAt = (await t.call('GET', `/intents/${intentId}`)).json().createdAt;
    const fresh = { intentId, status: 'SETTLED', channel: 'MERCHANT_INVOICE', createdAt, version: 1, replayed: false };
    expect(answers[won]?.json(), answers.map((a) => `${a.statusCode} ${a.body}`).join('; ')).toEqual(fresh);
    expect(answers[1 - won]?.statusCode).toBe(409);
    expect(answers[1 - won]?.json()).toEqual({ error: 'ALREADY_PROCESSED', status: 'SETTLED' });
    const after = await balances(t, names);
    expect(delta(after, before, wallet(winner))).toBe(-(BigInt(amount) + PRE_FEE));
    expect(delta(after, before, wallet(loser))).toBe(0n);
    expect(delta(after, before, MERCHANT_ACCOUNT)).toBe(BigInt(amount) - postFeeOf(amount));
    expect(delta(after, before, REVENUE)).toBe(PRE_FEE + postFeeOf(amount));
    expect(delta(after, before, TRANSIT)).toBe(0n);
    expect(await trail(intentId)).toEqual(SETTLED_TRAIL);
    expect(await stored(intentId)).toMatchObject({ status: 'SETTLED', version: 1, redeemed_by_user_id: BigInt(winner) });
    // A merchant watching the invoice learns it was paid, though the payer's answer took the lost-answer path.
    await until(() => tap.statusesOf(intentId).includes('SETTLED'));
    expect(tap.statusesOf(intentId)).toEqual(['CREATED', 'SETTLED']);

    const replay = await confirm(intentId, { payer: winner, key: keys[winner] });
    expect(replay.statusCode).toBe(200);
    expect(replay.json()).toEqual({ ...fresh, replayed: true });
    const rival = await confirm(intentId, { payer: loser, key: keys[loser] });
    expect(rival.json()).toEqual({ error: 'ALREADY_PROCESSED', status: 'SETTLED' });
    expect(await balances(t, names)).toEqual(after);
  });

  it('in a batch: each confirm, committed again alone, meets its own claim and is answered as fresh, not replayed', async () => {
    const amount = 1_200;
    const payers = Array.from({ length: 8 }, (_, i) => 4170 + i);
    for (const payer of payers) {
      await createUser(t, payer);
      await topUp(t, payer, 10_000);
    }
    const invoices: string[] = [];
    for (const _ of payers) invoices.push(await issued(amount, { live: true }));
    const names = [...payers.map(wallet), MERCHANT_ACCOUNT, TRANSIT];
    const before = await balances(t, names);
    const keys = payers.map(() => randomUUID());
    lost.arm(2);
    const answers = await Promise.all(payers.map((payer, i) => confirm(invoices[i]!, { payer, key: keys[i]! })));
    expect(lost.armed, 'a batch of two or more confirms met the lost answer').toBe(false);
    expect(answers.map((a) => `${a.statusCode} ${a.json().status} replayed ${a.json().replayed}`)).toEqual(
      payers.map(() => '200 SETTLED replayed false'),
    );
    const after = await balances(t, names);
    for (const payer of payers) expect(delta(after, before, wallet(payer)), wallet(payer)).toBe(-(BigInt(amount) + PRE_FEE));
    expect(delta(after, before, MERCHANT_ACCOUNT)).toBe(BigInt(payers.length) * (BigInt(amount) - postFeeOf(amount)));
    expect(delta(after, before, TRANSIT)).toBe(0n);
    for (const intentId of invoices) expect(await trail(intentId)).toEqual(SETTLED_TRAIL);
    await until(() => invoices.every((intentId) => tap.statusesOf(intentId).includes('SETTLED')));
    // Those of the batch whose answer was lost publish SETTLED alone, the others every transition.
    for (const intentId of invoices)
      expect(
        tap.statusesOf(intentId).filter((s) => s === 'SETTLED'),
        intentId,
      ).toEqual(['SETTLED']);

    const replays = await Promise.all(payers.map((payer, i) => confirm(invoices[i]!, { payer, key: keys[i]! })));
    expect(replays.map((a) => `${a.statusCode} ${a.json().status} replayed ${a.json().replayed}`)).toEqual(
      payers.map(() => '200 SETTLED replayed true'),
    );
    expect(await balances(t, names)).toEqual(after);
  });

  it('one whose claim lost the invoice to another key is answered 409 ALREADY_PROCESSED, as its retry would be, not 5xx', async () => {
    const amount = 900;
    const intentId = await issued(amount);
    const names = [wallet(U1), wallet(U2), MERCHANT_ACCOUNT];
    const before = await balances(t, names);
    // The rival confirms between this request's read (the invoice unclaimed) and its claim, whose
    // COMMIT then goes through and its answer is lost.
    let rival: LightMyRequestResponse | undefined;
    const overtaken: Database = {
      ...t.db,
      async transaction(work) {
        rival ??= await confirm(intentId, { payer: U2 });
        await t.db.transaction(work);
        throw new Error('Connection terminated unexpectedly');
      },
    };
    const fees = await createFeeEngine();
    const answer = await confirmInvoice(
      { ...instance(fees), committer: new IntentCommitter(overtaken, t.ledger) },
      {
        serviceId: ISSUER_SERVICE,
        intentId,
        actor: U1,
        expectedVersion: null,
        payerLedgerAccountId: ledgerAccountId(wallet(U1)),
        payerUserId: U1,
        idempotencyKey: randomUUID(),
        log: quiet,
      },
    )
      .then((a) => a as ConfirmAnswer | Error)
      .catch((error: unknown) => error as Error)
      .finally(() => fees.dispose());
    expect(rival?.json()).toMatchObject({ status: 'SETTLED', replayed: false });
    expect(answer).toBeInstanceOf(ApiError);
    expect((answer as ApiError).toBody()).toEqual({ error: 'ALREADY_PROCESSED', status: 'SETTLED' });
    const after = await balances(t, names);
    expect(delta(after, before, wallet(U1))).toBe(0n);
    expect(delta(after, before, wallet(U2))).toBe(-(BigInt(amount) + PRE_FEE));
    expect(delta(after, before, MERCHANT_ACCOUNT)).toBe(BigInt(amount) - postFeeOf(amount));
    expect(await stored(intentId)).toMatchObject({ status: 'SETTLED', version: 1, redeemed_by_user_id: BigInt(U2) });
  });

  it('a failure before its COMMIT was sent is answered 503 with Retry-After at once (docs/rules.md R66), and its retry with the key confirms once', async () => {
    const amount = 700;
    const intentId = await issued(amount);
    const names = [wallet(U2), MERCHANT_ACCOUNT];
    const before = await balances(t, names);
    const key = randomUUID();
    gone.arm();
    const res = await confirm(intentId, { payer: U2, key }).finally(() => gone.end());
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toEqual({ error: 'SERVICE_UNAVAILABLE', message: expect.any(String) });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // The claim's transaction met the outage at BEGIN; nothing looked for a claim it cannot have made.
    expect(gone.asked).toEqual(['BEGIN']);
    expect(await stored(intentId)).toMatchObject({ status: 'CREATED', version: 0 });
    expect(await balances(t, names)).toEqual(before);

    const retry = await confirm(intentId, { payer: U2, key });
    expect(retry.statusCode, retry.body).toBe(200);
    expect(retry.json()).toMatchObject({ status: 'SETTLED', version: 1, replayed: false });
    const after = await balances(t, names);
    expect(delta(after, before, wallet(U2))).toBe(-(BigInt(amount) + PRE_FEE));
  });
});
