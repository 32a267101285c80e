import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/adapters/database.js';
import { createSimulatorServer, type SimulatorServer } from '../../src/adapters/pspx/pspx-simulator.js';
import { createPayorchClient } from '@payorch/client';
import { DEMO_CONFIG_FILE, loadConfig, readConfigFile, secretsOf } from '../../src/config.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createTestSchema, type TestSchema, testPoolMode } from '../support/database.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { buildIfStale, type ServiceProcess, spawnService } from '../support/service-process.js';
import { customer } from '../support/workers.js';

/**
 * PAYORCH_ROLE: an `api` process serves HTTP and runs no worker, a `workers` process runs every
 * worker and answers only its probes and metrics. The route surface is checked in process on
 * every engine; the split itself needs two processes on one database, so PostgreSQL.
 */

const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const STARTUP_MS_MAX = 60_000;
const SETTLE_MS_MAX = 30_000;
const PAYER = 7801;

describe('a workers-role app', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ env: { PAYORCH_ROLE: 'workers' } });
  });
  afterAll(async () => t?.close());

  it('answers /livez, /readyz, /health and /metrics, and 404 for every client route, signed or not', async () => {
    for (const url of ['/livez', '/readyz', '/health', '/metrics']) {
      expect((await t.app.inject({ method: 'GET', url })).statusCode, url).toBe(200);
    }
    for (const [method, path] of [
      ['GET', '/accounts/system.revenue.THB/balance'],
      ['POST', '/intents'],
      ['GET', '/admin/service-keys'],
      ['GET', '/openapi.json'],
    ] as const) {
      const reply = await t.call(method, path, { body: method === 'POST' ? {} : undefined });
      expect([reply.statusCode, reply.json().error], path).toEqual([404, 'NOT_FOUND']);
    }
  });

  it('the configuration refuses an unknown PAYORCH_ROLE or DATABASE_POOL_MODE; any outbox tick is accepted (the lease renews on its own heartbeat)', () => {
    expect(() => loadConfig({ PAYORCH_ROLE: 'both' })).toThrow(/PAYORCH_ROLE must be one of all, api, workers \(got both\)/);
    expect(() => loadConfig({ DATABASE_POOL_MODE: 'statement' })).toThrow(/DATABASE_POOL_MODE must be one of session, transaction/);
    expect(loadConfig({}).role).toBe('all');
    expect(loadConfig({ DATABASE_POOL_MODE: 'transaction', OUTBOX_INTERVAL_MS: '10000' }).outboxIntervalMs).toBe(10_000);
  });
});

describe.runIf(pgUrl !== undefined)('an api process and a workers process on one PostgreSQL', () => {
  let schema: TestSchema;
  let simulator: SimulatorServer;
  let api: ServiceProcess;
  let workers: ServiceProcess;

  beforeAll(async () => {
    await buildIfStale();
    schema = await createTestSchema(pgUrl ?? '', 'roles');
    simulator = await createSimulatorServer({ adminRoutes: false });
    const common = {
      DATABASE_URL: schema.url,
      PSPX_URL: simulator.url,
      QR_SIGNING_SECRET: 'roles-qr',
      PSP_WORKER_INTERVAL_MS: '100',
      OUTBOX_INTERVAL_MS: '100',
    };
    // The api migrates; the workers process finds the schema ready.
    api = await spawnService({ ...common, PAYORCH_ROLE: 'api' }, STARTUP_MS_MAX);
    workers = await spawnService({ ...common, PAYORCH_ROLE: 'workers' }, STARTUP_MS_MAX);
  }, 150_000);
  afterAll(async () => {
    for (const service of [api, workers]) {
      service?.child.kill('SIGTERM');
      await service?.exited;
    }
    await simulator?.close();
    await schema?.drop();
  });

  it('the api creates a PSPX payout, the workers process settles it; each process ran only its part', async () => {
    const secret = secretsOf(readConfigFile(DEMO_CONFIG_FILE)).get('wallet-api')?.[0] ?? '';
    const client = createPayorchClient({ baseUrl: api.url, serviceId: 'wallet-api', secret });
    await client.accounts.create({ userId: PAYER, currency: 'THB' });
    await client.registerIpps({ ...customer, externalUserId: `ext-${PAYER}` }, { userId: PAYER });
    const topUp = await client.intents.create({ operationType: 'QP_TOPUP', amount: 50_000 }, { userId: PAYER });
    expect(topUp.status).toBe('SETTLED');
    const payout = await client.intents.create(
      { operationType: 'PSPX_WITHDRAWAL', amount: 12_345, metadata: { ipps: { receiverType: 'MSISDN', receiverAccount: '0817000001' } } },
      { userId: PAYER },
    );
    expect(payout.status).toBe('AUTHORIZED');

    const deadline = Date.now() + SETTLE_MS_MAX;
    let status = payout.status as string;
    while (status !== 'SETTLED' && Date.now() < deadline) {
      await sleep(100);
      status = (await client.intents.get(payout.intentId)).status;
    }
    expect(status).toBe('SETTLED');

    const hasLine = (service: ServiceProcess, text: string) => service.logs.some((line) => line.includes(text));
    expect(hasLine(workers, '"outbox_leader_elected"')).toBe(true);
    expect(hasLine(api, '"outbox_leader_elected"')).toBe(false);
    expect(hasLine(api, 'process role: api')).toBe(true);
    expect(hasLine(workers, 'process role: workers')).toBe(true);
    expect((await fetch(`${workers.url}/readyz`)).status).toBe(200);
    expect((await fetch(`${workers.url}/intents/${payout.intentId}`)).status).toBe(404);

    const db = await openDatabase(schema.url, '', testPoolMode);
    try {
      await expectLedgerInvariants(db);
    } finally {
      await db.close();
    }
  }, 90_000);
});
