import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBroker } from '../../src/adapters/broker.js';
import { type Database, openDatabase, type Sql } from '../../src/adapters/database.js';
import { migrate } from '../../src/adapters/migrations.js';
import { createPspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { buildApp } from '../../src/app.js';
import { loadConfig, secretsOf } from '../../src/config.js';
import { formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import { applyConfig } from '../../src/domain/bootstrap/apply-config.js';
import { createFeeEngine, type FeeEngine } from '../../src/domain/rules/fees/index.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { SqlLedger } from '../../src/ledger/sql-ledger.js';
import { demoConfigFile } from '../support/app.js';
import { createTestSchema, type TestSchema, testPoolMode } from '../support/database.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

/**
 * The database goes away under load and comes back. On PostgreSQL a TCP proxy between the app and
 * the server is cut (connections reset, then a partition where connects hang), which affects this
 * file's connections only; on PGlite the embedded database is closed under the app and reopened
 * from its directory. Either way: every request answers within a bound, failures are a clean 5xx
 * in the standard body, the health probe says so, the service recovers without a restart, a 5xx
 * retried with the same idempotency key ends exactly once, and no half-done intent is left
 * (the invariant audit is clean).
 */

const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;
/** No request may take longer than this, outage or not. */
const ANSWER_MS_MAX = 12_000;
const OUTAGE_MS = 1_500;
const RECOVERY_MS_MAX = 15_000;
const PAYERS = [7401, 7402, 7403, 7404] as const;
const PAYEE = 7409;
const TOP_UP = 1_000_000;
const AMOUNT = 100;
const PGLITE_SETUP_MS_MAX = 180_000;

interface Outcome {
  readonly key: string;
  readonly payer: number;
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly retryAfter: string | undefined;
  readonly elapsedMs: number;
}

/** One database whose current connection a test can take away and give back (PGlite variant). */
interface Switchable extends Database {
  swap(next: Database): void;
}
function switchable(initial: Database): Switchable {
  let current = initial;
  return {
    get kind() {
      return current.kind;
    },
    query: (text, params) => current.query(text, params),
    exec: (text) => current.exec(text),
    transaction: (work) => current.transaction(work),
    openLockSession: () => current.openLockSession(),
    copyRows: (table, columns, rows) => current.copyRows(table, columns, rows),
    close: () => current.close(),
    swap(next) {
      current = next;
    },
  };
}

interface Harness {
  readonly app: FastifyInstance;
  readonly fees: FeeEngine;
  readonly secret: string;
  /** The app's JSON log lines, parsed. */
  readonly logLines: Array<Record<string, unknown>>;
}

async function buildOn(db: Database): Promise<Harness> {
  const file = demoConfigFile();
  const ledger = new SqlLedger();
  await applyConfig(db, ledger, file);
  const fees = await createFeeEngine();
  const secrets = secretsOf(file);
  const logLines: Array<Record<string, unknown>> = [];
  const app = await buildApp({
    logger: { level: 'info', stream: { write: (line) => logLines.push(JSON.parse(line) as Record<string, unknown>) } },
    config: { ...loadConfig({ QR_SIGNING_SECRET: 'db-faults-qr', ADMIN_TOKEN: 'db-faults-admin' }), file },
    db,
    ledger,
    broker: createMemoryBroker(),
    // Nothing here pays out; the provider is never called.
    pspx: createPspxClient({ baseUrl: 'http://127.0.0.1:9' }),
    fees,
    secrets: () => secrets,
  });
  await app.ready();
  return { app, fees, secret: secrets.get('wallet-api')?.[0] ?? '', logLines };
}

function call(h: Harness, method: 'GET' | 'POST', path: string, body?: unknown, user?: number): Promise<LightMyRequestResponse> {
  const raw = body === undefined ? '' : JSON.stringify(body);
  const headers = {
    ...signedHeaders('wallet-api', h.secret, method, path, raw, user === undefined ? {} : { userId: user }),
    ...(raw === '' ? {} : { 'content-type': 'application/json' }),
  };
  return h.app.inject({ method, url: path, headers, ...(raw === '' ? {} : { payload: raw }) });
}

async function pay(h: Harness, payer: number, key: string): Promise<Outcome> {
  const started = Date.now();
  const res = await call(
    h,
    'POST',
    '/intents',
    { idempotencyKey: key, operationType: 'P2P_TRANSFER', amount: AMOUNT, recipientUserId: PAYEE },
    payer,
  );
  const retryAfter = res.headers['retry-after'];
  return {
    key,
    payer,
    status: res.statusCode,
    body: res.json() as Record<string, unknown>,
    retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined,
    elapsedMs: Date.now() - started,
  };
}

async function fund(h: Harness): Promise<void> {
  for (const user of [...PAYERS, PAYEE]) {
    const res = await call(h, 'POST', '/accounts', { userId: user, currency: 'THB' }, user);
    expect([200, 201], res.body).toContain(res.statusCode);
  }
  for (const payer of PAYERS) {
    const res = await call(h, 'POST', '/intents', { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: TOP_UP }, payer);
    expect(res.statusCode, res.body).toBe(201);
  }
}

/** Each payer pays in a loop (one at a time per payer, so TRANSACTION_IN_PROGRESS stays out of it) until `stop` resolves. */
async function load(h: Harness, stop: Promise<void>): Promise<Outcome[]> {
  let stopped = false;
  void stop.then(() => {
    stopped = true;
  });
  const outcomes: Outcome[] = [];
  await Promise.all(
    PAYERS.map(async (payer) => {
      while (!stopped) {
        outcomes.push(await pay(h, payer, randomUUID()));
        await new Promise((r) => setTimeout(r, 5));
      }
    }),
  );
  return outcomes;
}

function expectCleanAnswers(outcomes: readonly Outcome[]): void {
  for (const o of outcomes) {
    expect(o.elapsedMs, `${o.key} took ${o.elapsedMs} ms`).toBeLessThan(ANSWER_MS_MAX);
    if (o.status >= 500) {
      // docs/rules.md R66: an unreachable database is 503 with Retry-After (1-5 s), in the standard body, never 500.
      expect({ key: o.key, status: o.status, error: o.body.error }).toEqual({ key: o.key, status: 503, error: 'SERVICE_UNAVAILABLE' });
      expect(Object.keys(o.body).sort()).toEqual(['error', 'message']);
      expect(Number(o.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(o.retryAfter)).toBeLessThanOrEqual(5);
    } else {
      expect({ key: o.key, status: o.status, body: o.body }).toMatchObject({ status: 201, body: { status: 'SETTLED' } });
    }
  }
}

async function waitForRecovery(h: Harness): Promise<void> {
  const deadline = Date.now() + RECOVERY_MS_MAX;
  for (;;) {
    const health = await h.app.inject({ method: 'GET', url: '/health' });
    const probe = await pay(h, PAYERS[0], randomUUID());
    if (health.statusCode === 200 && probe.status === 201) return;
    if (Date.now() > deadline)
      throw new Error(`no recovery: health ${health.statusCode}, payment ${probe.status} ${JSON.stringify(probe.body)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** After recovery: every 5xx retried with its key ends exactly once; audit clean; money conserved. */
async function expectExactlyOnce(h: Harness, sql: Sql, outcomes: readonly Outcome[]): Promise<void> {
  const failed = outcomes.filter((o) => o.status >= 500);
  for (const o of failed) {
    const retry = await pay(h, o.payer, o.key);
    expect([200, 201], JSON.stringify(retry.body)).toContain(retry.status);
    expect(retry.body.status).toBe('SETTLED');
  }
  const keys = outcomes.map((o) => o.key);
  const { rows } = await sql.query<{ n: bigint; settled: bigint }>(
    "SELECT count(*)::bigint AS n, count(*) FILTER (WHERE status = 'SETTLED')::bigint AS settled FROM intents WHERE idempotency_key = ANY($1::uuid[])",
    [keys],
  );
  expect(rows[0]).toEqual({ n: BigInt(keys.length), settled: BigInt(keys.length) });
  const half = await sql.query(
    "SELECT id, status FROM intents WHERE status IN ('CREATED', 'VALIDATED', 'SETTLING') AND operation_type <> 'INVOICE_PAYMENT'",
  );
  expect(half.rows).toEqual([]);
}

/** docs/rules.md R66: one line when the outage begins and one when it ends, not one per failed request. */
async function expectOneLinePerOutage(h: Harness, outcomes: readonly Outcome[]): Promise<void> {
  const ended = () => h.logLines.filter((line) => line.event === 'database_outage_ended');
  for (let waitedMs = 0; ended().length === 0 && waitedMs < RECOVERY_MS_MAX; waitedMs += 100) await new Promise((r) => setTimeout(r, 100));
  const failed = outcomes.filter((o) => o.status >= 500).length;
  expect(h.logLines.filter((line) => line.event === 'database_outage_began')).toHaveLength(1);
  expect(ended()).toHaveLength(1);
  expect(ended()[0]?.failedRequests).toBeGreaterThanOrEqual(failed);
  // pino's levels: 50 is error. Every failed request wrote its access line, none an error line of its own.
  expect(h.logLines.filter((line) => Number(line.level) >= 50 && line.event !== 'database_outage_began')).toEqual([]);
  h.logLines.length = 0;
}

async function expectAuditClean(db: Database): Promise<void> {
  const audit = await runAudit(db);
  expect(audit.violations.map(formatViolation)).toEqual([]);
  expect(audit.ok).toBe(true);
}

describe.runIf(pgUrl !== undefined)('PostgreSQL behind a TCP proxy that is cut under load', () => {
  let proxy: TcpProxy;
  let schema: TestSchema;
  let direct: Database;
  let viaProxy: Database;
  let h: Harness;

  beforeAll(async () => {
    const target = new URL(pgUrl ?? '');
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    schema = await createTestSchema(pgUrl ?? '', 'dbfault');
    direct = await openDatabase(schema.url, '', testPoolMode);
    await migrate(direct);
    const scoped = new URL(schema.url);
    scoped.host = `127.0.0.1:${proxy.port}`;
    viaProxy = await openDatabase(scoped.toString(), '', testPoolMode);
    h = await buildOn(viaProxy);
    await fund(h);
  }, 60_000);

  afterAll(async () => {
    await h?.app.close();
    await h?.fees.dispose();
    await viaProxy?.close();
    await proxy?.close();
    await direct?.close();
    await schema?.drop();
  });

  it.each(['reset', 'stall'] as const)(
    'connections %s: clean 5xx within a bound, recovery without a restart, exactly once, audit clean',
    async (mode) => {
      let endLoad = () => {};
      const loadDone = load(h, new Promise<void>((resolve) => (endLoad = resolve)));
      await new Promise((r) => setTimeout(r, 300));
      proxy.cut(mode);
      await new Promise((r) => setTimeout(r, 200));
      const during = await h.app.inject({ method: 'GET', url: '/health' });
      await new Promise((r) => setTimeout(r, OUTAGE_MS));
      proxy.restore();
      await new Promise((r) => setTimeout(r, 300));
      endLoad();
      const outcomes = await loadDone;

      expect(during.statusCode).toBe(503);
      expect(during.json()).toEqual({ status: 'ko', message: 'Ledger unavailable' });
      expect(outcomes.filter((o) => o.status >= 500).length, 'the outage was not felt').toBeGreaterThan(0);
      expect(outcomes.filter((o) => o.status === 201).length).toBeGreaterThan(0);
      expectCleanAnswers(outcomes);
      await waitForRecovery(h);
      await expectOneLinePerOutage(h, outcomes);
      await expectExactlyOnce(h, direct, outcomes);
      await expectAuditClean(direct);
    },
    90_000,
  );
});

describe.runIf(pgUrl === undefined)('embedded PGlite closed under load, reopened from its directory', () => {
  let dataDir: string;
  let db: Switchable;
  let h: Harness;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'payorch-dbfault-'));
    const first = await openDatabase(undefined, dataDir);
    await migrate(first);
    db = switchable(first);
    h = await buildOn(db);
    await fund(h);
    // A PGlite on disk migrates and commits far slower than one in memory (about 25 s here idle).
  }, PGLITE_SETUP_MS_MAX);

  afterAll(async () => {
    await h?.app.close();
    await h?.fees.dispose();
    await db?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it(
    'closed: clean 5xx within a bound and health 503; reopened: recovery without rebuilding the app, exactly once, audit clean',
    async () => {
      let endLoad = () => {};
      const loadDone = load(h, new Promise<void>((resolve) => (endLoad = resolve)));
      await new Promise((r) => setTimeout(r, 300));
      await db.close();
      const during = await h.app.inject({ method: 'GET', url: '/health' });
      await new Promise((r) => setTimeout(r, OUTAGE_MS));
      const downAnswers = await pay(h, PAYERS[1], randomUUID());
      // Reopened from disk: what was committed before the close is there, nothing else.
      const reopened = await openDatabase(undefined, dataDir);
      db.swap(reopened);
      await new Promise((r) => setTimeout(r, 300));
      endLoad();
      const outcomes = await loadDone;

      expect(during.statusCode).toBe(503);
      expect(during.json()).toEqual({ status: 'ko', message: 'Ledger unavailable' });
      expect(downAnswers.status).toBe(503);
      expect(downAnswers.body).toEqual({ error: 'SERVICE_UNAVAILABLE', message: expect.any(String) });
      expect(outcomes.filter((o) => o.status >= 500).length, 'the outage was not felt').toBeGreaterThan(0);
      expectCleanAnswers([...outcomes, downAnswers]);
      await waitForRecovery(h);
      await expectOneLinePerOutage(h, [...outcomes, downAnswers]);
      await expectExactlyOnce(h, db, [...outcomes, downAnswers]);
      await expectAuditClean(db);
    },
    PGLITE_SETUP_MS_MAX,
  );
});
