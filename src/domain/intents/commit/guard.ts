import type { ApiError } from '../../errors.js';
import { type LimitCheck, limitExceeded } from '../../rules/limits.js';
import { transactionInProgress } from './payer-locks.js';

/** What intent_guard (sql/intents/02-guard.sql) holds and compares for one payment, in its transaction. */
export interface Guard {
  /** The payer whose advisory lock (docs/rules.md R22) this transaction takes; null: none. */
  readonly payerUserId: number | null;
  /** docs/rules.md R21 comparisons, evaluated under that lock in this order. */
  readonly checks: readonly LimitCheck[];
}

/** intent_guard's answer when it refuses; it answers NULL when the payment may go on. */
export type GuardRefusal = { refusal: 'locked' } | { refusal: 'limit'; index: number; current: string };

export function refusalError(refusal: GuardRefusal, guard: Guard): ApiError {
  if (refusal.refusal === 'locked') return transactionInProgress(guard.payerUserId);
  return limitExceeded(limitCheckOf(refusal, guard), BigInt(refusal.current));
}

/** The check a limit refusal names. */
export function limitCheckOf(refusal: { readonly index: number }, guard: Guard): LimitCheck {
  const check = guard.checks[refusal.index];
  if (check === undefined) throw new Error(`intent_guard named limit check ${refusal.index} of ${guard.checks.length}`);
  return check;
}

/** A check as intent_guard reads it. */
export function checkJson(check: LimitCheck) {
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

/**
 * Group-commit keys (GroupCommit's keysOf) that keep apart payments checked against one
 * recipient's limits: intent_guard does not see the payments of its own batch that are not
 * written yet (or, for a new intent, a payment the ledger then refuses still counts). A payer's
 * own limits need no key: the payer's lock lets one payment per payer into a batch.
 */
export const recipientLimitKeysOf = (guard: Guard) =>
  guard.checks.filter((check) => check.side === 'to').map((check) => `to:${check.userId}`);
