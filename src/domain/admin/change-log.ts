import assert from 'node:assert/strict';
import type { Sql } from '../../adapters/database.js';

export const ADMIN_ACTIONS = ['create', 'update', 'deactivate', 'reload', 'log-level', 'redeliver'] as const;
export type AdminAction = (typeof ADMIN_ACTIONS)[number];

export interface AdminChange {
  /** The signing service id, or 'admin-token' for the bearer token. */
  readonly actor: string;
  readonly entity: string;
  readonly entityId: string | null;
  readonly action: AdminAction;
  /** JSON-safe snapshots (money already as strings); never a secret. */
  readonly before: unknown;
  readonly after: unknown;
}

/**
 * Appends one row to admin_changes. Callers pass the transaction of the change itself, so the
 * change and its record commit or roll back together.
 */
export async function recordChange(tx: Sql, change: AdminChange): Promise<void> {
  const { rowCount } = await tx.query(
    `INSERT INTO admin_changes (actor, entity, entity_id, action, before, after)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb)`,
    [
      change.actor,
      change.entity,
      change.entityId,
      change.action,
      change.before === null ? null : JSON.stringify(change.before),
      change.after === null ? null : JSON.stringify(change.after),
    ],
  );
  assert.equal(rowCount, 1, 'admin_changes insert must write one row');
}
