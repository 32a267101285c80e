import type { Sql } from '../../../adapters/database.js';

/**
 * The outbox: money work that a status change decided and the outbox worker carries out, queued
 * in the same transaction as that status change so that neither happens without the other.
 */
export const OUTBOX_KINDS = ['post_pending', 'void_pending'] as const;
export type OutboxKind = (typeof OUTBOX_KINDS)[number];

export interface OutboxPayload {
  /** void_pending: the failure reason the intent gets when the outbox fails it. */
  readonly reason?: string;
  /** Set when an admin resolve queued the job: recorded in the audit row of the settlement. */
  readonly resolvedBy?: string;
}

/**
 * Queues a job; false when the same kind is already open for the intent (the partial unique
 * index outbox_open_job_idx), so a repeated decision never queues the work twice.
 */
export async function enqueueJob(sql: Sql, intentId: string, kind: OutboxKind, payload: OutboxPayload = {}): Promise<boolean> {
  const { rowCount } = await sql.query(
    `INSERT INTO outbox (kind, intent_id, payload) VALUES ($1, $2, $3::jsonb)
     ON CONFLICT (intent_id, kind) WHERE done_at IS NULL DO NOTHING`,
    [kind, intentId, JSON.stringify(payload)],
  );
  return rowCount === 1;
}

export async function openJobKinds(sql: Sql, intentId: string): Promise<OutboxKind[]> {
  const { rows } = await sql.query<{ kind: OutboxKind }>('SELECT kind FROM outbox WHERE intent_id = $1 AND done_at IS NULL ORDER BY id', [
    intentId,
  ]);
  return rows.map((row) => row.kind);
}
