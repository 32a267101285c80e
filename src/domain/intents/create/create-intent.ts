import { createHmac } from 'node:crypto';
import type { Database } from '../../../adapters/database.js';
import type { Permissions } from '../../auth/service-keys.js';
import { ledgerAccountId } from '../../../ledger/account-id.js';
import type { Ledger } from '../../../ledger/ledger.js';
import type { AccountLookup, AccountRecord } from '../../accounts/accounts.js';
import { ApiError, apiError, assertNever } from '../../errors.js';
import { type ConfigSnapshot, feeRulesOf } from '../../auth/config-snapshot.js';
import { type FeeEngine, type FeeResult, NO_FEES } from '../../rules/fees/index.js';
import { applicableLimitRules, type LimitRule, limitChecks, loadLimitRules } from '../../rules/limits.js';
import type { Logger } from '../../../adapters/logger.js';
import type { Channel, IntentStatus } from '../../model.js';
import { CHANNEL_BEHAVIOUR, isInvoiceChannel, transitAccountName } from '../../channels/channels.js';
import { pickChannel, routeChannel } from '../../rules/routing.js';
import { sha256Hex } from '../../auth/signing.js';
import { newIntentId } from './intent-id.js';
import { checkOverridePermissions, resolveAccounts, type ResolvedAccounts } from './account-resolution.js';
import { calculateFees, feeLegs } from './fee-calculation.js';
import { bodyRuleViolation, type IntentRequest, requestFingerprint } from './intent-request.js';
import { findIntentByKey, type Intent, type IntentLookup, type NewIntent, type Transition } from '../store/intent-store.js';
import { failureOf, storedDespite } from '../commit/commit-unanswered.js';
import type { IntentCommitter } from '../commit/intent-commit.js';
import { type MoneyPlan, reserveTransfer, settleTransfers } from '../money/money-path.js';
import { settlementRefusalOf } from '../money/apply-transfers.js';
import type { PayerLocks } from '../commit/payer-locks.js';
import type { StatusPublisher } from '../store/status-publisher.js';

export interface IntentDeps {
  readonly db: Database;
  readonly ledger: Ledger;
  readonly fees: FeeEngine;
  readonly publisher: StatusPublisher;
  readonly locks: PayerLocks;
  readonly committer: IntentCommitter;
  /** Shared by concurrent requests (coalesced-reads.ts). */
  readonly accounts: AccountLookup;
  /** Shared by concurrent requests too: an invoice's confirm reads its invoice through it. */
  readonly intents: IntentLookup;
  readonly settings: {
    readonly ledgerPendingTimeoutS: number;
    readonly invoiceMaxTtlS: number;
    readonly invoiceDefaultTtlS: number;
    readonly qrSigningSecret: string;
  };
}

export interface CreateIntentInput {
  readonly serviceId: string;
  readonly permissions: Permissions;
  /** X-User-Id: the acting platform user; 0 is the admin bypass. */
  readonly actor: number;
  readonly request: IntentRequest;
  readonly log: Logger;
  /** Routes, fee rules and limit rules as checked for this request (auth.ts); absent: read from the database. */
  readonly config?: ConfigSnapshot | null;
}

export interface IntentAnswer {
  readonly replayed: boolean;
  readonly intent: Intent;
}

/**
 * POST /intents: validate, route, price, limit, reserve and settle one payment. Every check
 * that can refuse the request runs before money moves; a refused request stores nothing.
 *
 * A replay is found without a read of its own: a new payment's insert meets the stored key
 * (`duplicate`), and a refusal looks the key up before it answers, so a stored intent still
 * wins over every check after the signature, as the order of checks in docs/design.md says.
 */
export async function createIntent(deps: IntentDeps, input: CreateIntentInput): Promise<IntentAnswer> {
  const { request, serviceId, actor } = input;
  const fingerprint = fingerprintOf(request, actor);
  const intentId = newIntentId();
  return deps.locks.oneAtATime(`${serviceId}/${request.idempotencyKey}`, async () => {
    let attempt: Attempt;
    try {
      attempt = await validateAndPersist(deps, input, fingerprint, intentId);
    } catch (thrown) {
      const own = await storedDespite(thrown, () => ownPayment(deps, input, intentId));
      if (own !== null) return ownAnswer(deps, input, own, [own.status]);
      const error = failureOf(thrown);
      if (!(error instanceof ApiError)) throw error;
      const existing = await findIntentByKey(deps.db, serviceId, request.idempotencyKey);
      if (existing === null) throw error;
      return replayOf(existing, fingerprint);
    }
    if (attempt.kind === 'duplicate') {
      const stored = await findIntentByKey(deps.db, serviceId, request.idempotencyKey);
      if (stored === null) throw new Error('idempotency conflict without a stored intent');
      if (stored.id === intentId) return ownAnswer(deps, input, stored, [stored.status]);
      return replayOf(stored, fingerprint);
    }
    const { outcome } = attempt;
    return ownAnswer(
      deps,
      input,
      outcome.intent,
      outcome.transitions.map((t) => t.to),
    );
  });
}

/**
 * This request's payment, answered as created, or, when the ledger refused its settlement, with
 * that refusal. Its live status message goes out first, on every path that finds the payment its
 * own.
 *
 * A COMMIT can go through and its answer be lost (a connection cut right then): the request then
 * meets a CommitUnanswered, or its batch's one-by-one retry meets the stored key, though its own
 * payment is stored. Told by the intent's id, drawn by this request before anything was written,
 * such a payment gets the answer it would have had, not a replay or the failure.
 */
function ownAnswer(deps: IntentDeps, input: CreateIntentInput, intent: Intent, statuses: readonly string[]): IntentAnswer {
  if (intent.live) void deps.publisher.publish(intent.id, statuses, intent.updatedAt);
  const refused = intent.status === 'FAILED' ? settlementRefusalOf(intent.failureReason) : null;
  if (refused !== null) {
    input.log.error({ traceId: intent.id, ledger: refused }, 'settlement refused by the ledger; reservation voided');
    throw apiError('LEDGER_TRANSFER_ERROR', `ledger refused the settlement: ${refused}`);
  }
  return { replayed: false, intent };
}

type Attempt = { kind: 'duplicate' } | { kind: 'stored'; outcome: Extract<PersistOutcome, { kind: 'stored' }> };

/** This request's own payment, if it is stored under its key. */
async function ownPayment(deps: IntentDeps, input: CreateIntentInput, intentId: string): Promise<Intent | null> {
  const stored = await findIntentByKey(deps.db, input.serviceId, input.request.idempotencyKey);
  return stored?.id === intentId ? stored : null;
}

/** Every check in the order of docs/design.md, then the one transaction; refusals throw ApiError. */
async function validateAndPersist(deps: IntentDeps, input: CreateIntentInput, fingerprint: string, intentId: string): Promise<Attempt> {
  const { request, actor } = input;
  const config = input.config ?? null;
  authorize(input);
  const violation = bodyRuleViolation(request);
  if (violation !== null) throw apiError('BAD_REQUEST', violation);
  if (request.operationType === 'INVOICE_PAYMENT') checkInvoiceTtl(deps, request);

  const accounts = await resolveAccounts(deps.accounts, request, actor);
  const amount = BigInt(request.amount);
  const channel =
    config === null
      ? await routeChannel(deps.db, request.operationType, amount)
      : pickChannel(config.routes, request.operationType, amount);
  CHANNEL_BEHAVIOUR[channel].check?.(request, accounts.from);
  const isInvoice = isInvoiceChannel(channel);
  const feeRules = config === null ? undefined : feeRulesOf(config, request.operationType);
  const fees = isInvoice ? NO_FEES : await calculateFees(deps.db, deps.fees, input.serviceId, { ...request, amount }, feeRules);
  if (fees.postFee > amount) throw apiError('BAD_REQUEST', `post fee ${fees.postFee} exceeds the amount ${amount}`);
  const legs = await feeLegs(deps.accounts, fees);

  const payer = accounts.from?.userId ?? null;
  return deps.locks.withPayer(isInvoice ? null : payer, async () => {
    const draft = draftIntent(deps, input, { id: intentId, fingerprint, accounts, channel, fees });
    const plan: MoneyPlan | null =
      accounts.from === null
        ? null
        : {
            intentId: draft.id,
            operationType: request.operationType,
            fromLedgerId: accounts.from.ledgerAccountId,
            toLedgerId: accounts.to.ledgerAccountId,
            transitLedgerId: ledgerAccountId(transitAccountName(channel, request.currency)),
            amount,
            preFee: fees.preFee,
            postFee: fees.postFee,
            feeLegs: legs,
          };
    const limitRules = plan === null ? [] : config === null ? null : applicableLimitRules(config.limitRules, request);
    const outcome = await persist(deps, draft, plan, accounts, limitRules);
    return outcome.kind === 'duplicate' ? { kind: 'duplicate' } : { kind: 'stored', outcome };
  });
}

function fingerprintOf(request: IntentRequest, actor: number): string {
  return sha256Hex(requestFingerprint(request, actor));
}

/** docs/rules.md R14: the same key for a different payment is a conflict, never a second payment. */
function replayOf(existing: Intent, fingerprint: string): IntentAnswer {
  if (existing.requestFingerprint !== fingerprint) {
    throw apiError('CONFLICT', 'idempotency key reused with different parameters');
  }
  return { replayed: true, intent: existing };
}

function authorize(input: CreateIntentInput): void {
  const allowed: readonly string[] = input.permissions.allowedOperationTypes;
  if (!allowed.includes(input.request.operationType)) {
    throw apiError('FORBIDDEN', `service ${input.serviceId} may not create ${input.request.operationType} intents`);
  }
  checkOverridePermissions(input.request, input.permissions);
}

function checkInvoiceTtl(deps: IntentDeps, request: IntentRequest): void {
  const ttl = request.metadata.ttlSeconds;
  if (typeof ttl === 'number' && ttl > deps.settings.invoiceMaxTtlS) {
    throw apiError('BAD_REQUEST', `metadata.ttlSeconds must not exceed ${deps.settings.invoiceMaxTtlS}`);
  }
}

/** docs/rules.md R16: HMAC-SHA256 of `intentId|amount|currency|toAccountName|expiresAt` truncated to 16 bytes. */
export function qrSignature(
  secret: string,
  intentId: string,
  amount: bigint,
  currency: string,
  toAccountName: string,
  expiresAt: Date,
): Buffer {
  return createHmac('sha256', secret)
    .update(`${intentId}|${amount}|${currency}|${toAccountName}|${expiresAt.toISOString()}`)
    .digest()
    .subarray(0, 16);
}

function draftIntent(
  deps: IntentDeps,
  input: CreateIntentInput,
  facts: { id: string; fingerprint: string; accounts: ResolvedAccounts; channel: Channel; fees: FeeResult },
): NewIntent {
  const { request, actor } = input;
  const { id, accounts, channel, fees } = facts;
  const amount = BigInt(request.amount);
  const { createdAs } = CHANNEL_BEHAVIOUR[channel];
  const isInvoice = createdAs === 'CREATED';
  const now = new Date();
  const ttlS = (request.metadata.ttlSeconds as number | undefined) ?? deps.settings.invoiceDefaultTtlS;
  const expiresAt = isInvoice ? new Date(now.getTime() + ttlS * 1000) : null;
  const status: IntentStatus = createdAs;
  const metadata = isInvoice ? { appScope: 'a', ...request.metadata } : request.metadata;
  return {
    id,
    idempotencyKey: request.idempotencyKey,
    serviceId: input.serviceId,
    requestFingerprint: facts.fingerprint,
    userId: actor,
    operationType: request.operationType,
    channel,
    fromAccountName: accounts.from?.accountName ?? null,
    toAccountName: accounts.to.accountName,
    fromUserId: accounts.from?.userId ?? null,
    toUserId: accounts.to.userId,
    externalRef: request.externalRef ?? null,
    amount,
    preFeeAmount: fees.preFee,
    postFeeAmount: fees.postFee,
    feeSplits: fees.splits.map((split) => ({ account: split.account, amount: split.amount.toString() })),
    currency: request.currency,
    status,
    // The PSP worker completes what is created AUTHORIZED; its payout starts at NEW.
    pspState: createdAs === 'AUTHORIZED' ? 'NEW' : null,
    failureReason: null,
    metadata,
    fromName: request.fromName ?? null,
    toName: request.toName ?? null,
    comment: request.comment ?? null,
    live: request.live ?? false,
    expiresAt,
    reservedAt: isInvoice ? null : now,
    qrSignature:
      expiresAt === null
        ? null
        : qrSignature(deps.settings.qrSigningSecret, id, amount, request.currency, accounts.to.accountName, expiresAt),
    issuedByUserId: isInvoice ? actor : null,
    transferIds: [],
  };
}

type PersistOutcome = { kind: 'duplicate' } | { kind: 'stored'; intent: Intent; transitions: readonly Transition[] };

/**
 * The intent, its audit trail, its ledger movement and its history commit together, in the
 * transaction of its group commit (intent-commit.ts). A refusal throws and stores nothing.
 */
async function persist(
  deps: IntentDeps,
  draft: NewIntent,
  plan: MoneyPlan | null,
  accounts: ResolvedAccounts,
  limitRules: readonly LimitRule[] | null,
): Promise<PersistOutcome> {
  const transfers =
    plan === null
      ? []
      : draft.status === 'SETTLED'
        ? [reserveTransfer(plan, deps.settings.ledgerPendingTimeoutS), ...settleTransfers(plan)]
        : [reserveTransfer(plan, deps.settings.ledgerPendingTimeoutS)];
  const intent = { ...draft, transferIds: transfers.map((t) => t.id) };
  const rules = plan === null ? [] : (limitRules ?? (await loadLimitRules(deps.db, draft.operationType, draft.currency)));
  const guard = {
    payerUserId: plan === null ? null : draft.fromUserId,
    checks: limitChecks(
      rules,
      {
        operationType: draft.operationType,
        amount: draft.amount,
        currency: draft.currency,
        fromUserId: draft.fromUserId,
        toUserId: draft.toUserId,
      },
      new Date(),
    ),
  };
  const transitions: Transition[] =
    plan === null
      ? [{ from: null, to: 'CREATED' }]
      : [
          { from: null, to: 'CREATED' },
          { from: 'CREATED', to: 'VALIDATED' },
          { from: 'VALIDATED', to: 'AUTHORIZED' },
          ...(draft.status === 'SETTLED' ? [{ from: 'AUTHORIZED', to: 'SETTLED' }] : []),
        ];
  const history = draft.status === 'SETTLED' ? historyRows(draft, accounts) : [];
  const outcome = await deps.committer.commit({ intent, guard, transfers, transitions, history });
  switch (outcome.kind) {
    case 'duplicate':
      return outcome;
    case 'refused':
      throw outcome.error;
    case 'stored': {
      const created = stored(intent, outcome.createdAt);
      const ended = outcome.failure === null ? created : { ...created, status: 'FAILED' as const, failureReason: outcome.failure.reason };
      return { kind: 'stored', intent: ended, transitions: outcome.transitions };
    }
    default:
      return assertNever(outcome);
  }
}

export function historyRows(
  intent: Pick<Intent, 'amount' | 'preFeeAmount' | 'postFeeAmount'>,
  accounts: { from: AccountRecord | null; to: AccountRecord },
) {
  return [
    ...(accounts.from === null
      ? []
      : [
          {
            accountName: accounts.from.accountName,
            userId: accounts.from.userId,
            direction: 'DEBIT' as const,
            amount: intent.amount,
            feeAmount: intent.preFeeAmount,
          },
        ]),
    {
      accountName: accounts.to.accountName,
      userId: accounts.to.userId,
      direction: 'CREDIT' as const,
      amount: intent.amount,
      feeAmount: intent.postFeeAmount,
    },
  ];
}

/**
 * Every field written out rather than spread: a spread of the draft's thirty fields followed by
 * nine more allocated ~12 KB per intent in V8 (its property store regrown field by field), a
 * tenth of what a payment allocated (docs/design.md#hot-field-copies).
 */
function stored(draft: NewIntent, createdAt: Date): Intent {
  return {
    id: draft.id,
    idempotencyKey: draft.idempotencyKey,
    serviceId: draft.serviceId,
    requestFingerprint: draft.requestFingerprint,
    userId: draft.userId,
    operationType: draft.operationType,
    channel: draft.channel,
    fromAccountName: draft.fromAccountName,
    toAccountName: draft.toAccountName,
    fromUserId: draft.fromUserId,
    toUserId: draft.toUserId,
    externalRef: draft.externalRef,
    amount: draft.amount,
    preFeeAmount: draft.preFeeAmount,
    postFeeAmount: draft.postFeeAmount,
    feeSplits: draft.feeSplits,
    currency: draft.currency,
    status: draft.status,
    pspState: draft.pspState,
    failureReason: draft.failureReason,
    metadata: draft.metadata,
    fromName: draft.fromName,
    toName: draft.toName,
    comment: draft.comment,
    live: draft.live,
    expiresAt: draft.expiresAt,
    reservedAt: draft.reservedAt,
    qrSignature: draft.qrSignature,
    issuedByUserId: draft.issuedByUserId,
    transferIds: draft.transferIds,
    version: 0,
    canceledAt: null,
    redeemedAt: null,
    cancelReason: null,
    redeemedByUserId: null,
    confirmIdempotencyKey: null,
    confirmAttemptId: null,
    settlementDate: null,
    createdAt,
    updatedAt: createdAt,
  };
}
