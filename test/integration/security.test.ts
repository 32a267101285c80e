import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import { signedHeaders, signRequest } from '../../src/domain/auth/signing.js';
import { bearerMatches } from '../../src/http/plugins/auth.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { balance, createMerchant, createUser, topUp } from '../support/payments.js';

/**
 * The security properties of the HTTP interface: signatures bind method, path, query and body and
 * are compared in constant time; tenants cannot see or touch each other's intents; account
 * override patterns match whole names only; fee expressions stay in their sandbox; hostile path
 * parameters are data; and no secret, signature or admin token reaches the log.
 */

const ADMIN_TOKEN = 'test-admin-token';
const PAYER = 7301;
const PAYEE = 7302;
const MERCHANT = 7307;
const MERCHANT_ACCOUNT = `merchant.${MERCHANT}.THB`;
/** A sandbox escape or a runaway expression must be stopped well inside this. */
const EXPRESSION_ANSWER_MS_MAX = 15_000;

const logLines: string[] = [];
let t: TestApp;
let secret: string;

beforeAll(async () => {
  t = await startTestApp({ logStream: { write: (line) => void logLines.push(line) } });
  secret = t.secrets.get('wallet-api')?.[0] ?? '';
  await createUser(t, PAYER);
  await createUser(t, PAYEE);
  await createMerchant(t, MERCHANT);
  await topUp(t, PAYER, 1_000_000);
});
afterAll(async () => t?.close());

const p2p = (amount = 100) => ({ idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount, recipientUserId: PAYEE });

async function auditIsClean(): Promise<void> {
  const audit = await runAudit(t.db);
  expect(audit.violations.map(formatViolation)).toEqual([]);
}

describe('request signatures', () => {
  it('a captured signature replayed on another path, query or body is refused', async () => {
    const body = JSON.stringify(p2p());
    const captured = signedHeaders('wallet-api', secret, 'POST', '/intents', body, { userId: PAYER });
    const send = (url: string, payload: string, method: 'POST' | 'GET' = 'POST') =>
      t.app.inject({
        method,
        url,
        headers: { ...captured, 'content-type': 'application/json' },
        ...(method === 'POST' ? { payload } : {}),
      });

    const otherBody = JSON.stringify({ ...JSON.parse(body), amount: 999_999 });
    for (const res of [
      await send('/intents/quote', body),
      await send('/intents?x=1', body),
      await send('/intents', otherBody),
      await send('/intents', `${body} `),
      await send(`/accounts/user.${PAYER}.THB/balance`, '', 'GET'),
    ]) {
      expect(res.statusCode, res.body).toBe(401);
      expect(res.json()).toMatchObject({ error: 'UNAUTHORIZED', message: 'invalid signature' });
    }
    // The original still verifies (within its window), once: a replay with the same key is an idempotent 200, not a second payment.
    const first = await send('/intents', body);
    const again = await send('/intents', body);
    expect([first.statusCode, again.statusCode]).toEqual([201, 200]);
    expect(again.json().intentId).toBe(first.json().intentId);
  });

  it('a signature of another method, or one made with the secret of another service, is refused', async () => {
    const path = `/accounts/user.${PAYER}.THB/balance`;
    const asPost = signedHeaders('wallet-api', secret, 'POST', path, '');
    expect((await t.app.inject({ method: 'GET', url: path, headers: asPost })).statusCode).toBe(401);
    const nfcSecret = t.secrets.get('nfc-terminal')?.[0] ?? '';
    const borrowed = { ...signedHeaders('nfc-terminal', nfcSecret, 'GET', path, ''), 'x-service-id': 'wallet-api' };
    expect((await t.app.inject({ method: 'GET', url: path, headers: borrowed })).statusCode).toBe(401);
  });

  it('signatures of the wrong length, case or alphabet are refused with 401, never a 500', async () => {
    const path = `/accounts/user.${PAYER}.THB/balance`;
    const good = signedHeaders('wallet-api', secret, 'GET', path, '');
    const sig = good['x-signature'] ?? '';
    const variants = [
      sig.toUpperCase(),
      sig.slice(0, 63),
      `${sig}0`,
      `${sig}00`,
      sig.slice(0, 32),
      '',
      'zz'.repeat(32),
      `${sig.slice(0, 62)}==`,
      ` ${sig}`,
      'a'.repeat(10_000),
    ];
    for (const signature of variants) {
      const res = await t.app.inject({ method: 'GET', url: path, headers: { ...good, 'x-signature': signature } });
      expect({ signature: signature.slice(0, 70), status: res.statusCode }).toEqual({ signature: signature.slice(0, 70), status: 401 });
    }
    expect((await t.app.inject({ method: 'GET', url: path, headers: good })).statusCode).toBe(200);
  });

  it('comparison is constant-time: timingSafeEqual over equal-length buffers, for signatures and the bearer token', () => {
    // Read the module rather than time it: a timing test on a shared machine is noise.
    const signing = readFileSync(new URL('../../src/domain/auth/signing.ts', import.meta.url), 'utf8');
    const matches = signing.slice(signing.indexOf('export function signatureMatches'));
    const body = matches.slice(0, matches.indexOf('\n}\n'));
    // The length is fixed before any byte is compared: 64 lower-case hex digits are 32 bytes, the HMAC-SHA256 size.
    expect(body).toMatch(/if \(!HEX_SHA256\.test\(signature\)\) return false;/);
    expect(signing).toMatch(/const HEX_SHA256 = \/\^\[0-9a-f\]\{64\}\$\/;/);
    expect(body).toMatch(/timingSafeEqual\(expected, given\)/);
    expect(body).not.toMatch(/===|!==|\.equals\(|localeCompare/);
    // Every secret is compared, so the time does not tell which one matched.
    expect(body).not.toMatch(/return true/);

    const auth = readFileSync(new URL('../../src/http/plugins/auth.ts', import.meta.url), 'utf8');
    const bearer = auth.slice(auth.indexOf('export function bearerMatches'));
    expect(bearer.slice(0, bearer.indexOf('\n}\n'))).toMatch(/timingSafeEqual\(digest\(match\[1\]\), digest\(token\)\)/);
    // Digests make the lengths equal whatever was sent: no throw, no early exit on length.
    expect(bearerMatches('Bearer x', ADMIN_TOKEN)).toBe(false);
    expect(bearerMatches(`Bearer ${ADMIN_TOKEN}x`, ADMIN_TOKEN)).toBe(false);
    expect(bearerMatches(`Bearer ${'y'.repeat(10_000)}`, ADMIN_TOKEN)).toBe(false);
    expect(bearerMatches(`Bearer ${ADMIN_TOKEN}`, ADMIN_TOKEN)).toBe(true);
    expect(bearerMatches(`bearer ${ADMIN_TOKEN}`, ADMIN_TOKEN)).toBe(false);
    expect(bearerMatches(`Bearer ${ADMIN_TOKEN}`, undefined)).toBe(false);
  });
});

describe('tenant isolation', () => {
  it("another service's intent is invisible: 404 on read, events and stream; 404 INTENT_NOT_FOUND on confirm and cancel", async () => {
    const invoice = await t.call('POST', '/intents', {
      user: MERCHANT,
      body: {
        idempotencyKey: randomUUID(),
        operationType: 'INVOICE_PAYMENT',
        amount: 1_000,
        toLedgerAccountId: ledgerAccountId(MERCHANT_ACCOUNT),
      },
    });
    expect(invoice.statusCode, invoice.body).toBe(201);
    const settled = await t.call('POST', '/intents', { user: PAYER, body: p2p() });
    expect(settled.statusCode, settled.body).toBe(201);

    for (const id of [invoice.json().intentId as string, settled.json().intentId as string]) {
      for (const service of ['nfc-terminal', 'mobile-gateway', 'exchange', 'admin-panel']) {
        for (const path of [`/intents/${id}`, `/intents/${id}/events`, `/intents/${id}/stream`]) {
          const res = await t.call('GET', path, { service });
          expect({ service, path, status: res.statusCode, error: res.json().error }).toEqual({
            service,
            path,
            status: 404,
            error: 'NOT_FOUND',
          });
        }
        const confirm = await t.call('POST', `/intents/${id}/confirm`, {
          service,
          user: PAYER,
          body: { payerLedgerAccountId: ledgerAccountId(`user.${PAYER}.THB`), payerUserId: PAYER, idempotencyKey: randomUUID() },
        });
        expect({ service, status: confirm.statusCode, error: confirm.json().error }).toEqual({
          service,
          status: 404,
          error: 'INTENT_NOT_FOUND',
        });
        const cancel = await t.call('POST', `/intents/${id}/cancel`, { service, user: 0, body: { reason: 'not yours' } });
        expect({ service, status: cancel.statusCode, error: cancel.json().error }).toEqual({
          service,
          status: 404,
          error: 'INTENT_NOT_FOUND',
        });
      }
    }
    // Untouched: still open for its owner.
    const own = await t.call('GET', `/intents/${invoice.json().intentId as string}`);
    expect(own.json().status).toBe('CREATED');
    await auditIsClean();
  });
});

describe('account override patterns match whole names only', () => {
  it('prefix, suffix, newline and look-alike tricks are refused and move nothing', async () => {
    const before = await balance(t, 'system.equity.THB');
    const payerBefore = await balance(t, `user.${PAYER}.THB`);
    const tricks = [
      'system.equity.THB',
      `user.${PAYER}.THB\nsystem.equity.THB`,
      `system.equity.THB\nuser.${PAYER}.THB`,
      `user.${PAYER}.THB\n`,
      `xuser.${PAYER}.THB`,
      `user.${PAYER}.THBx`,
      `user.${PAYER}.THB.evil`,
      `user.${PAYER}.THB|system.equity.THB`,
      `user.${PAYER}.THB\u0000system.equity.THB`,
      `user.${PAYER}.ＴＨＢ`,
      `USER.${PAYER}.THB`,
      "merchant.1.THB' OR '1'='1",
    ];
    for (const fromAccountName of tricks) {
      const res = await t.call('POST', '/intents', { user: PAYER, body: { ...p2p(), fromAccountName, recipientUserId: PAYEE } });
      expect({ name: fromAccountName, status: res.statusCode }).toMatchObject({ name: fromAccountName });
      expect([400, 403, 422], `${JSON.stringify(fromAccountName)}: ${res.body}`).toContain(res.statusCode);
      const toRes = await t.call('POST', '/intents', {
        user: PAYER,
        body: { ...p2p(), toAccountName: fromAccountName, recipientUserId: undefined },
      });
      expect([400, 403, 422], `${JSON.stringify(fromAccountName)} as toAccountName: ${toRes.body}`).toContain(toRes.statusCode);
    }
    // The panel's wide pattern still ends at the name: a second name after a newline does not ride along.
    const panel = await t.call('POST', '/intents', {
      service: 'admin-panel',
      user: 0,
      body: {
        idempotencyKey: randomUUID(),
        operationType: 'ADMIN_TRANSFER',
        amount: 100,
        fromAccountName: 'system.equity.THB\nuser.1.THB',
        toAccountName: `user.${PAYEE}.THB`,
      },
    });
    expect([400, 403, 422], panel.body).toContain(panel.statusCode);
    expect(await balance(t, 'system.equity.THB')).toBe(before);
    expect(await balance(t, `user.${PAYER}.THB`)).toBe(payerBefore);
    await auditIsClean();
  });
});

describe('fee expressions stay in the sandbox', () => {
  const escapes = [
    "this.constructor.constructor('return process')().exit(1)",
    '(function(){ return this })().process.env',
    "Function('return globalThis.process')().mainModule.require('fs').readFileSync('/etc/passwd')",
    "require('child_process').execSync('id')",
    "import('node:fs')",
    "[].constructor.constructor('return process.env')()",
    "Object.prototype.polluted = 'yes'; [{account: 'system.revenue.THB', amount: 1}]",
  ];
  const exhaustion = [
    "'x'.repeat(1e9)",
    "(() => { const a = []; for (;;) a.push({ account: 'x'.repeat(100) }); })()",
    // Long built-in calls, far past 100 ms on any machine: cut by the fee workers' wall-time watchdog
    // (or, between calls, by the sandbox's own deadline), never answered late.
    "(() => { let n = 0; for (let i = 0; i < 200; i++) { new Array(1e6).fill(1); n++; } return [{account: 'system.revenue.THB', amount: n}] })()",
    'while (true) {}',
    '(function f() { return f() + 1 })()',
    'new Array(2 ** 32 - 1).fill(0)',
  ];

  it('dry-run: escapes, memory exhaustion and endless loops answer 422 EVAL_ERROR within a bound; the service goes on', async () => {
    for (const expression of [...escapes, ...exhaustion]) {
      const started = Date.now();
      const res = await t.call('POST', '/admin/fee-rules/dry-run', {
        service: 'admin-tool',
        body: { expression, context: { operationType: 'P2P_TRANSFER', amount: 1_000, currency: 'THB', metadata: {} } },
      });
      const elapsedMs = Date.now() - started;
      // The prototype-pollution expression is valid inside its own realm; it may answer 200, but nothing leaks out.
      if (expression.includes('polluted')) expect([200, 422], res.body).toContain(res.statusCode);
      else
        expect({ expression, status: res.statusCode, error: res.json().error }).toEqual({ expression, status: 422, error: 'EVAL_ERROR' });
      expect(elapsedMs, expression).toBeLessThan(EXPRESSION_ANSWER_MS_MAX);
      expect(res.body).not.toMatch(/root:x:0|uid=\d|PATH=/);
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(process.exitCode ?? 0).toBe(0);
    const ok = await t.call('POST', '/admin/fee-rules/dry-run', {
      service: 'admin-tool',
      body: {
        expression: "[{account: 'system.revenue.THB', amount: amount / 100}]",
        context: { operationType: 'P2P_TRANSFER', amount: 1_000, currency: 'THB' },
      },
    });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toEqual({ splits: [{ account: 'system.revenue.THB', amount: '10' }], totalFee: '10' });
  });

  it('admin API: such a rule is refused when stored, through the bearer token too, and nothing is written', async () => {
    const count = async () => (await t.db.query<{ n: bigint }>('SELECT count(*)::bigint AS n FROM fee_rules')).rows[0]?.n;
    const before = await count();
    for (const expression of [escapes[0] ?? '', exhaustion[0] ?? '', exhaustion[2] ?? '']) {
      const started = Date.now();
      const res = await t.app.inject({
        method: 'POST',
        url: '/admin/fee-rules',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ name: 'evil', operationType: 'P2P_TRANSFER', expression, timing: 'PRE' }),
      });
      expect({ expression, status: res.statusCode, error: res.json().error }).toEqual({ expression, status: 422, error: 'EVAL_ERROR' });
      expect(Date.now() - started).toBeLessThan(EXPRESSION_ANSWER_MS_MAX);
    }
    expect(await count()).toBe(before);
    // Payments still work: no rule was stored that could block them.
    const res = await t.call('POST', '/intents', { user: PAYER, body: p2p() });
    expect(res.statusCode, res.body).toBe(201);
  });
});

describe('hostile path parameters and account names are data', () => {
  it('SQL and path-traversal payloads answer 4xx and change nothing', async () => {
    const counts = async () =>
      (
        await t.db.query<{ accounts: bigint; intents: bigint }>(
          'SELECT (SELECT count(*) FROM accounts)::bigint AS accounts, (SELECT count(*) FROM intents)::bigint AS intents',
        )
      ).rows[0];
    const before = await counts();
    const payloads = [
      "user.1.THB'; DROP TABLE accounts;--",
      "' OR '1'='1",
      "x' UNION SELECT ledger_account_id::text FROM accounts--",
      '../../../../etc/passwd',
      '..%2F..%2F..%2Fetc%2Fpasswd',
      '%2e%2e%2f%2e%2e%2fconfig%2fdemo.json',
      'user.1.THB%00',
      '$(id)',
    ];
    for (const payload of payloads) {
      const name = encodeURIComponent(payload);
      for (const path of [
        `/accounts/${name}/balance`,
        `/accounts/${name}/transactions`,
        `/intents/${name}`,
        `/intents/${name}/events`,
        `/admin/intents/${name}`,
      ]) {
        const res = await t.call('GET', path, { service: path.startsWith('/admin') ? 'admin-tool' : 'wallet-api' });
        // The history of an unknown name is an empty list (docs/rules.md R34), everything else a 4xx.
        if (path.endsWith('/transactions') && res.statusCode === 200) expect(res.json().transactions).toEqual([]);
        else expect([400, 404, 422], `${path}: ${res.body}`).toContain(res.statusCode);
        expect(res.body).not.toMatch(/root:x:0|"secrets"|ledger_account_id/);
      }
    }
    // A transactions read of a payload is an empty list (an unresolved name, docs/rules.md R34), never someone's rows.
    const listing = await t.call('GET', `/accounts/${encodeURIComponent("' OR '1'='1")}/transactions`);
    expect(listing.statusCode === 200 ? listing.json().transactions : []).toEqual([]);
    expect(await counts()).toEqual(before);
    const res = await t.call('POST', '/accounts', {
      user: PAYER,
      body: { userId: '1; DROP TABLE accounts' as unknown as number, currency: 'THB' },
    });
    expect(res.statusCode).toBe(422);
    expect(await counts()).toEqual(before);
  });
});

describe('logs', () => {
  it('secrets, signatures and the admin token never appear in the log, for good and failing requests', async () => {
    logLines.length = 0;
    const path = `/accounts/user.${PAYER}.THB/balance`;
    const good = signedHeaders('wallet-api', secret, 'GET', path, '');
    const badSignature = signRequest('not-the-secret', good['x-timestamp'] ?? '0', 'GET', path, '');
    const requests = [
      t.app.inject({ method: 'GET', url: path, headers: good }),
      t.app.inject({ method: 'GET', url: path, headers: { ...good, 'x-signature': badSignature } }),
      t.app.inject({ method: 'GET', url: path, headers: { ...good, 'x-timestamp': '1' } }),
      t.app.inject({ method: 'GET', url: '/admin/intents', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }),
      t.app.inject({ method: 'GET', url: '/admin/intents', headers: { authorization: `Bearer ${ADMIN_TOKEN}-wrong` } }),
      t.app.inject({
        method: 'POST',
        url: '/admin/fee-rules/dry-run',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        payload: '{"expression":"throw new Error(1)","context":{}}',
      }),
      // Another payer: two payments of one payer at once would meet the payer lock (409) instead.
      t.call('POST', '/intents', { user: PAYEE, body: { ...p2p(10_000_000_000), recipientUserId: PAYER } }),
      t.call('POST', '/intents', { user: PAYER, body: p2p() }),
      t.call('GET', '/intents/00000000-0000-4000-8000-000000000000'),
      t.call('POST', '/intents', { user: PAYER, rawBody: '{not json' }),
    ];
    const answers = await Promise.all(requests);
    expect(answers.map((r) => r.statusCode)).toEqual([200, 401, 401, 200, 401, 422, 422, 201, 404, 400]);
    expect(logLines.length).toBeGreaterThan(requests.length);
    const log = logLines.join('\n');
    const forbidden = [
      ...[...t.secrets.values()].flat(),
      ADMIN_TOKEN,
      good['x-signature'] ?? '',
      badSignature,
      t.config.qrSigningSecret ?? '',
    ].filter((value) => value.length >= 8);
    expect(forbidden.length).toBeGreaterThan(6);
    for (const value of forbidden) expect(log.includes(value), `log contains ${value.slice(0, 6)}…`).toBe(false);
    expect(log).not.toMatch(/authorization|x-signature/i);
  });
});
