import { randomUUID } from 'node:crypto';
import type { Sql } from '../../adapters/database.js';
import { ledgerAccountId } from '../../ledger/account-id.js';
import { type AccountRecord, lookupAccount } from '../accounts/accounts.js';
import { type ConfigSnapshot, feeRulesOf } from '../auth/config-snapshot.js';
import { apiError } from '../errors.js';
import type { FeeResult } from '../rules/fees/index.js';
import { applicableLimitRules, limitChecks, loadLimitRules } from '../rules/limits.js';
import type { Logger } from '../../adapters/logger.js';
import { transitAccountName } from '../channels/channels.js';
import type { IntentDeps } from '../intents/create/create-intent.js';
import { calculateFees, feeLegs } from '../intents/create/fee-calculation.js';
import { failureOf, storedDespite } from '../intents/commit/commit-unanswered.js';
import { invoiceLockKey, ownInvoice } from './invoice-access.js';
import { findIntent, type Intent, type Transition } from '../intents/store/intent-store.js';
import { type MoneyLeg, type MoneyPlan, reserveTransfer, settleTransfers } from '../intents/money/money-path.js';

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
  /** Fee rules and limit rules as checked for this request (auth.ts); absent: read from the database. */
  readonly config?: ConfigSnapshot | null;
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
 *
 * A COMMIT can go through and its answer be lost (a connection cut right then): the request then
 * meets a CommitUnanswered, or its batch's one-by-one retry finds the invoice claimed, though the
 * claim is its own. Told by the attempt id, drawn before anything was written and stored with the
 * claim, such a confirm is answered as the confirm it is, not as a 5xx or a replay. An invoice
 * found claimed by another request, or closed, answers as a retry would (409, a replay, EXPIRED):
 * a claim commits only on an unclaimed invoice, so this request's did not.
 */
export async function confirmInvoice(deps: IntentDeps, input: ConfirmInvoiceInput): Promise<ConfirmAnswer> {
  const attemptId = randomUUID();
  // Confirms of one invoice queue behind each other in this process, so a loser learns the
  // winner's outcome (ALREADY_PROCESSED, or its own replay) instead of tripping the payer lock.
  return deps.locks.oneAtATime(invoiceLockKey(input.intentId), async () => {
    try {
      return await attemptConfirm(deps, input, attemptId);
    } catch (thrown) {
      const current = await storedDespite(thrown, () => findIntent(deps.db, input.intentId));
      // Still unclaimed: this request's claim did not commit, or has not yet. Only the failure is certain.
      if (current === null || current.status === 'CREATED') throw failureOf(thrown);
      const seen = verdict(current, input, attemptId, new Date());
      if (seen === 'proceed') throw failureOf(thrown);
      return answerOf(deps, input, { kind: seen, intent: current });
    }
  });
}

async function attemptConfirm(deps: IntentDeps, input: ConfirmInvoiceInput, attemptId: string): Promise<ConfirmAnswer> {
  // Both reads in one round trip, each shared with the requests that arrive meanwhile; the checks keep their order.
  const [found, payerFound] = await Promise.all([deps.intents(input.intentId), lookupAccount(deps.accounts, input.payerLedgerAccountId)]);
  const intent = ownInvoice(found, input.serviceId, input.intentId, 'confirm');
  if (input.actor !== 0 && input.actor !== input.payerUserId) {
    throw apiError('PAYER_ACCOUNT_USER_MISMATCH', `X-User-Id ${input.actor} is not the payer ${input.payerUserId}`);
  }
  const seen = verdict(intent, input, attemptId, new Date());
  if (seen !== 'proceed') return answerOf(deps, input, { kind: seen, intent });
  const payer = payerAccount(payerFound, intent, input);
  const config = input.config ?? null;
  // The invoice's amount, currency and metadata never change, so its fees can be priced
  // before the transaction: the sandboxed rules then never run while the invoice row is locked.
  const fees = await calculateFees(
    deps.db,
    deps.fees,
    input.serviceId,
    {
      operationType: intent.operationType,
      amount: intent.amount,
      currency: intent.currency,
      metadata: intent.metadata,
    },
    config === null ? undefined : feeRulesOf(config, intent.operationType),
  );
  if (fees.postFee > intent.amount) throw apiError('BAD_REQUEST', `post fee ${fees.postFee} exceeds the amount ${intent.amount}`);
  const legs = await feeLegs(deps.accounts, fees);

  return deps.locks.withPayer(input.payerUserId, async () =>
    answerOf(deps, input, await redeem(deps, intent, { payer, fees, legs, input, attemptId })),
  );
}

/** The claim is this request's own: its attempt id was stored with it. */
const isOwnClaim = (stored: Intent, attemptId: string) => stored.confirmAttemptId === attemptId;

/**
 * The answer to a confirm, however its outcome was learnt. This request's own confirm is fresh,
 * and its live status message goes out on every path that finds it, a lost COMMIT answer's too
 * (its final status then): a merchant watching the invoice waits for it.
 */
function answerOf(deps: IntentDeps, input: ConfirmInvoiceInput, outcome: RedeemOutcome): ConfirmAnswer {
  const { intent } = outcome;
  if (outcome.kind === 'replay') return { replayed: true, intent };
  const statuses = outcome.kind === 'done' ? outcome.transitions.map((t) => t.to) : [intent.status];
  if (intent.live) void deps.publisher.publish(intent.id, statuses, intent.updatedAt);
  input.log
    .child({ traceId: intent.id })
    .info({ status: intent.status, failureReason: intent.failureReason, payer: intent.fromAccountName }, 'invoice confirmed');
  return { replayed: false, intent };
}

/**
 * Whether a confirm may go on, is the replay of the confirm that processed the invoice, or is
 * refused (thrown). 'own' (this request's claim, committed with its answer lost) is found only
 * by a read after the claim. An already swept invoice answers EXPIRED, as it did the moment
 * before the sweep, so a client sees one answer for one invoice whenever it asks.
 */
function verdict(intent: Intent, input: ConfirmInvoiceInput, attemptId: string, now: Date): 'proceed' | 'replay' | 'own' {
  if (intent.status !== 'CREATED') {
    if (isOwnClaim(intent, attemptId)) return 'own';
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

function payerAccount(account: AccountRecord | null, intent: Intent, input: ConfirmInvoiceInput): AccountRecord {
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
  readonly attemptId: string;
}

type RedeemOutcome = { kind: 'replay' | 'own'; intent: Intent } | { kind: 'done'; intent: Intent; transitions: readonly Transition[] };

/**
 * The claim (CREATED → VALIDATED, docs/rules.md R26, the one conditional step that decides which
 * confirm, cancel or sweep wins), the payer's lock and limits, the ledger batch and the final
 * status, committed with the confirms that arrive meanwhile (commit/confirm-commit.ts).
 */
async function redeem(deps: IntentDeps, seen: Intent, r: Redemption): Promise<RedeemOutcome> {
  const plan: MoneyPlan = {
    intentId: seen.id,
    operationType: seen.operationType,
    fromLedgerId: r.payer.ledgerAccountId,
    toLedgerId: ledgerAccountId(seen.toAccountName),
    transitLedgerId: ledgerAccountId(transitAccountName(seen.channel, seen.currency)),
    amount: seen.amount,
    preFee: r.fees.preFee,
    postFee: r.fees.postFee,
    feeLegs: r.legs,
  };
  // The rules are taken before the transaction; the usage they compare is read under the locks.
  const config = r.input.config ?? null;
  const rules =
    config === null ? await loadLimitRules(deps.db, seen.operationType, seen.currency) : applicableLimitRules(config.limitRules, seen);
  const subject = {
    operationType: seen.operationType,
    amount: seen.amount,
    currency: seen.currency,
    fromUserId: r.payer.userId,
    toUserId: seen.toUserId,
  };
  const outcome = await deps.committer.confirm({
    invoice: seen,
    expectedVersion: r.input.expectedVersion,
    payer: { accountName: r.payer.accountName, userId: r.input.payerUserId },
    confirmIdempotencyKey: r.input.idempotencyKey,
    attemptId: r.attemptId,
    actor: r.input.actor,
    fees: {
      preFee: r.fees.preFee,
      postFee: r.fees.postFee,
      splits: r.fees.splits.map((split) => ({ account: split.account, amount: split.amount.toString() })),
    },
    transfers: [reserveTransfer(plan, deps.settings.ledgerPendingTimeoutS), ...settleTransfers(plan)],
    guard: { payerUserId: r.payer.userId, checks: limitChecks(rules, subject, new Date()) },
  });
  if (outcome.kind === 'lost') return lostClaim(deps.db, seen.id, r);
  return outcome;
}

/**
 * Someone else changed the invoice between our read and our claim: answer as if we had read it
 * afterwards. If it still looks claimable, the database clock passed expiresAt, the one guard
 * our own clock cannot see. The claim found may be this request's own, committed by its batch
 * whose COMMIT answer was lost before the retry alone.
 */
async function lostClaim(sql: Sql, intentId: string, r: Redemption): Promise<RedeemOutcome> {
  const current = await findIntent(sql, intentId);
  if (current === null) throw new Error(`intent ${intentId} vanished during its confirm`);
  const seen = verdict(current, r.input, r.attemptId, new Date());
  if (seen === 'proceed') throw expired();
  return { kind: seen, intent: current };
}
