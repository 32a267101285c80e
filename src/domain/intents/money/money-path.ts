import assert from 'node:assert/strict';
import { parse as parseUuid } from 'uuid';
import { LEDGER_ACCOUNT_NAMESPACE } from '../../../ledger/account-id.js';
import { uuidV5 } from '../../../ledger/uuid-v5.js';
import { LEDGER_THB, TransferFlags, type TransferInput } from '../../../ledger/ledger.js';
import { LEDGER_CODE_BY_OPERATION, type OperationType } from '../../model.js';

/**
 * docs/rules.md R18, the money flow of one intent, as ledger transfers. Transfer ids derive from the intent id,
 * so a retried step (outbox, crash recovery) names the same transfer and the ledger answers
 * `exists` instead of moving money twice.
 */

const TRANSFER_NAMESPACE = parseUuid(uuidV5(parseUuid(LEDGER_ACCOUNT_NAMESPACE), 'payorch.transfers'));
/** The first 48 bits of a UUID as text: eight hex digits, the dash, four more. */
const TIME_PREFIX_CHARS = 13;
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * UUID v5 of `intentId/step`, whose first 48 bits are replaced by the intent id's: intent ids are
 * UUID v7, so those bits are the intent's creation time in milliseconds. Transfer ids then arrive
 * in time order like the intents, and the ledger's primary key index grows at its end instead of
 * writing a random leaf for every transfer, which is what a random id costs once the index no
 * longer fits in shared buffers (docs/perf-log/2026-11.md, "Stored intents"). The rest stays a hash: still the same id for
 * the same step of the same intent, and still a valid version 5 UUID.
 */
export function transferId(intentId: string, step: string): string {
  assert.match(intentId, UUID_TEXT, 'a transfer id derives from an intent id');
  const hashed = uuidV5(TRANSFER_NAMESPACE, `${intentId}/${step}`);
  return intentId.slice(0, TIME_PREFIX_CHARS).toLowerCase() + hashed.slice(TIME_PREFIX_CHARS);
}

export interface MoneyLeg {
  readonly ledgerAccountId: string;
  readonly amount: bigint;
}

export interface MoneyPlan {
  readonly intentId: string;
  readonly operationType: OperationType;
  readonly fromLedgerId: string;
  readonly toLedgerId: string;
  readonly transitLedgerId: string;
  readonly amount: bigint;
  readonly preFee: bigint;
  readonly postFee: bigint;
  /** Every fee account with what it receives (PRE and POST together). */
  readonly feeLegs: readonly MoneyLeg[];
}

/** Reserve: a pending transfer from the payer to the channel's transit of amount + preFee. */
export function reserveTransfer(plan: MoneyPlan, timeoutS: number): TransferInput {
  return {
    id: transferId(plan.intentId, 'reserve'),
    debitAccountId: plan.fromLedgerId,
    creditAccountId: plan.transitLedgerId,
    amount: plan.amount + plan.preFee,
    timeoutS,
    userData128: plan.intentId,
    ledger: LEDGER_THB,
    code: LEDGER_CODE_BY_OPERATION[plan.operationType],
    flags: TransferFlags.pending,
  };
}

/**
 * Settle, all-or-nothing: post the reservation, pay the receiver amount − postFee from transit,
 * pay each fee account from transit. Transit nets to zero: (amount + pre) − (amount − post) − (pre + post).
 */
export function settleTransfers(plan: MoneyPlan): TransferInput[] {
  const code = LEDGER_CODE_BY_OPERATION[plan.operationType];
  const legs: TransferInput[] = [
    {
      id: transferId(plan.intentId, 'post'),
      pendingId: transferId(plan.intentId, 'reserve'),
      userData128: plan.intentId,
      ledger: LEDGER_THB,
      code,
      flags: TransferFlags.postPendingTransfer,
    },
  ];
  const toReceiver = plan.amount - plan.postFee;
  if (toReceiver > 0n) {
    legs.push({
      id: transferId(plan.intentId, 'credit'),
      debitAccountId: plan.transitLedgerId,
      creditAccountId: plan.toLedgerId,
      amount: toReceiver,
      userData128: plan.intentId,
      ledger: LEDGER_THB,
      code,
      flags: TransferFlags.none,
    });
  }
  for (const leg of plan.feeLegs) {
    if (leg.amount === 0n) continue;
    legs.push({
      id: transferId(plan.intentId, `fee/${leg.ledgerAccountId}`),
      debitAccountId: plan.transitLedgerId,
      creditAccountId: leg.ledgerAccountId,
      amount: leg.amount,
      userData128: plan.intentId,
      ledger: LEDGER_THB,
      code,
      flags: TransferFlags.none,
    });
  }
  // Every member but the last carries `linked`: the chain applies as one.
  return legs.map((leg, index) => (index < legs.length - 1 ? { ...leg, flags: leg.flags | TransferFlags.linked } : leg));
}

/** Release: void the reservation (fail, cancel, expire). */
export function voidTransfer(intentId: string, operationType: OperationType): TransferInput {
  return {
    id: transferId(intentId, 'void'),
    pendingId: transferId(intentId, 'reserve'),
    userData128: intentId,
    ledger: LEDGER_THB,
    code: LEDGER_CODE_BY_OPERATION[operationType],
    flags: TransferFlags.voidPendingTransfer,
  };
}

export const postTransferIds = (plan: MoneyPlan) => settleTransfers(plan).map((t) => t.id);
