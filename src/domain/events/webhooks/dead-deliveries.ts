import type { DeadWebhook, DeadWebhookQuery, WebhookRedelivery } from '@payorch/client';
import type { Database, Sql } from '../../../adapters/database.js';
import { recordChange } from '../../admin/change-log.js';
import { apiError } from '../../errors.js';

/**
 * Dead webhooks: deliveries whose retry window ended without a 2xx. They stay until an operator
 * redelivers them, and they keep holding back the later events of their intent (one intent's
 * events never overtake each other), which the listing counts as `heldBack`.
 */

/** The wire shapes are the client's (one written copy, which the admin route's schema is checked against). */
type DeadDelivery = DeadWebhook;

interface DeadRow {
  id: bigint;
  service_id: string;
  intent_id: string;
  attempts: number;
  first_attempt_at: Date | null;
  last_attempt_at: Date | null;
  dead_at: Date;
  last_outcome: string | null;
  last_http_status: number | null;
  held_back: number;
  body: string;
}

const DEAD_COLUMNS = `d.id, d.service_id, d.intent_id, d.attempts, d.first_attempt_at, d.last_attempt_at, d.dead_at,
  d.last_outcome, d.last_http_status, d.body,
  (SELECT count(*)::int FROM webhook_deliveries l WHERE l.intent_id = d.intent_id AND l.id > d.id) AS held_back`;

/**
 * A delivery is named by the cursor its event carries, as the receiver got it (its Idempotency-Key),
 * never by the internal position the row keeps (docs/rules.md R63).
 */
const BODY_CURSOR_SQL = `(d.body::jsonb ->> 'cursor')`;

const fromRow = (row: DeadRow): DeadDelivery => ({
  cursor: (JSON.parse(row.body) as { cursor: string }).cursor,
  serviceId: row.service_id,
  intentId: row.intent_id,
  attempts: row.attempts,
  firstAttemptAt: row.first_attempt_at?.toISOString() ?? null,
  lastAttemptAt: row.last_attempt_at?.toISOString() ?? null,
  deadAt: row.dead_at.toISOString(),
  lastOutcome: row.last_outcome,
  lastHttpStatus: row.last_http_status,
  heldBack: row.held_back,
  event: JSON.parse(row.body) as unknown,
});

/** The route's default page; its schema fills it in, so this is for callers without one. */
export const DEAD_PAGE_DEFAULT = 100;

/** Oldest first, as they were taken from the feed. */
export async function listDeadDeliveries(sql: Sql, query: DeadWebhookQuery): Promise<DeadDelivery[]> {
  const { rows } = await sql.query<DeadRow>(
    `SELECT ${DEAD_COLUMNS} FROM webhook_deliveries d
      WHERE d.dead_at IS NOT NULL AND ($1::text IS NULL OR d.service_id = $1)
      ORDER BY d.id LIMIT $2 OFFSET $3`,
    [query.serviceId ?? null, query.limit ?? DEAD_PAGE_DEFAULT, query.offset ?? 0],
  );
  return rows.map(fromRow);
}

/**
 * Makes a dead delivery due now with a fresh window (attempts from 0), recorded in the admin
 * change log with who asked. 404 for a cursor no delivery has, 409 for one that is not dead.
 */
export async function redeliverDead(db: Database, cursor: string, actor: string): Promise<WebhookRedelivery> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<DeadRow>(`SELECT ${DEAD_COLUMNS} FROM webhook_deliveries d WHERE ${BODY_CURSOR_SQL} = $1 FOR UPDATE`, [
      cursor,
    ]);
    const [row] = rows;
    if (row === undefined) throw apiError('NOT_FOUND', `no webhook delivery is owed for cursor ${cursor}`);
    if (row.dead_at === null)
      throw apiError('CONFLICT', `the webhook delivery for cursor ${cursor} is not dead; it is still being attempted`);
    const before = fromRow(row);
    const { rowCount } = await tx.query(
      `UPDATE webhook_deliveries
          SET dead_at = NULL, attempts = 0, first_attempt_at = NULL, next_attempt_at = now()
        WHERE id = $1 AND dead_at IS NOT NULL`,
      [row.id],
    );
    if (rowCount !== 1) throw new Error(`dead webhook delivery ${cursor} changed while locked`);
    const { event: _, ...summary } = before;
    await recordChange(tx, {
      actor,
      entity: 'webhook-delivery',
      entityId: cursor,
      action: 'redeliver',
      before: summary,
      after: { attempts: 0, dead: false },
    });
    return { cursor: before.cursor, serviceId: before.serviceId, intentId: before.intentId };
  });
}
