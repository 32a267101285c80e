import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balances, createMerchant, createUser, intentBody, topUp } from '../support/payments.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  for (const user of [1, 2, 3, 4, 50]) await createUser(t, user);
  await createMerchant(t, 7);
  await topUp(t, 1, 100_000);
});
afterAll(async () => t?.close());
afterEach(async () => expectLedgerInvariants(t.db));

const post = (body: Record<string, unknown>, options: { service?: string; user?: number } = {}) =>
  t.call('POST', '/intents', { service: options.service ?? 'wallet-api', user: options.user ?? 1, body });

async function expectSettledTrail(intentId: string, service = 'wallet-api') {
  const res = await t.call('GET', `/intents/${intentId}/events`, { service });
  expect(res.statusCode).toBe(200);
  expect(res.json().events.map((e: { statusFrom: string | null; statusTo: string }) => [e.statusFrom, e.statusTo])).toEqual([
    [null, 'CREATED'],
    ['CREATED', 'VALIDATED'],
    ['VALIDATED', 'AUTHORIZED'],
    ['AUTHORIZED', 'SETTLED'],
  ]);
}

describe('the single-phase operation types settle synchronously with exact balances', () => {
  it('QP_TOPUP: nostro → user', async () => {
    const before = await balances(t, ['user.3.THB', 'system.nostro.pspx.THB']);
    const res = await post(intentBody({ operationType: 'QP_TOPUP', amount: 2500 }), { user: 3 });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      intentId: expect.any(String),
      status: 'SETTLED',
      channel: 'INTERNAL_P2P',
      preFeeAmount: '0',
      postFeeAmount: '0',
      requiresMonitoring: false,
      createdAt: expect.any(String),
      version: 0,
    });
    expect(await balances(t, ['user.3.THB', 'system.nostro.pspx.THB'])).toEqual({
      'user.3.THB': String(BigInt(before['user.3.THB'] ?? '0') + 2500n),
      'system.nostro.pspx.THB': String(BigInt(before['system.nostro.pspx.THB'] ?? '0') - 2500n),
    });
    await expectSettledTrail(body.intentId);
  });

  it('P2P_TRANSFER: user → recipient, with history rows on both sides', async () => {
    const res = await post(intentBody({ operationType: 'P2P_TRANSFER', amount: 1500, recipientUserId: 2, comment: 'lunch' }));
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ status: 'SETTLED', channel: 'INTERNAL_P2P', preFeeAmount: '0', postFeeAmount: '0' });
    expect(await balances(t, ['user.1.THB', 'user.2.THB'])).toEqual({ 'user.1.THB': '98500', 'user.2.THB': '1500' });
    const intentId = res.json().intentId as string;
    await expectSettledTrail(intentId);
    const debit = (await t.call('GET', '/accounts/user.1.THB/transactions?limit=1')).json().transactions[0];
    expect(debit).toEqual({
      id: expect.any(Number),
      intentId,
      operationType: 'P2P_TRANSFER',
      direction: 'DEBIT',
      amount: '1500',
      feeAmount: '0',
      currency: 'THB',
      createdAt: expect.stringMatching(/Z$/),
      balanceAfter: '98500',
      refundId: null,
    });
    const credit = (await t.call('GET', '/accounts/user.2.THB/transactions')).json().transactions;
    expect(credit).toEqual([expect.objectContaining({ intentId, direction: 'CREDIT', amount: '1500' })]);
  });

  it('P2P_TRANSFER to a toLedgerAccountId', async () => {
    const ledgerId = (await t.call('POST', '/accounts', { user: 4, body: { userId: 4, currency: 'THB' } })).json().ledgerAccountId;
    const res = await post(intentBody({ operationType: 'P2P_TRANSFER', amount: 100, toLedgerAccountId: ledgerId }));
    expect(res.statusCode).toBe(201);
    expect((await t.call('GET', `/intents/${res.json().intentId}`)).json()).toMatchObject({
      fromAccount: 'user.1.THB',
      toAccount: 'user.4.THB',
    });
  });

  it('WITHDRAWAL: user → PSPX nostro, with the shipped PRE fee of 1000 to revenue', async () => {
    const before = await balances(t, ['user.1.THB', 'system.nostro.pspx.THB', 'system.revenue.THB']);
    const res = await post(intentBody({ operationType: 'WITHDRAWAL', amount: 5000, externalRef: 'bank-ref-1' }));
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ status: 'SETTLED', channel: 'SERVICE_TRANSFER', preFeeAmount: '1000', postFeeAmount: '0' });
    const after = await balances(t, ['user.1.THB', 'system.nostro.pspx.THB', 'system.revenue.THB']);
    expect(BigInt(after['user.1.THB'] ?? '') - BigInt(before['user.1.THB'] ?? '')).toBe(-6000n);
    expect(BigInt(after['system.nostro.pspx.THB'] ?? '') - BigInt(before['system.nostro.pspx.THB'] ?? '')).toBe(5000n);
    expect(BigInt(after['system.revenue.THB'] ?? '') - BigInt(before['system.revenue.THB'] ?? '')).toBe(1000n);
  });

  it('WITHDRAWAL with fee_exempt skips the shipped fee', async () => {
    const res = await post(intentBody({ operationType: 'WITHDRAWAL', amount: 100, externalRef: 'r2', metadata: { tags: ['fee_exempt'] } }));
    expect(res.json()).toMatchObject({ status: 'SETTLED', preFeeAmount: '0' });
  });

  it('MINIAPP_CHARGE: customer → merchant (X-User-Id when merchantId is absent)', async () => {
    const before = await balances(t, ['user.1.THB', 'user.50.THB']);
    const res = await post(intentBody({ operationType: 'MINIAPP_CHARGE', amount: 700, metadata: { customerUserId: 1 } }), { user: 50 });
    expect(res.statusCode).toBe(201);
    const after = await balances(t, ['user.1.THB', 'user.50.THB']);
    expect(BigInt(after['user.1.THB'] ?? '') - BigInt(before['user.1.THB'] ?? '')).toBe(-700n);
    expect(BigInt(after['user.50.THB'] ?? '') - BigInt(before['user.50.THB'] ?? '')).toBe(700n);
  });

  it('MINIAPP_CREDIT: merchant → customer', async () => {
    const res = await post(intentBody({ operationType: 'MINIAPP_CREDIT', amount: 200, metadata: { customerUserId: 2, merchantId: 50 } }), {
      user: 50,
    });
    expect(res.statusCode).toBe(201);
    expect(await balances(t, ['user.50.THB'])).toEqual({ 'user.50.THB': '500' });
  });

  it('ADMIN_TRANSFER: both accounts from overrides, channel ADMIN', async () => {
    const res = await post(
      intentBody({
        operationType: 'ADMIN_TRANSFER',
        amount: 30_000,
        fromAccountName: 'system.equity.THB',
        toAccountName: 'service.900001.THB',
      }),
      { service: 'admin-panel', user: 0 },
    );
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ status: 'SETTLED', channel: 'ADMIN' });
    expect(await balances(t, ['service.900001.THB', 'system.equity.THB'])).toEqual({
      'service.900001.THB': '30000',
      'system.equity.THB': '-30000',
    });
    await expectSettledTrail(res.json().intentId, 'admin-panel');
  });

  it('SERVICE_DEPOSIT: service account → metadata.recipientUserId', async () => {
    const res = await post(
      intentBody({
        operationType: 'SERVICE_DEPOSIT',
        amount: 10_000,
        fromAccountName: 'service.900001.THB',
        metadata: { recipientUserId: 3 },
      }),
      { service: 'exchange', user: 900001 },
    );
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ status: 'SETTLED', channel: 'SERVICE_TRANSFER' });
    expect(await balances(t, ['service.900001.THB'])).toEqual({ 'service.900001.THB': '20000' });
  });

  it('NFC_CHARGE: user wallet → merchant wallet, both from overrides', async () => {
    const before = await balances(t, ['user.2.THB']);
    const res = await post(
      intentBody({
        operationType: 'NFC_CHARGE',
        amount: 300,
        fromAccountName: 'user.2.THB',
        toAccountName: 'merchant.7.THB',
        metadata: { nfcTagId: 99 },
      }),
      { service: 'nfc-terminal', user: 2 },
    );
    expect(res.statusCode, res.body).toBe(201);
    expect((await balances(t, ['user.2.THB']))['user.2.THB']).toBe(String(BigInt(before['user.2.THB'] ?? '') - 300n));
    expect(await balances(t, ['merchant.7.THB'])).toEqual({ 'merchant.7.THB': '300' });
  });
});

describe('body rules of the operation table (400 BAD_REQUEST)', () => {
  it.each([
    ['P2P_TRANSFER without a recipient', { operationType: 'P2P_TRANSFER', amount: 1 }],
    ['P2P_TRANSFER with externalRef', { operationType: 'P2P_TRANSFER', amount: 1, recipientUserId: 2, externalRef: 'x' }],
    ['WITHDRAWAL without externalRef', { operationType: 'WITHDRAWAL', amount: 1 }],
    ['WITHDRAWAL with recipientUserId', { operationType: 'WITHDRAWAL', amount: 1, externalRef: 'x', recipientUserId: 2 }],
    [
      'MINIAPP_CHARGE with recipientUserId',
      { operationType: 'MINIAPP_CHARGE', amount: 1, recipientUserId: 2, metadata: { customerUserId: 1 } },
    ],
    ['MINIAPP_CHARGE with externalRef', { operationType: 'MINIAPP_CHARGE', amount: 1, externalRef: 'x', metadata: { customerUserId: 1 } }],
    ['MINIAPP_CHARGE without customerUserId', { operationType: 'MINIAPP_CHARGE', amount: 1 }],
    [
      'MINIAPP_CREDIT with externalRef',
      { operationType: 'MINIAPP_CREDIT', amount: 1, externalRef: 'x', metadata: { customerUserId: 1, merchantId: 50 } },
    ],
    ['MINIAPP_CREDIT without merchantId', { operationType: 'MINIAPP_CREDIT', amount: 1, metadata: { customerUserId: 1 } }],
    ['INVOICE_PAYMENT without toLedgerAccountId', { operationType: 'INVOICE_PAYMENT', amount: 1 }],
    [
      'INVOICE_PAYMENT with recipientUserId',
      { operationType: 'INVOICE_PAYMENT', amount: 1, recipientUserId: 2, toLedgerAccountId: 'c67f828f-cc42-54ad-ad3e-9318cdfb52e6' },
    ],
    [
      'INVOICE_PAYMENT with ttlSeconds over the maximum',
      {
        operationType: 'INVOICE_PAYMENT',
        amount: 1,
        toLedgerAccountId: 'c67f828f-cc42-54ad-ad3e-9318cdfb52e6',
        metadata: { ttlSeconds: 3601 },
      },
    ],
    [
      'INVOICE_PAYMENT with an unknown appScope',
      {
        operationType: 'INVOICE_PAYMENT',
        amount: 1,
        toLedgerAccountId: 'c67f828f-cc42-54ad-ad3e-9318cdfb52e6',
        metadata: { appScope: 'x' },
      },
    ],
    ['an unresolvable toAccountName', { operationType: 'P2P_TRANSFER', amount: 1, toAccountName: 'user.2.THB.extra' }],
  ])('%s', async (_name, body) => {
    const res = await post(intentBody(body));
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toBe('BAD_REQUEST');
  });

  it('SERVICE_DEPOSIT without metadata.recipientUserId', async () => {
    const res = await post(intentBody({ operationType: 'SERVICE_DEPOSIT', amount: 1, fromAccountName: 'service.900001.THB' }), {
      service: 'exchange',
      user: 900001,
    });
    expect(res.statusCode).toBe(400);
  });

  it.each([
    ['NFC_CHARGE with recipientUserId', { recipientUserId: 2 }],
    ['NFC_CHARGE with externalRef', { externalRef: 'x' }],
    ['NFC_CHARGE without nfcTagId', { metadata: {} }],
    ['NFC_CHARGE with a non-integer nfcTagId', { metadata: { nfcTagId: 'abc' } }],
  ])('%s', async (_name, extra) => {
    const body = {
      operationType: 'NFC_CHARGE',
      amount: 1,
      fromAccountName: 'user.2.THB',
      toAccountName: 'merchant.7.THB',
      metadata: { nfcTagId: 1 },
      ...extra,
    };
    const res = await post(intentBody(body), { service: 'nfc-terminal', user: 2 });
    expect(res.statusCode, res.body).toBe(400);
  });

  it('ADMIN_TRANSFER without overrides', async () => {
    const res = await post(intentBody({ operationType: 'ADMIN_TRANSFER', amount: 1 }), { service: 'admin-panel', user: 0 });
    expect(res.statusCode).toBe(400);
  });

  it('a missing or malformed X-User-Id', async () => {
    for (const user of [undefined, 'abc', '-1', '1.5']) {
      const res = await t.call('POST', '/intents', {
        ...(user === undefined ? {} : { user }),
        body: intentBody({ operationType: 'QP_TOPUP', amount: 1 }),
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('BAD_REQUEST');
    }
  });
});

describe('schema errors (422 VALIDATION_ERROR)', () => {
  it.each([
    ['an unknown operationType', { operationType: 'TELEPORT', amount: 1 }],
    ['amount 0', { operationType: 'QP_TOPUP', amount: 0 }],
    ['a negative amount', { operationType: 'QP_TOPUP', amount: -5 }],
    ['a fractional amount', { operationType: 'QP_TOPUP', amount: 1.5 }],
    ['an amount as a string', { operationType: 'QP_TOPUP', amount: '100' }],
    ['an amount beyond the safe-integer range', { operationType: 'QP_TOPUP', amount: 2 ** 53 }],
    ['a currency of 4 letters', { operationType: 'QP_TOPUP', amount: 1, currency: 'THBX' }],
    ['a comment over 500', { operationType: 'QP_TOPUP', amount: 1, comment: 'x'.repeat(501) }],
    ['a fromName over 255', { operationType: 'QP_TOPUP', amount: 1, fromName: 'x'.repeat(256) }],
    ['an externalRef over 100', { operationType: 'WITHDRAWAL', amount: 1, externalRef: 'x'.repeat(101) }],
    ['recipientUserId 0', { operationType: 'P2P_TRANSFER', amount: 1, recipientUserId: 0 }],
    ['an unknown field', { operationType: 'QP_TOPUP', amount: 1, tip: 5 }],
    ['metadata as an array', { operationType: 'QP_TOPUP', amount: 1, metadata: [] }],
  ])('%s', async (_name, body) => {
    const res = await post(intentBody(body));
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error).toBe('VALIDATION_ERROR');
  });

  it('an idempotencyKey that is not a UUID v4', async () => {
    for (const idempotencyKey of ['not-a-uuid', '6f1c2a9e-3b4d-1c5e-8f60-718293a4b5c6']) {
      const res = await post({ idempotencyKey, operationType: 'QP_TOPUP', amount: 1 });
      expect(res.statusCode).toBe(422);
    }
  });

  it('an unknown operationType is refused before permissions', async () => {
    const res = await post(intentBody({ operationType: 'TELEPORT', amount: 1 }), { service: 'mobile-gateway' });
    expect(res.statusCode).toBe(422);
  });
});

describe('permissions (403 FORBIDDEN)', () => {
  it.each([
    ['an operation type outside allowedOperationTypes', 'nfc-terminal', { operationType: 'P2P_TRANSFER', amount: 1, recipientUserId: 2 }],
    ['any operation for a key with an empty list', 'mobile-gateway', { operationType: 'QP_TOPUP', amount: 1 }],
    [
      'toLedgerAccountId without allowToLedgerAccountId',
      'nfc-terminal',
      {
        operationType: 'NFC_CHARGE',
        amount: 1,
        fromAccountName: 'user.2.THB',
        toAccountName: 'merchant.7.THB',
        toLedgerAccountId: 'c67f828f-cc42-54ad-ad3e-9318cdfb52e6',
        metadata: { nfcTagId: 1 },
      },
    ],
    [
      'fromAccountName without fromAccountOverride',
      'mobile-gateway',
      { operationType: 'QP_TOPUP', amount: 1, fromAccountName: 'user.2.THB' },
    ],
    [
      'an override of a type not allowed',
      'wallet-api',
      { operationType: 'P2P_TRANSFER', amount: 1, fromAccountName: 'system.equity.THB', recipientUserId: 2 },
    ],
    [
      'an override name that only partly matches the pattern',
      'nfc-terminal',
      {
        operationType: 'NFC_CHARGE',
        amount: 1,
        fromAccountName: 'user.2.THB',
        toAccountName: 'merchant.7.settlement.THB',
        metadata: { nfcTagId: 1 },
      },
    ],
    [
      'a to override on the merchant NFC key that names a user wallet',
      'nfc-terminal',
      { operationType: 'NFC_CHARGE', amount: 1, fromAccountName: 'user.2.THB', toAccountName: 'user.1.THB', metadata: { nfcTagId: 1 } },
    ],
    [
      'an exchange from-override outside its one service account',
      'exchange',
      { operationType: 'SERVICE_DEPOSIT', amount: 1, fromAccountName: 'service.900002.THB', metadata: { recipientUserId: 3 } },
    ],
  ])('%s', async (_name, service, body) => {
    const res = await post(intentBody(body), { service, user: 2 });
    expect(res.statusCode, res.body).toBe(403);
    expect(res.json().error).toBe('FORBIDDEN');
  });
});

describe('other refusals of POST /intents', () => {
  it('422 ACCOUNT_NOT_FOUND for a recipient without a wallet', async () => {
    const res = await post(intentBody({ operationType: 'P2P_TRANSFER', amount: 1, recipientUserId: 999 }));
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('ACCOUNT_NOT_FOUND');
  });

  it('422 ACCOUNT_NOT_FOUND for an unknown toLedgerAccountId', async () => {
    const res = await post(intentBody({ operationType: 'P2P_TRANSFER', amount: 1, toLedgerAccountId: randomUUID() }));
    expect(res.json().error).toBe('ACCOUNT_NOT_FOUND');
  });

  it('422 INSUFFICIENT_FUNDS leaves nothing behind: no intent, no reservation', async () => {
    const before = await balances(t, ['user.3.THB']);
    const key = randomUUID();
    const res = await post({ idempotencyKey: key, operationType: 'P2P_TRANSFER', amount: 900_000, recipientUserId: 2 }, { user: 3 });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({ error: 'INSUFFICIENT_FUNDS', message: expect.any(String) });
    expect(await balances(t, ['user.3.THB'])).toEqual(before);
    const { rowCount } = await t.db.query('SELECT 1 FROM intents WHERE idempotency_key = $1', [key]);
    expect(rowCount).toBe(0);
  });

  it('422 LIMIT_EXCEEDED with the rule detail, numbers as strings', async () => {
    await topUp(t, 4, 6_000_000);
    const ok = await post(intentBody({ operationType: 'P2P_TRANSFER', amount: 4_000_000, recipientUserId: 2 }), { user: 4 });
    expect(ok.statusCode, ok.body).toBe(201);
    const res = await post(intentBody({ operationType: 'P2P_TRANSFER', amount: 1_000_001, recipientUserId: 2 }), { user: 4 });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({
      error: 'LIMIT_EXCEEDED',
      message: expect.any(String),
      detail: {
        ruleName: 'daily p2p debit',
        window: 'DAILY',
        limitType: 'AMOUNT',
        limit: '5000000',
        current: '4000000',
        requested: '1000001',
      },
    });
    expect((await post(intentBody({ operationType: 'P2P_TRANSFER', amount: 1_000_000, recipientUserId: 2 }), { user: 4 })).statusCode).toBe(
      201,
    );
  });

  it('400 NO_ROUTE when no active route holds the amount', async () => {
    await t.db.query("UPDATE routes SET active = false WHERE operation_type = 'MINIAPP_CREDIT'");
    const res = await post(intentBody({ operationType: 'MINIAPP_CREDIT', amount: 1, metadata: { customerUserId: 2, merchantId: 50 } }), {
      user: 50,
    });
    await t.db.query("UPDATE routes SET active = true WHERE operation_type = 'MINIAPP_CREDIT'");
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('NO_ROUTE');
  });

  it('422 PSPX_NOT_REGISTERED for a payer without a PSPX wallet', async () => {
    const res = await post(
      intentBody({
        operationType: 'PSPX_WITHDRAWAL',
        amount: 100,
        metadata: { ipps: { receiverType: 'MSISDN', receiverAccount: '0812345678' } },
      }),
    );
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('PSPX_NOT_REGISTERED');
  });

  it('422 PSPX_METADATA_INVALID for a bad receiver block', async () => {
    await t.db.query("UPDATE accounts SET pspx_wallet_id = 'W-TEST-3' WHERE account_name = 'user.3.THB'");
    for (const ipps of [
      undefined,
      { receiverType: 'IBAN', receiverAccount: '1' },
      { receiverType: 'BANKAC', receiverAccount: '123' },
      { receiverType: 'MSISDN' },
    ]) {
      const res = await post(intentBody({ operationType: 'THAI_QR_PAY', amount: 100, metadata: ipps === undefined ? {} : { ipps } }), {
        user: 3,
      });
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json().error).toBe('PSPX_METADATA_INVALID');
    }
  });
});

describe('reads and tenant isolation', () => {
  it('GET /intents/{id} and /events answer only the creating service', async () => {
    const created = (await post(intentBody({ operationType: 'QP_TOPUP', amount: 10 }), { user: 2 })).json();
    const own = await t.call('GET', `/intents/${created.intentId}`);
    expect(own.json()).toEqual({
      intentId: created.intentId,
      status: 'SETTLED',
      refundedAmount: '0',
      operationType: 'QP_TOPUP',
      channel: 'INTERNAL_P2P',
      amount: '10',
      currency: 'THB',
      preFeeAmount: '0',
      postFeeAmount: '0',
      fromAccount: 'system.nostro.pspx.THB',
      toAccount: 'user.2.THB',
      failureReason: null,
      version: 0,
      createdAt: created.createdAt,
      updatedAt: expect.any(String),
    });
    for (const path of [`/intents/${created.intentId}`, `/intents/${created.intentId}/events`]) {
      const other = await t.call('GET', path, { service: 'mobile-gateway' });
      expect(other.statusCode).toBe(404);
      expect(other.json().error).toBe('NOT_FOUND');
    }
    expect((await t.call('GET', `/intents/${randomUUID()}`)).statusCode).toBe(404);
    expect((await t.call('GET', '/intents/not-a-uuid')).statusCode).toBe(422);
  });
});

describe('idempotency', () => {
  it('a replay answers 200 with the original intent plus amount and currency, and moves nothing', async () => {
    const body = intentBody({ operationType: 'P2P_TRANSFER', amount: 250, recipientUserId: 2 });
    const first = await post(body);
    expect(first.statusCode).toBe(201);
    const before = await balances(t, ['user.1.THB', 'user.2.THB']);
    const replay = await post(body);
    expect(replay.statusCode).toBe(200);
    expect(replay.json()).toEqual({ ...first.json(), amount: '250', currency: 'THB' });
    expect(await balances(t, ['user.1.THB', 'user.2.THB'])).toEqual(before);
  });

  it('the same key with another amount or recipient is 409 CONFLICT', async () => {
    const body = intentBody({ operationType: 'P2P_TRANSFER', amount: 260, recipientUserId: 2 });
    expect((await post(body)).statusCode).toBe(201);
    for (const changed of [
      { ...body, amount: 261 },
      { ...body, recipientUserId: 3 },
      { ...body, operationType: 'QP_TOPUP', recipientUserId: undefined },
    ]) {
      const res = await post(changed);
      expect(res.statusCode).toBe(409);
      expect(res.json()).toEqual({ error: 'CONFLICT', message: 'idempotency key reused with different parameters' });
    }
  });

  it('the same key under another service is a different intent', async () => {
    const body = intentBody({
      operationType: 'ADMIN_TRANSFER',
      amount: 5,
      fromAccountName: 'system.equity.THB',
      toAccountName: 'user.2.THB',
    });
    const mine = await post(body, { service: 'admin-panel', user: 0 });
    const keyOfOther = await post({ idempotencyKey: body.idempotencyKey, operationType: 'QP_TOPUP', amount: 5 }, { user: 2 });
    expect(mine.statusCode).toBe(201);
    expect(keyOfOther.statusCode).toBe(201);
    expect(keyOfOther.json().intentId).not.toBe(mine.json().intentId);
  });

  it('20 concurrent duplicates create exactly one intent and one ledger movement', async () => {
    const body = intentBody({ operationType: 'P2P_TRANSFER', amount: 1000, recipientUserId: 3 });
    const before = await balances(t, ['user.1.THB', 'user.3.THB']);
    const answers = await Promise.all(Array.from({ length: 20 }, () => post(body)));
    const codes = answers.map((a) => a.statusCode).sort();
    expect(codes.filter((c) => c === 201)).toHaveLength(1);
    expect(codes.every((c) => c === 201 || c === 200 || c === 409)).toBe(true);
    expect(new Set(answers.filter((a) => a.statusCode < 300).map((a) => a.json().intentId)).size).toBe(1);
    const after = await balances(t, ['user.1.THB', 'user.3.THB']);
    expect(BigInt(after['user.1.THB'] ?? '') - BigInt(before['user.1.THB'] ?? '')).toBe(-1000n);
    expect(BigInt(after['user.3.THB'] ?? '') - BigInt(before['user.3.THB'] ?? '')).toBe(1000n);
    const { rows } = await t.db.query<{ n: bigint }>('SELECT count(*) AS n FROM intents WHERE idempotency_key = $1', [body.idempotencyKey]);
    expect(rows[0]?.n).toBe(1n);
  });
});

describe('per-payer lock (docs/rules.md R22)', () => {
  it('a second payment of one payer while the first runs gets 409 TRANSACTION_IN_PROGRESS, never a 5xx', async () => {
    await topUp(t, 2, 50_000);
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => post(intentBody({ operationType: 'P2P_TRANSFER', amount: 10, recipientUserId: 3 }), { user: 2 })),
    );
    const codes = answers.map((a) => a.statusCode);
    expect(codes.every((c) => c === 201 || c === 409)).toBe(true);
    expect(codes.filter((c) => c === 201).length).toBeGreaterThanOrEqual(1);
    for (const answer of answers.filter((a) => a.statusCode === 409)) expect(answer.json().error).toBe('TRANSACTION_IN_PROGRESS');
  });
});

describe('concurrent payments among a few funded users', () => {
  it('never overdraw, never answer 5xx, and conserve money', async () => {
    const users = [11, 12, 13, 14];
    for (const user of users) {
      await createUser(t, user);
      await topUp(t, user, 5_000);
    }
    const names = users.map((u) => `user.${u}.THB`);
    const total = async () => Object.values(await balances(t, names)).reduce((sum, v) => sum + BigInt(v), 0n);
    const before = await total();
    const requests = Array.from({ length: 80 }, (_, i) => {
      const from = users[i % users.length] ?? 11;
      const to = users[(i + 1 + (i % 3)) % users.length] ?? 12;
      return post(intentBody({ operationType: 'P2P_TRANSFER', amount: 700 + (i % 5) * 400, recipientUserId: to }), { user: from });
    });
    const answers = await Promise.all(requests);
    for (const answer of answers) {
      expect([201, 409, 422]).toContain(answer.statusCode);
      if (answer.statusCode === 422) expect(answer.json().error).toBe('INSUFFICIENT_FUNDS');
    }
    expect(await total()).toBe(before);
    for (const value of Object.values(await balances(t, names))) expect(BigInt(value) >= 0n).toBe(true);
  });
});
