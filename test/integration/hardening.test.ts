import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createMemorySharedState } from '../../src/adapters/shared-state.js';
import { messageSignedHeaders } from '../../src/domain/auth/message-signing.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { applyConfig } from '../../src/domain/bootstrap/apply-config.js';
import { SqlLedger } from '../../src/ledger/sql-ledger.js';
import { demoConfigFile, startTestApp, type TestApp } from '../support/app.js';
import { openTestDatabase } from '../support/database.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { balances, createUser, intentBody, topUp } from '../support/payments.js';

/**
 * docs/rules.md R61 and R62: replay records that no flood can evict, taken only after the rate
 * limit; account-name patterns that cannot backtrack; service-key PATCH as a merge patch; fee
 * splits into transit or nostro accounts refused before any payment meets them (admin API,
 * CONFIG_FILE, payment and quote).
 */

/** Small, so that a flood fills the store within a test; the production figure is MEMORY_CLAIMS_MAX. */
const CLAIMS_MAX = 40;
const PAYER = 8801;
const PAYEE = 8802;
const shared = createMemorySharedState('', CLAIMS_MAX);
let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ shared });
  await createUser(t, PAYER);
  await createUser(t, PAYEE);
  await topUp(t, PAYER, 1_000_000);
});
afterAll(async () => {
  await t?.close();
  await shared.close();
});
afterEach(async () => expectLedgerInvariants(t.db));

const admin = (method: string, url: string, body?: unknown) =>
  t.call(method, url, { service: 'admin-tool', scheme: 'message', ...(body === undefined ? {} : { body }) });

async function addKey(serviceId: string, permissions: Record<string, unknown>): Promise<void> {
  t.secrets = new Map([...t.secrets, [serviceId, [`${serviceId}-secret-for-tests-only-000000`]]]);
  const res = await admin('POST', '/admin/service-keys', { serviceId, permissions });
  expect(res.statusCode, res.body).toBe(201);
}

describe('replay records (docs/rules.md R61)', () => {
  it('a flood of unique nonces cannot evict a captured admin write: the store refuses new ones (503), the replay stays 401', async () => {
    const body = JSON.stringify({ level: 'info' });
    // Captured on the wire: an admin write signed with the legacy scheme, replayable while its record lives.
    const captured = {
      ...signedHeaders('admin-tool', t.secrets.get('admin-tool')?.[0] ?? '', 'PUT', '/admin/log-level', body),
      'content-type': 'application/json',
    };
    const send = () => t.app.inject({ method: 'PUT', url: '/admin/log-level', headers: captured, payload: body });
    expect((await send()).statusCode).toBe(200);

    const statuses = new Map<number, number>();
    for (let i = 0; i < CLAIMS_MAX * 2; i += 1) {
      const res = await t.call('GET', `/accounts/user.${PAYER}.THB/balance`, { scheme: 'message' });
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
    }
    expect(statuses.get(503)).toBeGreaterThan(0);
    const replay = await send();
    expect(replay.statusCode, replay.body).toBe(401);
    expect(replay.json().message).toBe('replayed request');
  });
});

describe('nonces after the rate limit (docs/rules.md R61)', () => {
  it('a request refused 429 takes no nonce: the same signed request is accepted once the bucket refills', async () => {
    // The flood above filled this file's small store; its records outlive the test.
    await shared.close();
    await addKey('nonce-limited', {
      allowedOperationTypes: [],
      requireMessageSignatures: true,
      rateLimit: { requestsPerSecond: 2, burst: 1 },
    });
    const path = '/policies/evaluate';
    const body = JSON.stringify({
      userId: 1,
      amount: '1',
      currency: 'THB',
      channel: 'INTERNAL_P2P',
      appId: 'x',
      operationType: 'P2P_TRANSFER',
    });
    const secret = t.secrets.get('nonce-limited')?.[0] ?? '';
    const request = () => ({ ...messageSignedHeaders('nonce-limited', secret, 'POST', path, body), 'content-type': 'application/json' });
    const send = (headers: Record<string, string>) => t.app.inject({ method: 'POST', url: path, headers, payload: body });
    expect((await send(request())).statusCode).toBe(200);
    const overLimit = request();
    expect((await send(overLimit)).statusCode).toBe(429);
    await new Promise((resolve) => setTimeout(resolve, 700));
    const retried = await send(overLimit);
    expect(retried.statusCode, retried.body).toBe(200);
    // And now it is taken.
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect((await send(overLimit)).json().message).toBe('replayed nonce');
  });
});

describe('account-name patterns (docs/rules.md R61)', () => {
  /** Backtracks without bound on a backtracking engine: 2^n paths for a name of n characters. */
  const explosive = '(([a-z0-9]|[a-z0-9.])+)+!';

  it('a pattern that would backtrack is matched in linear time: the payment is refused at once, the loop stays free', async () => {
    await addKey('pattern-svc', {
      allowedOperationTypes: ['P2P_TRANSFER'],
      requireMessageSignatures: false,
      fromAccountOverride: { allowedTypes: ['USER_WALLET'], namePattern: explosive },
    });
    const startedAt = performance.now();
    const res = await t.call('POST', '/intents', {
      service: 'pattern-svc',
      user: 0,
      body: intentBody({ operationType: 'P2P_TRANSFER', amount: 1, fromAccountName: 'user.1234567890123456.THB', recipientUserId: PAYEE }),
    });
    const tookMs = performance.now() - startedAt;
    expect(res.statusCode, res.body).toBe(403);
    // A backtracking engine takes minutes on this name; the bound here is the ruling's, with room for a loaded machine.
    expect(tookMs).toBeLessThan(1_000);
  });

  it.each([
    ['a backreference', '(user)\\.\\1'],
    ['a look-ahead', '(?=user)user\\.[0-9]+\\.THB'],
  ])('refuses a pattern with %s (422), which a linear-time engine cannot run', async (_name, namePattern) => {
    const res = await admin('POST', '/admin/service-keys', {
      serviceId: 'pattern-refused',
      permissions: { allowedOperationTypes: [], toAccountOverride: { allowedTypes: ['USER_WALLET'], namePattern } },
    });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error).toBe('VALIDATION_ERROR');
    expect((await admin('GET', '/admin/service-keys/pattern-refused')).statusCode).toBe(404);
  });
});

describe('PATCH of a service key is a merge patch (docs/rules.md R62)', () => {
  const initial = {
    allowedOperationTypes: ['P2P_TRANSFER'],
    requireMessageSignatures: true,
    toAccountOverride: { allowedTypes: ['USER_WALLET'], namePattern: 'user\\.[0-9]+\\.THB' },
    rateLimit: { requestsPerSecond: 100, burst: 100 },
  };
  const permissionsOf = async (serviceId: string) => (await admin('GET', `/admin/service-keys/${serviceId}`)).json().permissions;

  it('omitting requireMessageSignatures keeps it; nested objects merge field by field; null removes', async () => {
    await addKey('merge-svc', initial);
    const changed = await admin('PATCH', '/admin/service-keys/merge-svc', { permissions: { rateLimit: { burst: 5 } } });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json().permissions).toEqual({ ...initial, rateLimit: { requestsPerSecond: 100, burst: 5 } });
    // The legacy scheme is still refused for this key.
    const legacy = await t.call('GET', `/accounts/user.${PAYER}.THB/balance`, { service: 'merge-svc' });
    expect(legacy.statusCode).toBe(401);

    const removed = await admin('PATCH', '/admin/service-keys/merge-svc', {
      permissions: { toAccountOverride: { namePattern: 'user\\.1\\.THB' }, rateLimit: null },
    });
    expect(removed.statusCode, removed.body).toBe(200);
    expect(await permissionsOf('merge-svc')).toEqual({
      allowedOperationTypes: ['P2P_TRANSFER'],
      requireMessageSignatures: true,
      toAccountOverride: { allowedTypes: ['USER_WALLET'], namePattern: 'user\\.1\\.THB' },
    });
  });

  it.each([
    ['a nested object left incomplete', { fromAccountOverride: { namePattern: 'user\\.1\\.THB' } }],
    ['a required field removed', { allowedOperationTypes: null }],
    ['a merged pattern RE2 refuses', { toAccountOverride: { namePattern: '(a)\\1' } }],
  ])('answers 422 for %s and changes nothing', async (_name, permissions) => {
    const before = await permissionsOf('merge-svc');
    const res = await admin('PATCH', '/admin/service-keys/merge-svc', { permissions });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error).toBe('VALIDATION_ERROR');
    expect(await permissionsOf('merge-svc')).toEqual(before);
  });
});

describe('fee split targets (docs/rules.md R62)', () => {
  it.each([
    ['a transit account', 'system.transit.INTERNAL_P2P.THB'],
    ['a nostro account', 'system.nostro.pspx.THB'],
  ])('refuses a fee rule paying %s at creation (422 VALIDATION_ERROR)', async (_name, account) => {
    const res = await admin('POST', '/admin/fee-rules', {
      name: `pays ${account}`,
      operationType: 'P2P_TRANSFER',
      expression: `[{account: '${account}', amount: 1}]`,
      timing: 'PRE',
    });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json()).toMatchObject({ error: 'VALIDATION_ERROR', message: expect.stringContaining(account) });
  });

  it('a split that only some payments send to a transit account is 422 for them at payment time, never 500, and moves nothing', async () => {
    const created = await admin('POST', '/admin/fee-rules', {
      name: 'transit when asked',
      operationType: 'P2P_TRANSFER',
      expression: "[{account: metadata.route === 'transit' ? 'system.transit.INTERNAL_P2P.THB' : 'system.revenue.THB', amount: 1}]",
      timing: 'PRE',
      tagsInclude: ['hardening'],
    });
    expect(created.statusCode, created.body).toBe(201);
    try {
      const names = [`user.${PAYER}.THB`, `user.${PAYEE}.THB`, 'system.revenue.THB', 'system.transit.INTERNAL_P2P.THB'];
      const before = await balances(t, names);
      const res = await t.call('POST', '/intents', {
        user: PAYER,
        body: intentBody({
          operationType: 'P2P_TRANSFER',
          amount: 100,
          recipientUserId: PAYEE,
          metadata: { tags: ['hardening'], route: 'transit' },
        }),
      });
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json().error).toBe('EVAL_ERROR');
      // The quote of the same payment says so too, instead of pricing a payment that cannot be made.
      const quote = await t.call('POST', '/intents/quote', {
        body: { operationType: 'P2P_TRANSFER', amount: 100, currency: 'THB', metadata: { tags: ['hardening'], route: 'transit' } },
      });
      expect(quote.statusCode, quote.body).toBe(422);
      expect(quote.json()).toMatchObject({ error: 'EVAL_ERROR', message: expect.stringContaining('system.transit.INTERNAL_P2P.THB') });
      const fine = await t.call('POST', '/intents/quote', {
        body: { operationType: 'P2P_TRANSFER', amount: 100, currency: 'THB', metadata: { tags: ['hardening'] } },
      });
      expect(fine.statusCode, fine.body).toBe(200);
      expect(fine.json().breakdown).toContainEqual({ account: 'system.revenue.THB', amount: '1' });
      expect(await balances(t, names)).toEqual(before);
      const paid = await t.call('POST', '/intents', {
        user: PAYER,
        body: intentBody({ operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: PAYEE, metadata: { tags: ['hardening'] } }),
      });
      expect(paid.statusCode, paid.body).toBe(201);
    } finally {
      await admin('DELETE', `/admin/fee-rules/${created.json().id}`);
    }
  });
});

describe('fee split targets of CONFIG_FILE (docs/rules.md R62)', () => {
  it.each([
    ['a transit account', 'system.transit.INTERNAL_P2P.THB'],
    ['a nostro account', 'system.nostro.pspx.THB'],
  ])('a seeded fee rule paying %s stops the start, naming the rule, and seeds nothing', async (_name, account) => {
    const db = await openTestDatabase();
    try {
      const file = demoConfigFile();
      const feeRules = [
        ...(file.feeRules ?? []),
        { name: 'pays a system account', operationType: 'P2P_TRANSFER' as const, expression: `[{account: '${account}', amount: 1}]` },
      ];
      const refused = applyConfig(db, new SqlLedger(), { ...file, feeRules });
      await expect(refused).rejects.toThrow(
        `CONFIG_FILE feeRules[${feeRules.length - 1}] (pays a system account): fee split pays ${account}`,
      );
      for (const table of ['fee_rules', 'service_keys', 'routes'])
        expect((await db.query(`SELECT 1 FROM ${table}`)).rowCount, table).toBe(0);
      // The same file without it starts, and seeds its rules.
      await applyConfig(db, new SqlLedger(), file);
      expect((await db.query('SELECT 1 FROM fee_rules')).rowCount).toBe(file.feeRules?.length);
    } finally {
      await db.close();
    }
  });
});
