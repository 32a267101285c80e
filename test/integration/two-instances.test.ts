import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Broker, createMemoryBroker } from '../../src/adapters/broker.js';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { createPspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { createSimulatorServer, type SimulatorServer } from '../../src/adapters/pspx/pspx-simulator.js';
import { buildApp } from '../../src/app.js';
import { DEMO_CONFIG_FILE, loadConfig, readConfigFile, secretsOf } from '../../src/config.js';
import { formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import { applyConfig } from '../../src/domain/bootstrap/apply-config.js';
import { createFeeEngine, type FeeEngine } from '../../src/domain/rules/fees/index.js';
import { StatusPublisher } from '../../src/domain/intents/store/status-publisher.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { SqlLedger } from '../../src/ledger/sql-ledger.js';
import { type Loop, startLoop } from '../../src/workers/loop.js';
import { createOutboxWorker, OUTBOX_DEFAULTS, type OutboxWorker } from '../../src/workers/outbox-worker.js';
import { createPspWorker } from '../../src/workers/psp-worker.js';
import { buildIfStale, spawnService } from '../support/service-process.js';
import { createTestSchema, openTestDatabase, testPoolMode } from '../support/database.js';
import { captureLogger, customer, testPspSettings } from '../support/workers.js';

/**
 * Two payorch instances on one database and one broker, under concurrent load from both sides:
 * money is conserved and the audit is clean, concurrent duplicates make one intent, a live stream
 * opened on one instance hears transitions made by the other, exactly one outbox leader exists at
 * a time and the other takes over when the leader dies.
 *
 * With DATABASE_URL=postgres://… and REDIS_URL: two real processes (built dist/) on a schema of
 * their own, the leader killed with SIGKILL. On the embedded default two processes cannot share
 * one PGlite, so two in-process apps with their own workers share one PGlite database and one
 * memory broker, and the leader instance is shut down; the same properties are asserted.
 */

const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const redisUrl = process.env.REDIS_URL !== undefined && process.env.REDIS_URL !== '' ? process.env.REDIS_URL : undefined;
const asProcesses = pgUrl !== undefined && redisUrl !== undefined;
const secret = secretsOf(readConfigFile(DEMO_CONFIG_FILE)).get('wallet-api')?.[0] ?? '';
const ADMIN_TOKEN = 'two-instances-admin';
const STARTUP_MS_MAX = 30_000;
const SETTLE_MS_MAX = 20_000;
const WORKER_INTERVAL_MS = 50;
const USERS = [7501, 7502, 7503, 7504] as const;
const TOP_UP = 100_000;
const PAYMENTS = 60;

interface Instance {
  readonly url: string;
  /** Lines of its log that name an outbox election. */
  elections(): number;
  /** Dies (SIGKILL for a process; shutdown of the app and its workers in process). */
  kill(): Promise<void>;
}

interface Cluster {
  readonly instances: [Instance, Instance];
  readonly db: Database;
  readonly simulator: SimulatorServer;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Two processes (PostgreSQL + Redis)

async function spawnInstance(databaseUrl: string, simulatorUrl: string): Promise<Instance> {
  const { child, url, logs, exited } = await spawnService(
    {
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl,
      PSPX_URL: simulatorUrl,
      ADMIN_TOKEN,
      QR_SIGNING_SECRET: 'two-instances-qr',
      PSP_WORKER_INTERVAL_MS: String(WORKER_INTERVAL_MS),
      OUTBOX_INTERVAL_MS: String(WORKER_INTERVAL_MS),
      PSP_LEASE_MS: '2000',
    },
    STARTUP_MS_MAX,
  );
  return {
    url,
    elections: () => logs.filter((line) => line.includes('"outbox_leader_elected"')).length,
    async kill() {
      if (child.exitCode !== null) return;
      child.kill('SIGKILL');
      await exited;
    },
  };
}

async function processCluster(): Promise<Cluster> {
  await buildIfStale();
  const simulator = await createSimulatorServer({ adminRoutes: false });
  const schema = await createTestSchema(pgUrl ?? '', 'two');
  // The first migrates; the second finds the schema ready (migrations also wait on a lock).
  const first = await spawnInstance(schema.url, simulator.url);
  const second = await spawnInstance(schema.url, simulator.url);
  const db = await openDatabase(schema.url, '', testPoolMode);
  return {
    instances: [first, second],
    db,
    simulator,
    async close() {
      await Promise.all([first.kill(), second.kill()]);
      await db.close();
      await simulator.close();
      await schema.drop();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Two apps in one process (PGlite)

async function inProcessInstance(db: Database, broker: Broker, simulator: SimulatorServer): Promise<Instance> {
  const file = readConfigFile(DEMO_CONFIG_FILE);
  const secrets = secretsOf(file);
  const ledger = new SqlLedger();
  const fees: FeeEngine = await createFeeEngine();
  const pspx = createPspxClient({ baseUrl: simulator.url });
  const app: FastifyInstance = await buildApp({
    config: { ...loadConfig({ QR_SIGNING_SECRET: 'two-instances-qr', ADMIN_TOKEN }), file },
    db,
    ledger,
    broker,
    pspx,
    fees,
    secrets: () => secrets,
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const log = captureLogger();
  const outbox: OutboxWorker = createOutboxWorker({
    db,
    ledger,
    publisher: new StatusPublisher(broker, log),
    log,
    settings: OUTBOX_DEFAULTS,
  });
  const psp = createPspWorker({ db, pspx, log, settings: { ...testPspSettings, leaseMs: 2_000 } });
  const loops: Loop[] = [
    startLoop('psp', WORKER_INTERVAL_MS, () => psp.runOnce(), log),
    startLoop('outbox', WORKER_INTERVAL_MS, () => outbox.runOnce(), log),
  ];
  let dead = false;
  return {
    url,
    elections: () => log.events('outbox_leader_elected').length,
    async kill() {
      if (dead) return;
      dead = true;
      await Promise.all(loops.map((loop) => loop.stop()));
      await outbox.stop();
      await app.close();
      await fees.dispose();
    },
  };
}

async function inProcessCluster(): Promise<Cluster> {
  const db = await openTestDatabase();
  await applyConfig(db, new SqlLedger(), readConfigFile(DEMO_CONFIG_FILE));
  const broker = createMemoryBroker();
  const simulator = await createSimulatorServer();
  const first = await inProcessInstance(db, broker, simulator);
  const second = await inProcessInstance(db, broker, simulator);
  return {
    instances: [first, second],
    db,
    simulator,
    async close() {
      await Promise.all([first.kill(), second.kill()]);
      await broker.close();
      await simulator.close();
      await db.close();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Over HTTP, the same for both

async function call(instance: Instance, method: 'GET' | 'POST', path: string, body?: unknown, user?: number) {
  const raw = body === undefined ? '' : JSON.stringify(body);
  const headers: Record<string, string> = signedHeaders(
    'wallet-api',
    secret,
    method,
    path,
    raw,
    user === undefined ? {} : { userId: user },
  );
  if (raw !== '') headers['content-type'] = 'application/json';
  const response = await fetch(`${instance.url}${path}`, { method, headers, ...(raw === '' ? {} : { body: raw }) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Collects the statuses of a live stream until it ends or `timeoutMs` passes. */
async function streamStatuses(instance: Instance, intentId: string, timeoutMs: number): Promise<{ status: number; statuses: string[] }> {
  const path = `/intents/${intentId}/stream`;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const response = await fetch(`${instance.url}${path}`, {
    headers: signedHeaders('wallet-api', secret, 'GET', path, ''),
    signal: controller.signal,
  });
  const statuses: string[] = [];
  try {
    const reader = response.body?.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const chunk = await reader?.read();
      if (chunk === undefined || chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      for (const match of buffer.matchAll(/^data: (.+)$/gm)) statuses.push((JSON.parse(match[1] ?? '{}') as { status: string }).status);
      buffer = buffer.slice(buffer.lastIndexOf('\n') + 1);
    }
  } catch {
    // Aborted at the time-out: the statuses so far are the answer.
  } finally {
    clearTimeout(timer);
  }
  return { status: response.status, statuses };
}

async function waitFor(condition: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function balanceOf(instance: Instance, name: string): Promise<bigint> {
  const res = await call(instance, 'GET', `/accounts/${name}/balance`);
  expect(res.status).toBe(200);
  return BigInt(res.body.balance as string);
}

async function payout(instance: Instance, receiverAccount: string): Promise<string> {
  const res = await call(
    instance,
    'POST',
    '/intents',
    {
      idempotencyKey: randomUUID(),
      operationType: 'PSPX_WITHDRAWAL',
      amount: 500,
      live: true,
      metadata: { ipps: { receiverType: 'MSISDN', receiverAccount } },
    },
    USERS[0],
  );
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.intentId as string;
}

let cluster: Cluster;
beforeAll(async () => {
  cluster = asProcesses ? await processCluster() : await inProcessCluster();
  const [a, b] = cluster.instances;
  for (const [index, user] of USERS.entries()) {
    const via = index % 2 === 0 ? a : b;
    expect((await call(via, 'POST', '/accounts', { userId: user, currency: 'THB' }, user)).status).toBe(201);
    expect(
      (await call(via, 'POST', '/intents', { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: TOP_UP }, user)).status,
    ).toBe(201);
  }
  expect((await call(a, 'POST', '/accounts/register-ipps', customer, USERS[0])).status).toBe(201);
}, 120_000);
afterAll(async () => cluster?.close());

describe(`two instances on one database (${asProcesses ? 'two processes, PostgreSQL + Redis' : 'two apps in one process, PGlite + memory broker'})`, () => {
  it('concurrent payments through both: money conserved, duplicates make one intent, audit clean', async () => {
    const [a, b] = cluster.instances;
    // Rounds in which every user pays once, all at the same time, alternately through A and B
    // (one payment per payer at a time: a second one would rightly get TRANSACTION_IN_PROGRESS).
    const results: Array<Array<{ status: number; body: Record<string, unknown> }>> = [];
    for (let round = 0; round < PAYMENTS / USERS.length; round += 1) {
      const answers = await Promise.all(
        USERS.map(async (from, index) => {
          const to = USERS[(index + 1 + (round % 3)) % USERS.length] ?? USERS[0];
          const body = { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 100 + round, recipientUserId: to };
          // Every fifth payment goes to both instances at once: a retry that reached the other one.
          const copies = (round + index) % 5 === 0 ? [a, b] : [(round + index) % 2 === 0 ? a : b];
          return Promise.all(copies.map((instance) => call(instance, 'POST', '/intents', body, from)));
        }),
      );
      results.push(...answers);
    }
    for (const answers of results) {
      for (const res of answers) {
        // docs/rules.md R14, R22: a duplicate replays (200) or is a conflict; a busy payer is 409; never a 5xx.
        expect([200, 201, 409], JSON.stringify(res.body)).toContain(res.status);
        if (res.status === 409) expect(['TRANSACTION_IN_PROGRESS', 'CONFLICT']).toContain(res.body.error);
      }
      const ids = new Set(answers.filter((r) => r.status < 300).map((r) => r.body.intentId));
      expect(ids.size).toBeLessThanOrEqual(1);
    }
    expect(results.flat().filter((r) => r.status === 201).length).toBe(PAYMENTS);
    const total = (await Promise.all(USERS.map((u) => balanceOf(a, `user.${u}.THB`)))).reduce((x, y) => x + y, 0n);
    expect(total).toBe(BigInt(TOP_UP * USERS.length));
    const audit = await runAudit(cluster.db);
    expect(audit.violations.map(formatViolation)).toEqual([]);
  }, 60_000);

  it('a live stream on either instance hears the transitions the other one makes', async () => {
    const [a, b] = cluster.instances;
    // The provider answers slowly, so both streams are open before the payout moves on.
    cluster.simulator.simulator.setDelayMs(300);
    try {
      const id = await payout(a, '0810000111');
      const [onB, onA] = await Promise.all([streamStatuses(b, id, SETTLE_MS_MAX), streamStatuses(a, id, SETTLE_MS_MAX)]);
      for (const stream of [onB, onA]) {
        expect(stream.status).toBe(200);
        expect(stream.statuses[0]).toBe('AUTHORIZED');
        expect(stream.statuses.at(-1)).toBe('SETTLED');
      }
    } finally {
      cluster.simulator.simulator.setDelayMs(0);
    }
  }, 60_000);

  it('exactly one outbox leader; when it dies the other takes over and payouts still settle', async () => {
    const [a, b] = cluster.instances;
    await waitFor(() => a.elections() + b.elections() >= 1, 10_000, 'an outbox leader');
    await sleep(WORKER_INTERVAL_MS * 10);
    // Standbys try the lock at every tick: a second election while the first holds would show here.
    expect(a.elections() + b.elections()).toBe(1);
    const [leader, standby] = a.elections() === 1 ? [a, b] : [b, a];
    await leader.kill();
    await waitFor(() => standby.elections() === 1, 15_000, 'the standby to take over');
    const id = await payout(standby, '0810000222');
    await waitFor(
      async () => (await call(standby, 'GET', `/intents/${id}`)).body.status === 'SETTLED',
      SETTLE_MS_MAX,
      'the payout to settle under the new leader',
    );
    const { rows } = await cluster.db.query<{ n: bigint }>('SELECT count(*)::bigint AS n FROM outbox WHERE done_at IS NULL');
    expect(rows[0]?.n).toBe(0n);
    const audit = await runAudit(cluster.db);
    expect(audit.violations.map(formatViolation)).toEqual([]);
  }, 60_000);
});
