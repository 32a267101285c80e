import { execFile } from 'node:child_process';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { createSimulatorServer, type SimulatorServer } from '../../src/adapters/pspx/pspx-simulator.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { customer } from '../support/workers.js';
import { buildIfStale, callAsWalletApi, freePort, type ServiceProcess, spawnService } from '../support/service-process.js';

/**
 * docs/rules.md R66: a `workers` process outlives a PostgreSQL outage of half a minute, stopped
 * fast or immediate while payouts are in flight, and finishes them within 5 s of its return. The
 * server is stopped and started, so it is a cluster of the test's own (initdb), never the shared
 * one; DATABASE_URL only says that this run has PostgreSQL (CI's PostgreSQL pass).
 */

const run = promisify(execFile);
const PG_BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
const asRoot = process.getuid?.() === 0;
const asPostgres = (file: string, argv: readonly string[]) =>
  run(asRoot ? 'runuser' : file, asRoot ? ['-u', 'postgres', '--', file, ...argv] : [...argv], { maxBuffer: 4 * 1024 * 1024 });

const STARTUP_MS_MAX = 90_000;
const OUTAGE_MS = 30_000;
/** docs/rules.md R66: in-flight payouts are final this soon after the database's return. */
const FINAL_AFTER_RETURN_MS_MAX = 5_000;
const PAYER = 8123;
const FINAL = ['SETTLED', 'FAILED', 'CANCELED', 'EXPIRED', 'MANUAL_REVIEW'];

const enabled = (process.env.DATABASE_URL ?? '').startsWith('postgres');

describe.runIf(enabled)('a workers process across a 30 s PostgreSQL outage (a private cluster)', () => {
  let home: string;
  let port: number;
  let simulator: SimulatorServer;
  let api: ServiceProcess | undefined;
  let workers: ServiceProcess | undefined;
  let db: Database | undefined;
  const data = () => join(home, 'data');
  const url = () => `postgres://postgres@127.0.0.1:${port}/payorch`;
  const startPostgres = () =>
    asPostgres(join(PG_BIN, 'pg_ctl'), [
      '-D',
      data(),
      '-o',
      `-p ${port} -k ${home} -c listen_addresses=127.0.0.1`,
      '-l',
      join(home, 'pg.log'),
      '-w',
      'start',
    ]);
  const stopPostgres = (mode: 'fast' | 'immediate') => asPostgres(join(PG_BIN, 'pg_ctl'), ['-D', data(), '-m', mode, '-w', 'stop']);
  const common = () => ({
    DATABASE_URL: url(),
    PSPX_URL: simulator.url,
    QR_SIGNING_SECRET: 'outage-qr',
    PSP_WORKER_INTERVAL_MS: '100',
    OUTBOX_INTERVAL_MS: '100',
  });

  beforeAll(async () => {
    await buildIfStale();
    home = await mkdtemp(join(tmpdir(), 'payorch-outage-'));
    if (asRoot) await chown(home, ...(await postgresIds()));
    port = await freePort();
    await asPostgres(join(PG_BIN, 'initdb'), ['-D', data(), '-U', 'postgres', '--auth=trust', '-E', 'UTF8']);
    await startPostgres();
    const admin = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
    await admin.connect();
    await admin.query('CREATE DATABASE payorch');
    await admin.end();
    simulator = await createSimulatorServer({ adminRoutes: false });
    api = await spawnService({ ...common(), PAYORCH_ROLE: 'api' }, STARTUP_MS_MAX);
    workers = await spawnService({ ...common(), PAYORCH_ROLE: 'workers' }, STARTUP_MS_MAX);
    db = await openDatabase(url(), '');
    const call = (path: string, body: unknown) => callAsWalletApi(api?.url ?? '', 'POST', path, { user: PAYER, body });
    expect([200, 201]).toContain((await call('/accounts', { userId: PAYER, currency: 'THB' })).status);
    expect([200, 201]).toContain((await call('/accounts/register-ipps', { ...customer, externalUserId: `ext-${PAYER}` })).status);
    const funded = await call('/intents', { idempotencyKey: crypto.randomUUID(), operationType: 'QP_TOPUP', amount: 5_000_000 });
    expect(funded.body.status).toBe('SETTLED');
  }, 240_000);

  afterAll(async () => {
    for (const service of [api, workers]) {
      service?.child.kill('SIGKILL');
      await service?.exited;
    }
    await db?.close();
    await simulator?.close();
    if (home !== undefined) {
      await stopPostgres('immediate').catch(() => {});
      await rm(home, { recursive: true, force: true });
    }
  }, 60_000);

  it('transactions and queries in flight across fast and immediate stops: every one settles, and no client error escapes to end the process', async () => {
    const pool = await openDatabase(url(), '');
    const escaped: unknown[] = [];
    const onUncaught = (error: unknown) => escaped.push(error);
    process.on('uncaughtException', onUncaught);
    let stopped = false;
    try {
      await pool.exec('CREATE TABLE IF NOT EXISTS outage_probe (id int PRIMARY KEY, n bigint NOT NULL)');
      await pool.exec('INSERT INTO outage_probe SELECT g, 0 FROM generate_series(1, 40) g ON CONFLICT DO NOTHING');
      // As the workers use the pool: short transactions (a locked read, a pause, a write sent
      // with the COMMIT) beside single statements, more of them than the pool has connections.
      const lanes = Array.from({ length: 40 }, async (_, lane) => {
        let settled = 0;
        while (!stopped) {
          await (lane % 3 === 0
            ? pool.query('SELECT pg_sleep(0.01), n FROM outage_probe WHERE id = $1', [lane + 1])
            : pool.transaction(async (tx) => {
                await tx.query('SELECT n FROM outage_probe WHERE id = $1 FOR UPDATE', [lane + 1]);
                await tx.query('SELECT pg_sleep(0.02)');
                tx.send('UPDATE outage_probe SET n = n + 1 WHERE id = $1', [lane + 1]);
              })
          ).catch(() => sleep(50));
          settled += 1;
        }
        return settled;
      });
      for (const mode of ['fast', 'immediate', 'fast', 'fast', 'immediate', 'fast'] as const) {
        await sleep(1_500);
        await stopPostgres(mode);
        await sleep(1_000);
        await startPostgres();
      }
      await sleep(2_000);
      stopped = true;
      // A statement whose connection died mid-flight still settles: every lane ends.
      const settled = await Promise.race([Promise.all(lanes), sleep(15_000).then(() => 'lanes still waiting')]);
      expect(Array.isArray(settled) ? 'every lane ended' : settled).toBe('every lane ended');
      expect(escaped.map(String)).toEqual([]);
    } finally {
      stopped = true;
      process.off('uncaughtException', onUncaught);
      await pool.close();
    }
  }, 120_000);

  for (const mode of ['fast', 'immediate'] as const) {
    it(`stopped ${mode} for 30 s with payouts in flight: the workers go on logging, and the payouts are final within 5 s of its return`, async () => {
      const running = workers;
      if (running === undefined || api === undefined || db === undefined) throw new Error('not started');
      // The provider answers slowly, so that the outage strikes payouts the workers hold.
      simulator.simulator.setDelayMs(1_500);
      const ids: string[] = [];
      for (let i = 0; i < 12; i += 1) {
        const created = await callAsWalletApi(api.url, 'POST', '/intents', {
          user: PAYER,
          body: {
            idempotencyKey: crypto.randomUUID(),
            operationType: 'PSPX_WITHDRAWAL',
            amount: 1_000 + i,
            metadata: { ipps: { receiverType: 'MSISDN', receiverAccount: `08166600${String(i).padStart(2, '0')}` } },
          },
        });
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        ids.push(String(created.body.intentId));
      }
      const sql = db;
      await waitUntil(async () => {
        const { rows } = await sql.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM intents WHERE id = ANY($1::uuid[]) AND psp_lease_owner IS NOT NULL',
          [ids],
        );
        return (rows[0]?.n ?? 0) > 0;
      }, 20_000);

      await stopPostgres(mode);
      simulator.simulator.setDelayMs(0);
      const stoppedAt = Date.now();
      const linesAtStop = running.logs.length;
      await sleep(OUTAGE_MS / 2);
      const linesMidway = running.logs.length;
      await sleep(OUTAGE_MS / 2);
      // Its loops keep trying (and saying so) while the database is away: a process that goes
      // silent here has stopped, whatever it answers.
      const linesLateInOutage = running.logs.length;
      expect(linesLateInOutage, `log lines during the second half of the outage (${Date.now() - stoppedAt} ms)`).toBeGreaterThan(
        linesMidway,
      );
      expect(linesMidway).toBeGreaterThan(linesAtStop);
      await startPostgres();
      const backAt = Date.now();

      const allFinal = async () => {
        const { rows } = await sql.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM intents WHERE id = ANY($1::uuid[]) AND status = ANY($2::text[])',
          [ids, FINAL],
        );
        return rows[0]?.n === ids.length;
      };
      const finalIn = await waitUntil(allFinal, 30_000).then(
        () => Date.now() - backAt,
        () => null,
      );
      const livez = await fetch(`${running.url}/livez`, { signal: AbortSignal.timeout(2_000) }).then(
        (response) => response.status,
        () => 'no answer',
      );
      expect({ finalIn: finalIn !== null && finalIn <= FINAL_AFTER_RETURN_MS_MAX ? 'in time' : finalIn, livez }).toEqual({
        finalIn: 'in time',
        livez: 200,
      });
      expect(ids.map((id) => simulator.simulator.confirmsReceived(id)).every((n) => n <= 1)).toBe(true);
      await expectLedgerInvariants(sql);
    }, 150_000);
  }
});

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(50);
  }
}

/** The postgres user's uid and gid: initdb refuses to run as root, and its directory must be its own. */
async function postgresIds(): Promise<[number, number]> {
  const { stdout } = await run('id', ['-u', 'postgres']);
  const { stdout: group } = await run('id', ['-g', 'postgres']);
  return [Number(stdout.trim()), Number(group.trim())];
}
