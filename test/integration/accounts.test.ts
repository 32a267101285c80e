import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { SYSTEM_ACCOUNTS } from '../../src/domain/accounts/account-names.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t?.close());

describe('POST /accounts', () => {
  it('creates a user wallet once: 201, then 200', async () => {
    const first = await t.call('POST', '/accounts', { user: 42, body: { userId: 42, currency: 'THB' } });
    expect(first.statusCode).toBe(201);
    expect(first.json()).toEqual({ accountName: 'user.42.THB', ledgerAccountId: '4a539b8b-e623-57cd-9b08-0ff8c25807f9' });
    const again = await t.call('POST', '/accounts', { user: 42, body: { userId: 42, currency: 'THB', entityType: 'user' } });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(first.json());
  });

  it('creates merchant wallet and settlement accounts for the admin tool', async () => {
    const res = await t.call('POST', '/accounts', {
      service: 'admin-tool',
      user: 7,
      body: { userId: 7, currency: 'THB', entityType: 'merchant' },
    });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({
      primary: { accountName: 'merchant.7.THB', ledgerAccountId: 'c67f828f-cc42-54ad-ad3e-9318cdfb52e6', created: true },
      settlement: { accountName: 'merchant.7.settlement.THB', ledgerAccountId: '333b931c-81e5-557f-81ac-1a1a378a1f5f', created: true },
    });
    const again = await t.call('POST', '/accounts', {
      service: 'admin-tool',
      user: 7,
      body: { userId: 7, currency: 'THB', entityType: 'merchant' },
    });
    expect(again.statusCode).toBe(200);
    expect(again.json().primary.created).toBe(false);
  });

  it('refuses an entity type outside the key permission (docs/rules.md R15)', async () => {
    const merchantByWallet = await t.call('POST', '/accounts', { user: 8, body: { userId: 8, currency: 'THB', entityType: 'merchant' } });
    expect(merchantByWallet.statusCode).toBe(403);
    const userByAdminTool = await t.call('POST', '/accounts', { service: 'admin-tool', user: 8, body: { userId: 8, currency: 'THB' } });
    expect(userByAdminTool.statusCode).toBe(403);
    const byGateway = await t.call('POST', '/accounts', { service: 'mobile-gateway', user: 8, body: { userId: 8, currency: 'THB' } });
    expect(byGateway.statusCode).toBe(403);
    expect((await t.call('GET', '/accounts/merchant.8.THB/balance')).statusCode).toBe(404);
  });

  it.each([
    ['missing X-User-Id', undefined, { userId: 9, currency: 'THB' }],
    ['X-User-Id not equal to userId', 10, { userId: 9, currency: 'THB' }],
    ['a malformed X-User-Id', 'abc', { userId: 9, currency: 'THB' }],
    ['a currency other than THB', 9, { userId: 9, currency: 'USD' }],
    ['userId 0', 9, { userId: 0, currency: 'THB' }],
    ['userId as a string', 9, { userId: '9', currency: 'THB' }],
    ['an unknown entity type', 9, { userId: 9, currency: 'THB', entityType: 'bank' }],
    ['an unknown field', 9, { userId: 9, currency: 'THB', extra: 1 }],
  ])('answers 422 VALIDATION_ERROR for %s', async (_name, user, body) => {
    const res = await t.call('POST', '/accounts', { ...(user === undefined ? {} : { user }), body });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('VALIDATION_ERROR');
    expect((await t.call('GET', '/accounts/user.9.THB/balance')).statusCode).toBe(404);
  });
});

describe('GET /accounts/{name}/balance', () => {
  it('has the ten system accounts (docs/rules.md R19) at zero after start', async () => {
    for (const { name } of SYSTEM_ACCOUNTS) {
      const res = await t.call('GET', `/accounts/${name}/balance`);
      expect(res.json()).toEqual({ accountName: name, balance: '0', currency: 'THB' });
    }
    const { rows } = await t.db.query<{ count: bigint }>("SELECT count(*) AS count FROM accounts WHERE account_name LIKE 'system.%'");
    expect(rows[0]?.count).toBe(10n);
  });

  it('reads by ledger UUID, echoing it, with currency THB', async () => {
    const id = ledgerAccountId('system.revenue.THB');
    const res = await t.call('GET', `/accounts/${id}/balance`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ accountName: id, balance: '0', currency: 'THB' });
  });

  it('answers 404 for an unknown account, also for payloads that look like SQL or paths', async () => {
    for (const name of ['user.999.THB', "x' OR '1'='1", '../../etc/passwd', ledgerAccountId('user.999.THB')]) {
      const res = await t.call('GET', `/accounts/${encodeURIComponent(name)}/balance`);
      expect(res.statusCode).toBe(404);
      expect(res.json().error).toBe('NOT_FOUND');
    }
  });

  it('reads the config-created service account', async () => {
    const res = await t.call('GET', '/accounts/service.900001.THB/balance');
    expect(res.json()).toEqual({ accountName: 'service.900001.THB', balance: '0', currency: 'THB' });
  });
});

describe('GET /accounts/{name}/transactions', () => {
  it('is empty before any intent, for a name and for an unknown UUID', async () => {
    expect((await t.call('GET', '/accounts/user.42.THB/transactions')).json()).toEqual({ transactions: [] });
    const unknown = await t.call('GET', `/accounts/${ledgerAccountId('user.31337.THB')}/transactions`);
    expect(unknown.statusCode).toBe(200);
    expect(unknown.json()).toEqual({ transactions: [] });
  });

  it.each(['limit=0', 'limit=101', 'offset=-1', 'limit=abc', 'other=1'])('answers 422 for %s (docs/rules.md R34)', async (query) => {
    const res = await t.call('GET', `/accounts/user.42.THB/transactions?${query}`);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('VALIDATION_ERROR');
  });
});
