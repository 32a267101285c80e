import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALLOWED_TRANSITIONS } from '../../src/domain/intents/store/state-machine.js';
import { CHANNELS, FINAL_STATUSES, INTENT_STATUSES, OPERATION_TYPES } from '../../src/domain/model.js';
import { NO_ADMIN_TOKEN_MESSAGE } from '../../src/http/plugins/auth.js';
import { importMapHash } from '../../src/http/routes/console.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
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
      'reconciliation.js',
      'refunds.js',
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

describe('GET /console/status (what the sign-in form says before any token is typed)', () => {
  it('says whether ADMIN_TOKEN is set, without a token and without the token itself', async () => {
    const res = await get('/console/status');
    expect([res.statusCode, res.json()]).toEqual([200, { adminTokenConfigured: true }]);
    expect(res.body).not.toContain('test-admin-token');
    const tokenless = await startTestApp({ env: { ADMIN_TOKEN: '' } });
    try {
      const answer = await tokenless.app.inject({ method: 'GET', url: '/console/status' });
      expect([answer.statusCode, answer.json()]).toEqual([200, { adminTokenConfigured: false }]);
    } finally {
      await tokenless.close();
    }
  });

  it('the sign-in form asks it before the operator signs in', () => {
    expect(consoleFile('app.js')).toContain("fetch('/console/status'");
  });
});

describe("GET /admin/intents/{id}/refunds (the intent page's refunds)", () => {
  let intentId: string;
  beforeAll(async () => {
    await createUser(t, 802);
    const paid = await t.call('POST', '/intents', {
      user: 801,
      body: {
        idempotencyKey: randomUUID(),
        operationType: 'P2P_TRANSFER',
        amount: 4000,
        recipientUserId: 802,
        metadata: { tags: ['fee_exempt'] },
      },
    });
    expect(paid.statusCode, paid.body).toBe(201);
    intentId = paid.json().intentId;
  });
  afterAll(async () => expectLedgerInvariants(t.db));

  it('no refunds yet: an empty list and nothing refunded', async () => {
    const res = await get(`/admin/intents/${intentId}/refunds`, ADMIN);
    expect([res.statusCode, res.json()]).toEqual([200, { refundedAmount: '0', refunds: [] }]);
  });

  it('lists every refund of any service with the settled sum, the same refundedAmount GET /intents/{id} gives', async () => {
    for (const amount of [1000, 500]) {
      const res = await t.call('POST', `/intents/${intentId}/refunds`, {
        user: 77,
        body: { idempotencyKey: randomUUID(), reason: 'customer asked', amount },
      });
      expect(res.statusCode, res.body).toBe(201);
    }
    const res = await get(`/admin/intents/${intentId}/refunds`, ADMIN);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().refundedAmount).toBe('1500');
    expect(res.json().refunds.map((r: { amount: string; status: string; intentId: string }) => [r.amount, r.status, r.intentId])).toEqual([
      ['1000', 'SETTLED', intentId],
      ['500', 'SETTLED', intentId],
    ]);
    expect((await t.call('GET', `/intents/${intentId}`)).json().refundedAmount).toBe('1500');
  });

  it('401 without the token, 403 for a signed key without admin, 404 for an unknown intent, 422 for a malformed id', async () => {
    expect((await get(`/admin/intents/${intentId}/refunds`)).statusCode).toBe(401);
    expect((await t.call('GET', `/admin/intents/${intentId}/refunds`, { service: 'wallet-api' })).statusCode).toBe(403);
    const missing = await get(`/admin/intents/${randomUUID()}/refunds`, ADMIN);
    expect([missing.statusCode, missing.json().error]).toEqual([404, 'NOT_FOUND']);
    const malformed = await get('/admin/intents/not-a-uuid/refunds', ADMIN);
    expect([malformed.statusCode, malformed.json().error]).toEqual([422, 'VALIDATION_ERROR']);
  });

  it('the intent page reads it', () => {
    expect(consoleFile('refunds.js')).toMatch(/useRead\(`\/admin\/intents\/\$\{encodeURIComponent\(intentId\)\}\/refunds`/);
    expect(consoleFile('intents.js')).toMatch(/<\$\{IntentRefunds\} intent=\$\{intent\} \/>/);
  });
});

describe('the reconciliation section', () => {
  it('reads the runs and one run with its breaks through the admin token, and starts runs', async () => {
    const created = await t.app.inject({
      method: 'POST',
      url: '/admin/reconciliation/runs',
      headers: ADMIN,
      payload: { date: '20250102' },
    });
    expect(created.statusCode, created.body).toBe(201);
    const runId = created.json().runId;
    const list = await get('/admin/reconciliation/runs?limit=100', ADMIN);
    expect(list.statusCode).toBe(200);
    expect(list.json().runs.map((run: { runId: string }) => run.runId)).toContain(runId);
    const one = await get(`/admin/reconciliation/runs/${runId}`, ADMIN);
    expect([one.statusCode, one.json().runId, Array.isArray(one.json().breaks)]).toEqual([200, runId, true]);
    expect((await get('/admin/reconciliation/runs')).statusCode).toBe(401);
    const source = consoleFile('reconciliation.js');
    expect(source).toContain("useRead('/admin/reconciliation/runs?limit=100')");
    // One run's breaks a page at a time, with the API's own cursor; a run for a date through the POST.
    expect(source).toMatch(
      /\/admin\/reconciliation\/runs\/\$\{encodeURIComponent\(runId\)\}\$\{queryString\(\{ limit: BREAKS_PAGE_SIZE, after: afters\.at\(-1\) \}\)\}/,
    );
    expect(source).toContain("api('/admin/reconciliation/runs', { method: 'POST', body: { date: date.replaceAll('-', '') } })");
    expect(consoleFile('app.js')).toContain("{ path: 'reconciliation', label: 'Reconciliation' }");
  });
});

describe('intent ids in the list tables', () => {
  it('are shown whole, never cut to a prefix', () => {
    const format = consoleFile('format.js');
    expect(format).toMatch(/<code class="id">\$\{id\}<\/code>/);
    expect(format).not.toMatch(/slice\(0, 8\)/);
  });
});
