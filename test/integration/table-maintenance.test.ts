import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTableMaintenance } from '../../src/workers/table-maintenance.js';
import { startTestApp, type TestApp } from '../support/app.js';

/**
 * Without autovacuum (PGlite), the statistics of a table would stay those of its first, empty
 * state; the maintenance run brings the planner's picture of grown tables up to date.
 */
const lines: string[] = [];
const log = { info: (b: object) => void lines.push(JSON.stringify(b)), warn: () => {}, error: () => {}, child: () => log };

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t?.close());

const knownPages = async (table: string) =>
  (await t.db.query<{ relpages: number }>('SELECT relpages FROM pg_class WHERE oid = to_regclass($1)', [table])).rows[0]!.relpages;

describe('table maintenance', () => {
  it('vacuums and analyzes a table that grew since its statistics were taken, and leaves it alone after', async () => {
    await t.db.exec('CREATE TABLE maintenance_probe (id int PRIMARY KEY, filler text)');
    await t.db.exec('ANALYZE maintenance_probe');
    await t.db.exec("INSERT INTO maintenance_probe SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g");
    expect(await knownPages('maintenance_probe')).toBe(0);

    const maintenance = createTableMaintenance({ db: t.db, log });
    await maintenance.runOnce();
    const pages = await knownPages('maintenance_probe');
    expect(pages).toBeGreaterThan(100);
    const { rows } = await t.db.query<{ reltuples: number }>("SELECT reltuples FROM pg_class WHERE oid = to_regclass('maintenance_probe')");
    expect(rows[0]!.reltuples).toBe(20000);
    expect(lines.at(-1)).toContain('maintenance_probe');

    lines.length = 0;
    await maintenance.runOnce();
    expect(lines.join('\n')).not.toContain('maintenance_probe');
  });

  // One session runs every statement only on PGlite; a PostgreSQL pool would prepare and discard
  // on different connections.
  it.runIf(process.env.DATABASE_URL === undefined)(
    'makes the plans cached while a table was small again once it has grown, on PGlite',
    async () => {
      await t.db.exec(
        "CREATE TABLE replan_probe (id uuid PRIMARY KEY, filler text); INSERT INTO replan_probe SELECT gen_random_uuid(), 'x' FROM generate_series(1, 5); ANALYZE replan_probe",
      );
      const maintenance = createTableMaintenance({ db: t.db, log });
      await maintenance.replanIfGrown();
      // A generic plan is what PL/pgSQL keeps for a statement; a prepared one shows it in EXPLAIN.
      await t.db.exec(
        'SET plan_cache_mode = force_generic_plan; PREPARE replan_probe_by_id (uuid) AS SELECT filler FROM replan_probe WHERE id = $1',
      );
      const plan = async () =>
        (await t.db.query<{ 'QUERY PLAN': string }>("EXPLAIN EXECUTE replan_probe_by_id('00000000-0000-0000-0000-000000000000')")).rows
          .map((row) => row['QUERY PLAN'])
          .join('\n');
      try {
        expect(await plan()).toContain('Seq Scan on replan_probe');
        await t.db.exec("INSERT INTO replan_probe SELECT gen_random_uuid(), repeat('x', 100) FROM generate_series(1, 20000)");
        expect(await plan()).toContain('Seq Scan on replan_probe');

        await maintenance.replanIfGrown();
        expect(await plan()).toContain('Index Scan using replan_probe_pkey');
      } finally {
        await t.db.exec('DEALLOCATE replan_probe_by_id; RESET plan_cache_mode');
      }
    },
  );

  // The maintenance loop shares PGlite's one session with the payments: its statements must wait
  // for an open transaction rather than run inside it (a VACUUM there fails; a DISCARD PLANS there
  // would be rolled back with it) or break it.
  it.runIf(process.env.DATABASE_URL === undefined)(
    'waits for an open transaction on PGlite, then runs, and the transaction commits whole',
    async () => {
      await t.db.exec('CREATE TABLE beside_probe (id int PRIMARY KEY, filler text); ANALYZE beside_probe');
      const maintenance = createTableMaintenance({ db: t.db, log });
      const order: string[] = [];
      let releaseTransaction!: () => void;
      const held = new Promise<void>((resolve) => {
        releaseTransaction = resolve;
      });
      const transaction = t.db.transaction(async (tx) => {
        await tx.query("INSERT INTO beside_probe SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g");
        await held;
        await tx.query("INSERT INTO beside_probe VALUES (0, 'last')");
        order.push('transaction');
      });
      // Sent while the transaction is open and holding its rows uncommitted.
      const maintained = Promise.all([maintenance.runOnce(), maintenance.replanIfGrown()]).then(() => order.push('maintenance'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(order).toEqual([]);
      releaseTransaction();
      await Promise.all([transaction, maintained]);

      expect(order).toEqual(['transaction', 'maintenance']);
      const { rows } = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM beside_probe');
      expect(rows[0]!.n).toBe(20001);
      // The VACUUM (ANALYZE) ran after the commit, so it counted the committed rows.
      expect(await knownPages('beside_probe')).toBeGreaterThan(100);
    },
  );
});
