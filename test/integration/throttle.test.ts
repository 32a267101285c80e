import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisSharedState } from '../../src/adapters/shared-state.js';
import { ADDRESS_FAILURE_SHARE } from '../../src/http/plugins/throttle.js';
import { signedHeaders, signRequest } from '../../src/domain/auth/signing.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createMerchant, createUser, intentBody, topUp } from '../support/payments.js';

/**
 * Rate limits (docs/SECURITY.md §5): a token bucket per service from its key's
 * `permissions.rateLimit`, shared by every instance through Redis when REDIS_URL is set; a source
 * that keeps failing authentication is answered 429 before its signature is checked; live streams
 * are capped per service. A refused request changes nothing.
 */

const FAILURE_BURST = 3;
const STREAMS_MAX = 2;
const LIMITED = 'limited-svc';
/** Refills one token per 100 s, so no test's own slowness can refill the bucket between two calls. */
const SLOW = 'slow-svc';
const PAYER = 7701;
const PAYEE = 7702;
const MERCHANT = 7707;
const env = { AUTH_FAILURE_BURST: String(FAILURE_BURST), SSE_STREAMS_PER_SERVICE_MAX: String(STREAMS_MAX) };
let t: TestApp;
let base: string;

async function addLimitedService(app: TestApp, serviceId = LIMITED, requestsPerSecond = 1): Promise<void> {
  app.secrets = new Map([...app.secrets, [serviceId, [`${serviceId}-secret-for-tests-only`]]]);
  const res = await app.call('POST', '/admin/service-keys', {
    service: 'admin-tool',
    body: { serviceId, permissions: { allowedOperationTypes: ['P2P_TRANSFER'], rateLimit: { requestsPerSecond, burst: 3 } } },
  });
  expect(res.statusCode, res.body).toBe(201);
}

const pay = (app: TestApp, service = LIMITED) =>
  app.call('POST', '/intents', {
    service,
    user: PAYER,
    body: intentBody({ operationType: 'P2P_TRANSFER', amount: 1, recipientUserId: PAYEE }),
  });
const intentCount = async (app: TestApp) => (await app.db.query<{ n: bigint }>('SELECT count(*)::bigint AS n FROM intents')).rows[0]?.n;
const metricValue = async (app: TestApp, line: RegExp) => {
  const text = (await app.app.inject({ method: 'GET', url: '/metrics' })).body;
  return Number(
    text
      .split('\n')
      .find((l) => line.test(l))
      ?.split(' ')
      .at(-1) ?? 0,
  );
};

beforeAll(async () => {
  t = await startTestApp({ env });
  await createUser(t, PAYER);
  await createUser(t, PAYEE);
  await createMerchant(t, MERCHANT);
  await topUp(t, PAYER, 100_000);
  await addLimitedService(t);
  // Here, not beside the other instance's: the same admin write signed in the same second on two
  // instances sharing Redis is one request replayed.
  await addLimitedService(t, SLOW, 0.01);
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => t?.close());

describe('a service over its rate limit', () => {
  it('gets its burst, then 429 RATE_LIMITED with Retry-After, and the refused payment stores nothing', async () => {
    // One after another: two payments of one payer at once would meet its lock (409) instead.
    const burst = [await pay(t), await pay(t), await pay(t)];
    expect(burst.map((r) => r.statusCode)).toEqual([201, 201, 201]);
    const before = await intentCount(t);
    const refused = await pay(t);
    expect(refused.statusCode, refused.body).toBe(429);
    expect(refused.json().error).toBe('RATE_LIMITED');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await intentCount(t)).toBe(before);
    await expectLedgerInvariants(t.db);
  });

  it('is let through again once a token has come back', async () => {
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const res = await pay(t);
    expect(res.statusCode, res.body).toBe(201);
  });

  it('leaves a service without rateLimit unlimited', async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, () => t.call('GET', `/accounts/user.${PAYER}.THB/balance`)));
    expect(answers.every((r) => r.statusCode === 200)).toBe(true);
  });

  it('draws from one bucket on every instance when REDIS_URL is set, from its own otherwise', async () => {
    const other = await startTestApp({ env, shared: t.shared });
    try {
      await createUser(other, PAYER);
      await createUser(other, PAYEE);
      await topUp(other, PAYER, 10_000);
      await addLimitedService(other, SLOW, 0.01);
      // Drain the shared (or this instance's) bucket through the first app. At LIMITED's 1 /s, a
      // loaded machine refilled a token between the last 429 and the other instance's call.
      while ((await pay(t, SLOW)).statusCode !== 429);
      const res = await pay(other, SLOW);
      expect(res.statusCode, res.body).toBe(process.env.REDIS_URL === undefined ? 201 : 429);
    } finally {
      await other.close();
    }
  });
});

describe('a rate limit that cannot work', () => {
  it.each([
    ['zero requests per second', { requestsPerSecond: 0, burst: 1 }],
    ['a negative rate', { requestsPerSecond: -1, burst: 1 }],
    ['a burst of zero', { requestsPerSecond: 1, burst: 0 }],
    ['a fractional burst', { requestsPerSecond: 1, burst: 1.5 }],
    ['a rate as text', { requestsPerSecond: '5', burst: 1 }],
    ['an unknown field', { requestsPerSecond: 1, burst: 1, window: 60 }],
  ])('is refused on a key with 422 and nothing is stored: %s', async (_name, rateLimit) => {
    const serviceId = `bad-limit-${randomUUID().slice(0, 8)}`;
    const res = await t.call('POST', '/admin/service-keys', {
      service: 'admin-tool',
      body: { serviceId, permissions: { allowedOperationTypes: [], rateLimit } },
    });
    expect(res.statusCode, res.body).toBe(422);
    expect((await t.call('GET', `/admin/service-keys/${serviceId}`, { service: 'admin-tool' })).statusCode).toBe(404);
  });
});

describe('failed authentications', () => {
  const path = `/accounts/user.${PAYER}.THB/balance`;
  const badlySigned = (service: string) => {
    const headers = signedHeaders(service, 'not-the-secret', 'GET', path, '');
    return t.app.inject({ method: 'GET', url: path, headers });
  };

  it('are counted by reason in /metrics', async () => {
    const before = await metricValue(t, /^payorch_auth_failures_total\{reason="bad_signature"\}/);
    const res = await badlySigned('nfc-terminal');
    expect(res.statusCode).toBe(401);
    expect(await metricValue(t, /^payorch_auth_failures_total\{reason="bad_signature"\}/)).toBe(before + 1);
    const unknown = await t.app.inject({ method: 'GET', url: path, headers: { ...signedHeaders('nobody', 'x', 'GET', path, '') } });
    expect(unknown.statusCode).toBe(401);
    expect(await metricValue(t, /^payorch_auth_failures_total\{reason="unknown_service"\}/)).toBeGreaterThanOrEqual(1);
  });

  it('slow a source down before its signature is checked; another service from the same address is not affected', async () => {
    const service = 'mobile-gateway';
    for (let attempt = 0; attempt < FAILURE_BURST; attempt++) expect((await badlySigned(service)).statusCode).toBe(401);
    // Correctly signed now, but from a source that keeps failing: refused before any check.
    const slowed = await t.call('GET', path, { service });
    expect(slowed.statusCode, slowed.body).toBe(429);
    expect(slowed.json()).toMatchObject({ error: 'RATE_LIMITED', message: 'too many failed authentications from this source' });
    expect(Number(slowed.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await t.call('GET', path, { service: 'wallet-api' })).statusCode).toBe(200);
    expect(await metricValue(t, /^payorch_rate_limited_total\{reason="auth_failures"\}/)).toBeGreaterThanOrEqual(1);
  });

  it('slow an address that claims a new X-Service-Id on every attempt (docs/rules.md R61)', async () => {
    const remoteAddress = '10.61.0.1';
    const attempt = (claimed: string) =>
      t.app.inject({ method: 'GET', url: path, remoteAddress, headers: signedHeaders(claimed, 'guess', 'GET', path, '') });
    const addressBurst = ADDRESS_FAILURE_SHARE * FAILURE_BURST;
    for (let i = 0; i < addressBurst; i++) expect((await attempt(`claimed-${i}`)).statusCode).toBe(401);
    const slowed = await attempt('claimed-fresh');
    expect(slowed.statusCode, slowed.body).toBe(429);
    // Another address is not affected.
    const elsewhere = await t.app.inject({
      method: 'GET',
      url: path,
      remoteAddress: '10.61.0.2',
      headers: signedHeaders('x', 'y', 'GET', path, ''),
    });
    expect(elsewhere.statusCode).toBe(401);
  });

  it('a forged signature with a valid timestamp is still refused after the slow-down has passed', async () => {
    const headers = signedHeaders('exchange', 'x', 'GET', path, '');
    const res = await t.app.inject({
      method: 'GET',
      url: path,
      headers: { ...headers, 'x-signature': signRequest('y', headers['x-timestamp'] ?? '', 'GET', path, '') },
    });
    expect(res.statusCode).toBe(401);
  });
});

describe('open live streams per service', () => {
  async function openStream(intentId: string): Promise<{ status: number; retryAfter: string | null; close: () => void }> {
    const controller = new AbortController();
    const streamPath = `/intents/${intentId}/stream`;
    const headers = signedHeaders('wallet-api', t.secrets.get('wallet-api')?.[0] ?? '', 'GET', streamPath, '');
    const res = await fetch(base + streamPath, { headers, signal: controller.signal });
    if (!res.ok) await res.text();
    return { status: res.status, retryAfter: res.headers.get('retry-after'), close: () => controller.abort() };
  }

  it(`are capped at ${STREAMS_MAX}; a stream whose client leaves frees its slot`, async () => {
    const issued = await t.call('POST', '/intents', {
      user: MERCHANT,
      body: intentBody({ operationType: 'INVOICE_PAYMENT', amount: 1_000, toLedgerAccountId: ledgerAccountId(`merchant.${MERCHANT}.THB`) }),
    });
    expect(issued.statusCode, issued.body).toBe(201);
    const intentId = issued.json().intentId as string;
    const open = [await openStream(intentId), await openStream(intentId)];
    expect(open.map((s) => s.status)).toEqual([200, 200]);
    const third = await openStream(intentId);
    expect(third.status).toBe(429);
    expect(Number(third.retryAfter)).toBeGreaterThanOrEqual(1);
    open[0]?.close();
    let again = await openStream(intentId);
    for (let attempt = 0; again.status === 429 && attempt < 50; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      again = await openStream(intentId);
    }
    expect(again.status).toBe(200);
    again.close();
    open[1]?.close();
  });
});

describe('when the shared state cannot answer', () => {
  it('a replay cache that cannot be asked refuses an admin write with 503, never a 500 or an unchecked write', async () => {
    const unreachable = createRedisSharedState('redis://127.0.0.1:1', `payorch-test-${randomUUID()}:`);
    const cut = await startTestApp({ shared: unreachable });
    try {
      const res = await cut.call('POST', '/admin/limit-rules', {
        service: 'admin-tool',
        body: { name: 'not stored', direction: 'DEBIT', window: 'DAILY', limitType: 'AMOUNT', limit: 5 },
      });
      expect(res.statusCode, res.body).toBe(503);
      expect(res.json().error).toBe('SERVICE_UNAVAILABLE');
      expect(
        (await cut.db.query<{ n: bigint }>("SELECT count(*)::bigint AS n FROM limit_rules WHERE name = 'not stored'")).rows[0]?.n,
      ).toBe(0n);
    } finally {
      await cut.close();
    }
  }, 30_000);
});
