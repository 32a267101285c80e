import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FIELD_DEPTH_MAX } from '../../src/http/plugins/input-guard.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balance, createMerchant, createUser, topUp } from '../support/payments.js';

/**
 * Input PostgreSQL cannot store, nesting past the limit, cursors and times the service never
 * issued, and ledger ids of accounts a payment may not name: each is a clean 4xx that changes
 * nothing, on every route family (docs/SECURITY.md §6). Each case here was a 500 or a silent
 * U+FFFD before.
 */

const PAYER = 7601;
const PAYEE = 7602;
const MERCHANT = 7607;
let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
  await createUser(t, PAYER);
  await createUser(t, PAYEE);
  await createMerchant(t, MERCHANT);
  await topUp(t, PAYER, 1_000_000);
});
afterAll(async () => t?.close());
afterEach(async () => expectLedgerInvariants(t.db));

const nested = (levels: number): unknown => {
  let value: unknown = 1;
  for (let level = 0; level < levels; level++) value = { a: value };
  return value;
};
const p2p = (extra: Record<string, unknown> = {}) => ({ idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: PAYEE, ...extra });
/** JSON text with a lone surrogate escape, which JSON.stringify would never produce from a well-formed string. */
const withRaw = (json: object, field: string, rawValue: string) => JSON.stringify(json).replace(/^\{/, `{"${field}":${rawValue},`);
const count = async (table: string) => (await t.db.query<{ n: bigint }>(`SELECT count(*)::bigint AS n FROM ${table}`)).rows[0]?.n;

async function expectRefused(res: { statusCode: number; body: string }, status = 422): Promise<void> {
  expect(res.statusCode, res.body).toBe(status);
  expect(JSON.parse(res.body).error).toBe(status === 403 ? 'FORBIDDEN' : 'VALIDATION_ERROR');
}

describe('text PostgreSQL cannot store', () => {
  it.each([
    ['a lone high surrogate in comment', withRaw(p2p(), 'comment', '"\\ud800"')],
    ['a lone low surrogate in a metadata value', withRaw(p2p(), 'metadata', '{"note":["ok","\\udc00"]}')],
    ['a lone surrogate in a metadata key', withRaw(p2p(), 'metadata', '{"\\udbff":1}')],
    ['a NUL in comment', JSON.stringify(p2p({ comment: 'a\u0000b' }))],
  ])('POST /intents refuses %s with 422 and stores nothing', async (_name, rawBody) => {
    const before = [await count('intents'), await balance(t, `user.${PAYER}.THB`)];
    await expectRefused(await t.call('POST', '/intents', { user: PAYER, rawBody }));
    expect([await count('intents'), await balance(t, `user.${PAYER}.THB`)]).toEqual(before);
  });

  it('the quote lists the issue under details, as it does its schema errors', async () => {
    const res = await t.call('POST', '/intents/quote', { rawBody: '{"operationType":"P2P_TRANSFER","amount":100,"metadata":{"x":"\\ud800"}}' });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({ error: 'VALIDATION_ERROR', details: ['body.metadata.x: must not contain lone UTF-16 surrogates'] });
  });

  it('admin writes refuse it instead of storing U+FFFD, and a policy condition key instead of a 500', async () => {
    const before = [await count('fee_rules'), await count('limit_rules'), await count('auth_policies')];
    const admin = (path: string, rawBody: string) => t.call('POST', path, { service: 'admin-tool', rawBody });
    await expectRefused(await admin('/admin/fee-rules', '{"name":"\\ud800","operationType":"P2P_TRANSFER","expression":"[]","timing":"PRE"}'));
    await expectRefused(await admin('/admin/limit-rules', '{"name":"x\\udfff","direction":"DEBIT","window":"DAILY","limitType":"AMOUNT","limit":5}'));
    await expectRefused(await admin('/admin/auth-policies', '{"scope":"global","condition":{"\\ud800":1},"requiredStepUp":"PIN","reasonCode":"x"}'));
    expect([await count('fee_rules'), await count('limit_rules'), await count('auth_policies')]).toEqual(before);
  });

  it('policy evaluation and path parameters refuse it too', async () => {
    await expectRefused(
      await t.call('POST', '/policies/evaluate', {
        rawBody: '{"userId":7601,"amount":"100","currency":"THB","channel":"INTERNAL_P2P","appId":"\\ud800","operationType":"P2P_TRANSFER"}',
      }),
    );
    await expectRefused(await t.call('GET', '/accounts/user.%00.THB/balance'));
  });
});

describe(`nesting deeper than ${FIELD_DEPTH_MAX} levels`, () => {
  it(`metadata of ${FIELD_DEPTH_MAX} levels is taken, one more is refused and stores nothing`, async () => {
    const ok = await t.call('POST', '/intents', { user: PAYER, body: p2p({ metadata: nested(FIELD_DEPTH_MAX) }) });
    expect(ok.statusCode, ok.body).toBe(201);
    const before = await count('intents');
    await expectRefused(await t.call('POST', '/intents', { user: PAYER, body: p2p({ metadata: nested(FIELD_DEPTH_MAX + 1) }) }));
    await expectRefused(await t.call('POST', '/intents', { user: PAYER, body: p2p({ metadata: nested(2_000) }) }));
    expect(await count('intents')).toBe(before);
  });

  it('a policy condition and the quote follow the same limit', async () => {
    await expectRefused(
      await t.call('POST', '/admin/auth-policies', { service: 'admin-tool', body: { scope: 'global', condition: nested(40), requiredStepUp: 'PIN', reasonCode: 'x' } }),
    );
    await expectRefused(await t.call('POST', '/intents/quote', { body: { operationType: 'P2P_TRANSFER', amount: 100, metadata: nested(3_000) } }));
  });
});

describe('cursors and times the service never issued', () => {
  const cursorOf = (text: string) => Buffer.from(text).toString('base64url');
  const id = '00000000-0000-4000-8000-000000000000';

  it.each([
    ['past bigint', cursorOf(`9999999999999999999.${id}`)],
    ['past year 9999', cursorOf(`9000000000000000000.${id}`)],
    ['negative', cursorOf(`-1.${id}`)],
    ['with a leading zero', cursorOf(`01.${id}`)],
    ['not in canonical base64url', `${cursorOf(`1.${id}`)}=`],
    ['an upper-case id', cursorOf('1.ABCDEF01-0000-4000-8000-00000000000A')],
  ])('GET /admin/intents refuses a cursor %s with 422', async (_name, cursor) => {
    await expectRefused(await t.call('GET', `/admin/intents?cursor=${cursor}`, { service: 'admin-tool' }));
  });

  it('a cursor the listing issued still pages', async () => {
    const first = await t.call('GET', '/admin/intents?limit=1', { service: 'admin-tool' });
    const { nextCursor } = first.json() as { nextCursor: string };
    const second = await t.call('GET', `/admin/intents?limit=1&cursor=${nextCursor}`, { service: 'admin-tool' });
    expect(second.statusCode, second.body).toBe(200);
  });

  it.each([
    ['year 0000', 'createdFrom=0000-01-01T00:00:00Z'],
    ['an offset of 23:59', 'createdTo=9999-12-31T23:59:59-23:59'],
  ])('a time with %s is a 422, not a timestamp error', async (_name, query) => {
    await expectRefused(await t.call('GET', `/admin/intents?${query}`, { service: 'admin-tool' }));
  });
});

describe('what toLedgerAccountId may name', () => {
  it.each(['system.transit.INTERNAL_P2P.THB', 'system.revenue.THB', 'system.nostro.pspx.THB', 'system.equity.THB', 'service.900001.THB'])(
    '%s is 403 FORBIDDEN and nothing moves',
    async (accountName) => {
      const before = [await balance(t, `user.${PAYER}.THB`), await count('intents')];
      const res = await t.call('POST', '/intents', { user: PAYER, body: p2p({ recipientUserId: undefined, toLedgerAccountId: ledgerAccountId(accountName) }) });
      await expectRefused(res, 403);
      expect([await balance(t, `user.${PAYER}.THB`), await count('intents')]).toEqual(before);
    },
  );

  it('a user or merchant wallet is still paid by its ledger id', async () => {
    for (const accountName of [`user.${PAYEE}.THB`, `merchant.${MERCHANT}.THB`]) {
      const before = await balance(t, accountName);
      const res = await t.call('POST', '/intents', { user: PAYER, body: p2p({ recipientUserId: undefined, toLedgerAccountId: ledgerAccountId(accountName) }) });
      expect(res.statusCode, res.body).toBe(201);
      expect(await balance(t, accountName)).toBe(before + 100n);
    }
  });
});
