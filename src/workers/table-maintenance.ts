import type { Database } from '../adapters/database.js';
import type { Logger } from '../adapters/logger.js';

/**
 * Autovacuum's work for a database that has no autovacuum: embedded PGlite runs PostgreSQL in
 * single-user mode, where it never runs. Without it the planner keeps the statistics of the
 * first start, when every table was empty, and the plans it caches per session stay made for
 * empty tables: the reference check of the audit events and history rows then scans the whole
 * intents table, and a service gets slower with every payment it stores (docs/PERFORMANCE.md).
 * Dead row versions of the hot balance rows are never reclaimed either.
 *
 * Autovacuum decides from the statistics counters, which PGlite does not keep current; this
 * decides from size instead: a table whose pages grew by more than a tenth since its statistics
 * were taken is vacuumed and analyzed (ANALYZE also makes sessions plan their statements again).
 */
export interface TableMaintenance {
  runOnce(): Promise<void>;
}

const GROWTH_FACTOR = 1.1;
const GROWTH_PAGES_MIN = 8;

export function createTableMaintenance(deps: { readonly db: Database; readonly log: Logger }): TableMaintenance {
  const { db, log } = deps;
  return {
    async runOnce() {
      const { rows } = await db.query<{ name: string; pages: number; known_pages: number }>(
        `SELECT c.relname AS name,
                (pg_relation_size(c.oid) / current_setting('block_size')::int)::int AS pages,
                c.relpages AS known_pages
           FROM pg_class c
          WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'`,
      );
      const grown = rows.filter((row) => row.pages > row.known_pages * GROWTH_FACTOR + GROWTH_PAGES_MIN);
      for (const table of grown) {
        // Names come from pg_class of our own schema; quoting keeps them data all the same.
        await db.exec(`VACUUM (ANALYZE) "${table.name.replaceAll('"', '""')}"`);
      }
      if (grown.length > 0) log.info({ tables: grown.map((t) => t.name) }, 'vacuumed and analyzed grown tables');
    },
  };
}
