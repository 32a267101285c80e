import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Logger } from '../../src/adapters/logger.js';
import { RedisHealth, withDatabaseFallback } from '../../src/adapters/redis-fallback.js';
import { createRedisSharedState } from '../../src/adapters/shared-state.js';
import { messageSignedHeaders } from '../../src/domain/auth/message-signing.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createUser, topUp } from '../support/payments.js';
import { startRedis, stopRedis } from '../support/private-redis.js';
import { freePort } from '../support/service-process.js';

/**
 * docs/rules.md R64: Redis is never on the money path. A private redis-server of this file (never
 * the machine's shared one) is frozen (SIGSTOP: it accepts and never answers), then killed, then
 * started again, while nonce-signed payments go on: each is answered 201 without waiting on Redis
 * past its bound, a nonce is still accepted only once (the records go to the database), /readyz
 * stays 200 and says Redis is unreachable, and one log line marks each end of the outage.
 */

const PAYER = 8801;
const PAYEE = 8802;
/** Bound of one request during the outage: Redis's 100 ms plus the payment itself on a busy machine. */
const ANSWER_MS_MAX = 2_000;

let port: number;
let redis: ChildProcess;
let t: TestApp;
const logLines: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  port = await freePort();
  redis = await startRedis(port);
  t = await startTestApp({
    shared: createRedisSharedState(`redis://127.0.0.1:${port}`, `payorch-outage-${randomBytes(4).toString('hex')}:`),
    logStream: { write: (line) => logLines.push(JSON.parse(line) as Record<string, unknown>) },
  });
  await createUser(t, PAYER);
  await createUser(t, PAYEE);
  await topUp(t, PAYER, 1_000_000);
}, 60_000);

afterAll(async () => {
  if (redis !== undefined) {
    redis.kill('SIGCONT');
    await stopRedis(redis);
  }
  await t?.shared.close();
  await t?.close();
});

/** A payment signed the client's default way: an HTTP Message Signature with a fresh nonce. */
function noncePayment(): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify({ idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: PAYEE });
  const secret = t.secrets.get('wallet-api')?.[0] ?? '';
  const headers = messageSignedHeaders('wallet-api', secret, 'POST', '/intents', body, { userId: PAYER });
  return { headers: { ...headers, 'content-type': 'application/json' }, body };
}

/** A signed admin write as an eavesdropper holds it: the same bytes, sent again. */
function capturedAdminWrite() {
  const body = JSON.stringify({ level: 'info' });
  const headers = {
    ...signedHeaders('admin-tool', t.secrets.get('admin-tool')?.[0] ?? '', 'PUT', '/admin/log-level', body),
    'content-type': 'application/json',
  };
  return { send: () => t.app.inject({ method: 'PUT', url: '/admin/log-level', headers, payload: body }) };
}

async function send(request: { headers: Record<string, string>; body: string }) {
  const started = performance.now();
  const res = await t.app.inject({ method: 'POST', url: '/intents', headers: request.headers, payload: request.body });
  return { res, elapsedMs: performance.now() - started };
}

async function expectPaymentsThroughOutage(): Promise<void> {
  for (let i = 0; i < 5; i += 1) {
    const { res, elapsedMs } = await send(noncePayment());
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().status).toBe('SETTLED');
    expect(elapsedMs).toBeLessThan(ANSWER_MS_MAX);
  }
  // The same nonce once more, with a new body signed under it: the database's record refuses it.
  const first = noncePayment();
  expect((await send(first)).res.statusCode).toBe(201);
  const replay = await send(first);
  expect(replay.res.statusCode, replay.res.body).toBe(401);
  expect(replay.res.json()).toEqual({ error: 'UNAUTHORIZED', message: 'replayed nonce' });
  const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
  expect(ready.statusCode).toBe(200);
  expect(ready.json()).toEqual({ status: 'ok', redis: 'unreachable' });
}

/** Requests find Redis again by trying it (at most once a second while it is down). */
async function awaitRedisBack(): Promise<void> {
  let ready = await t.app.inject({ method: 'GET', url: '/readyz' });
  for (let waitedMs = 0; ready.json().redis !== 'ok' && waitedMs < 10_000; waitedMs += 200) {
    await send(noncePayment());
    await new Promise((r) => setTimeout(r, 200));
    ready = await t.app.inject({ method: 'GET', url: '/readyz' });
  }
  expect(ready.json()).toEqual({ status: 'ok', redis: 'ok' });
}

describe('Redis not answering (docs/rules.md R64)', () => {
  it('answers while Redis is up, and /readyz says so', async () => {
    const { res } = await send(noncePayment());
    expect(res.statusCode, res.body).toBe(201);
    const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.json()).toEqual({ status: 'ok', redis: 'ok' });
  });

  it('frozen (accepts, never answers): nonce-signed payments succeed within the bound, a nonce once only', async () => {
    // Captured on the wire while Redis answers. Its record was in Redis only, so the outage's
    // database fallback accepted it again: a flood that made Redis miss its bound replayed it.
    const adminWrite = capturedAdminWrite();
    expect((await adminWrite.send()).statusCode).toBe(200);
    redis.kill('SIGSTOP');
    try {
      await expectPaymentsThroughOutage();
      const replay = await adminWrite.send();
      expect(replay.statusCode, replay.body).toBe(401);
      expect(replay.json().message).toBe('replayed request');
    } finally {
      redis.kill('SIGCONT');
    }
    await awaitRedisBack();
    expect((await adminWrite.send()).statusCode).toBe(401);
  });

  it('an event loop late past the bound is not Redis down: the answer that came meanwhile is read, the database is not used', async () => {
    const unreachable: object[] = [];
    const log: Logger = { info: () => {}, warn: () => {}, error: (line) => unreachable.push(line), child: () => log };
    const health = new RedisHealth(log);
    const state = withDatabaseFallback(t.shared, t.db, health);
    const key = `loop-late-${randomUUID()}`;
    const claim = state.claimOnce(key, 60_000);
    // The process busy (a flood's requests, or off the CPU on a loaded machine) for twice the bound.
    const busyUntil = performance.now() + 200;
    while (performance.now() < busyUntil);
    expect(await claim).toBe(true);
    expect(unreachable).toEqual([]);
    expect(health.state).toBe('ok');
    const { rows } = await t.db.query('SELECT 1 FROM replay_claims WHERE key = $1', [t.shared.prefix + key]);
    expect(rows).toEqual([]);
    expect(await state.claimOnce(key, 60_000)).toBe(false);
  });

  it('killed, then started again: payments go on, and a nonce used during the outage stays used after it', async () => {
    await stopRedis(redis);
    await expectPaymentsThroughOutage();
    const usedDuringOutage = noncePayment();
    expect((await send(usedDuringOutage)).res.statusCode).toBe(201);

    redis = await startRedis(port);
    await awaitRedisBack();
    const replay = await send(usedDuringOutage);
    expect(replay.res.statusCode, replay.res.body).toBe(401);
    expect((await send(noncePayment())).res.statusCode).toBe(201);
  }, 30_000);

  it('logs one line when Redis stops answering and one when it answers again, per outage', () => {
    const unreachable = logLines.filter((line) => line.event === 'redis_unreachable');
    const back = logLines.filter((line) => line.event === 'redis_answers_again');
    // Two outages, the freeze and the kill; a loaded machine may add a flap of its own, each with both lines.
    expect(unreachable.length).toBeGreaterThanOrEqual(2);
    expect(unreachable.length).toBeLessThanOrEqual(4);
    expect(back.length).toBe(unreachable.length);
  });

  it('moved no money twice: ledger invariants and the audit hold', async () => {
    await expectLedgerInvariants(t.db);
    const audit = await runAudit(t.db);
    expect(audit.violations.map(formatViolation)).toEqual([]);
  });
});
