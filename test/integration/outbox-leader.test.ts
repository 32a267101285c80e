import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/database.js';
import { openLeaseSession } from '../../src/adapters/lease-session.js';
import { createTestSchema, testPoolMode } from '../support/database.js';
import { openDatabase } from '../../src/adapters/database.js';
import { migrate } from '../../src/adapters/migrations.js';
import { createPspxClient } from '../../src/adapters/pspx/pspx-client.js';
import { StatusPublisher } from '../../src/domain/intents/store/status-publisher.js';
import { createOutboxWorker, OUTBOX_DEFAULTS, type OutboxWorker } from '../../src/workers/outbox-worker.js';
import { createPspWorker, type PspWorker } from '../../src/workers/psp-worker.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createUser, topUp } from '../support/payments.js';
import { captureLogger, payout, registerIpps, testPspSettings, trailOf } from '../support/workers.js';

const onPostgres = (process.env.DATABASE_URL ?? '').startsWith('postgres');

let t: TestApp;
let psp: PspWorker;
const log = captureLogger();
const started: OutboxWorker[] = [];

beforeAll(async () => {
  t = await startTestApp();
  psp = createPspWorker({ db: t.db, pspx: createPspxClient({ baseUrl: t.pspxSimulator.url }), log, settings: testPspSettings });
  await createUser(t, 701);
  await registerIpps(t, 701);
  await topUp(t, 701, 1_000_000);
});
afterAll(async () => {
  await Promise.all(started.map((worker) => worker.stop()));
  await t?.close();
});
afterEach(async () => {
  await Promise.all(started.splice(0).map((worker) => worker.stop()));
  await expectLedgerInvariants(t.db);
});

function outboxWorker(lockName = 'test.outbox', db: Database = t.db): OutboxWorker {
  const worker = createOutboxWorker({
    db,
    ledger: t.ledger,
    publisher: new StatusPublisher(t.broker, log),
    log,
    settings: { ...OUTBOX_DEFAULTS, lockName },
  });
  started.push(worker);
  return worker;
}

/** Payouts the PSP worker has confirmed: each leaves one post_pending job for the outbox. */
async function confirmedPayouts(count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let n = 0; n < count; n += 1) ids.push(await payout(t, 701, `08170000${n}1`, 100 + n));
  while ((await psp.runOnce()) > 0);
  const { rows } = await t.db.query<{ n: bigint }>(
    "SELECT count(*)::bigint AS n FROM outbox WHERE done_at IS NULL AND kind = 'post_pending' AND intent_id = ANY($1::uuid[])",
    [ids],
  );
  expect(rows[0]?.n).toBe(BigInt(count));
  return ids;
}

async function expectSettledOnce(ids: readonly string[]): Promise<void> {
  for (const id of ids) {
    const trail = await trailOf(t, id);
    expect(trail.filter(([, to]) => to === 'SETTLED')).toEqual([['AUTHORIZED', 'SETTLED']]);
  }
  const { rows } = await t.db.query<{ attempts: number }>('SELECT attempts FROM outbox WHERE intent_id = ANY($1::uuid[])', [ids]);
  expect(rows.map((row) => row.attempts)).toEqual(ids.map(() => 1));
}

describe(`outbox leader election (a lease row, on ${onPostgres ? 'PostgreSQL' : 'PGlite'}, pool mode ${testPoolMode})`, () => {
  it('a lock session holds its lock alone until it ends, then another session gets it', async () => {
    const first = await t.db.openLockSession();
    const second = await t.db.openLockSession();
    try {
      expect(await first.tryLock('test.session')).toBe(true);
      expect(await second.tryLock('test.session')).toBe(false);
      expect(await second.tryLock('test.other-name')).toBe(true);
      await first.close();
      expect(await first.alive()).toBe(false);
      expect(await second.tryLock('test.session')).toBe(true);
    } finally {
      await first.close();
      await second.close();
    }
  });

  it('of two workers exactly one leads and works the jobs; the standby takes over when the leader stops', async () => {
    const a = outboxWorker();
    const b = outboxWorker();
    expect((await a.runOnce()).leader).toBe(true);
    const ids = await confirmedPayouts(4);

    const rounds = await Promise.all([0, 1, 2].map(() => Promise.all([a.runOnce(), b.runOnce()])));
    for (const [fromA, fromB] of rounds) expect([fromA.leader, fromB.leader]).toEqual([true, false]);
    const done = rounds.map(([fromA, fromB]) => [fromA.jobsDone, fromB.jobsDone]);
    expect(done.reduce((sum, [byA]) => sum + (byA ?? 0), 0)).toBe(4);
    expect(done.every(([, byB]) => byB === 0)).toBe(true);
    await expectSettledOnce(ids);

    await a.stop();
    expect(a.isLeader).toBe(false);
    const more = await confirmedPayouts(2);
    const takeover = await b.runOnce();
    expect(takeover).toMatchObject({ leader: true, jobsDone: 2 });
    await expectSettledOnce(more);
    // A newcomer finds the lock taken.
    expect((await outboxWorker().runOnce()).leader).toBe(false);
  });

  it('two workers that both believe they lead (a stale leader) still carry out each job exactly once', async () => {
    // Different lock names: both lead. Only the row locks and the open-job check stand between them.
    const a = outboxWorker('test.split-brain.a');
    const b = outboxWorker('test.split-brain.b');
    const ids = await confirmedPayouts(6);
    const [fromA, fromB] = await Promise.all([a.runOnce(), b.runOnce()]);
    expect([fromA.leader, fromB.leader]).toEqual([true, true]);
    const [againA, againB] = await Promise.all([a.runOnce(), b.runOnce()]);
    expect(fromA.jobsDone + fromB.jobsDone + againA.jobsDone + againB.jobsDone).toBe(6);
    await expectSettledOnce(ids);
  });

  it.runIf(onPostgres && testPoolMode === 'session')(
    'processes with and without DATABASE_POOL_MODE=transaction overlapping (a switch-over): one leader, and the other takes over when it stops',
    async () => {
      // Two pools as two processes have them, one per pool mode, on one schema of their own.
      const scoped = await createTestSchema(process.env.DATABASE_URL ?? '', 'leader_modes');
      const bySession = await openDatabase(scoped.url, '', 'session');
      const byTransaction = await openDatabase(scoped.url, '', 'transaction');
      try {
        await migrate(bySession);
        const inSession = outboxWorker('test.outbox.modes', bySession);
        const inTransaction = outboxWorker('test.outbox.modes', byTransaction);
        const rounds = [];
        for (let round = 0; round < 4; round += 1) rounds.push(await Promise.all([inSession.runOnce(), inTransaction.runOnce()]));
        const leaders = rounds.map(([a, b]) => Number(a.leader) + Number(b.leader));
        expect(leaders).toEqual([1, 1, 1, 1]);
        const [leader, standby] = rounds[0]?.[0]?.leader === true ? [inSession, inTransaction] : [inTransaction, inSession];
        await leader.stop();
        expect((await standby.runOnce()).leader).toBe(true);
      } finally {
        await Promise.all(started.splice(0).map((worker) => worker.stop()));
        await bySession.close();
        await byTransaction.close();
        await scoped.drop();
      }
    },
  );
});

/** A lease taken by someone else lapsing: what a crashed leader leaves behind. */
async function expireLease(name: string): Promise<void> {
  const expired = await t.db.query("UPDATE leader_leases SET expires_at = now() - interval '1 second' WHERE name = $1", [name]);
  expect(expired.rowCount).toBe(1);
}

describe('outbox leadership as a lease row (every engine, either pool mode)', () => {
  it('a lease is held alone, renewed by its holder, and taken over once it lapses; the old holder learns it lost it', async () => {
    const first = openLeaseSession(t.db);
    const second = openLeaseSession(t.db);
    try {
      expect(await first.tryLock('test.lease')).toBe(true);
      expect(await second.tryLock('test.lease')).toBe(false);
      expect(await first.alive()).toBe(true);
      expect(await first.tryLock('test.lease')).toBe(true);
      await expireLease('test.lease');
      expect(await second.tryLock('test.lease')).toBe(true);
      expect(await first.alive()).toBe(false);
      expect(await first.tryLock('test.lease').catch((error: Error) => error.message)).toBe('lease session is closed');
      await second.close();
      const { rows } = await t.db.query('SELECT 1 FROM leader_leases WHERE name = $1', ['test.lease']);
      expect(rows).toHaveLength(0);
    } finally {
      await first.close();
      await second.close();
    }
  });

  it('the standby worker takes over the jobs when the leader’s lease lapses, and the old leader stands down', async () => {
    const a = outboxWorker('test.outbox.lease');
    const b = outboxWorker('test.outbox.lease');
    expect((await a.runOnce()).leader).toBe(true);
    expect((await b.runOnce()).leader).toBe(false);
    const ids = await confirmedPayouts(2);
    await expireLease('test.outbox.lease');
    expect(await b.runOnce()).toMatchObject({ leader: true, jobsDone: 2 });
    const lost = log.events('outbox_leadership_lost').length;
    expect(await a.runOnce()).toMatchObject({ leader: false, jobsDone: 0 });
    expect(log.events('outbox_leadership_lost').length).toBe(lost + 1);
    expect((await a.runOnce()).leader).toBe(false);
    await expectSettledOnce(ids);
    // A leader that stops hands the lease back at once: the standby does not wait for it to lapse.
    await b.stop();
    expect((await a.runOnce()).leader).toBe(true);
  });
});
