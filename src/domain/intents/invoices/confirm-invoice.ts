import type { Sql } from '../../../adapters/database.js';
import { ledgerAccountId } from '../../../ledger/account-id.js';
import { type AccountRecord, findAccount } from '../../accounts.js';
import { ApiError, apiError, assertNever } from '../../errors.js';
import type { FeeResult } from '../../fees/index.js';
import { enforceLimits } from '../../limits.js';
import type { Logger } from '../../../adapters/logger.js';
import { transitAccountName } from '../../channels.js';
import { applyTransfers } from '../money/apply-transfers.js';
import type { IntentDeps } from '../create/create-intent.js';
import { calculateFees, feeLegs } from '../create/fee-calculation.js';
import { invoiceLockKey, ownInvoice } from './invoice-access.js';
import { findIntent, type Intent, insertHistory, type Transition } from '../store/intent-store.js';
import { moveIntent } from '../store/intent-writer.js';
import { type MoneyLeg, type MoneyPlan, reserveTransfer, settleTransfers, transferId } from '../money/money-path.js';
import { lockPayerInTransaction } from '../create/payer-locks.js';

export interface ConfirmInvoiceInput {
  readonly serviceId: string;
  readonly intentId: string;
  /** X-User-Id: must be the payer, or 0 (the admin bypass). */
  readonly actor: number;
  /** If-Match, when sent: the version the caller saw. */
  readonly expectedVersion: number | null;
  readonly payerLedgerAccountId: string;
  readonly payerUserId: number;
  readonly idempotencyKey: string;
  readonly log: Logger;
}

export interface ConfirmAnswer {
  readonly replayed: boolean;
  readonly intent: Intent;
}

/**
 * POST /intents/{id}/confirm: the payer redeems a merchant invoice. The claim (CREATED →
 * VALIDATED, docs/rules.md R26), the limit check, the ledger batch and the final status commit in one
 * transaction, so a crash never leaves a claimed invoice without its money or its failure.
 * Lack of funds or a limit is an answer, not an error (docs/rules.md R27): 200 with status FAILED.
 */
export async function confirmInvoice(deps: IntentDeps, input: ConfirmInvoiceInput): Promise<ConfirmAnswer> {
  // Confirms of one invoice queue behind each other in this process, so a loser learns the
  // winner's outcome (ALREADY_PROCESSED, or its own replay) instead of tripping the payer lock.
  return deps.locks.oneAtATime(invoiceLockKey(input.intentId), async () => {
    const intent = await ownInvoice(deps.db, input.serviceId, input.intentId, 'confirm');
    if (input.actor !== 0 && input.actor !== input.payerUserId) {
      throw apiError('PAYER_ACCOUNT_USER_MISMATCH', `X-User-Id ${input.actor} is not the payer ${input.payerUserId}`);
    }
    if (verdict(intent, input, new Date()) === 'replay') return { replayed: true, intent };
    const payer = await payerAccount(deps.db, intent, input);
    // The invoice's amount, currency and metadata never change, so its fees can be priced
    // before the transaction: the sandboxed rules then never run while the invoice row is locked.
    const fees = await calculateFees(deps.db, deps.fees, {
      operationType: intent.operationType,
      amount: intent.amount,
      currency: intent.currency,
      metadata: intent.metadata,
    });
    if (fees.postFee > intent.amount) throw apiError('BAD_REQUEST', `post fee ${fees.postFee} exceeds the amount ${intent.amount}`);
    const legs = await feeLegs(deps.accounts, fees);

    return deps.locks.withPayer(input.payerUserId, async () => {
      const outcome = await redeem(deps, intent, { payer, fees, legs, input });
      if (outcome.kind === 'replay') return { replayed: true, intent: outcome.intent };
      if (outcome.intent.live)
        void deps.publisher.publish(
          intent.id,
          outcome.transitions.map((t) => t.to),
          outcome.intent.updatedAt,
        );
      input.log
        .child({ traceId: intent.id })
        .info(
          { status: outcome.intent.status, failureReason: outcome.intent.failureReason, payer: payer.accountName },
          'invoice confirmed',
        );
      return { replayed: false, intent: outcome.intent };
    });
  });
}

/**
 * Whether a confirm may go on, is the replay of the confirm that processed the invoice, or is
 * refused (thrown). An already swept invoice answers EXPIRED, as it did the moment before the
 * sweep, so a client sees one answer for one invoice whenever it asks.
 */
function verdict(intent: Intent, input: ConfirmInvoiceInput, now: Date): 'proceed' | 'replay' {
  if (intent.status !== 'CREATED') {
    if (intent.confirmIdempotencyKey === input.idempotencyKey && intent.redeemedByUserId === input.payerUserId) return 'replay';
    if (intent.status === 'EXPIRED') throw expired();
    throw apiError('ALREADY_PROCESSED', `invoice is ${intent.status}`, { bare: true, extra: { status: intent.status } });
  }
  if (intent.expiresAt === null || intent.expiresAt <= now) throw expired();
  if (input.expectedVersion !== null && input.expectedVersion !== intent.version) {
    throw apiError('VERSION_MISMATCH', `If-Match ${input.expectedVersion}, version ${intent.version}`, {
      bare: true,
      extra: { currentVersion: intent.version },
    });
  }
  return 'proceed';
}

const expired = () => apiError('EXPIRED', 'invoice expired', { bare: true });

async function payerAccount(sql: Sql, intent: Intent, input: ConfirmInvoiceInput): Promise<AccountRecord> {
  const account = await findAccount(sql, input.payerLedgerAccountId);
  if (account === null) throw apiError('PAYER_ACCOUNT_NOT_FOUND', `no account with ledger id ${input.payerLedgerAccountId}`);
  if (account.userId !== input.payerUserId) {
    throw apiError('PAYER_ACCOUNT_USER_MISMATCH', `account ${account.accountName} does not belong to user ${input.payerUserId}`);
  }
  if (account.currency !== intent.currency)
    throw apiError('BAD_REQUEST', `payer account ${account.accountName} is not in ${intent.currency}`);
  if (account.accountName === intent.toAccountName)
    throw apiError('BAD_REQUEST', 'an invoice cannot be paid from its own receiving account');
  return account;
}

interface Redemption {
  readonly payer: AccountRecord;
  readonly fees: FeeResult;
  readonly legs: readonly MoneyLeg[];
  readonly input: ConfirmInvoiceInput;
}

type RedeemOutcome = { kind: 'replay'; intent: Intent } | { kind: 'done'; intent: Intent; transitions: Transition[] };

async function redeem(deps: IntentDeps, seen: Intent, r: Redemption): Promise<RedeemOutcome> {
  return deps.db.transaction(async (tx) => {
    const claimed = await claim(tx, seen.id, r);
    if (claimed === null) return { kind: 'replay', intent: await lostClaim(tx, seen.id, r.input) };
    await lockPayerInTransaction(tx, r.payer.userId);
    const limitRefusal = await limitRefusalOf(tx, claimed);
    if (limitRefusal !== null) return finish(tx, claimed, r, { status: 'FAILED', reason: limitRefusal, transferIds: [] });

    const plan: MoneyPlan = {
      intentId: claimed.id,
      operationType: claimed.operationType,
      fromLedgerId: r.payer.ledgerAccountId,
      toLedgerId: ledgerAccountId(claimed.toAccountName),
      transitLedgerId: ledgerAccountId(transitAccountName(claimed.channel, claimed.currency)),
      amount: claimed.amount,
      preFee: r.fees.preFee,
      postFee: r.fees.postFee,
      feeLegs: r.legs,
    };
    const transfers = [reserveTransfer(plan, deps.settings.ledgerPendingTimeoutS), ...settleTransfers(plan)];
    const money = await applyTransfers(deps.ledger, tx, claimed, transfers);
    switch (money.kind) {
      case 'applied':
        return finish(tx, claimed, r, { status: 'SETTLED', transferIds: transfers.map((t) => t.id) });
      case 'reservation_refused':
        if (money.failure.result === 'exceeds_credits')
          return finish(tx, claimed, r, { status: 'FAILED', reason: 'insufficient_funds', transferIds: [] });
        // Not the payer's doing: roll the claim back too, so the invoice stays payable.
        throw apiError('LEDGER_TRANSFER_ERROR', `ledger refused the reservation: ${money.failure.result}`);
      case 'settlement_refused':
        return finish(tx, claimed, r, {
          status: 'FAILED',
          reason: `ledger_transfer_error: ${money.results.join(', ')}`,
          transferIds: [transferId(claimed.id, 'reserve'), transferId(claimed.id, 'void')],
        });
      default:
        return assertNever(money);
    }
  });
}

/** docs/rules.md R26: the one conditional move that decides which confirm (or cancel, or the sweep) wins. */
function claim(tx: Sql, intentId: string, r: Redemption): Promise<Intent | null> {
  return moveIntent(tx, intentId, {
    from: 'CREATED',
    to: 'VALIDATED',
    trail: [claimEvent(r)],
    changes: {
      payer: { accountName: r.payer.accountName, userId: r.input.payerUserId, confirmIdempotencyKey: r.input.idempotencyKey },
      bumpVersion: true,
    },
    conditions: { unexpiredInvoice: true, ...(r.input.expectedVersion === null ? {} : { version: r.input.expectedVersion }) },
  });
}

/**
 * Someone else changed the invoice between our read and our claim: answer as if we had read it
 * afterwards. If it still looks claimable, the database clock passed expiresAt, the one guard
 * our own clock cannot see.
 */
async function lostClaim(tx: Sql, intentId: string, input: ConfirmInvoiceInput): Promise<Intent> {
  const current = await findIntent(tx, intentId);
  if (current === null) throw new Error(`intent ${intentId} vanished during its confirm`);
  if (verdict(current, input, new Date()) === 'replay') return current;
  throw expired();
}

/** docs/rules.md R27: a limit that blocks the payer is the intent's failure reason, not the request's error. */
async function limitRefusalOf(tx: Sql, intent: Intent): Promise<string | null> {
  try {
    await enforceLimits(tx, {
      operationType: intent.operationType,
      amount: intent.amount,
      currency: intent.currency,
      fromUserId: intent.fromUserId,
      toUserId: intent.toUserId,
      intentId: intent.id,
    });
    return null;
  } catch (error) {
    if (error instanceof ApiError && error.code === 'LIMIT_EXCEEDED') return `limit_exceeded: ${error.detail?.ruleName ?? error.message}`;
    throw error;
  }
}

/** transferIds: what the ledger holds for this intent; a FAILED ending with some was reserved, then voided. */
type Ending =
  | { readonly status: 'SETTLED'; readonly transferIds: readonly string[] }
  | { readonly status: 'FAILED'; readonly reason: string; readonly transferIds: readonly string[] };

/** Records where the claimed invoice ended, with its audit trail and, when settled, its history rows. */
async function finish(tx: Sql, claimed: Intent, r: Redemption, ending: Ending): Promise<RedeemOutcome> {
  const settled = ending.status === 'SETTLED';
  const reserved = ending.transferIds.length > 0;
  const transitions: Transition[] = settled
    ? [
        { from: 'VALIDATED', to: 'AUTHORIZED' },
        { from: 'AUTHORIZED', to: 'SETTLED' },
      ]
    : reserved
      ? [
          { from: 'VALIDATED', to: 'AUTHORIZED' },
          { from: 'AUTHORIZED', to: 'FAILED', reason: ending.reason },
        ]
      : [{ from: 'VALIDATED', to: 'FAILED', reason: ending.reason }];
  const intent = await moveIntent(tx, claimed.id, {
    from: 'VALIDATED',
    to: ending.status,
    trail: transitions,
    changes: {
      ...(settled ? {} : { failureReason: ending.reason }),
      fees: {
        preFee: r.fees.preFee,
        postFee: r.fees.postFee,
        splits: r.fees.splits.map((split) => ({ account: split.account, amount: split.amount.toString() })),
      },
      transferIds: ending.transferIds,
      reserved,
    },
  });
  if (intent === null) throw new Error(`intent ${claimed.id} left VALIDATED under its own transaction`);
  if (settled) {
    await insertHistory(tx, intent, [
      {
        accountName: r.payer.accountName,
        userId: r.payer.userId,
        direction: 'DEBIT',
        amount: intent.amount,
        feeAmount: intent.preFeeAmount,
      },
      {
        accountName: intent.toAccountName,
        userId: intent.toUserId,
        direction: 'CREDIT',
        amount: intent.amount,
        feeAmount: intent.postFeeAmount,
      },
    ]);
  }
  return { kind: 'done', intent, transitions: [claimEvent(r), ...transitions] };
}

const claimEvent = (r: Redemption): Transition => ({
  from: 'CREATED',
  to: 'VALIDATED',
  payload: { payerAccount: r.payer.accountName, payerUserId: r.input.payerUserId, actor: r.input.actor },
});
