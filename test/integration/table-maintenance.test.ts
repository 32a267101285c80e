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
});
