import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { createSimulatorServer, type SimulatorServer } from '../../src/adapters/pspx/pspx-simulator.js';
import { DEMO_CONFIG_FILE, readConfigFile, secretsOf } from '../../src/config.js';
import { signedHeaders } from '../../src/domain/auth/signing.js';
import { balanceOf, expectLedgerInvariants } from '../support/invariants.js';
import { createTestSchema, type TestSchema, testPoolMode } from '../support/database.js';
import { buildIfStale, type ServiceProcess, spawnService } from '../support/service-process.js';
import { customer } from '../support/workers.js';

/**
 * The service as a real process (node bin/payorch.js serve, built from src), killed with SIGKILL
 * while payouts are in flight and started again on the same database and the same provider:
 * every payout ends exactly once, the provider never gets a second confirm, and the money adds up.
 */

const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const ADMIN_TOKEN = 'crash-test-admin-token';
const secret = secretsOf(readConfigFile(DEMO_CONFIG_FILE)).get('wallet-api')?.[0] ?? '';
// Generous: a loaded 2-core CI machine starts embedded PGlite slowly.
const STARTUP_MS_MAX = 60_000;
const SETTLE_MS_MAX = 60_000;

let simulator: SimulatorServer;
let dataDir: string;
let schema: TestSchema | null = null;
let databaseUrl = '';

type Service = ServiceProcess;

async function startService(): Promise<Service> {
  return spawnService(
    {
      DATABASE_URL: databaseUrl,
      DATA_DIR: dataDir,
      REDIS_URL: '',
      PSPX_URL: simulator.url,
      ADMIN_TOKEN,
      QR_SIGNING_SECRET: 'crash-test-qr-secret',
      PSP_WORKER_INTERVAL_MS: '50',
      OUTBOX_INTERVAL_MS: '50',
      PSP_MAX_INQUIRIES: '3',
      PSP_LEASE_MS: '1000',
    },
    STARTUP_MS_MAX,
  );
}

async function call(service: Service, method: string, path: string, options: { user?: number; body?: unknown; admin?: boolean } = {}) {
  const raw = options.body === undefined ? '' : JSON.stringify(options.body);
  const headers: Record<string, string> = options.admin
    ? { authorization: `Bearer ${ADMIN_TOKEN}` }
    : signedHeaders('wallet-api', secret, method, path, raw, options.user === undefined ? {} : { userId: options.user });
  if (raw !== '') headers['content-type'] = 'application/json';
  const response = await fetch(`${service.url}${path}`, { method, headers, ...(raw === '' ? {} : { body: raw }) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function statusOf(service: Service, id: string): Promise<string> {
  const res = await call(service, 'GET', `/intents/${id}`);
  expect(res.status).toBe(200);
  return res.body.status as string;
}

async function waitFor(condition: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Open outbox jobs, as the service reads them at scrape time (its embedded database is its own while it runs). */
async function outboxDepth(service: ServiceProcess): Promise<number> {
  const text = await (await fetch(`${service.url}/metrics`)).text();
  return Number(/^payorch_outbox_depth (\S+)$/m.exec(text)?.[1] ?? -1);
}

async function openServiceDatabase(): Promise<Database> {
  return openDatabase(pgUrl === undefined ? undefined : databaseUrl, dataDir, testPoolMode);
}

beforeAll(async () => {
  await buildIfStale();
  // Held confirms (9997, 9998) outlast the service's 3000 ms client time-out.
  simulator = await createSimulatorServer({ confirmHoldMs: 3500 });
  dataDir = await mkdtemp(join(tmpdir(), 'payorch-crash-'));
  if (pgUrl !== undefined) {
    schema = await createTestSchema(pgUrl, 'crash');
    databaseUrl = schema.url;
  }
}, 120_000);

afterAll(async () => {
  await simulator?.close();
  await rm(dataDir, { recursive: true, force: true });
  await schema?.drop();
});

describe('crash recovery of the PSP payouts', () => {
  it('SIGKILL mid-flight, restart: every payout ends exactly once, no second confirm, money conserved', async () => {
    const USER = 911;
    let service = await startService();
    const ids: string[] = [];
    try {
      expect((await call(service, 'POST', '/accounts', { user: USER, body: { userId: USER, currency: 'THB' } })).status).toBe(201);
      expect((await call(service, 'POST', '/accounts/register-ipps', { user: USER, body: customer })).status).toBe(201);
      const topUp = await call(service, 'POST', '/intents', {
        user: USER,
        body: { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: 1_000_000 },
      });
      expect(topUp.body.status).toBe('SETTLED');

      // Every provider answer takes 300 ms, so the kill lands while calls are out.
      simulator.simulator.setDelayMs(300);
      const receivers = ['0810000001', '0810000002', '0810000003', '0810009997', '0810009999', '0810009998'];
      for (const [index, receiverAccount] of receivers.entries()) {
        const res = await call(service, 'POST', '/intents', {
          user: USER,
          body: {
            idempotencyKey: randomUUID(),
            operationType: 'PSPX_WITHDRAWAL',
            amount: 1000 * (index + 1),
            metadata: { ipps: { receiverType: 'MSISDN', receiverAccount } },
          },
        });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        ids.push(res.body.intentId as string);
      }
      // Inquiries answered: the confirms are on their way (held by the provider's delay) when the process dies.
      await waitFor(async () => simulator.simulator.stats.inquiries >= receivers.length, 10_000, 'the inquiries');
      await sleep(100);
      const atKill = await Promise.all(ids.map((id) => statusOf(service, id)));
      service.child.kill('SIGKILL');
      expect(await service.exited).toBeNull();
      expect(atKill.filter((status) => status === 'AUTHORIZED').length).toBeGreaterThan(0);
    } catch (error) {
      service.child.kill('SIGKILL');
      throw error;
    }

    simulator.simulator.setDelayMs(0);
    service = await startService();
    try {
      const final = new Set(['SETTLED', 'FAILED', 'MANUAL_REVIEW']);
      await waitFor(
        async () => (await Promise.all(ids.map((id) => statusOf(service, id)))).every((s) => final.has(s)),
        SETTLE_MS_MAX,
        'the payouts to end',
      );
      // An operator settles what the worker could not decide, by what the provider says it paid.
      for (const id of ids) {
        if ((await statusOf(service, id)) !== 'MANUAL_REVIEW') continue;
        const resolution = simulator.simulator.payoutsMade(id) === 1 ? 'CONFIRMED' : 'FAILED';
        expect((await call(service, 'POST', `/admin/intents/${id}/resolve`, { admin: true, body: { resolution } })).status).toBe(200);
      }
      await waitFor(
        async () => (await Promise.all(ids.map((id) => statusOf(service, id)))).every((s) => s === 'SETTLED' || s === 'FAILED'),
        SETTLE_MS_MAX,
        'the resolutions',
      );
      // A final status commits with its ledger step queued (post or void): the outbox leader runs
      // it moments later, and the reservation is only released then.
      await waitFor(async () => (await outboxDepth(service)) === 0, SETTLE_MS_MAX, 'the outbox to empty');

      for (const [index, id] of ids.entries()) {
        const status = await statusOf(service, id);
        expect(simulator.simulator.confirmsReceived(id)).toBeLessThanOrEqual(1);
        expect({ index, paid: simulator.simulator.payoutsMade(id) }).toEqual({ index, paid: status === 'SETTLED' ? 1 : 0 });
        const events = (await call(service, 'GET', `/intents/${id}/events`)).body.events as Array<{
          statusFrom: string | null;
          statusTo: string;
        }>;
        const endings = events.filter(
          (e) =>
            (e.statusTo === 'SETTLED' || e.statusTo === 'FAILED') && (e.statusFrom === 'AUTHORIZED' || e.statusFrom === 'MANUAL_REVIEW'),
        );
        expect(endings).toHaveLength(1);
        const moves = events.map((e) => `${e.statusFrom}>${e.statusTo}`);
        expect(new Set(moves).size).toBe(moves.length);
      }
      expect(await statusOf(service, ids[4] ?? '')).toBe('FAILED'); // 9999: the inquiry was rejected
      expect(simulator.simulator.confirmsReceived(ids[4] ?? '')).toBe(0);

      // SIGTERM drains and exits cleanly.
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
    } catch (error) {
      service.child.kill('SIGKILL');
      await service.exited;
      throw new Error(`${(error as Error).message}\n--- service log ---\n${service.logs.slice(-40).join('\n')}`);
    }

    const db = await openServiceDatabase();
    try {
      await expectLedgerInvariants(db);
      const { rows } = await db.query<{ paid: bigint }>(
        "SELECT coalesce(sum(amount), 0)::bigint AS paid FROM intents WHERE id = ANY($1::uuid[]) AND status = 'SETTLED'",
        [ids],
      );
      const paid = rows[0]?.paid ?? 0n;
      expect(await balanceOf(db, `user.${USER}.THB`)).toBe(1_000_000n - paid);
      expect(await balanceOf(db, 'system.transit.PSPX.THB')).toBe(0n);
      expect(await balanceOf(db, 'system.nostro.pspx.THB')).toBe(-1_000_000n + paid);
      const open = await db.query('SELECT 1 FROM outbox WHERE done_at IS NULL');
      expect(open.rows).toHaveLength(0);
    } finally {
      await db.close();
    }
  }, 240_000);
});
