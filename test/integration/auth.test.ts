import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signRequest } from '../../src/domain/auth/signing.js';
import { healthWhenCalm, startTestApp, type TestApp } from '../support/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t?.close());

const balancePath = '/accounts/system.revenue.THB/balance';

function headersFor(
  overrides: Record<string, string | undefined>,
  path = balancePath,
  body = '',
  secret = 'demo-wallet-api-secret-change-me',
) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const base: Record<string, string | undefined> = {
    'x-service-id': 'wallet-api',
    'x-timestamp': timestamp,
    'x-signature': signRequest(secret, timestamp, 'GET', path, body),
    ...overrides,
  };
  return Object.fromEntries(Object.entries(base).filter((e): e is [string, string] => e[1] !== undefined));
}

describe('request signing', () => {
  it('accepts a correctly signed request', async () => {
    const res = await t.call('GET', balancePath);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ accountName: 'system.revenue.THB', balance: '0', currency: 'THB' });
  });

  it.each(['x-service-id', 'x-timestamp', 'x-signature'])('refuses a request without %s', async (name) => {
    const res = await t.app.inject({ method: 'GET', url: balancePath, headers: headersFor({ [name]: undefined }) });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ error: 'UNAUTHORIZED', message: expect.stringMatching(/^missing header X-/i) });
  });

  it('refuses an unknown service', async () => {
    const res = await t.app.inject({ method: 'GET', url: balancePath, headers: headersFor({ 'x-service-id': 'nobody' }) });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'UNAUTHORIZED', message: 'unknown service' });
  });

  it('refuses a signature made with another secret', async () => {
    const headers = headersFor({}, balancePath, '', 'wrong-secret');
    const res = await t.app.inject({ method: 'GET', url: balancePath, headers });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'UNAUTHORIZED', message: 'invalid signature' });
  });

  it('refuses a tampered body', async () => {
    const signedBody = JSON.stringify({ userId: 501, currency: 'THB' });
    const res = await t.app.inject({
      method: 'POST',
      url: '/accounts',
      headers: { ...(await signedPost('/accounts', signedBody)), 'content-type': 'application/json', 'x-user-id': '502' },
      payload: signedBody.replace('501', '502'),
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().message).toBe('invalid signature');
  });

  it('refuses a tampered query string', async () => {
    const signedPath = '/accounts/user.1.THB/transactions?limit=5';
    const headers = headersFor({}, signedPath);
    const res = await t.app.inject({ method: 'GET', url: '/accounts/user.1.THB/transactions?limit=50', headers });
    expect(res.statusCode).toBe(401);
    expect(res.json().message).toBe('invalid signature');
  });

  it.each([61, -61])('refuses a timestamp %i s off', async (offsetS) => {
    const res = await t.call('GET', balancePath, { nowS: Math.floor(Date.now() / 1000) + offsetS });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'UNAUTHORIZED', message: 'timestamp outside window' });
  });

  it.each([55, -55])('accepts a timestamp %i s off', async (offsetS) => {
    const res = await t.call('GET', balancePath, { nowS: Math.floor(Date.now() / 1000) + offsetS });
    expect(res.statusCode).toBe(200);
  });

  it('refuses a signature that is not lower-case hex', async () => {
    const headers = headersFor({});
    headers['x-signature'] = (headers['x-signature'] ?? '').toUpperCase();
    const res = await t.app.inject({ method: 'GET', url: balancePath, headers });
    expect(res.statusCode).toBe(401);
  });

  it('refuses a captured signature replayed on another path', async () => {
    const headers = headersFor({});
    const res = await t.app.inject({ method: 'GET', url: '/accounts/system.equity.THB/balance', headers });
    expect(res.statusCode).toBe(401);
  });

  it('answers 403 for a secret whose service has no key record', async () => {
    t.secrets = new Map([...t.secrets, ['ghost', ['ghost-secret']]]);
    const res = await t.call('GET', balancePath, { service: 'ghost' });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('FORBIDDEN');
  });

  it('answers 403 for an inactive key', async () => {
    await t.db.query("UPDATE service_keys SET active = false WHERE service_id = 'mobile-gateway'");
    const res = await t.call('GET', balancePath, { service: 'mobile-gateway' });
    expect(res.statusCode).toBe(403);
    await t.db.query("UPDATE service_keys SET active = true WHERE service_id = 'mobile-gateway'");
    expect((await t.call('GET', balancePath, { service: 'mobile-gateway' })).statusCode).toBe(200);
  });

  it('needs no signature for /health, /openapi.json and /docs', async () => {
    expect((await healthWhenCalm(t.app)).statusCode).toBe(200);
    const doc = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(doc.statusCode).toBe(200);
    expect(doc.json().openapi).toBe('3.1.0');
    expect(Object.keys(doc.json().paths)).toContain('/accounts/{name}/balance');
    const docs = await t.app.inject({ method: 'GET', url: '/docs' });
    expect([200, 302]).toContain(docs.statusCode);
  });
});

async function signedPost(path: string, body: string) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  return {
    'x-service-id': 'wallet-api',
    'x-timestamp': timestamp,
    'x-signature': signRequest('demo-wallet-api-secret-change-me', timestamp, 'POST', path, body),
  };
}
