import type { Sql } from '../../adapters/database.js';
import { apiError } from '../errors.js';
import { type LimitCheck, limitExceeded } from '../limits.js';
import { type HistoryRow, insertIntentStatement, type NewIntent, type Transition } from './intent-store.js';
import { PAYER_LOCK_CLASS } from './payer-locks.js';

/**
 * The statements of one intent's transaction, folded: a round trip costs about as much as the
 * SQL it carries (docs/PERFORMANCE.md), so the intent row, the payer's lock and the limit usage
 * go in one statement, and the audit events and history rows in another.
 */

export type Opened = { readonly kind: 'duplicate' } | { readonly kind: 'opened'; readonly createdAt: Date };

export interface Guard {
  /** The payer whose advisory lock (R22) this transaction takes; null: none. */
  readonly payerUserId: number | null;
  /** R21 comparisons, evaluated under that lock in this order. */
  readonly checks: readonly LimitCheck[];
}

/**
 * Inserts the intent (nothing when its idempotency key is stored: `duplicate`), takes the payer's
 * lock and compares the limit usage, in one statement (intent_guard, migrations/006). A refusal
 * throws, which rolls the insert back with the transaction: a refused request stores nothing.
 */
export async function openIntent(tx: Sql, intent: NewIntent, guard: Guard): Promise<Opened> {
  const insert = insertIntentStatement(intent);
  const n = insert.values.length;
  const { rows } = await tx.query<{ created_at: Date | null; refusal: GuardRefusal | null }>(
    `WITH inserted AS (${insert.text})
     SELECT (SELECT created_at FROM inserted) AS created_at,
            intent_guard($${n + 1}, $${n + 2}::bigint, $${n + 3}::uuid, $${n + 4}::jsonb) AS refusal`,
    [...insert.values, PAYER_LOCK_CLASS, guard.payerUserId, intent.id, JSON.stringify(guard.checks.map(checkJson))],
  );
  const row = rows[0];
  if (row === undefined || row.created_at === null) return { kind: 'duplicate' };
  const refusal = row.refusal;
  if (refusal !== null) throw refusalError(refusal, guard);
  return { kind: 'opened', createdAt: row.created_at };
}

type GuardRefusal = { refusal: 'locked' } | { refusal: 'limit'; index: number; current: string };

function refusalError(refusal: GuardRefusal, guard: Guard) {
  if (refusal.refusal === 'locked') {
    return apiError('TRANSACTION_IN_PROGRESS', `a payment is already running for user ${guard.payerUserId}`);
  }
  const check = guard.checks[refusal.index];
  if (check === undefined) throw new Error(`intent_guard named limit check ${refusal.index} of ${guard.checks.length}`);
  return limitExceeded(check, BigInt(refusal.current));
}

function checkJson(check: LimitCheck) {
  return {
    side: check.side,
    userId: check.userId,
    since: check.since?.toISOString() ?? null,
    currency: check.rule.currency,
    operationType: check.rule.operationType,
    measure: check.rule.limitType,
    requested: check.requested.toString(),
    limit: check.rule.limit.toString(),
  };
}

/** Appends the audit events in order and the history rows, in one statement. */
export async function closeIntent(
  tx: Sql,
  intent: Pick<NewIntent, 'id' | 'operationType' | 'currency'>,
  transitions: readonly Transition[],
  history: readonly HistoryRow[],
): Promise<void> {
  await tx.query(
    `WITH events AS (
       INSERT INTO intent_events (intent_id, status_from, status_to, reason, payload)
       SELECT $1, e.status_from, e.status_to, e.reason, e.payload
         FROM unnest($4::text[], $5::text[], $6::text[], $7::jsonb[]) WITH ORDINALITY AS e (status_from, status_to, reason, payload, ord)
        ORDER BY e.ord
     ), history AS (
       INSERT INTO transactions (intent_id, account_name, user_id, operation_type, direction, amount, fee_amount, currency)
       SELECT $1, h.account_name, h.user_id, $2, h.direction, h.amount, h.fee_amount, $3
         FROM unnest($8::text[], $9::bigint[], $10::text[], $11::bigint[], $12::bigint[]) AS h (account_name, user_id, direction, amount, fee_amount)
       ON CONFLICT (intent_id, account_name, direction) DO NOTHING
     )
     SELECT 1`,
    [
      intent.id,
      intent.operationType,
      intent.currency,
      transitions.map((t) => t.from),
      transitions.map((t) => t.to),
      transitions.map((t) => t.reason ?? null),
      transitions.map((t) => (t.payload === undefined || t.payload === null ? null : JSON.stringify(t.payload))),
      history.map((r) => r.accountName),
      history.map((r) => r.userId),
      history.map((r) => r.direction),
      history.map((r) => r.amount.toString()),
      history.map((r) => r.feeAmount.toString()),
    ],
  );
}
