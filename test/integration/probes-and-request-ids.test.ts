import { randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { migrate } from '../../src/adapters/migrations.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createTestSchema, type TestSchema, testPoolMode } from '../support/database.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createUser, topUp } from '../support/payments.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

/**
 * The orchestrator's probes (/livez never touches the database, /readyz answers for the database
 * and the migrations) and the request id every response and log line of a request carries.
 */

const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/;
// The newest shipped migration, whichever it is: the probe must name the one that is pending.
const LATEST_MIGRATION = readdirSync(new URL('../../migrations/', import.meta.url))
  .filter((name) => name.endsWith('.sql'))
  .sort()
  .at(-1)!
  .replace(/\.sql$/, '');

const lines: Array<Record<string, unknown>> = [];
const rawLines: string[] = [];
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    logStream: {
      write: (line) => {
        rawLines.push(line);
        lines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  });
});
afterAll(async () => t?.close());

const linesOf = (requestId: string) => lines.filter((line) => line.requestId === requestId);

describe('GET /livez and GET /readyz', () => {
  it('both answer 200 unsigned while the database answers and every migration is applied', async () => {
    const live = await t.app.inject({ method: 'GET', url: '/livez' });
    expect([live.statusCode, live.json()]).toEqual([200, { status: 'ok' }]);
    const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
    // With REDIS_URL, readiness also says whether Redis answers (docs/rules.md R64), without failing on it.
    const redis = process.env.REDIS_URL ? { redis: 'ok' } : {};
    expect([ready.statusCode, ready.json()]).toEqual([200, { status: 'ok', ...redis }]);
  });

  it('readiness fails with 503 SERVICE_UNAVAILABLE naming the migration while one is pending, and recovers', async () => {
    const { rows } = await t.db.query<{ sha256: string }>('SELECT sha256 FROM schema_migrations WHERE version = $1', [LATEST_MIGRATION]);
    await t.db.query('DELETE FROM schema_migrations WHERE version = $1', [LATEST_MIGRATION]);
    try {
      const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json()).toEqual({ error: 'SERVICE_UNAVAILABLE', message: `migration ${LATEST_MIGRATION} is pending` });
      expect((await t.app.inject({ method: 'GET', url: '/livez' })).statusCode).toBe(200);
    } finally {
      await t.db.query('INSERT INTO schema_migrations (version, sha256) VALUES ($1, $2)', [LATEST_MIGRATION, rows[0]?.sha256]);
    }
    expect((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    await expectLedgerInvariants(t.db);
  });

  it('readiness stays 200 while a SQL function source differs from this version’s, as a newer release leaves it during a rolling upgrade', async () => {
    const { rows } = await t.db.query<{ name: string; sha256: string }>(
      'SELECT name, sha256 FROM sql_function_sources ORDER BY name LIMIT 1',
    );
    const source = rows[0];
    expect(source).toBeDefined();
    await t.db.query('UPDATE sql_function_sources SET sha256 = $2 WHERE name = $1', [source?.name, 'f'.repeat(64)]);
    try {
      expect((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    } finally {
      await t.db.query('UPDATE sql_function_sources SET sha256 = $2 WHERE name = $1', [source?.name, source?.sha256]);
    }
  });

  it('with the database closed, liveness still answers 200 and readiness 503 in the standard error body', async () => {
    const closed = await startTestApp();
    try {
      await closed.db.close();
      const live = await closed.app.inject({ method: 'GET', url: '/livez' });
      expect([live.statusCode, live.json()]).toEqual([200, { status: 'ok' }]);
      const ready = await closed.app.inject({ method: 'GET', url: '/readyz' });
      expect([ready.statusCode, ready.json()]).toEqual([503, { error: 'SERVICE_UNAVAILABLE', message: 'database unavailable' }]);
    } finally {
      await closed.app.close();
    }
  }, 120_000);
});

describe.runIf(pgUrl !== undefined)('readiness on PostgreSQL behind a TCP proxy that is cut', () => {
  let proxy: TcpProxy;
  let schema: TestSchema;
  let viaProxy: TestApp;

  beforeAll(async () => {
    const target = new URL(pgUrl ?? '');
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    schema = await createTestSchema(pgUrl ?? '', 'probes');
    const direct: Database = await openDatabase(schema.url, '', testPoolMode);
    await migrate(direct);
    await direct.close();
    const proxied = new URL(schema.url);
    proxied.host = `127.0.0.1:${proxy.port}`;
    viaProxy = await startTestApp({ db: await openDatabase(proxied.toString(), '', testPoolMode) });
  }, 60_000);
  afterAll(async () => {
    await viaProxy?.close();
    await proxy?.close();
    await schema?.drop();
  });

  it('readiness is 503 while the database does not answer and 200 again once it does; liveness stays 200', async () => {
    expect((await viaProxy.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    proxy.cut('reset');
    const ready = await viaProxy.app.inject({ method: 'GET', url: '/readyz' });
    expect([ready.statusCode, ready.json().error]).toEqual([503, 'SERVICE_UNAVAILABLE']);
    expect((await viaProxy.app.inject({ method: 'GET', url: '/livez' })).statusCode).toBe(200);
    proxy.restore();
    // The pool drops the connections the cut reset; a new one answers.
    let status = 503;
    for (let attempt = 0; attempt < 20 && status !== 200; attempt += 1) {
      status = (await viaProxy.app.inject({ method: 'GET', url: '/readyz' })).statusCode;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(status).toBe(200);
  });
});

describe('X-Request-Id', () => {
  it('an acceptable id is echoed and written as requestId on every log line of the request, with the verified serviceId', async () => {
    const requestId = 'checkout-7f3.A_b';
    const reply = await t.call('GET', '/accounts/system.revenue.THB/balance', { headers: { 'x-request-id': requestId } });
    expect(reply.statusCode).toBe(200);
    expect(reply.headers['x-request-id']).toBe(requestId);
    const logged = linesOf(requestId);
    expect(logged.map((line) => line.msg)).toContain('request completed');
    expect(logged.every((line) => line.requestId === requestId)).toBe(true);
    expect(logged.find((line) => line.msg === 'request completed')?.serviceId).toBe('wallet-api');
  });

  it('an id that is absent, empty, too long or has other characters is replaced by a new UUID', async () => {
    const refused = ['', 'a'.repeat(129), 'two words', 'x\u00e9', '../etc;passwd', '{"level":60}'];
    const answered: string[] = [];
    for (const sent of [undefined, ...refused]) {
      const headers = sent === undefined ? {} : { 'x-request-id': sent };
      const reply = await t.app.inject({ method: 'GET', url: '/livez', headers });
      const id = String(reply.headers['x-request-id']);
      expect(id, JSON.stringify(sent)).toMatch(UUID);
      answered.push(id);
    }
    expect(new Set(answered).size).toBe(answered.length);
    expect(
      (await t.app.inject({ method: 'GET', url: '/livez', headers: { 'x-request-id': 'a'.repeat(128) } })).headers['x-request-id'],
    ).toBe('a'.repeat(128));
  });

  it('a request whose signature fails is logged with its request id but without the claimed service id', async () => {
    const requestId = 'forged-signature-1';
    const reply = await t.call('GET', '/accounts/system.revenue.THB/balance', {
      headers: { 'x-request-id': requestId, 'x-signature': '0'.repeat(64) },
    });
    expect(reply.statusCode).toBe(401);
    expect(reply.headers['x-request-id']).toBe(requestId);
    expect(reply.json().error).toBe('UNAUTHORIZED');
    const logged = linesOf(requestId);
    expect(logged.length).toBeGreaterThan(0);
    expect(logged.some((line) => 'serviceId' in line)).toBe(false);
  });

  it('requests answered at the same time each log their own request id, service and payment, and nothing of the others', async () => {
    // Four payers: one payer's payments are taken one at a time (409 while one is under way).
    const payers = [7301, 7302, 7303, 7304];
    await createUser(t, 7309);
    for (const payer of payers) {
      await createUser(t, payer);
      await topUp(t, payer, 1_000);
    }
    const payments = payers.map((payer, i) => ({ requestId: `together-pay-${i}`, service: 'wallet-api', payer }));
    const reads = ['admin-tool', 'mobile-gateway', 'admin-tool'].map((service, i) => ({ requestId: `together-read-${i}`, service }));
    const forged = { requestId: 'together-forged', service: 'admin-tool' };
    const [paid, read, refused] = await Promise.all([
      Promise.all(
        payments.map(({ requestId, service, payer }) =>
          t.call('POST', '/intents', {
            service,
            user: payer,
            headers: { 'x-request-id': requestId },
            body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: 7309 },
          }),
        ),
      ),
      Promise.all(
        reads.map(({ requestId, service }) =>
          t.call('GET', '/accounts/system.revenue.THB/balance', { service, headers: { 'x-request-id': requestId } }),
        ),
      ),
      t.call('GET', '/accounts/system.revenue.THB/balance', {
        service: forged.service,
        headers: { 'x-request-id': forged.requestId, 'x-signature': '0'.repeat(64) },
      }),
    ]);
    expect(paid.map((reply) => reply.statusCode)).toEqual([201, 201, 201, 201]);
    expect(read.map((reply) => reply.statusCode)).toEqual([200, 200, 200]);
    expect(refused.statusCode).toBe(401);
    for (const [index, { requestId, service }] of [...payments, ...reads].entries()) {
      const own = rawLines.filter((line) => line.includes(`"requestId":"${requestId}"`));
      expect(own.length, requestId).toBeGreaterThan(0);
      const completed = own.map((line) => JSON.parse(line) as Record<string, unknown>).find((line) => line.msg === 'request completed');
      expect(completed?.serviceId, requestId).toBe(service);
      // Each field once: no other request's fields, and none twice.
      for (const line of own)
        for (const field of ['requestId', 'serviceId', 'traceId', 'intent']) {
          expect(line.split(`"${field}":`).length, `${requestId} ${field}`).toBeLessThanOrEqual(2);
        }
      const payment = paid[index];
      if (payment === undefined) expect(own.some((line) => line.includes('"traceId"'))).toBe(false);
      else expect(completed).toMatchObject({ traceId: payment.json().intentId, intent: { status: 'SETTLED', amount: '100' } });
    }
    expect(linesOf(forged.requestId).some((line) => 'serviceId' in line || 'traceId' in line)).toBe(false);
    await expectLedgerInvariants(t.db);
  });

  it('a 404 for an unknown route carries the request id too', async () => {
    const reply = await t.call('GET', '/no-such-route', { headers: { 'x-request-id': 'lost-1' } });
    expect(reply.statusCode).toBe(404);
    expect(reply.headers['x-request-id']).toBe('lost-1');
  });
});
