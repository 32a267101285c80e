import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balance, createMerchant, createUser, topUp } from '../support/payments.js';

/**
 * Input the service refuses (docs/SECURITY.md §6), one explicit case per class and route family:
 * text no column can hold (a lone UTF-16 surrogate, high or low, or NUL, in any value or key),
 * JSON nested deeper than 32 levels, numbers JSON cannot write back, instants and numbers out of
 * range, cursors the service did not issue, and toLedgerAccountId naming an account that is not
 * a wallet. Each is refused with its documented code, never a 5xx, stores nothing and leaves the
 * ledger as it was.
 */

const PAYER = 7601;
const PAYEE = 7602;
const MERCHANT = 7607;
const AGENT = 7608;
const ADMIN = { service: 'admin-tool' } as const;
/** The service's limit (docs/SECURITY.md §6): an object or array this many levels below the body is the deepest taken. */
const DEPTH_MAX = 32;

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
  await createUser(t, PAYER);
  await createUser(t, PAYEE);
  await createMerchant(t, MERCHANT);
  const agent = await t.call('POST', '/accounts', { ...ADMIN, user: AGENT, body: { userId: AGENT, currency: 'THB', entityType: 'agent' } });
  expect(agent.statusCode, agent.body).toBe(201);
  await topUp(t, PAYER, 1_000_000);
});
afterAll(async () => t?.close());

const p2p = (extra: Record<string, unknown> = {}) => ({
  idempotencyKey: randomUUID(),
  operationType: 'P2P_TRANSFER',
  amount: 100,
  recipientUserId: PAYEE,
  ...extra,
});
/** `levels` objects nested in one another around a string. */
const nested = (levels: number): unknown => Array.from({ length: levels }).reduce<unknown>((inner) => ({ a: inner }), 'deep');

/** Every table a refused request could have written to, the ledger's included. */
async function rowCounts(): Promise<Record<string, bigint>> {
  const tables = [
    'intents',
    'intent_events',
    'transactions',
    'ledger_transfers',
    'fee_rules',
    'auth_policies',
    'limit_rules',
    'routes',
    'service_keys',
    'admin_changes',
  ];
  const { rows } = await t.db.query<Record<string, bigint>>(
    `SELECT ${tables.map((name) => `(SELECT count(*) FROM ${name})::bigint AS ${name}`).join(', ')}`,
  );
  return rows[0] ?? {};
}

/** The answer is the refusal named, and nothing anywhere changed. */
async function expectRefused(
  send: () => Promise<LightMyRequestResponse>,
  status = 422,
  code = 'VALIDATION_ERROR',
): Promise<LightMyRequestResponse> {
  const before = await rowCounts();
  const res = await send();
  expect(res.statusCode, res.body).toBe(status);
  expect(res.json().error).toBe(code);
  expect(await rowCounts()).toEqual(before);
  await expectLedgerInvariants(t.db);
  return res;
}

describe('text PostgreSQL cannot store is 422 VALIDATION_ERROR wherever it is', () => {
  const intentId = randomUUID();
  const cases: ReadonlyArray<readonly [string, string, string, Record<string, unknown>, { service?: string; user?: number }]> = [
    ['a high surrogate in comment (the reported 500)', 'POST', '/intents', p2p({ comment: '\ud800' }), { user: PAYER }],
    ['a low surrogate in comment', 'POST', '/intents', p2p({ comment: 'ok\udc00' }), { user: PAYER }],
    ['NUL in toName', 'POST', '/intents', p2p({ toName: 'a\u0000b' }), { user: PAYER }],
    ['a surrogate in an array inside metadata', 'POST', '/intents', p2p({ metadata: { tags: ['vip', '\udfff'] } }), { user: PAYER }],
    ['a surrogate in a metadata key', 'POST', '/intents', p2p({ metadata: { '\ud83d': 1 } }), { user: PAYER }],
    ['NUL in a nested metadata key', 'POST', '/intents', p2p({ metadata: { a: { 'k\u0000': 1 } } }), { user: PAYER }],
    [
      'a surrogate in quote metadata',
      'POST',
      '/intents/quote',
      { operationType: 'P2P_TRANSFER', amount: 1, metadata: { note: '\ud800' } },
      { user: PAYER },
    ],
    ['NUL in a cancel reason', 'POST', `/intents/${intentId}/cancel`, { reason: '\u0000' }, { user: PAYER }],
    [
      'a surrogate in a policy evaluation',
      'POST',
      '/policies/evaluate',
      { userId: PAYER, amount: '1', currency: 'THB', channel: 'APP', appId: 'a\ud800', operationType: 'P2P_TRANSFER' },
      { user: PAYER },
    ],
    [
      'a surrogate in a PSPX registration',
      'POST',
      '/accounts/register-ipps',
      {
        externalUserId: 'e',
        customerEnglishName: 'A',
        senderTaxId: '1234567890123',
        senderAccountName: 'A',
        documentExpiry: '2030-01-01',
        dateOfBirth: '1990-01-01',
        phoneNumber: '0812345678',
        nationality: 'TH',
        address: 'Bangkok \udc00',
      },
      { user: PAYER },
    ],
    [
      'a surrogate in a fee expression',
      'POST',
      '/admin/fee-rules',
      { name: 'n', operationType: 'P2P_TRANSFER', expression: "[] // '\ud800'" },
      ADMIN,
    ],
    [
      'NUL in a fee rule tag',
      'POST',
      '/admin/fee-rules',
      { name: 'n', operationType: 'P2P_TRANSFER', expression: '[]', tagsInclude: ['\u0000'] },
      ADMIN,
    ],
    [
      'a surrogate in a dry-run expression',
      'POST',
      '/admin/fee-rules/dry-run',
      { expression: "'\udfff'", context: { operationType: 'P2P_TRANSFER', amount: 1, currency: 'THB' } },
      ADMIN,
    ],
    [
      'a surrogate in a policy scope',
      'POST',
      '/admin/auth-policies',
      { scope: 'app:\ud800', requiredStepUp: 'PIN', reasonCode: 'r' },
      ADMIN,
    ],
    [
      'NUL in a policy condition key',
      'POST',
      '/admin/auth-policies',
      { scope: 'global', requiredStepUp: 'PIN', reasonCode: 'r', condition: { 'x\u0000': 1 } },
      ADMIN,
    ],
    [
      'a surrogate in a limit rule name',
      'POST',
      '/admin/limit-rules',
      { name: '\udc00', direction: 'DEBIT', window: 'DAILY', limitType: 'COUNT', limit: 1 },
      ADMIN,
    ],
    [
      'a surrogate in a service key permission (was a 500)',
      'POST',
      '/admin/service-keys',
      {
        serviceId: 'hostile',
        permissions: { allowedOperationTypes: [], toAccountOverride: { allowedTypes: ['USER_WALLET'], namePattern: '\ud800' } },
      },
      ADMIN,
    ],
    ['a surrogate in a resolve reason', 'POST', `/admin/intents/${intentId}/resolve`, { resolution: 'FAILED', reason: '\ud800' }, ADMIN],
  ];

  it.each(cases)('%s', async (_label, method, path, body, who) => {
    const res = await expectRefused(() => t.call(method, path, { ...who, body }));
    // The answer names where, never echoes the text it could not store.
    expect(res.body).not.toMatch(/\\u(d[89a-f]|0000)/i);
  });

  it('NUL in a path or query parameter is refused before it reaches SQL', async () => {
    await expectRefused(() => t.call('GET', '/accounts/user.1%00.THB/balance'));
    await expectRefused(() => t.call('GET', '/accounts/%00/transactions'));
    await expectRefused(() => t.call('GET', '/admin/accounts/user.1%00.THB', ADMIN));
    await expectRefused(() => t.call('GET', '/admin/intents?serviceId=%00', ADMIN));
  });

  it('a confirm answers its schema status, 400 VALIDATION_ERROR, for the same text', async () => {
    await expectRefused(
      () =>
        t.call('POST', `/intents/${randomUUID()}/confirm`, {
          user: PAYER,
          body: { payerLedgerAccountId: '\ud800', payerUserId: PAYER, idempotencyKey: randomUUID() },
        }),
      400,
    );
  });

  it('a length is counted in characters, as the column counts it: 500 astral characters fit comment, 501 do not', async () => {
    const fits = await t.call('POST', '/intents', { user: PAYER, body: p2p({ comment: '🙂'.repeat(500) }) });
    expect(fits.statusCode, fits.body).toBe(201);
    await expectRefused(() => t.call('POST', '/intents', { user: PAYER, body: p2p({ comment: '🙂'.repeat(501) }) }));
  });

  it('well-formed text in every script, astral characters included, is stored as sent', async () => {
    const comment = 'ภาษาไทย 🙂 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u202e';
    const res = await t.call('POST', '/intents', { user: PAYER, body: p2p({ comment, metadata: { '🙂': ['ok'] } }) });
    expect(res.statusCode, res.body).toBe(201);
    const { rows } = await t.db.query<{ comment: string; metadata: unknown }>('SELECT comment, metadata FROM intents WHERE id = $1', [
      res.json().intentId,
    ]);
    expect(rows[0]).toEqual({ comment, metadata: { '🙂': ['ok'] } });
    await expectLedgerInvariants(t.db);
  });
});

describe('JSON deeper than 32 levels, or with a number JSON cannot write back, is 422 VALIDATION_ERROR', () => {
  it(`metadata of ${DEPTH_MAX} levels is taken; one more is refused`, async () => {
    const taken = await t.call('POST', '/intents', { user: PAYER, body: p2p({ metadata: nested(DEPTH_MAX) }) });
    expect(taken.statusCode, taken.body).toBe(201);
    const res = await expectRefused(() => t.call('POST', '/intents', { user: PAYER, body: p2p({ metadata: nested(DEPTH_MAX + 1) }) }));
    expect(res.json().message).toMatch(/must not nest deeper than 32 levels/);
  });

  it('thousands of nested arrays in metadata (a stack overflow before) are refused', async () => {
    const deep = `${'['.repeat(5_000)}${']'.repeat(5_000)}`;
    const raw = JSON.stringify(p2p({ metadata: { x: 0 } })).replace('{"x":0}', `{"x":${deep}}`);
    await expectRefused(() => t.call('POST', '/intents', { user: PAYER, rawBody: raw }));
  });

  it('deep policy conditions, dry-run metadata and quote metadata are refused too', async () => {
    await expectRefused(() =>
      t.call('POST', '/admin/auth-policies', {
        ...ADMIN,
        body: { scope: 'global', requiredStepUp: 'PIN', reasonCode: 'r', condition: { x: nested(40) } },
      }),
    );
    await expectRefused(() =>
      t.call('POST', '/admin/fee-rules/dry-run', {
        ...ADMIN,
        body: { expression: '[]', context: { operationType: 'P2P_TRANSFER', amount: 1, currency: 'THB', metadata: nested(40) } },
      }),
    );
    const quote = await expectRefused(() =>
      t.call('POST', '/intents/quote', { user: PAYER, body: { operationType: 'P2P_TRANSFER', amount: 1, metadata: nested(40) } }),
    );
    expect(quote.json().details).toEqual([expect.stringMatching(/^body\.metadata(\.a)+: must not nest deeper than 32 levels$/)]);
  });

  it('1e400 in a policy condition (stored as 0 before) is refused', async () => {
    const raw = '{"scope":"global","requiredStepUp":"PIN","reasonCode":"r","condition":{"amount_lt":1e400}}';
    const res = await expectRefused(() => t.call('POST', '/admin/auth-policies', { ...ADMIN, rawBody: raw }));
    expect(res.json().message).toBe('body.condition.amount_lt: must be a finite number');
  });
});

describe('numbers and instants out of range in paths and queries are 422 VALIDATION_ERROR', () => {
  it.each([
    '/admin/intents?limit=1e400',
    '/admin/intents?limit=9223372036854775808',
    '/admin/fee-rules?offset=-1',
    '/admin/fee-rules?offset=99999999999999999999',
    '/admin/routes?limit=NaN',
    '/admin/fee-rules/9223372036854775808',
    '/admin/limit-rules/1e400',
    '/admin/auth-policies/-1',
    '/admin/accounts/user.1.THB?offset=-9223372036854775809',
  ])('GET %s', async (path) => {
    await expectRefused(() => t.call('GET', path, ADMIN));
  });

  it('GET /accounts/{name}/transactions with limit 1e400', async () => {
    await expectRefused(() => t.call('GET', `/accounts/user.${PAYER}.THB/transactions?limit=1e400`));
  });

  it.each([
    ['/admin/intents?createdFrom=0000-01-01T00:00:00Z', 'year 0000, which PostgreSQL cannot read (was a 500)'],
    ['/admin/intents?createdTo=2016-12-31T23:59:60Z', 'a leap second'],
    ['/admin/intents?createdFrom=0001-01-01T00:00:00%2B01:00', 'an offset that lands in year 0000'],
    ['/admin/audit?since=2016-12-31T23:59:60Z', 'a leap second, which Date cannot hold (was a 500)'],
    ['/admin/audit?since=0000-01-01T00:00:00Z', 'year 0000 (a 500 on PGlite)'],
  ])('GET %s: %s', async (path) => {
    const res = await expectRefused(() => t.call('GET', path, ADMIN));
    expect(res.json().message).toMatch(/must match format "date-time"/);
  });

  it('the edges of the range still answer', async () => {
    for (const path of [
      '/admin/intents?createdFrom=0001-01-01T00:00:00Z&createdTo=9999-12-31T23:59:59.999Z',
      '/admin/audit?since=9999-12-31T23:59:59Z',
    ]) {
      const res = await t.call('GET', path, ADMIN);
      expect(res.statusCode, res.body).toBe(200);
    }
  });
});

describe('an id PostgreSQL cannot read as a uuid is a schema error', () => {
  const urn = `urn:uuid:${randomUUID()}`;
  it.each([
    ['GET', `/intents/${urn}`, { user: PAYER }, undefined, 422],
    ['GET', `/intents/${urn}/events`, { user: PAYER }, undefined, 422],
    ['GET', `/admin/intents/${urn}`, ADMIN, undefined, 422],
    ['POST', `/admin/intents/${urn}/resolve`, ADMIN, { resolution: 'FAILED' }, 422],
    ['POST', `/intents/${urn}/cancel`, { user: PAYER }, {}, 422],
    [
      'POST',
      `/intents/${urn}/confirm`,
      { user: PAYER },
      { payerLedgerAccountId: ledgerAccountId(`user.${PAYER}.THB`), payerUserId: PAYER, idempotencyKey: randomUUID() },
      400,
    ],
  ] as const)('%s %s (the URN form was a 500)', async (method, path, who, body, status) => {
    await expectRefused(() => t.call(method, path, { ...who, ...(body === undefined ? {} : { body }) }), status);
  });
});

describe('the headers that reach SQL are read into integers first', () => {
  it.each(['9223372036854775808', '99999999999999999999', '-1', '1e3', '+7', '0x10', '\u0661'])('X-User-Id %s', async (user) => {
    await expectRefused(() => t.call('POST', '/intents', { user, body: p2p() }), 400, 'BAD_REQUEST');
    await expectRefused(() => t.call('POST', '/accounts', { user, body: { userId: PAYER, currency: 'THB' } }));
  });

  it.each(['2147483648', 'W/"9223372036854775808"', '-1', '1e3'])('If-Match %s on a confirm', async (ifMatch) => {
    const body = { payerLedgerAccountId: ledgerAccountId(`user.${PAYER}.THB`), payerUserId: PAYER, idempotencyKey: randomUUID() };
    await expectRefused(
      () => t.call('POST', `/intents/${randomUUID()}/confirm`, { user: PAYER, body, headers: { 'if-match': ifMatch } }),
      400,
    );
  });
});

describe('a listing cursor the service did not issue is 422 VALIDATION_ERROR', () => {
  const cursorOf = (text: string) => Buffer.from(text).toString('base64url');
  const id = '0190f6f4-6bd1-7c2e-9d2a-3c1e7b9a0a11';
  const now = BigInt(Date.now()) * 1000n;

  it.each([
    ['a time past int8 (the reported 500)', cursorOf(`9999999999999999999.${id}`)],
    ['int8 max, past any timestamp (was "interval out of range")', cursorOf(`9223372036854775807.${id}`)],
    ['a time past year 9999', cursorOf(`253402300800000000.${id}`)],
    ['a negative time', cursorOf(`-1.${id}`)],
    ['a leading zero', cursorOf(`0${now}.${id}`)],
    ['an upper-case id', cursorOf(`${now}.${id.toUpperCase()}`)],
    ['text after the id', cursorOf(`${now}.${id}x`)],
    ['padding', `${cursorOf(`${now}.${id}`)}=`],
    ['the base64 alphabet instead of base64url', `${cursorOf(`${now}.${id}`).replaceAll('_', '/').replaceAll('-', '+')}+`],
    ['garbage', 'not-a-cursor'],
  ])('%s', async (_label, cursor) => {
    await expectRefused(() => t.call('GET', `/admin/intents?cursor=${encodeURIComponent(cursor)}`, ADMIN));
  });

  it('the cursors it issues page through every intent once', async () => {
    for (let n = 0; n < 3; n++) expect((await t.call('POST', '/intents', { user: PAYER, body: p2p() })).statusCode).toBe(201);
    const all = await t.call('GET', '/admin/intents?limit=200', ADMIN);
    const expected = (all.json().intents as Array<{ intentId: string }>).map((intent) => intent.intentId);
    expect(expected.length).toBeGreaterThan(2);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: LightMyRequestResponse = await t.call(
        'GET',
        `/admin/intents?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`,
        ADMIN,
      );
      expect(page.statusCode, page.body).toBe(200);
      seen.push(...(page.json().intents as Array<{ intentId: string }>).map((intent) => intent.intentId));
      cursor = page.json().nextCursor as string | null;
    } while (cursor !== null);
    expect(seen).toEqual(expected);
  });
});

describe('toLedgerAccountId names only a user, merchant or agent wallet', () => {
  it.each([
    'system.transit.INTERNAL_P2P.THB',
    'system.transit.MERCHANT_INVOICE.THB',
    'system.revenue.THB',
    'system.nostro.pspx.THB',
    'system.equity.THB',
    'service.900001.THB',
    `merchant.${MERCHANT}.settlement.THB`,
    `agent.${AGENT}.settlement.THB`,
  ])('%s: 403 FORBIDDEN, nothing moves, no intent and no reservation', async (target) => {
    const before = { payer: await balance(t, `user.${PAYER}.THB`), target: await balance(t, target) };
    const body = { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 500, toLedgerAccountId: ledgerAccountId(target) };
    const res = await expectRefused(() => t.call('POST', '/intents', { user: PAYER, body }), 403, 'FORBIDDEN');
    expect(res.json().message).toBe('toLedgerAccountId must name a user, merchant or agent wallet');
    expect({ payer: await balance(t, `user.${PAYER}.THB`), target: await balance(t, target) }).toEqual(before);
  });

  it('an invoice to a transit account is refused the same way', async () => {
    const body = {
      idempotencyKey: randomUUID(),
      operationType: 'INVOICE_PAYMENT',
      amount: 500,
      toLedgerAccountId: ledgerAccountId('system.transit.MERCHANT_INVOICE.THB'),
    };
    await expectRefused(() => t.call('POST', '/intents', { user: MERCHANT, body }), 403, 'FORBIDDEN');
  });

  it.each([`user.${PAYEE}.THB`, `merchant.${MERCHANT}.THB`, `agent.${AGENT}.THB`])('%s still receives', async (target) => {
    const before = await balance(t, target);
    const res = await t.call('POST', '/intents', {
      user: PAYER,
      body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 250, toLedgerAccountId: ledgerAccountId(target) },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().status).toBe('SETTLED');
    expect(await balance(t, target)).toBe(before + 250n);
    await expectLedgerInvariants(t.db);
  });
});

it('after all of it the audit is clean', async () => {
  const audit = await runAudit(t.db);
  expect(audit.violations.map(formatViolation)).toEqual([]);
});

describe('the shared reads of an invoice pair answer each request for itself', () => {
  const issue = async (toLedgerAccountId: string) => {
    const res = await t.call('POST', '/intents', {
      user: MERCHANT,
      body: { idempotencyKey: randomUUID(), operationType: 'INVOICE_PAYMENT', amount: 300, toLedgerAccountId },
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().intentId as string;
  };
  const confirm = (intentId: string, payerLedgerAccountId: string, payerUserId = PAYER) =>
    t.call('POST', `/intents/${intentId}/confirm`, {
      user: payerUserId,
      body: { payerLedgerAccountId, payerUserId, idempotencyKey: randomUUID() },
    });

  it('upper-case ids find what lower-case ones do; unknown ids and another wallet sent at once are refused alone', async () => {
    const merchant = ledgerAccountId(`merchant.${MERCHANT}.THB`);
    const payer = ledgerAccountId(`user.${PAYER}.THB`);
    const [upper, plain, unpaid] = await Promise.all([issue(merchant.toUpperCase()), issue(merchant), issue(merchant)]);
    // A second payer: two confirms of one payer at once are 409 TRANSACTION_IN_PROGRESS (docs/rules.md R22).
    await topUp(t, PAYEE, 300);
    const before = { payer: await balance(t, `user.${PAYER}.THB`), payee: await balance(t, `user.${PAYEE}.THB`) };
    const answers = await Promise.all([
      confirm(upper.toUpperCase(), payer.toUpperCase()),
      confirm(randomUUID(), payer),
      confirm(unpaid, randomUUID()),
      confirm(unpaid, ledgerAccountId(`user.${PAYEE}.THB`)),
      confirm(plain, ledgerAccountId(`user.${PAYEE}.THB`), PAYEE),
    ]);
    expect(answers.map((res) => [res.statusCode, res.json().status ?? res.json().error])).toEqual([
      [200, 'SETTLED'],
      [404, 'INTENT_NOT_FOUND'],
      [404, 'PAYER_ACCOUNT_NOT_FOUND'],
      [400, 'PAYER_ACCOUNT_USER_MISMATCH'],
      [200, 'SETTLED'],
    ]);
    expect(answers[0]!.json().intentId).toBe(upper);
    expect({ payer: await balance(t, `user.${PAYER}.THB`), payee: await balance(t, `user.${PAYEE}.THB`) }).toEqual({
      payer: before.payer - 300n,
      payee: before.payee - 300n,
    });
    const stillPayable = await confirm(unpaid, payer);
    expect([stillPayable.statusCode, stillPayable.json().status]).toEqual([200, 'SETTLED']);
    await expectLedgerInvariants(t.db);
  });
});
