import type { Database } from '../../adapters/database.js';
import type { Permissions } from '../auth/service-keys.js';
import { parseAccountName } from '../accounts/account-names.js';
import { ApiError, apiError, assertNever } from '../errors.js';
import { failureOf, storedDespite } from '../intents/commit/commit-unanswered.js';
import { newIntentId } from '../intents/create/intent-id.js';
import type { PayerLocks } from '../intents/commit/payer-locks.js';
import type { Intent, IntentLookup } from '../intents/store/intent-store.js';
import { INSUFFICIENT_FUNDS_REASON, type RefundCommitter } from './refund-commit.js';
import { refundFingerprint, type RefundRequest } from './refund-request.js';
import { findRefundByKey, type Refund } from './refund-store.js';

export interface RefundDeps {
  readonly db: Database;
  readonly refunds: RefundCommitter;
  /** The original, read after the call in a read shared with the calls that arrive together. */
  readonly intents: IntentLookup;
  /** Requests with one idempotency key run one at a time in this process, as intents' do. */
  readonly locks: PayerLocks;
}

export interface CreateRefundInput {
  readonly serviceId: string;
  readonly permissions: Permissions;
  /** X-User-Id: who asked for the refund. */
  readonly actor: number;
  readonly intentId: string;
  readonly request: RefundRequest;
}

export interface RefundAnswer {
  readonly replayed: boolean;
  readonly refund: Refund;
}

/**
 * POST /intents/{id}/refunds (docs/rules.md R57). The checks that need only the original run here
 * and store nothing when they refuse; the remainder check runs in the database, in the transaction
 * of the refund's money (refund-commit.ts). A refusal still answers a stored refund of the same
 * key as a replay, as POST /intents does.
 */
export async function createRefund(deps: RefundDeps, input: CreateRefundInput): Promise<RefundAnswer> {
  const { serviceId, actor, request } = input;
  if (input.permissions.refunds !== true) throw apiError('FORBIDDEN', `service ${serviceId} may not refund`);
  const original = await deps.intents(input.intentId);
  // Tenant isolation: another service's intent is a missing one (404), as on GET /intents/{id}.
  if (original === null || original.serviceId !== serviceId) throw apiError('NOT_FOUND', 'intent not found');
  const fingerprint = refundFingerprint(original.id, actor, request);
  const refundId = newIntentId();
  return deps.locks.oneAtATime(`refund:${serviceId}/${request.idempotencyKey}`, async () => {
    try {
      return await attempt(deps, input, original, fingerprint, refundId);
    } catch (thrown) {
      const own = await storedDespite(thrown, () => findRefundByKey(deps.db, serviceId, request.idempotencyKey));
      if (own !== null && own.id === refundId) return answerOf(own, false);
      const error = failureOf(thrown);
      if (!(error instanceof ApiError) || error.code === 'INSUFFICIENT_FUNDS' || error.code === 'LEDGER_TRANSFER_ERROR') throw error;
      const existing = await findRefundByKey(deps.db, serviceId, request.idempotencyKey);
      if (existing === null || existing.id === refundId) throw error;
      return replayOf(existing, fingerprint);
    }
  });
}

async function attempt(
  deps: RefundDeps,
  input: CreateRefundInput,
  original: Intent,
  fingerprint: string,
  refundId: string,
): Promise<RefundAnswer> {
  const { request } = input;
  const refundable = refundableOf(original);
  const outcome = await deps.refunds.commit({
    refundId,
    serviceId: input.serviceId,
    idempotencyKey: request.idempotencyKey,
    fingerprint,
    original,
    amount: request.amount,
    refundable,
    refundFees: request.refundFees,
    reason: request.reason,
    actor: input.actor,
    metadata: request.metadata,
  });
  switch (outcome.kind) {
    case 'duplicate': {
      const stored = await findRefundByKey(deps.db, input.serviceId, request.idempotencyKey);
      if (stored === null) throw new Error('refund key conflict without a stored refund');
      return replayOf(stored, fingerprint);
    }
    case 'exceeds':
      throw apiError('REFUND_EXCEEDS_REMAINING', `the intent has ${outcome.remaining} left to refund`, {
        extra: { remaining: outcome.remaining.toString() },
      });
    case 'stored':
      return answerOf(outcome.refund, false);
    default:
      return assertNever(outcome);
  }
}

/**
 * What the original credited its to-account, and so what all its refunds may return (docs/rules.md
 * R57); throws NOT_REFUNDABLE for an original that cannot be refunded at all.
 */
export function refundableOf(original: Intent): bigint {
  if (original.status !== 'SETTLED') throw notRefundable(`the intent is ${original.status}; only a SETTLED intent is refunded`);
  if (original.fromAccountName === null) throw notRefundable('the intent has no from-account to refund to');
  for (const name of [original.fromAccountName, original.toAccountName]) {
    if (parseAccountName(name)?.accountType === 'NOSTRO') throw notRefundable(`${name} is held at a provider, not in this ledger`);
  }
  const refundable = original.amount - original.postFeeAmount;
  if (refundable <= 0n) throw notRefundable('the intent credited its to-account nothing');
  return refundable;
}

const notRefundable = (message: string) => apiError('NOT_REFUNDABLE', message);

/** docs/rules.md R57: the same key for another refund is a conflict, never a second refund. */
function replayOf(existing: Refund, fingerprint: string): RefundAnswer {
  if (existing.requestFingerprint !== fingerprint) throw apiError('CONFLICT', 'idempotency key reused with different parameters');
  return answerOf(existing, true);
}

/** A FAILED refund answers with its refusal, first time and on every replay; the body names it. */
function answerOf(refund: Refund, replayed: boolean): RefundAnswer {
  if (refund.status === 'FAILED') {
    const extra = { refundId: refund.id, failureReason: refund.failureReason };
    if (refund.failureReason === INSUFFICIENT_FUNDS_REASON || refund.failureReason?.includes('exceeds_credits'))
      throw apiError('INSUFFICIENT_FUNDS', 'an account lacks the funds for this refund; the refund is stored FAILED', { extra });
    throw apiError('LEDGER_TRANSFER_ERROR', `ledger refused the refund: ${refund.failureReason}`, { extra });
  }
  return { replayed, refund };
}
