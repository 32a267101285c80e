import assert from 'node:assert/strict';
import type { Sql } from '../../../adapters/database.js';
import { ledgerAccountId } from '../../../ledger/account-id.js';
import type { CreateTransferError, Ledger } from '../../../ledger/ledger.js';
import type { IntentStatus } from '../../model.js';
import { transitAccountName } from '../../channels/channels.js';
import { type HistoryRow, INTENT_SELECT, type Intent, insertHistory, toIntent } from '../store/intent-store.js';
import { moveIntent, moveIntents } from '../store/intent-writer.js';
import { type MoneyPlan, settleTransfers, voidTransfer } from './money-path.js';

/**
 * The second half of docs/rules.md R18 for an intent whose reservation was made earlier (PSPX payouts, and
 * whatever a worker has to finish): settle or release it, and move the intent's status with it,
 * inside the caller's transaction. Retries are safe: the transfer ids derive from the intent id,
 * so a repeated step gets `exists`, and the status guard lets only one attempt move the intent.
 */

/** docs/rules.md R23: the reason an intent gets when its reservation timed out before it could be posted. */
export const PENDING_EXPIRED_REASON = 'pending_expired';

/** A void that finds the reservation already gone has nothing left to release. */
const ALREADY_RELEASED: readonly CreateTransferError[] = [
  'pending_transfer_not_found',
  'pending_transfer_expired',
  'pending_transfer_already_voided',
];

export type DeferredOutcome =
  | {
      readonly kind: 'moved';
      readonly from: IntentStatus;
      readonly to: 'SETTLED' | 'FAILED';
      readonly reason: string | null;
      readonly updatedAt: Date;
    }
  /** Already in the target status (a repeated job, or a resolve that failed it first): no change. */
  | { readonly kind: 'unchanged'; readonly status: IntentStatus };

/** The ledger refused in a way no retry of this step can cure by itself: an operator must look. */
export class LedgerRefusal extends Error {
  override readonly name = 'LedgerRefusal';
  constructor(
    readonly intentId: string,
    readonly results: readonly CreateTransferError[],
  ) {
    super(`ledger refused the transfers of intent ${intentId}: ${results.join(', ')}`);
  }
}

/** Reads the intent and locks its row for the rest of the caller's transaction. */
export async function lockIntent(tx: Sql, intentId: string): Promise<Intent | null> {
  const { rows } = await tx.query(`SELECT ${INTENT_SELECT} FROM intents WHERE id = $1 FOR UPDATE`, [intentId]);
  return rows[0] === undefined ? null : toIntent(rows[0]);
}

/** lockIntent for many: their rows locked in id order, so that two callers never wait for each other in a circle. */
export async function lockIntents(tx: Sql, intentIds: readonly string[]): Promise<Map<string, Intent>> {
  const { rows } = await tx.query(`SELECT ${INTENT_SELECT} FROM intents WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`, [intentIds]);
  return new Map(rows.map((row) => toIntent(row)).map((intent) => [intent.id, intent]));
}

/** The money plan of a stored intent: the same legs, and so the same transfer ids, every time. */
export function storedPlan(intent: Intent): MoneyPlan {
  assert.ok(intent.fromAccountName !== null, `intent ${intent.id} has no payer account to settle from`);
  return {
    intentId: intent.id,
    operationType: intent.operationType,
    fromLedgerId: ledgerAccountId(intent.fromAccountName),
    toLedgerId: ledgerAccountId(intent.toAccountName),
    transitLedgerId: ledgerAccountId(transitAccountName(intent.channel, intent.currency)),
    amount: intent.amount,
    preFee: intent.preFeeAmount,
    postFee: intent.postFeeAmount,
    feeLegs: intent.feeSplits.map((split) => ({ ledgerAccountId: ledgerAccountId(split.account), amount: BigInt(split.amount) })),
  };
}

/**
 * Posts the reservation and pays receiver and fee accounts (one linked chain), then SETTLED with
 * history rows. A reservation that expired first ends the intent FAILED `pending_expired` (docs/rules.md R23).
 */
export async function settleReservation(
  ledger: Ledger,
  tx: Sql,
  intent: Intent,
  options: { readonly fromStatuses: readonly IntentStatus[]; readonly payload?: Record<string, unknown> | null },
): Promise<DeferredOutcome> {
  const { outcomes, refused } = await settleReservations(ledger, tx, [{ intent, payload: options.payload ?? null }], options.fromStatuses);
  const outcome = outcomes.get(intent.id);
  if (outcome !== undefined) return outcome;
  const failures = refused.get(intent.id) ?? [];
  // A linked chain fails as a whole; its first member (the post) names the cause.
  if (failures[0] === 'pending_transfer_expired') {
    const updatedAt = await moveStatus(tx, intent, {
      to: 'FAILED',
      reason: PENDING_EXPIRED_REASON,
      transferIds: [],
      payload: options.payload ?? null,
    });
    return { kind: 'moved', from: intent.status, to: 'FAILED', reason: PENDING_EXPIRED_REASON, updatedAt };
  }
  throw new LedgerRefusal(intent.id, failures);
}

export interface SettleRequest {
  readonly intent: Intent;
  /** The payload of the intent's SETTLED event. */
  readonly payload: Record<string, unknown> | null;
}

/**
 * settleReservation for many intents at once, in the caller's transaction: one ledger call with
 * every intent's chain, and one statement each for the status moves with their audit events and
 * for the history rows. A chain applies or fails alone, so an intent the ledger refused leaves
 * the others settled: it is answered in `refused` (its chain's results, the post's first) with
 * nothing of it written. The caller holds the intents' rows locked.
 */
export async function settleReservations(
  ledger: Ledger,
  tx: Sql,
  requests: readonly SettleRequest[],
  fromStatuses: readonly IntentStatus[],
): Promise<{ outcomes: Map<string, DeferredOutcome>; refused: Map<string, CreateTransferError[]> }> {
  const outcomes = new Map<string, DeferredOutcome>();
  const refused = new Map<string, CreateTransferError[]>();
  const open: SettleRequest[] = [];
  for (const request of requests) {
    const { intent } = request;
    if (intent.status === 'SETTLED') outcomes.set(intent.id, { kind: 'unchanged', status: intent.status });
    else if (!fromStatuses.includes(intent.status)) throw new Error(`intent ${intent.id} cannot settle from ${intent.status}`);
    else open.push(request);
  }
  if (open.length === 0) return { outcomes, refused };
  const chains = open.map(({ intent }) => settleTransfers(storedPlan(intent)));
  const chainOfTransfer = chains.flatMap((chain, index) => chain.map(() => index));
  const results = await ledger.createTransfers(tx, chains.flat());
  for (const failure of results) {
    if (failure.result === 'exists') continue;
    const intentId = open[chainOfTransfer[failure.index] ?? -1]?.intent.id;
    assert.ok(intentId !== undefined, `ledger answered transfer ${failure.index} of ${chainOfTransfer.length}`);
    refused.set(intentId, [...(refused.get(intentId) ?? []), failure.result]);
  }
  const posted = open.map((request, index) => ({ ...request, transferIds: chains[index]?.map((t) => t.id) ?? [] }));
  const settled = posted.filter(({ intent }) => !refused.has(intent.id));
  // One move per kind of event (its from-status and payload): usually one for the whole batch.
  const groups = new Map<string, typeof settled>();
  for (const request of settled) {
    const key = JSON.stringify([request.intent.status, request.payload]);
    groups.set(key, [...(groups.get(key) ?? []), request]);
  }
  for (const group of groups.values()) {
    const first = group[0];
    assert.ok(first !== undefined);
    const moved = await moveIntents(
      tx,
      group.map(({ intent }) => intent.id),
      {
        from: first.intent.status,
        to: 'SETTLED',
        reason: null,
        payload: first.payload,
        changes: { addTransferIdsByIntent: new Map(group.map(({ intent, transferIds }) => [intent.id, transferIds])) },
      },
    );
    // The rows are locked by the caller, so the guard can only fail on a bug: never move money twice.
    if (moved.length !== group.length)
      throw new Error(`${group.length - moved.length} intents left ${first.intent.status} under locked rows`);
    for (const intent of moved)
      outcomes.set(intent.id, { kind: 'moved', from: first.intent.status, to: 'SETTLED', reason: null, updatedAt: intent.updatedAt });
  }
  await insertHistory(
    tx,
    settled.map(({ intent }) => ({ intent, rows: historyOf(intent) })),
  );
  return { outcomes, refused };
}

/**
 * Voids the reservation (nothing reserved, or already released, is fine) and fails the intent
 * with `reason`, unless it is FAILED already (a resolve fails it before its void job runs).
 */
export async function releaseReservation(
  ledger: Ledger,
  tx: Sql,
  intent: Intent,
  options: { readonly fromStatuses: readonly IntentStatus[]; readonly reason: string },
): Promise<DeferredOutcome> {
  if (intent.status !== 'FAILED' && !options.fromStatuses.includes(intent.status)) {
    throw new Error(`intent ${intent.id} cannot fail from ${intent.status}`);
  }
  const transfer = voidTransfer(intent.id, intent.operationType);
  const [failure] = await ledger.createTransfers(tx, [transfer]);
  if (failure !== undefined && failure.result !== 'exists' && !ALREADY_RELEASED.includes(failure.result)) {
    throw new LedgerRefusal(intent.id, [failure.result]);
  }
  if (intent.status === 'FAILED') return { kind: 'unchanged', status: intent.status };
  const voided = failure === undefined || failure.result === 'exists';
  const updatedAt = await moveStatus(tx, intent, {
    to: 'FAILED',
    reason: options.reason,
    transferIds: voided ? [transfer.id] : [],
    payload: null,
  });
  return { kind: 'moved', from: intent.status, to: 'FAILED', reason: options.reason, updatedAt };
}

async function moveStatus(
  tx: Sql,
  intent: Intent,
  move: { to: IntentStatus; reason: string | null; transferIds: readonly string[]; payload: Record<string, unknown> | null },
): Promise<Date> {
  const moved = await moveIntent(tx, intent.id, {
    from: intent.status,
    to: move.to,
    reason: move.reason,
    payload: move.payload,
    changes: { ...(move.reason === null ? {} : { failureReason: move.reason }), addTransferIds: move.transferIds },
  });
  // The row is locked by the caller, so the guard can only fail on a bug: never move money twice.
  if (moved === null) throw new Error(`intent ${intent.id} left ${intent.status} under a locked row`);
  return moved.updatedAt;
}

/** The two sides in the transaction history, as create-intent writes them for synchronous payments. */
function historyOf(intent: Intent): HistoryRow[] {
  const credit: HistoryRow = {
    accountName: intent.toAccountName,
    userId: intent.toUserId,
    direction: 'CREDIT',
    amount: intent.amount,
    feeAmount: intent.postFeeAmount,
  };
  if (intent.fromAccountName === null) return [credit];
  return [
    {
      accountName: intent.fromAccountName,
      userId: intent.fromUserId,
      direction: 'DEBIT',
      amount: intent.amount,
      feeAmount: intent.preFeeAmount,
    },
    credit,
  ];
}
