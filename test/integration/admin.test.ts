import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createMerchant, createUser, intentBody, topUp } from '../support/payments.js';

const ADMIN_TOKEN = 'test-admin-token';

let t: TestApp;
/** What the next POST /admin/config/reload loads; an Error makes the reload fail. */
let nextSecrets: Map<string, readonly string[]> | Error = new Map();

beforeAll(async () => {
  t = await startTestApp({
    reloadSecrets: () => {
      if (nextSecrets instanceof Error) throw nextSecrets;
      t.secrets = nextSecrets;
      return nextSecrets.size;
    },
  });
  nextSecrets = new Map(t.secrets);
});
afterAll(async () => t?.close());

/** With the admin bearer token (docs/rules.md R11). */
function withToken(method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, body?: unknown, token = ADMIN_TOKEN) {
  return t.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
}

/** Signed by a key with permissions.admin (admin-tool, admin-panel) or any other key. */
const signed = (method: string, url: string, body?: unknown, service = 'admin-tool') =>
  t.call(method, url, { service, ...(body === undefined ? {} : { body }) });

function expectStatus(res: LightMyRequestResponse, status: number) {
  expect(res.statusCode, res.body).toBe(status);
  return res.json();
}

async function changesOf(entity: string, entityId: string | null) {
  const { rows } = await t.db.query<{ actor: string; action: string; before: unknown; after: unknown }>(
    'SELECT actor, action, before, after FROM admin_changes WHERE entity = $1 AND entity_id IS NOT DISTINCT FROM $2 ORDER BY id',
    [entity, entityId],
  );
  return rows;
}

const changeCount = async () => Number((await t.db.query<{ n: bigint }>('SELECT count(*) AS n FROM admin_changes')).rows[0]?.n);

describe('admin authentication (docs/rules.md R11)', () => {
  it('accepts the bearer token and signed keys with permissions.admin', async () => {
    expectStatus(await withToken('GET', '/admin/fee-rules'), 200);
    expectStatus(await signed('GET', '/admin/fee-rules', undefined, 'admin-tool'), 200);
    expectStatus(await signed('GET', '/admin/fee-rules', undefined, 'admin-panel'), 200);
  });

  it('answers 401 to a wrong or missing token and to an unsigned request', async () => {
    expect(expectStatus(await withToken('GET', '/admin/routes', undefined, 'wrong-token'), 401).error).toBe('UNAUTHORIZED');
    const malformed = await t.app.inject({ method: 'GET', url: '/admin/routes', headers: { authorization: 'Basic abc' } });
    expect(malformed.statusCode).toBe(401);
    expect((await t.app.inject({ method: 'GET', url: '/admin/routes' })).statusCode).toBe(401);
  });

  it('answers 403 to a signed key without permissions.admin, and changes nothing', async () => {
    const before = await changeCount();
    const list = await signed('GET', '/admin/service-keys', undefined, 'wallet-api');
    expect(expectStatus(list, 403).error).toBe('FORBIDDEN');
    const create = await signed('POST', '/admin/auth-policies', { scope: 'global', requiredStepUp: 'PIN', reasonCode: 'x' }, 'wallet-api');
    expectStatus(create, 403);
    expectStatus(await signed('PUT', '/admin/log-level', { level: 'debug' }, 'wallet-api'), 403);
    expectStatus(await signed('POST', '/admin/config/reload', undefined, 'wallet-api'), 403);
    expect(await changeCount()).toBe(before);
  });
});

describe('/admin/fee-rules', () => {
  it('creates with column defaults, reads, lists, changes and deactivates, recording each change', async () => {
    const created = expectStatus(
      await withToken('POST', '/admin/fee-rules', {
        name: 'credit fee',
        operationType: 'MINIAPP_CREDIT',
        expression: "[{account: 'system.revenue.THB', amount: amount * 0.01}]",
      }),
      201,
    );
    expect(created).toEqual({
      id: expect.any(Number),
      name: 'credit fee',
      operationType: 'MINIAPP_CREDIT',
      expression: "[{account: 'system.revenue.THB', amount: amount * 0.01}]",
      timing: 'PRE',
      tagsInclude: [],
      tagsExclude: [],
      priority: 0,
      active: true,
      createdAt: expect.stringMatching(/Z$/),
    });
    const path = `/admin/fee-rules/${created.id}`;
    expect(expectStatus(await signed('GET', path), 200)).toEqual(created);
    expect(expectStatus(await signed('GET', '/admin/fee-rules'), 200).feeRules).toContainEqual(created);

    const changed = expectStatus(await signed('PATCH', path, { timing: 'POST', tagsExclude: ['fee_exempt'], priority: 3 }), 200);
    expect(changed).toEqual({ ...created, timing: 'POST', tagsExclude: ['fee_exempt'], priority: 3 });

    const deactivated = expectStatus(await withToken('DELETE', path), 200);
    expect(deactivated).toEqual({ ...changed, active: false });
    expect(expectStatus(await withToken('DELETE', path), 200)).toEqual(deactivated);
    expect(
      expectStatus(await withToken('GET', '/admin/fee-rules?active=true'), 200).feeRules.map((r: { id: number }) => r.id),
    ).not.toContain(created.id);
    expect(expectStatus(await withToken('GET', '/admin/fee-rules?active=false'), 200).feeRules).toContainEqual(deactivated);

    const changes = await changesOf('fee-rule', String(created.id));
    expect(changes).toEqual([
      { actor: 'admin-token', action: 'create', before: null, after: created },
      { actor: 'admin-tool', action: 'update', before: created, after: changed },
      // The second DELETE changed nothing and recorded nothing.
      { actor: 'admin-token', action: 'deactivate', before: changed, after: deactivated },
    ]);
  });

  it.each([
    ['an endless loop (time-out)', 'while(true){}'],
    ['a split without a string account', '[{account: 1}]'],
    ['a syntax error', '[{account: '],
    ['a result that is not an array', '42'],
    ['a negative amount', "[{account: 'system.revenue.THB', amount: -1}]"],
    ['an exception', 'process.exit(1)'],
  ])('refuses %s with 422 EVAL_ERROR and stores nothing', async (_name, expression) => {
    const before = await changeCount();
    const rules = (await t.db.query('SELECT 1 FROM fee_rules')).rowCount;
    const res = await withToken('POST', '/admin/fee-rules', { name: 'bad', operationType: 'P2P_TRANSFER', expression });
    expect(expectStatus(res, 422).error).toBe('EVAL_ERROR');
    expect((await t.db.query('SELECT 1 FROM fee_rules')).rowCount).toBe(rules);
    expect(await changeCount()).toBe(before);
  });

  it('checks a changed expression too, and keeps the rule as it was when refused', async () => {
    const created = expectStatus(
      await withToken('POST', '/admin/fee-rules', { name: 'ok', operationType: 'MINIAPP_CREDIT', expression: '[]', active: false }),
      201,
    );
    const res = await withToken('PATCH', `/admin/fee-rules/${created.id}`, { expression: 'while(true){}' });
    expect(expectStatus(res, 422).error).toBe('EVAL_ERROR');
    expect(expectStatus(await withToken('GET', `/admin/fee-rules/${created.id}`), 200)).toEqual(created);
  });

  it('a broken rule that got in another way (config seed, SQL) can be turned off, not back on', async () => {
    const { rows } = await t.db.query<{ id: bigint }>(
      "INSERT INTO fee_rules (name, operation_type, expression) VALUES ('legacy', 'MINIAPP_CREDIT', '[{account: 1}]') RETURNING id",
    );
    const path = `/admin/fee-rules/${rows[0]?.id}`;
    expect(expectStatus(await withToken('PATCH', path, { priority: 9 }), 422).error).toBe('EVAL_ERROR');
    expect(expectStatus(await withToken('PATCH', path, { active: false }), 200).active).toBe(false);
    expect(expectStatus(await withToken('PATCH', path, { active: true }), 422).error).toBe('EVAL_ERROR');
    expect(expectStatus(await withToken('DELETE', path), 200).active).toBe(false);
  });

  it('runs the check with the tags the rule requires', async () => {
    const expression = "metadata.tags.includes('vip') ? [] : [{account: 'system.revenue.THB', amount: 5}]";
    const res = await withToken('POST', '/admin/fee-rules', {
      name: 'tagged',
      operationType: 'MINIAPP_CREDIT',
      expression,
      tagsInclude: ['vip'],
      active: false,
    });
    expectStatus(res, 201);
  });

  it.each([
    ['an empty PATCH', 'PATCH', '/admin/fee-rules/1', {}],
    ['an unknown field', 'PATCH', '/admin/fee-rules/1', { name: 'x', owner: 'me' }],
    ['an unknown operationType', 'POST', '/admin/fee-rules', { name: 'x', operationType: 'TELEPORT', expression: '[]' }],
    ['a missing expression', 'POST', '/admin/fee-rules', { name: 'x', operationType: 'P2P_TRANSFER' }],
    ['a bad timing', 'POST', '/admin/fee-rules', { name: 'x', operationType: 'P2P_TRANSFER', expression: '[]', timing: 'LATER' }],
    ['an id that is not a number', 'GET', '/admin/fee-rules/abc', undefined],
  ] as const)('answers 422 VALIDATION_ERROR for %s', async (_name, method, url, body) => {
    expect(expectStatus(await withToken(method, url, body), 422).error).toBe('VALIDATION_ERROR');
  });

  it('answers 404 for an unknown id on read, change and deactivate', async () => {
    for (const method of ['GET', 'DELETE'] as const) {
      expect(expectStatus(await withToken(method, '/admin/fee-rules/999999'), 404).error).toBe('NOT_FOUND');
    }
    expectStatus(await withToken('PATCH', '/admin/fee-rules/999999', { priority: 1 }), 404);
  });
});

describe('/admin/routes', () => {
  it('creates, changes and deactivates a route, amounts out as strings (docs/rules.md R20)', async () => {
    const created = expectStatus(
      await withToken('POST', '/admin/routes', {
        operationType: 'QP_TOPUP',
        minAmount: 1_000_000,
        channel: 'SERVICE_TRANSFER',
        priority: 5,
        active: false,
      }),
      201,
    );
    expect(created).toEqual({
      id: expect.any(Number),
      operationType: 'QP_TOPUP',
      minAmount: '1000000',
      maxAmount: null,
      channel: 'SERVICE_TRANSFER',
      priority: 5,
      active: false,
      createdAt: expect.any(String),
    });
    const changed = expectStatus(await signed('PATCH', `/admin/routes/${created.id}`, { maxAmount: 2_000_000 }), 200);
    expect(changed).toEqual({ ...created, maxAmount: '2000000' });
    expect(expectStatus(await signed('PATCH', `/admin/routes/${created.id}`, { maxAmount: null }), 200).maxAmount).toBeNull();
    expect(expectStatus(await withToken('GET', '/admin/routes'), 200).routes).toHaveLength(12);
    expect((await changesOf('route', String(created.id))).map((c) => c.action)).toEqual(['create', 'update', 'update']);
  });

  it('refuses maxAmount below minAmount (422), on create and on change, and stores nothing', async () => {
    const before = await changeCount();
    const bad = await withToken('POST', '/admin/routes', {
      operationType: 'QP_TOPUP',
      minAmount: 100,
      maxAmount: 99,
      channel: 'INTERNAL_P2P',
    });
    expect(expectStatus(bad, 422).error).toBe('VALIDATION_ERROR');
    const route = expectStatus(await withToken('GET', '/admin/routes?limit=1'), 200).routes[0];
    const badPatch = await withToken('PATCH', `/admin/routes/${route.id}`, { maxAmount: 0 });
    expect(expectStatus(badPatch, 422).error).toBe('VALIDATION_ERROR');
    expect(await changeCount()).toBe(before);
    expect(expectStatus(await withToken('GET', `/admin/routes/${route.id}`), 200)).toEqual(route);
  });

  it('refuses an unknown channel', async () => {
    const res = await withToken('POST', '/admin/routes', { operationType: 'QP_TOPUP', channel: 'CARRIER_PIGEON' });
    expectStatus(res, 422);
  });

  it.each([
    ['an invoice to a synchronous channel', 'INVOICE_PAYMENT', 'INTERNAL_P2P'],
    ['an invoice to PSPX', 'INVOICE_PAYMENT', 'PSPX_TRANSFER'],
    ['a payment to the invoice channel', 'P2P_TRANSFER', 'MERCHANT_INVOICE'],
    ['a top-up to PSPX payouts', 'QP_TOPUP', 'PSPX_TRANSFER'],
    // A withdrawal has no receiver block to pay out to (docs/rules.md, Operation table).
    ['a withdrawal to PSPX payouts', 'WITHDRAWAL', 'PSPX_TRANSFER'],
  ])(
    'refuses a channel that cannot carry the operation type (%s) on create and on change, and stores nothing',
    async (_, operationType, channel) => {
      const before = await changeCount();
      const created = await withToken('POST', '/admin/routes', { operationType, channel, priority: -1 });
      expect(expectStatus(created, 422).error).toBe('VALIDATION_ERROR');
      expect(created.json().message).toContain(`cannot carry ${operationType}`);
      const routes = expectStatus(await withToken('GET', '/admin/routes'), 200).routes as { id: number; operationType: string }[];
      const own = routes.find((route) => route.operationType === operationType);
      expect(own).toBeDefined();
      const moved = await withToken('PATCH', `/admin/routes/${own?.id}`, { channel });
      expect(expectStatus(moved, 422).error).toBe('VALIDATION_ERROR');
      expect(await changeCount()).toBe(before);
      expect(expectStatus(await withToken('GET', `/admin/routes/${own?.id}`), 200)).toEqual(own);
    },
  );

  it('accepts a channel that can carry the operation type (a QR payment sent to PSPX payouts)', async () => {
    const created = expectStatus(
      await withToken('POST', '/admin/routes', { operationType: 'THAI_QR_PAY', channel: 'PSPX_TRANSFER', active: false }),
      201,
    );
    expect(created.channel).toBe('PSPX_TRANSFER');
  });
});

describe('/admin/limit-rules', () => {
  it('creates with window, limitType and an integer limit; the limit comes out as a string (docs/rules.md R21)', async () => {
    const created = expectStatus(
      await signed('POST', '/admin/limit-rules', {
        name: 'monthly credits',
        direction: 'CREDIT',
        window: 'MONTHLY',
        limitType: 'COUNT',
        limit: 100,
        active: false,
      }),
      201,
    );
    expect(created).toEqual({
      id: expect.any(Number),
      name: 'monthly credits',
      operationType: '*',
      direction: 'CREDIT',
      window: 'MONTHLY',
      limitType: 'COUNT',
      limit: '100',
      currency: 'THB',
      active: false,
      createdAt: expect.any(String),
    });
    const changed = expectStatus(
      await signed('PATCH', `/admin/limit-rules/${created.id}`, { limit: 9_007_199_254_740_991, operationType: 'QP_TOPUP' }),
      200,
    );
    expect(changed).toMatchObject({ limit: '9007199254740991', operationType: 'QP_TOPUP' });
    expect(expectStatus(await signed('GET', '/admin/limit-rules'), 200).limitRules).toContainEqual(changed);
  });

  it.each([
    ['limit as a string', { limit: '100' }],
    ['a negative limit', { limit: -1 }],
    ['a fractional limit', { limit: 1.5 }],
    ['an unknown window', { window: 'WEEKLY' }],
    ['an unknown direction', { direction: 'SIDEWAYS' }],
  ])('answers 422 for %s', async (_name, overrides) => {
    const body = { name: 'x', direction: 'DEBIT', window: 'DAILY', limitType: 'AMOUNT', limit: 1, ...overrides };
    expectStatus(await withToken('POST', '/admin/limit-rules', body), 422);
  });
});

describe('/admin/auth-policies', () => {
  it('creates a policy that the very next evaluation uses, and changes apply at once', async () => {
    const evaluate = async () =>
      expectStatus(
        await t.call('POST', '/policies/evaluate', {
          body: { userId: 1, amount: '300', currency: 'THB', channel: 'INTERNAL_P2P', appId: 'admin-test', operationType: 'P2P_TRANSFER' },
        }),
        200,
      );
    expect((await evaluate()).reasonCode).toBe('no_match');
    const created = expectStatus(
      await withToken('POST', '/admin/auth-policies', {
        scope: 'app:admin-test',
        condition: { amount_gte: 200, risk_score_gte: 5 },
        requiredStepUp: 'PIN',
        reasonCode: 'admin_app',
        priority: 1,
      }),
      201,
    );
    expect(created).toEqual({
      id: expect.any(Number),
      scope: 'app:admin-test',
      condition: { amount_gte: 200, risk_score_gte: 5 },
      requiredStepUp: 'PIN',
      reasonCode: 'admin_app',
      priority: 1,
      active: true,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(await evaluate()).toMatchObject({ required: 'PIN', reasonCode: 'admin_app', policyId: created.id });

    const changed = expectStatus(await signed('PATCH', `/admin/auth-policies/${created.id}`, { condition: { amount_gte: 301 } }), 200);
    expect(changed.condition).toEqual({ amount_gte: 301 });
    expect(Date.parse(changed.updatedAt)).toBeGreaterThanOrEqual(Date.parse(created.updatedAt));
    expect((await evaluate()).reasonCode).toBe('no_match');

    expectStatus(await signed('PATCH', `/admin/auth-policies/${created.id}`, { condition: {} }), 200);
    expect((await evaluate()).reasonCode).toBe('admin_app');
    expectStatus(await signed('DELETE', `/admin/auth-policies/${created.id}`), 200);
    expect((await evaluate()).reasonCode).toBe('no_match');
  });

  it('takes the default priority 100 and an empty condition', async () => {
    const created = expectStatus(
      await withToken('POST', '/admin/auth-policies', {
        scope: 'merchant:42',
        requiredStepUp: 'BLOCK',
        reasonCode: 'blocked',
        active: false,
      }),
      201,
    );
    expect(created).toMatchObject({ priority: 100, condition: {}, requiredStepUp: 'BLOCK' });
  });

  it.each([
    ['an unknown scope form', { scope: 'country:TH' }],
    ['a merchant scope without a number', { scope: 'merchant:abc' }],
    ['a lower-case level', { requiredStepUp: 'pin' }],
    ['a string bound', { condition: { amount_gte: '100' } }],
    ['a string new_payee', { condition: { new_payee: 'yes' } }],
    ['a reasonCode of 51 characters', { reasonCode: 'r'.repeat(51) }],
  ])('answers 422 for %s', async (_name, overrides) => {
    const body = { scope: 'global', requiredStepUp: 'PIN', reasonCode: 'x', ...overrides };
    expect(expectStatus(await withToken('POST', '/admin/auth-policies', body), 422).error).toBe('VALIDATION_ERROR');
  });
});

describe('/admin/service-keys', () => {
  const permissions = {
    allowedOperationTypes: ['P2P_TRANSFER'],
    toAccountOverride: { allowedTypes: ['USER_WALLET'], namePattern: 'user\\.[0-9]+\\.THB' },
  };

  it('creates, reads, changes and deactivates a key; no secret in or out', async () => {
    const created = expectStatus(await withToken('POST', '/admin/service-keys', { serviceId: 'partner-x', permissions }), 201);
    expect(created).toEqual({
      serviceId: 'partner-x',
      active: true,
      permissions,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(expectStatus(await withToken('GET', '/admin/service-keys/partner-x'), 200)).toEqual(created);
    const list = expectStatus(await withToken('GET', '/admin/service-keys'), 200).serviceKeys as { serviceId: string }[];
    expect(list.map((k) => k.serviceId)).toEqual([...list.map((k) => k.serviceId)].sort());
    expect(list.map((k) => k.serviceId)).toContain('wallet-api');
    expect(JSON.stringify(list)).not.toContain('secret');

    const narrowed = { allowedOperationTypes: [] };
    const changed = expectStatus(await signed('PATCH', '/admin/service-keys/partner-x', { permissions: narrowed }), 200);
    // A merge patch (docs/rules.md R62): the fields it does not name keep their value.
    expect(changed.permissions).toEqual({ ...permissions, ...narrowed });
    // Every permission GET shows can be patched back: refunds (docs/rules.md R57) too.
    const refunding = expectStatus(await signed('PATCH', '/admin/service-keys/partner-x', { permissions: { refunds: true } }), 200);
    expect(refunding.permissions).toEqual({ ...permissions, ...narrowed, refunds: true });
    const roundTrip = expectStatus(await signed('PATCH', '/admin/service-keys/partner-x', { permissions: refunding.permissions }), 200);
    expect(roundTrip.permissions).toEqual(refunding.permissions);
    expect(expectStatus(await signed('DELETE', '/admin/service-keys/partner-x'), 200).active).toBe(false);
    expect((await changesOf('service-key', 'partner-x')).map((c) => [c.actor, c.action])).toEqual([
      ['admin-token', 'create'],
      ['admin-tool', 'update'],
      ['admin-tool', 'update'],
      ['admin-tool', 'update'],
      ['admin-tool', 'deactivate'],
    ]);
  });

  it('answers 409 CONFLICT for an existing serviceId', async () => {
    const res = await withToken('POST', '/admin/service-keys', { serviceId: 'wallet-api', permissions });
    expect(expectStatus(res, 409).error).toBe('CONFLICT');
  });

  it.each([
    ['a secret in the body', { serviceId: 'partner-y', permissions, secret: 'abc' }],
    [
      'a namePattern that is not a regular expression',
      {
        serviceId: 'partner-y',
        permissions: { allowedOperationTypes: [], fromAccountOverride: { allowedTypes: ['USER_WALLET'], namePattern: '(' } },
      },
    ],
    ['an unknown permission', { serviceId: 'partner-y', permissions: { allowedOperationTypes: [], superuser: true } }],
    ['a serviceId of 51 characters', { serviceId: 's'.repeat(51), permissions }],
  ])('answers 422 for %s', async (_name, body) => {
    expect(expectStatus(await withToken('POST', '/admin/service-keys', body), 422).error).toBe('VALIDATION_ERROR');
    expectStatus(await withToken('GET', '/admin/service-keys/partner-y'), 404);
  });

  it('a deactivated key is refused on its next request (403), a reactivated one accepted', async () => {
    const evaluate = () =>
      t.call('POST', '/policies/evaluate', {
        service: 'mobile-gateway',
        body: { userId: 1, amount: '1', currency: 'THB', channel: 'INTERNAL_P2P', appId: 'x', operationType: 'P2P_TRANSFER' },
      });
    expectStatus(await evaluate(), 200);
    expectStatus(await withToken('DELETE', '/admin/service-keys/mobile-gateway'), 200);
    expect(expectStatus(await evaluate(), 403).error).toBe('FORBIDDEN');
    expectStatus(await withToken('PATCH', '/admin/service-keys/mobile-gateway', { active: true }), 200);
    expectStatus(await evaluate(), 200);
  });
});

describe('PUT /admin/log-level', () => {
  it('switches the level of the running process and records the switch', async () => {
    const res = expectStatus(await withToken('PUT', '/admin/log-level', { level: 'debug' }), 200);
    expect(res.level).toBe('debug');
    expect(t.app.log.level).toBe('debug');
    expect(expectStatus(await signed('GET', '/admin/log-level'), 200)).toEqual({ level: 'debug' });
    expect(expectStatus(await signed('PUT', '/admin/log-level', { level: 'warn' }), 200)).toEqual({ level: 'warn', previous: 'debug' });
    expect(t.app.log.level).toBe('warn');
    const changes = await changesOf('log-level', null);
    expect(changes.at(-1)).toEqual({ actor: 'admin-tool', action: 'log-level', before: { level: 'debug' }, after: { level: 'warn' } });
  });

  it.each([{ level: 'verbose' }, { level: 'DEBUG' }, {}])('answers 422 for %j', async (body) => {
    expectStatus(await withToken('PUT', '/admin/log-level', body), 422);
    expect(t.app.log.level).toBe('warn');
  });
});

describe('POST /admin/config/reload', () => {
  const evaluateSignedWith = (secret: string) => {
    const body = JSON.stringify({
      userId: 1,
      amount: '1',
      currency: 'THB',
      channel: 'INTERNAL_P2P',
      appId: 'x',
      operationType: 'P2P_TRANSFER',
    });
    return t.app.inject({
      method: 'POST',
      url: '/policies/evaluate',
      headers: { ...signedHeaders('exchange', secret, 'POST', '/policies/evaluate', body), 'content-type': 'application/json' },
      payload: body,
    });
  };

  it('rotates secrets: during rotation both verify; after a reload with only the new one the old one gets 401', async () => {
    // As if CONFIG_FILE listed both secrets at start.
    t.secrets = new Map([...t.secrets, ['exchange', ['exchange-old', 'exchange-new']]]);
    expectStatus(await evaluateSignedWith('exchange-old'), 200);
    expectStatus(await evaluateSignedWith('exchange-new'), 200);

    nextSecrets = new Map([...t.secrets, ['exchange', ['exchange-new']]]);
    expect(expectStatus(await withToken('POST', '/admin/config/reload'), 200)).toEqual({ services: nextSecrets.size });
    expect(expectStatus(await evaluateSignedWith('exchange-old'), 401).message).toBe('invalid signature');
    expectStatus(await evaluateSignedWith('exchange-new'), 200);

    const changes = await changesOf('config', 'secrets');
    expect(changes.at(-1)).toEqual({ actor: 'admin-token', action: 'reload', before: null, after: { services: nextSecrets.size } });
    expect(JSON.stringify(changes)).not.toContain('exchange-new');
  });

  it('a failed reload answers 500, keeps the secrets in force and records nothing', async () => {
    const before = await changeCount();
    const inForce = t.secrets;
    nextSecrets = new Error('CONFIG_FILE /etc/payorch.json is invalid: "super-secret-value" is not JSON');
    const res = await signed('POST', '/admin/config/reload');
    const body = expectStatus(res, 500);
    expect(body.error).toBe('INTERNAL_ERROR');
    expect(body.message).not.toContain('super-secret-value');
    expect(t.secrets).toBe(inForce);
    expect(await changeCount()).toBe(before);
    nextSecrets = new Map(t.secrets);
  });
});

describe('OpenAPI document', () => {
  it('describes the admin and policy routes with their bodies and responses', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    for (const path of ['/admin/fee-rules', '/admin/routes', '/admin/limit-rules', '/admin/auth-policies', '/admin/service-keys']) {
      expect(doc.paths[path].post.requestBody.content['application/json'].schema).toBeDefined();
      expect(doc.paths[path].get.responses['200']).toBeDefined();
    }
    expect(Object.keys(doc.paths['/admin/fee-rules/{id}']).sort()).toEqual(['delete', 'get', 'patch']);
    expect(Object.keys(doc.paths['/admin/service-keys/{serviceId}']).sort()).toEqual(['delete', 'get', 'patch']);
    expect(doc.paths['/admin/config/reload'].post.responses['200']).toBeDefined();
    expect(doc.paths['/admin/log-level'].put.requestBody).toBeDefined();
    expect(doc.paths['/policies/evaluate'].post.requestBody).toBeDefined();
  });
});

describe('admin changes apply to the very next intent', () => {
  const payer = 801;
  const payee = 802;
  const pay = (amount: number, service = 'wallet-api') =>
    t.call('POST', '/intents', {
      service,
      user: payer,
      body: intentBody({ operationType: 'P2P_TRANSFER', amount, recipientUserId: payee }),
    });

  beforeAll(async () => {
    await createUser(t, payer);
    await createUser(t, payee);
    await topUp(t, payer, 1_000_000);
  });

  it('a new fee rule changes preFeeAmount; its deactivation removes the fee', async () => {
    expect(expectStatus(await pay(1000), 201).preFeeAmount).toBe('0');
    const rule = expectStatus(
      await withToken('POST', '/admin/fee-rules', {
        name: 'p2p fee',
        operationType: 'P2P_TRANSFER',
        expression: "[{account: 'system.revenue.THB', amount: 25}]",
      }),
      201,
    );
    expect(expectStatus(await pay(1000), 201).preFeeAmount).toBe('25');
    expectStatus(await withToken('DELETE', `/admin/fee-rules/${rule.id}`), 200);
    expect(expectStatus(await pay(1000), 201).preFeeAmount).toBe('0');
  });

  it('a deactivated route gives 400 NO_ROUTE; reactivated, payments flow again', async () => {
    const routes = expectStatus(await withToken('GET', '/admin/routes?active=true'), 200).routes as { id: number; operationType: string }[];
    const p2p = routes.find((route) => route.operationType === 'P2P_TRANSFER');
    expect(p2p).toBeDefined();
    expectStatus(await withToken('DELETE', `/admin/routes/${p2p?.id}`), 200);
    expect(expectStatus(await pay(1000), 400).error).toBe('NO_ROUTE');
    expectStatus(await withToken('PATCH', `/admin/routes/${p2p?.id}`, { active: true }), 200);
    expectStatus(await pay(1000), 201);
  });

  it('a route stored without the channel check (by hand, or before it existed) is refused when followed: 400 NO_ROUTE, nothing stored or moved', async () => {
    const merchant = 803;
    await createMerchant(t, merchant);
    const intentsBefore = (await t.db.query<{ n: bigint }>('SELECT count(*) AS n FROM intents')).rows[0]?.n;
    await t.db.query(
      "INSERT INTO routes (operation_type, min_amount, channel, priority) VALUES ('INVOICE_PAYMENT', 1, 'INTERNAL_P2P', -100)",
    );
    try {
      const invoice = await t.call('POST', '/intents', {
        user: merchant,
        body: intentBody({ operationType: 'INVOICE_PAYMENT', amount: 500, toLedgerAccountId: ledgerAccountId(`merchant.${merchant}.THB`) }),
      });
      const answer = expectStatus(invoice, 400);
      expect(answer.error).toBe('NO_ROUTE');
      expect(answer.message).toContain('cannot carry INVOICE_PAYMENT');
    } finally {
      await t.db.query("DELETE FROM routes WHERE operation_type = 'INVOICE_PAYMENT' AND channel = 'INTERNAL_P2P'");
    }
    expect((await t.db.query<{ n: bigint }>('SELECT count(*) AS n FROM intents')).rows[0]?.n).toBe(intentsBefore);
    await expectLedgerInvariants(t.db);
  });

  it('a tightened limit gives 422 LIMIT_EXCEEDED; loosened again, payments flow', async () => {
    const limits = expectStatus(await withToken('GET', '/admin/limit-rules'), 200).limitRules as {
      id: number;
      name: string;
      limit: string;
    }[];
    const daily = limits.find((rule) => rule.name === 'daily p2p debit');
    expect(daily).toBeDefined();
    expectStatus(await withToken('PATCH', `/admin/limit-rules/${daily?.id}`, { limit: 5000 }), 200);
    const refused = expectStatus(await pay(2000), 422);
    expect(refused).toMatchObject({ error: 'LIMIT_EXCEEDED', detail: { ruleName: 'daily p2p debit', limit: '5000' } });
    expectStatus(await withToken('PATCH', `/admin/limit-rules/${daily?.id}`, { limit: Number(daily?.limit) }), 200);
    expectStatus(await pay(2000), 201);
  });

  it('a deactivated service key gets 403 on its next intent', async () => {
    expectStatus(await withToken('DELETE', '/admin/service-keys/wallet-api'), 200);
    expect(expectStatus(await pay(1000), 403).error).toBe('FORBIDDEN');
    expectStatus(await withToken('PATCH', '/admin/service-keys/wallet-api', { active: true }), 200);
    expectStatus(await pay(1000), 201);
  });
});
