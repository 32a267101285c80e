import type { Sql } from '../../adapters/database.js';
import { ledgerAccountId } from '../../ledger/account-id.js';
import { type AccountRecord, findAccount } from '../accounts.js';
import { ApiError, apiError, assertNever } from '../errors.js';
import type { FeeResult } from '../fees/index.js';
import { enforceLimits } from '../limits.js';
import type { Logger } from '../logger.js';
import { transitAccountName } from '../model.js';
import { applyTransfers } from './apply-transfers.js';
import type { IntentDeps } from './create-intent.js';
import { calculateFees, feeLegs } from './fee-calculation.js';
import { invoiceLockKey, ownInvoice } from './invoice-access.js';
import { appendEvents, findIntent, INTENT_SELECT, type Intent, insertHistory, toIntent, type Transition } from './intent-store.js';
import { type MoneyLeg, type MoneyPlan, reserveTransfer, settleTransfers, transferId } from './money-path.js';
import { lockPayerInTransaction } from './payer-locks.js';

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
 * VALIDATED, R26), the limit check, the ledger batch and the final status commit in one
 * transaction, so a crash never leaves a claimed invoice without its money or its failure.
 * Lack of funds or a limit is an answer, not an error (R27): 200 with status FAILED.
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
    const fees = await calculateFees(deps.db, deps.fees, { operationType: intent.operationType, amount: intent.amount, currency: intent.currency, metadata: intent.metadata });
    if (fees.postFee > intent.amount) throw apiError('BAD_REQUEST', `post fee ${fees.postFee} exceeds the amount ${intent.amount}`);
    const legs = await feeLegs(deps.accounts, fees);

    return deps.locks.withPayer(input.payerUserId, async () => {
      const outcome = await redeem(deps, intent, { payer, fees, legs, input });
      if (outcome.kind === 'replay') return { replayed: true, intent: outcome.intent };
      if (outcome.intent.live) void deps.publisher.publish(intent.id, outcome.transitions.map((t) => t.to), outcome.intent.updatedAt);
      input.log
        .child({ traceId: intent.id })
        .info({ status: outcome.intent.status, failureReason: outcome.intent.failureReason, payer: payer.accountName }, 'invoice confirmed');
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
    throw apiError('VERSION_MISMATCH', `If-Match ${input.expectedVersion}, version ${intent.version}`, { bare: true, extra: { currentVersion: intent.version } });
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
  if (account.currency !== intent.currency) throw apiError('BAD_REQUEST', `payer account ${account.accountName} is not in ${intent.currency}`);
  if (account.accountName === intent.toAccountName) throw apiError('BAD_REQUEST', 'an invoice cannot be paid from its own receiving account');
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
        if (money.failure.result === 'exceeds_credits') return finish(tx, claimed, r, { status: 'FAILED', reason: 'insufficient_funds', transferIds: [] });
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

/** R26: the one conditional update that decides which confirm (or cancel, or the sweep) wins. */
async function claim(tx: Sql, intentId: string, r: Redemption): Promise<Intent | null> {
  const { rows } = await tx.query(
    `UPDATE intents
        SET status = 'VALIDATED', from_account_name = $2, from_user_id = $3, user_id = $3, redeemed_by_user_id = $3,
            redeemed_at = now(), confirm_idempotency_key = $4, version = version + 1, updated_at = now()
      WHERE id = $1 AND status = 'CREATED' AND operation_type = 'INVOICE_PAYMENT' AND expires_at > now()
        AND ($5::integer IS NULL OR version = $5::integer)
      RETURNING ${INTENT_SELECT}`,
    [intentId, r.payer.accountName, r.input.payerUserId, r.input.idempotencyKey, r.input.expectedVersion],
  );
  if (rows.length > 1) throw new Error(`claim of ${intentId} touched ${rows.length} rows`);
  return rows[0] === undefined ? null : toIntent(rows[0]);
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

/** R27: a limit that blocks the payer is the intent's failure reason, not the request's error. */
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
  const validated: Transition = { from: 'CREATED', to: 'VALIDATED', payload: { payerAccount: r.payer.accountName, payerUserId: r.input.payerUserId, actor: r.input.actor } };
  const settled = ending.status === 'SETTLED';
  const reserved = ending.transferIds.length > 0;
  const { rows } = await tx.query(
    `UPDATE intents
        SET status = $2, failure_reason = $3, pre_fee_amount = $4, post_fee_amount = $5, fee_splits = $6,
            transfer_ids = $7::uuid[], reserved_at = CASE WHEN $8::boolean THEN now() ELSE reserved_at END, updated_at = now()
      WHERE id = $1 AND status = 'VALIDATED'
      RETURNING ${INTENT_SELECT}`,
    [
      claimed.id,
      ending.status,
      settled ? null : ending.reason,
      r.fees.preFee.toString(),
      r.fees.postFee.toString(),
      JSON.stringify(r.fees.splits.map((split) => ({ account: split.account, amount: split.amount.toString() }))),
      ending.transferIds,
      reserved,
    ],
  );
  if (rows.length !== 1 || rows[0] === undefined) throw new Error(`intent ${claimed.id} left VALIDATED under its own transaction`);
  const intent = toIntent(rows[0]);
  const transitions: Transition[] = settled
    ? [validated, { from: 'VALIDATED', to: 'AUTHORIZED' }, { from: 'AUTHORIZED', to: 'SETTLED' }]
    : reserved
      ? [validated, { from: 'VALIDATED', to: 'AUTHORIZED' }, { from: 'AUTHORIZED', to: 'FAILED', reason: ending.reason }]
      : [validated, { from: 'VALIDATED', to: 'FAILED', reason: ending.reason }];
  await appendEvents(tx, intent.id, transitions);
  if (settled) {
    await insertHistory(tx, intent, [
      { accountName: r.payer.accountName, userId: r.payer.userId, direction: 'DEBIT', amount: intent.amount, feeAmount: intent.preFeeAmount },
      { accountName: intent.toAccountName, userId: intent.toUserId, direction: 'CREDIT', amount: intent.amount, feeAmount: intent.postFeeAmount },
    ]);
  }
  return { kind: 'done', intent, transitions };
}
