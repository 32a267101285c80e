import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALLOWED_TRANSITIONS } from '../../src/domain/intents/store/state-machine.js';
import { CHANNELS, FINAL_STATUSES, INTENT_STATUSES, OPERATION_TYPES } from '../../src/domain/model.js';
import { NO_ADMIN_TOKEN_MESSAGE } from '../../src/http/plugins/auth.js';
import { importMapHash } from '../../src/http/routes/console.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createUser, topUp } from '../support/payments.js';

const consoleFile = (name: string) => readFileSync(new URL(`../../console/${name}`, import.meta.url), 'utf8');
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const ADMIN = bearer('test-admin-token');

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  await createUser(t, 801);
  await topUp(t, 801, 25_000);
});
afterAll(async () => t?.close());

const get = (url: string, headers: Record<string, string> = {}) => t.app.inject({ method: 'GET', url, headers });

describe('GET /console and its files (unsigned, docs/rules.md R37)', () => {
  it('serves the page without a signature, with a CSP that allows only this origin and the hashed import map', async () => {
    const res = await get('/console');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain(`script-src 'self' ${importMapHash(consoleFile('index.html'))}`);
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("form-action 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.body).toContain('<script type="module" src="/console/app.js">');
  });

  it('serves every file the page references, each with its content type and the same CSP', async () => {
    const index = consoleFile('index.html');
    const importMap = JSON.parse(/<script type="importmap">([\s\S]*?)<\/script>/.exec(index)?.[1] ?? '{}') as {
      imports: Record<string, string>;
    };
    const referenced = [...index.matchAll(/(?:src|href)="(\/console\/[^"]+)"/g)].map((match) => match[1] ?? '');
    const urls = [...referenced, ...Object.values(importMap.imports)];
    expect(urls).toEqual(
      expect.arrayContaining(['/console/app.js', '/console/console.css', '/console/preact.mjs', '/console/hooks.mjs', '/console/htm.mjs']),
    );
    const expected = (url: string) =>
      url.endsWith('.css') ? 'text/css; charset=utf-8' : url.endsWith('.svg') ? 'image/svg+xml' : 'text/javascript; charset=utf-8';
    for (const url of urls) {
      const res = await get(url);
      expect([url, res.statusCode, res.headers['content-type']]).toEqual([url, 200, expected(url)]);
      expect(res.headers['content-security-policy']).toContain("default-src 'none'");
    }
  });

  it('serves the modules the console imports from each other', async () => {
    const modules = [
      'app.js',
      'api.js',
      'html.js',
      'format.js',
      'model.js',
      'intents.js',
      'resolve.js',
      'review.js',
      'accounts.js',
      'audit.js',
      'webhooks.js',
    ];
    for (const name of modules) {
      const res = await get(`/console/${name}`);
      for (const [, imported] of res.body.matchAll(/from '\.\/([^']+)'/g))
        expect(modules, `${name} imports ${imported}`).toContain(imported);
      expect([name, res.statusCode, res.headers['content-type']]).toEqual([name, 200, 'text/javascript; charset=utf-8']);
    }
  });

  it('404 for a name outside the closed list, including paths that try to leave console/', async () => {
    for (const url of ['/console/nope.js', '/console/..%2Fpackage.json', '/console/%2E%2E%2Fsrc%2Fapp.ts']) {
      const res = await get(url);
      expect([url, res.statusCode, res.json().error]).toEqual([url, 404, 'NOT_FOUND']);
    }
  });

  it("model.js, the filters' and badges' values, is the domain model itself", async () => {
    const res = await get('/console/model.js');
    expect(res.statusCode).toBe(200);
    const served = await import(`data:text/javascript;base64,${Buffer.from(res.body).toString('base64')}`);
    expect(served.INTENT_STATUSES).toEqual([...INTENT_STATUSES]);
    expect(served.FINAL_STATUSES).toEqual([...FINAL_STATUSES]);
    expect(served.ALLOWED_TRANSITIONS).toEqual(ALLOWED_TRANSITIONS);
    expect(served.CHANNELS).toEqual([...CHANNELS]);
    expect(served.OPERATION_TYPES).toEqual([...OPERATION_TYPES]);
  });
});

describe('GET /admin/accounts/{name} (the console account look-up)', () => {
  it('401 without the admin token, and with a wrong one', async () => {
    const missing = await get('/admin/accounts/user.801.THB');
    expect([missing.statusCode, missing.json().error]).toEqual([401, 'UNAUTHORIZED']);
    const wrong = await get('/admin/accounts/user.801.THB', bearer('not-the-token'));
    expect([wrong.statusCode, wrong.json()]).toEqual([401, { error: 'UNAUTHORIZED', message: 'invalid bearer token' }]);
  });

  it('says so when the server has no ADMIN_TOKEN, instead of calling any token wrong', async () => {
    const tokenless = await startTestApp({ env: { ADMIN_TOKEN: '' } });
    try {
      const res = await tokenless.app.inject({ method: 'GET', url: '/admin/accounts/user.801.THB', headers: ADMIN });
      expect([res.statusCode, res.json()]).toEqual([401, { error: 'UNAUTHORIZED', message: NO_ADMIN_TOKEN_MESSAGE }]);
    } finally {
      await tokenless.close();
    }
  });

  it('403 for a signed key without admin permission; 200 for a signed admin key', async () => {
    expect((await t.call('GET', '/admin/accounts/user.801.THB', { service: 'wallet-api' })).statusCode).toBe(403);
    expect((await t.call('GET', '/admin/accounts/user.801.THB', { service: 'admin-tool' })).statusCode).toBe(200);
  });

  it('balance and history, newest first, by name or by ledger id', async () => {
    const res = await get('/admin/accounts/user.801.THB', ADMIN);
    expect(res.statusCode, res.body).toBe(200);
    const account = res.json();
    expect(account).toMatchObject({
      accountName: 'user.801.THB',
      accountType: 'USER_WALLET',
      userId: 801,
      currency: 'THB',
      balance: '25000',
    });
    expect(account.transactions).toEqual([expect.objectContaining({ operationType: 'QP_TOPUP', direction: 'CREDIT', amount: '25000' })]);
    const byId = await get(`/admin/accounts/${account.ledgerAccountId}`, ADMIN);
    expect(byId.json()).toEqual(account);
  });

  it('404 for an unknown account; 422 for a page size over the maximum', async () => {
    const missing = await get('/admin/accounts/user.999999.THB', ADMIN);
    expect([missing.statusCode, missing.json().error]).toEqual([404, 'NOT_FOUND']);
    const tooMany = await get('/admin/accounts/user.801.THB?limit=101', ADMIN);
    expect([tooMany.statusCode, tooMany.json().error]).toEqual([422, 'VALIDATION_ERROR']);
  });
});

describe('the other admin routes the console calls refuse a missing token', () => {
  it.each(['/admin/intents', '/admin/intents?status=MANUAL_REVIEW', '/admin/audit'])(
    'GET %s: 401 without, 200 with the token',
    async (url) => {
      expect((await get(url)).statusCode).toBe(401);
      expect((await get(url, ADMIN)).statusCode).toBe(200);
    },
  );
});
