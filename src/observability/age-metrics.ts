import { Gauge, type Registry } from 'prom-client';
import type { Sql } from '../adapters/sql.js';
import { decodeFeedCursor } from '../domain/events/feed-cursor.js';

/**
 * Backlogs told by their age, read at scrape time from the tables (cluster-wide, and non-zero
 * while the workers that would drain them are down): the oldest payout not final, how far behind
 * each webhook service and feed reader is, and the last invariant audit. A counter that stops
 * moving says nothing when the process that would move it is down; these do.
 */
export function ageSampler(sql: Sql, registers: Registry[]): () => Promise<void> {
  const payoutAge = new Gauge({
    name: 'payorch_payout_oldest_open_age_seconds',
    help: 'Age of the oldest PSPX payout not final (created, authorized, settling or in MANUAL_REVIEW); 0 when none; -1 when the database could not be read.',
    registers,
  });
  const feedLag = new Gauge({
    name: 'payorch_event_feed_lag_seconds',
    help: 'Age of the oldest feed event a reader has not taken yet (webhook:<serviceId> for a service with a webhook, or a background reader such as nats:PAYORCH_EVENTS); 0 when it is caught up.',
    labelNames: ['reader'],
    registers,
  });
  const auditOk = new Gauge({
    name: 'payorch_audit_last_ok',
    help: 'The last invariant audit (GET /admin/audit, payorch audit): 1 clean, 0 violations found, -1 none has run yet.',
    registers,
  });
  const auditViolations = new Gauge({
    name: 'payorch_audit_last_violations',
    help: 'Violations the last invariant audit found.',
    registers,
  });
  const auditTime = new Gauge({
    name: 'payorch_audit_last_run_timestamp_seconds',
    help: 'When the last invariant audit finished (Unix time); 0 when none has run yet.',
    registers,
  });
  return async () => {
    try {
      const { rows } = await sql.query<{ payout_age_s: number; ok: boolean | null; violations: number | null; finished_s: number | null }>(
        `SELECT (SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0) FROM intents
                  WHERE status IN ('CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLING', 'MANUAL_REVIEW') AND channel = 'PSPX_TRANSFER')::float8 AS payout_age_s,
                a.ok, a.violations, EXTRACT(EPOCH FROM a.finished_at)::float8 AS finished_s
           FROM (SELECT 1) one LEFT JOIN audit_last_run a ON true`,
      );
      const row = rows[0];
      payoutAge.set(Math.max(0, row?.payout_age_s ?? 0));
      auditOk.set(row?.ok === true ? 1 : row?.ok === false ? 0 : -1);
      auditViolations.set(row?.violations ?? 0);
      auditTime.set(row?.finished_s ?? 0);
      feedLag.reset();
      for (const [reader, seconds] of await readerLags(sql)) feedLag.set({ reader }, seconds);
    } catch {
      payoutAge.set(-1);
    }
  };
}

/** Each reader's lag: the age of the first event past its position (one index probe each). */
async function readerLags(sql: Sql): Promise<Map<string, number>> {
  const lags = new Map<string, number>();
  const oldestAfter = async (serviceId: string | null, xact: bigint, seq: bigint): Promise<number> => {
    const { rows } = await sql.query<{ age_s: number }>(
      `SELECT EXTRACT(EPOCH FROM now() - occurred_at)::float8 AS age_s FROM event_feed
        WHERE ($1::text IS NULL OR service_id = $1) AND (xact, seq) > ($2::bigint, $3::bigint)
        ORDER BY ${serviceId === null ? 'xact, seq' : 'service_id, xact, seq'} LIMIT 1`,
      [serviceId, xact, seq],
    );
    return Math.max(0, rows[0]?.age_s ?? 0);
  };
  const { rows: webhooks } = await sql.query<{ service_id: string; feed_cursor: string | null }>(
    `SELECT k.service_id, c.feed_cursor FROM service_keys k LEFT JOIN webhook_cursors c ON c.service_id = k.service_id
      WHERE k.active AND k.permissions->'webhook'->>'url' IS NOT NULL`,
  );
  for (const { service_id: serviceId, feed_cursor: cursor } of webhooks) {
    const position = cursor === null ? { xact: -1n, seq: -1n } : decodeFeedCursor(cursor);
    if (position !== null) lags.set(`webhook:${serviceId}`, await oldestAfter(serviceId, position.xact, position.seq));
  }
  const { rows: readers } = await sql.query<{ reader: string; after_xact: bigint; after_seq: bigint }>(
    'SELECT reader, after_xact, after_seq FROM event_feed_readers',
  );
  for (const reader of readers) lags.set(reader.reader, await oldestAfter(null, reader.after_xact, reader.after_seq));
  return lags;
}
