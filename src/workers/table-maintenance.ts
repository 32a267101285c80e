import type { Database } from '../adapters/database.js';
import type { Logger } from '../adapters/logger.js';

/**
 * Autovacuum's work for a database that has no autovacuum: embedded PGlite runs PostgreSQL in
 * single-user mode, where it never runs. Without it the planner keeps the statistics of the
 * first start, when every table was empty, and the plans it caches per session stay made for
 * empty tables: the reference check of the audit events and history rows then scans the whole
 * intents table, and a service gets slower with every payment it stores (docs/perf-log/2026-11.md, "Stale plans").
 * Dead row versions of the hot balance rows are never reclaimed either.
 *
 * Autovacuum decides from the statistics counters, which PGlite does not keep current; this
 * decides from size instead: a table whose pages grew by more than a tenth since its statistics
 * were taken is vacuumed and analyzed (ANALYZE also makes sessions plan their statements again).
 */
export interface TableMaintenance {
  runOnce(): Promise<void>;
  /**
   * PGlite only, where one session runs every statement: once a table has grown by half since
   * the session last planned, its cached plans are dropped (DISCARD PLANS) and made again on
   * their next use, for the tables' current sizes. The PL/pgSQL functions and triggers keep a
   * plan per statement for the session's life; made while a table was nearly empty, it scans the
   * whole table, and until the next ANALYZE (runOnce, every minute) each batch paid for that:
   * the reference checks of the audit events and history rows took ~10 ms a batch each at 20,000
   * intents, against ~0.4 ms planned afresh (docs/perf-log/2026-11.md, "PGlite's plans"). The planner sizes a table by
   * its current pages, so new plans need no new statistics, and dropping plans is cheap.
   */
  replanIfGrown(): Promise<void>;
}

const GROWTH_FACTOR = 1.1;
const GROWTH_PAGES_MIN = 8;
/** Plans are made again once a table is this much larger than when they were made. */
const REPLAN_GROWTH_FACTOR = 1.5;

export function createTableMaintenance(deps: { readonly db: Database; readonly log: Logger }): TableMaintenance {
  const { db, log } = deps;
  const tables = async () =>
    (
      await db.query<{ name: string; pages: number; known_pages: number }>(
        `SELECT c.relname AS name,
                (pg_relation_size(c.oid) / current_setting('block_size')::int)::int AS pages,
                c.relpages AS known_pages
           FROM pg_class c
          WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'`,
      )
    ).rows;
  /** Each table's pages when the session last planned afresh; none before the first time. */
  let plannedAt = new Map<string, number>();
  return {
    async replanIfGrown() {
      const rows = await tables();
      const grown = rows.filter((row) => row.pages > (plannedAt.get(row.name) ?? 0) * REPLAN_GROWTH_FACTOR + GROWTH_PAGES_MIN);
      if (grown.length === 0) return;
      await db.exec('DISCARD PLANS');
      plannedAt = new Map(rows.map((row) => [row.name, row.pages]));
    },
    async runOnce() {
      const rows = await tables();
      const grown = rows.filter((row) => row.pages > row.known_pages * GROWTH_FACTOR + GROWTH_PAGES_MIN);
      for (const table of grown) {
        // Names come from pg_class of our own schema; quoting keeps them data all the same.
        await db.exec(`VACUUM (ANALYZE) "${table.name.replaceAll('"', '""')}"`);
      }
      if (grown.length > 0) log.info({ tables: grown.map((t) => t.name) }, 'vacuumed and analyzed grown tables');
    },
  };
}
