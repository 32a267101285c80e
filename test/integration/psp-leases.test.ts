import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/database.js';
import { openDatabase } from '../../src/adapters/database.js';
import { createPspxClient, type PspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { createSimulatorServer, type SimulatorServer } from '../../src/adapters/pspx/pspx-simulator.js';
import { loadConfig } from '../../src/config.js';
import type { OutboxWorker } from '../../src/workers/outbox-worker.js';
import { createPspWorker, type PspWorkerSettings } from '../../src/workers/psp-worker.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createTestSchema, type TestSchema, testPoolMode } from '../support/database.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { buildIfStale, callAsWalletApi, type ServiceProcess, spawnService } from '../support/service-process.js';
import { captureLogger, customer, payout, payoutPayer, testOutbox, testPspSettings, trailOf } from '../support/workers.js';

/**
 * PSP leases (docs/rules.md R65): short leases that a live worker renews on a heartbeat, so a
 * killed workers process's payouts are taken over within one lease of their last renewal and
 * finish within 5 s of the restart, while a live worker's payouts are never taken from it however
 * long its provider calls last; and payouts in flight proceed independently of each other.
 */

const PAYER = 611;
/** The production lease (PSP_LEASE_MS's default): what a restarted process has to wait out at most. */
const PRODUCTION_LEASE_MS = loadConfig({}).pspLeaseMs;
const FINAL_AFTER_RESTART_MS_MAX = 5_000;

let t: TestApp;
let client: PspxClient;
let outbox: OutboxWorker;
const log = captureLogger();

beforeAll(async () => {
  t = await startTestApp({ pspx: { timeoutMs: 2_000 } });
  client = createPspxClient({ baseUrl: t.pspxSimulator.url, timeoutMs: 2_000, backoffBaseMs: 1, backoffCapMs: 5 });
  outbox = testOutbox(t, log);
  await payoutPayer(t, PAYER, 10_000_000);
});
afterAll(async () => {
  await outbox?.stop();
  await t?.close();
});
afterEach(async () => expectLedgerInvariants(t.db));

const sim = () => t.pspxSimulator.simulator;
const never = <T>() => new Promise<T>(() => {});

/** The provider client with some calls replaced. */
const clientWith = (overrides: Partial<PspxClient>): PspxClient => ({
  registerWallet: (key, data) => client.registerWallet(key, data),
  inquiry: (id, amount, receiver) => client.inquiry(id, amount, receiver),
  confirm: (id, ref) => client.confirm(id, ref),
  statusInquiry: (id) => client.statusInquiry(id),
  statement: (date, sink) => client.statement(date, sink),
  partnerBalance: () => client.partnerBalance(),
  ...overrides,
});

async function pspStates(ids: readonly string[]): Promise<Map<string, { state: string; status: string; owner: string | null }>> {
  const { rows } = await t.db.query<{ id: string; psp_state: string; status: string; psp_lease_owner: string | null }>(
    'SELECT id, psp_state, status, psp_lease_owner FROM intents WHERE id = ANY($1::uuid[])',
    [ids],
  );
  return new Map(rows.map((row) => [row.id, { state: row.psp_state, status: row.status, owner: row.psp_lease_owner }]));
}

async function waitUntil(what: string, check: () => Promise<boolean>, msMax: number): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > msMax) throw new Error(`${what}: not within ${msMax} ms`);
    await sleep(20);
  }
  return Date.now() - started;
}

/** The outbox on a 50 ms tick, as a workers process runs it; stop() ends it. */
function runOutbox(): { stop(): Promise<void> } {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await outbox.runOnce();
      await sleep(50);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

const allFinal = (ids: readonly string[]) => async () =>
  [...(await pspStates(ids)).values()].every((row) => row.status === 'SETTLED' || row.status === 'FAILED');

describe('PSP leases and heartbeats', () => {
  it('a killed worker’s payouts (mid-inquiry and with a confirm delivered) are final within 5 s of a new worker’s start; one confirm each', async () => {
    const settings: PspWorkerSettings = { ...testPspSettings, leaseMs: PRODUCTION_LEASE_MS, concurrencyMax: 32 };
    const midInquiry = [await payout(t, PAYER, '0815550001', 1000), await payout(t, PAYER, '0815550002', 1100)];
    const confirmDelivered = [await payout(t, PAYER, '0815550003', 1200), await payout(t, PAYER, '0815550004', 1300)];
    const all = [...midInquiry, ...confirmDelivered];

    // The process that dies: its inquiries of the first two hang; the other two's confirms reach
    // the provider and the answers never come back. Killed, its database calls never complete
    // (so its heartbeat stops) and nothing it was waiting for goes on.
    let killed = false;
    const dyingDb = new Proxy(t.db, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => (killed ? never() : (value as (...a: unknown[]) => unknown).apply(target, args));
      },
    }) as Database;
    const dying = createPspWorker({
      db: dyingDb,
      log,
      settings,
      pspx: clientWith({
        inquiry: (id, amount, receiver) => (midInquiry.includes(id) ? never() : client.inquiry(id, amount, receiver)),
        confirm: async (id, ref) => {
          await client.confirm(id, ref);
          return never();
        },
      }),
    });
    const dyingPump = dying.start(50);
    await waitUntil(
      'the dying worker to hold all four where it hangs',
      async () => {
        const states = await pspStates(all);
        return (
          midInquiry.every((id) => states.get(id)?.state === 'QUERY_PENDING') &&
          confirmDelivered.every((id) => states.get(id)?.state === 'CONFIRM_PENDING' && sim().confirmsReceived(id) === 1)
        );
      },
      10_000,
    );
    // Held longer than a lease: the heartbeat kept every lease.
    await sleep(PRODUCTION_LEASE_MS + 500);
    expect([...(await pspStates(all)).values()].map((row) => row.owner === null)).toEqual([false, false, false, false]);
    killed = true;
    void dyingPump.stop();

    const restartedAt = Date.now();
    const restarted = createPspWorker({ db: t.db, pspx: client, log, settings }).start(50);
    const outboxLoop = runOutbox();
    try {
      const tookMs = await waitUntil('every payout final', allFinal(all), FINAL_AFTER_RESTART_MS_MAX);
      log.info({ event: 'test_takeover', tookMs, sinceRestartMs: Date.now() - restartedAt }, 'taken over');
    } finally {
      await restarted.stop();
      await outboxLoop.stop();
    }
    const states = await pspStates(all);
    expect(all.map((id) => states.get(id)?.status)).toEqual(['SETTLED', 'SETTLED', 'SETTLED', 'SETTLED']);
    expect(all.map((id) => sim().confirmsReceived(id))).toEqual([1, 1, 1, 1]);
    expect(all.map((id) => sim().payoutsMade(id))).toEqual([1, 1, 1, 1]);
    // The delivered confirms were settled by status inquiry, never sent again.
    for (const id of confirmDelivered)
      expect((await trailOf(t, id)).slice(-3)).toEqual([
        ['CONFIRM_PENDING', 'INQUIRING'],
        ['INQUIRING', 'CONFIRMED'],
        ['AUTHORIZED', 'SETTLED'],
      ]);
  }, 40_000);

  it('a live worker’s leases are never taken while it heartbeats, however long its provider calls last', async () => {
    // A 300 ms lease, provider calls of 1.5 s (five leases), a rival claiming every 20 ms.
    const settings: PspWorkerSettings = { ...testPspSettings, leaseMs: 300, concurrencyMax: 10 };
    const ids = [await payout(t, PAYER, '0815551001', 1000), await payout(t, PAYER, '0815551002', 1000)];
    const inquiriesBefore = sim().stats.inquiries;
    const slow = clientWith({
      inquiry: async (id, amount, receiver) => {
        await sleep(1_500);
        return client.inquiry(id, amount, receiver);
      },
      confirm: async (id, ref) => {
        await sleep(1_500);
        return client.confirm(id, ref);
      },
    });
    const lines = captureLogger();
    const owner = createPspWorker({ db: t.db, pspx: slow, log: lines, settings });
    const driving = owner.runOnce();
    await waitUntil('the owner to claim both', async () => [...(await pspStates(ids)).values()].every((row) => row.owner !== null), 5_000);

    let rivalClaims = 0;
    const rivalClient = clientWith({
      inquiry: (id, amount, receiver) => {
        rivalClaims += 1;
        return client.inquiry(id, amount, receiver);
      },
      statusInquiry: (id) => {
        rivalClaims += 1;
        return client.statusInquiry(id);
      },
    });
    const rival = createPspWorker({ db: t.db, pspx: rivalClient, log: lines, settings }).start(20);
    try {
      expect(await driving).toBe(2);
    } finally {
      await rival.stop();
    }
    expect(rivalClaims).toBe(0);
    expect(lines.events('psp_lease_lost')).toEqual([]);
    expect(sim().stats.inquiries - inquiriesBefore).toBe(2);
    expect(ids.map((id) => sim().confirmsReceived(id))).toEqual([1, 1]);
    for (const id of ids)
      expect((await trailOf(t, id)).slice(-2)).toEqual([
        ['QUERIED', 'CONFIRM_PENDING'],
        ['CONFIRM_PENDING', 'CONFIRMED'],
      ]);
    const outboxLoop = runOutbox();
    await waitUntil('both settled', allFinal(ids), 10_000).finally(() => outboxLoop.stop());
  }, 30_000);

  it('payouts in flight proceed independently: one slow provider answer holds up only its own payout', async () => {
    const settings: PspWorkerSettings = { ...testPspSettings, leaseMs: PRODUCTION_LEASE_MS, concurrencyMax: 16 };
    const slowId = await payout(t, PAYER, '0815552000', 1000);
    const fast: string[] = [];
    for (let i = 1; i <= 9; i += 1) fast.push(await payout(t, PAYER, `081555200${i}`, 1000));
    let releaseSlow: () => void = () => {};
    const slowHeld = new Promise<void>((resolve) => {
      releaseSlow = resolve;
    });
    const pspx = clientWith({
      inquiry: async (id, amount, receiver) => {
        if (id === slowId) await slowHeld;
        return client.inquiry(id, amount, receiver);
      },
    });
    const pump = createPspWorker({ db: t.db, pspx, log, settings }).start(50);
    try {
      await waitUntil(
        'the nine others confirmed',
        async () => [...(await pspStates(fast)).values()].every((row) => row.state === 'CONFIRMED'),
        10_000,
      );
      expect((await pspStates([slowId])).get(slowId)?.state).toBe('QUERY_PENDING');
    } finally {
      releaseSlow();
      await pump.stop();
    }
    expect((await pspStates([slowId])).get(slowId)?.state).toBe('CONFIRMED');
    const outboxLoop = runOutbox();
    await waitUntil('all settled', allFinal([slowId, ...fast]), 10_000).finally(() => outboxLoop.stop());
  }, 30_000);
});

const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;

describe.runIf(pgUrl !== undefined)('a workers process SIGKILLed with payouts leased, on PostgreSQL', () => {
  const STARTUP_MS_MAX = 60_000;
  const KILLED_PAYER = 7811;
  let schema: TestSchema;
  let simulator: SimulatorServer;
  let api: ServiceProcess;
  let workers: ServiceProcess | undefined;
  let db: Database;
  const common = () => ({
    DATABASE_URL: schema.url,
    PSPX_URL: simulator.url,
    QR_SIGNING_SECRET: 'leases-qr',
    PSP_WORKER_INTERVAL_MS: '100',
    OUTBOX_INTERVAL_MS: '100',
  });

  beforeAll(async () => {
    await buildIfStale();
    schema = await createTestSchema(pgUrl ?? '', 'leases');
    simulator = await createSimulatorServer({ adminRoutes: false });
    api = await spawnService({ ...common(), PAYORCH_ROLE: 'api' }, STARTUP_MS_MAX);
    db = await openDatabase(schema.url, '', testPoolMode);
  }, 150_000);
  afterAll(async () => {
    for (const service of [api, workers]) {
      service?.child.kill('SIGTERM');
      await service?.exited;
    }
    await db?.close();
    await simulator?.close();
    await schema?.drop();
  });

  it('a restarted workers process finishes the payouts its killed predecessor held within 5 s; one confirm each', async () => {
    const call = (method: string, path: string, body?: unknown) => callAsWalletApi(api.url, method, path, { user: KILLED_PAYER, body });
    expect([200, 201]).toContain((await call('POST', '/accounts', { userId: KILLED_PAYER, currency: 'THB' })).status);
    expect([200, 201]).toContain(
      (await call('POST', '/accounts/register-ipps', { ...customer, externalUserId: `ext-${KILLED_PAYER}` })).status,
    );
    const funded = await call('POST', '/intents', { idempotencyKey: crypto.randomUUID(), operationType: 'QP_TOPUP', amount: 500_000 });
    expect(funded.body.status).toBe('SETTLED');

    // The provider holds every answer 8 s: the workers process is killed while it waits for them.
    simulator.simulator.setDelayMs(8_000);
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const created = await call('POST', '/intents', {
        idempotencyKey: crypto.randomUUID(),
        operationType: 'PSPX_WITHDRAWAL',
        amount: 1000 + i,
        metadata: { ipps: { receiverType: 'MSISDN', receiverAccount: `081777000${i}` } },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      ids.push(String(created.body.intentId));
    }
    workers = await spawnService({ ...common(), PAYORCH_ROLE: 'workers' }, STARTUP_MS_MAX);
    const leased = async () => {
      const { rows } = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM intents WHERE id = ANY($1::uuid[]) AND psp_state = 'QUERY_PENDING' AND psp_lease_owner IS NOT NULL`,
        [ids],
      );
      return rows[0]?.n === ids.length;
    };
    await waitUntil('the workers to hold all five mid-inquiry', leased, 20_000);
    workers.child.kill('SIGKILL');
    await workers.exited;
    simulator.simulator.setDelayMs(0);

    const restartedAt = Date.now();
    workers = await spawnService({ ...common(), PAYORCH_ROLE: 'workers' }, STARTUP_MS_MAX);
    const listeningAt = Date.now();
    const final = async () => {
      const { rows } = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM intents WHERE id = ANY($1::uuid[]) AND status = 'SETTLED'`,
        [ids],
      );
      return rows[0]?.n === ids.length;
    };
    await waitUntil('every payout settled', final, 30_000);
    // Counted from the moment the new process listens (its workers start then): the start itself
    // is node's and the machine's (1 s quiet, 7 s on a loaded 2-core CI runner), not the leases'.
    const sinceListeningMs = Date.now() - listeningAt;
    const startupMs = listeningAt - restartedAt;
    expect(
      sinceListeningMs,
      `settled ${sinceListeningMs} ms after the restarted process listened (it took ${startupMs} ms to start)`,
    ).toBeLessThanOrEqual(FINAL_AFTER_RESTART_MS_MAX);
    expect(ids.map((id) => simulator.simulator.confirmsReceived(id))).toEqual([1, 1, 1, 1, 1]);
    expect(ids.map((id) => simulator.simulator.payoutsMade(id))).toEqual([1, 1, 1, 1, 1]);
    await expectLedgerInvariants(db);
  }, 120_000);
});
