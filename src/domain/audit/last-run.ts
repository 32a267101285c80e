import type { Sql } from '../../adapters/sql.js';

/** Keeps the last audit's result and time (one row), so /metrics can say when it failed or stopped running. */
export async function recordAuditRun(sql: Sql, result: { readonly ok: boolean; readonly violations: readonly unknown[] }): Promise<void> {
  await sql.query(
    `INSERT INTO audit_last_run (ok, violations, finished_at) VALUES ($1, $2, now())
     ON CONFLICT (singleton) DO UPDATE SET ok = EXCLUDED.ok, violations = EXCLUDED.violations, finished_at = EXCLUDED.finished_at`,
    [result.ok, result.violations.length],
  );
}
