import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Database } from '../adapters/database.js';
import type { WorkerMetrics } from '../observability/metrics.js';
import { isReceiverType, type PspxClient, type Receiver } from '../adapters/pspx/pspx-client.js';
import { assertNever } from '../domain/errors.js';
import { claimPayouts, countInquiry as recordInquiry, moveIntent, releasePayout } from '../domain/intents/store/intent-writer.js';
import type { OutboxKind, OutboxPayload } from '../domain/intents/store/outbox-jobs.js';
import type { PspSubState } from '../domain/intents/store/state-machine.js';
import type { Logger } from '../adapters/logger.js';
import { INTENT_ID_ATTRIBUTE, inSpan, withIntentIds } from '../adapters/tracing.js';

/**
 * The PSP worker drives PSPX payouts through their sub-states (docs/rules.md, PSP sub-states):
 *
 *   NEW → QUERY_PENDING → QUERIED → CONFIRM_PENDING → CONFIRMED   (post_pending job: outbox settles)
 *   QUERY_PENDING → FAILED            inquiry rejected             (void_pending job: outbox fails)
 *   CONFIRM_PENDING → FAILED          confirm rejected
 *   CONFIRM_PENDING → INQUIRING       confirm timed out, answered pending or unknown, or a restart
 *   INQUIRING → CONFIRMED | FAILED    a final status inquiry answer
 *   INQUIRING → MANUAL_REVIEW         inquiriesMax answers without a final one (intent MANUAL_REVIEW)
 *   QUERY_PENDING | QUERIED → FAILED  the reservation would expire before a confirm could finish
 *
 * Claim and lease: a batch is claimed in one statement (FOR UPDATE SKIP LOCKED, then a lease
 * token and expiry written on the rows), so concurrent workers and instances never claim one
 * intent at once; the row locks last only for that statement, never across a provider call. Every
 * state write is a guarded UPDATE on (status, psp_state, lease token) with its audit row and any
 * outbox job in the same transaction: a worker whose lease expired and was taken over writes
 * nothing more. A crashed worker's lease simply runs out and another worker resumes from the
 * recorded sub-state.
 *
 * Never a second confirm: CONFIRM_PENDING is committed before the confirm is sent, by the one
 * worker whose guarded QUERIED → CONFIRM_PENDING update succeeded, and that worker sends it in the
 * same step. A claim that finds CONFIRM_PENDING (or INQUIRING) therefore knows a confirm may have
 * gone out, and only asks with statusInquiry.
 */

/** failureReason when the reservation's time ran out before the confirm could be sent. */
export const CONFIRM_WINDOW_CLOSED = 'confirm_window_closed';
export const INQUIRIES_EXHAUSTED = 'psp_inquiries_exhausted';

export interface PspWorkerSettings {
  /** Intents claimed per run. */
  readonly batchSizeMax: number;
  /** How long a claim is exclusive; must exceed one step (a provider call with its retries). */
  readonly leaseMs: number;
  /** PSP_MAX_INQUIRIES: status inquiries without a final answer before MANUAL_REVIEW. */
  readonly inquiriesMax: number;
  /** Pause between two status inquiries of one intent. */
  readonly inquiryDelayMs: number;
  /** Pause after an unknown answer (provider down) before the step is tried again. */
  readonly retryDelayMs: number;
  /** LEDGER_PENDING_TIMEOUT_S: the reservation's lifetime. */
  readonly ledgerPendingTimeoutS: number;
  /** A confirm is only sent while at least this much of the reservation's lifetime is left. */
  readonly confirmMarginS: number;
}

export interface PspWorkerDeps {
  readonly db: Database;
  readonly pspx: PspxClient;
  readonly log: Logger;
  readonly settings: PspWorkerSettings;
  /** In-flight gauge, inquiry and escalation counters; absent in tests that do not look. */
  readonly metrics?: WorkerMetrics;
}

export interface PspWorker {
  /** Claims one batch and drives each intent as far as it goes now; returns how many it claimed. */
  runOnce(): Promise<number>;
}

/** Moves one claim may make before it yields the intent (NEW → … → CONFIRMED is 5). */
const STEPS_PER_CLAIM_MAX = 8;

interface Claim {
  readonly id: string;
  readonly token: string;
  readonly state: PspSubState;
  readonly amount: bigint;
  readonly preFeeAmount: bigint;
  readonly postFeeAmount: bigint;
  readonly currency: string;
  readonly receiver: Receiver;
  readonly inquiries: number;
  readonly inquiryRef: string | null;
  /** Evaluated at claim time on the database clock. */
  readonly confirmWindowOpen: boolean;
}

type Step =
  | { readonly kind: 'moved'; readonly next: Claim }
  | { readonly kind: 'wait'; readonly delayMs: number }
  | { readonly kind: 'done' };

interface Context {
  readonly deps: PspWorkerDeps;
  readonly log: Logger;
}

/** A guarded write found the intent changed: another worker holds it now (our lease ran out). */
class LeaseLost extends Error {
  override readonly name = 'LeaseLost';
}

export function createPspWorker(deps: PspWorkerDeps): PspWorker {
  assert.ok(deps.settings.batchSizeMax > 0 && deps.settings.leaseMs > 0 && deps.settings.inquiriesMax > 0, 'PSP worker limits must be > 0');
  let running: Promise<number> | null = null;
  return {
    runOnce() {
      // One batch at a time per worker: a manual run during a timed one waits for it.
      const previous = running ?? Promise.resolve(0);
      const run = previous.catch(() => 0).then(() => runBatch(deps));
      running = run;
      return run.finally(() => {
        if (running === run) running = null;
      });
    },
  };
}

async function runBatch(deps: PspWorkerDeps): Promise<number> {
  const claims = await claimBatch(deps, randomUUID());
  await Promise.all(
    claims.map((claim) => {
      deps.metrics?.pspInFlight.inc();
      const driven = inSpan('psp drive', { [INTENT_ID_ATTRIBUTE]: claim.id, 'payorch.psp_state': claim.state }, () =>
        withIntentIds([claim.id], () => drive(deps, claim)),
      );
      return driven.finally(() => deps.metrics?.pspInFlight.dec());
    }),
  );
  return claims.length;
}

async function claimBatch(deps: PspWorkerDeps, token: string): Promise<Claim[]> {
  const { settings } = deps;
  const rows = await claimPayouts(deps.db, {
    owner: token,
    limit: settings.batchSizeMax,
    leaseMs: settings.leaseMs,
    confirmWindowS: settings.ledgerPendingTimeoutS - settings.confirmMarginS,
  });
  return rows.map((row) => ({
    id: row.id,
    token,
    state: row.psp_state,
    amount: row.amount,
    preFeeAmount: row.pre_fee_amount,
    postFeeAmount: row.post_fee_amount,
    currency: row.currency.trim(),
    receiver: receiverOf(row.id, row.metadata),
    inquiries: row.psp_inquiries,
    inquiryRef: row.psp_inquiry_ref,
    confirmWindowOpen: row.confirm_window_open,
  }));
}

/** metadata.ipps was validated when the intent was created; a bad one here is a bug, not an input error. */
function receiverOf(intentId: string, metadata: Record<string, unknown>): Receiver {
  const ipps = metadata.ipps;
  assert.ok(typeof ipps === 'object' && ipps !== null, `intent ${intentId} has no metadata.ipps`);
  const { receiverType, receiverAccount, receiverBank } = ipps as Record<string, unknown>;
  assert.ok(isReceiverType(receiverType), `intent ${intentId} has a bad receiverType`);
  assert.ok(typeof receiverAccount === 'string', `intent ${intentId} has no receiverAccount`);
  return { receiverType, receiverAccount, ...(typeof receiverBank === 'string' ? { receiverBank } : {}) };
}

/** Steps one claimed intent until it waits or ends, then gives the lease back. Never throws. */
async function drive(deps: PspWorkerDeps, claim: Claim): Promise<void> {
  const ctx: Context = { deps, log: deps.log.child({ traceId: claim.id }) };
  let current = claim;
  let delayMs = 0;
  try {
    for (let steps = 0; steps < STEPS_PER_CLAIM_MAX; steps += 1) {
      const result = await step(ctx, current);
      if (result.kind !== 'moved') {
        if (result.kind === 'wait') delayMs = result.delayMs;
        break;
      }
      current = result.next;
    }
  } catch (error) {
    if (error instanceof LeaseLost) {
      ctx.log.warn({ event: 'psp_lease_lost', pspState: current.state }, 'PSP worker lost its claim; another worker continues the intent');
      return;
    }
    ctx.log.error({ event: 'psp_worker_error', err: error, pspState: current.state }, 'PSP worker step failed; retried later');
    delayMs = deps.settings.retryDelayMs;
  }
  await release(deps, claim, delayMs).catch((error: unknown) => {
    // The lease then runs out by itself; only the retry waits a little longer.
    ctx.log.error({ event: 'psp_worker_error', err: error }, 'PSP worker could not release its claim');
  });
}

const release = (deps: PspWorkerDeps, claim: Claim, delayMs: number) => releasePayout(deps.db, claim.id, claim.token, delayMs);

async function step(ctx: Context, claim: Claim): Promise<Step> {
  switch (claim.state) {
    case 'NEW':
      return move(ctx, claim, { to: 'QUERY_PENDING' });
    case 'QUERY_PENDING':
      return inquire(ctx, claim);
    case 'QUERIED':
      return confirm(ctx, claim);
    case 'CONFIRM_PENDING':
      // Only a claim starts here: the worker that recorded CONFIRM_PENDING confirmed in the same
      // step and moved on, so this one stopped in between. Its confirm may have reached the
      // provider: ask, never confirm again.
      return move(ctx, claim, { to: 'INQUIRING', payload: { confirmAnswer: 'not_known_after_restart' } });
    case 'INQUIRING':
      return askStatus(ctx, claim);
    case 'CONFIRMED':
    case 'FAILED':
    case 'MANUAL_REVIEW':
      return { kind: 'done' };
    default:
      return assertNever(claim.state);
  }
}

async function inquire(ctx: Context, claim: Claim): Promise<Step> {
  if (!claim.confirmWindowOpen) return fail(ctx, claim, CONFIRM_WINDOW_CLOSED);
  const answer = await ctx.deps.pspx.inquiry(claim.id, payoutAmount(claim), claim.receiver);
  switch (answer.kind) {
    case 'ok':
      return move(ctx, claim, { to: 'QUERIED', inquiryRef: answer.inquiryRef });
    case 'rejected':
      return fail(ctx, claim, answer.reason);
    case 'unknown':
      // An inquiry pays nothing: repeating it later is safe (the provider answers the same ref).
      ctx.log.warn(
        { event: 'psp_unknown_answer', call: 'inquiry', cause: answer.cause, detail: answer.detail },
        'PSPX inquiry unanswered; retried later',
      );
      return { kind: 'wait', delayMs: ctx.deps.settings.retryDelayMs };
    default:
      return assertNever(answer);
  }
}

async function confirm(ctx: Context, claim: Claim): Promise<Step> {
  if (!claim.confirmWindowOpen) return fail(ctx, claim, CONFIRM_WINDOW_CLOSED);
  assert.ok(claim.inquiryRef !== null, `intent ${claim.id} is QUERIED without an inquiryRef`);
  // Recorded first: if this process dies after the confirm left, the next worker knows.
  const recorded = await move(ctx, claim, { to: 'CONFIRM_PENDING' });
  assert.ok(recorded.kind === 'moved');
  const pending = recorded.next;
  const answer = await ctx.deps.pspx.confirm(claim.id, claim.inquiryRef);
  switch (answer.kind) {
    case 'completed':
      return confirmed(ctx, pending, answer.settlementDate);
    case 'rejected':
      return fail(ctx, pending, answer.reason);
    case 'pending':
      return move(ctx, pending, { to: 'INQUIRING', payload: { confirmAnswer: 'pending' } });
    case 'unknown':
      return move(ctx, pending, { to: 'INQUIRING', payload: { confirmAnswer: answer.cause, detail: answer.detail } });
    default:
      return assertNever(answer);
  }
}

async function askStatus(ctx: Context, claim: Claim): Promise<Step> {
  const answer = await ctx.deps.pspx.statusInquiry(claim.id);
  // An open breaker sent nothing (see below), so only the others count as inquiries made.
  if (answer.kind !== 'unknown' || answer.cause !== 'circuit_open') ctx.deps.metrics?.pspInquiry();
  switch (answer.kind) {
    case 'completed':
      return confirmed(ctx, claim, answer.settlementDate);
    case 'failed':
      return fail(ctx, claim, answer.reason);
    case 'pending':
    case 'not_found':
      // not_found: no confirm reached the provider yet. One may still be on its way (sent just
      // before a crash), so failing now could void a payout the provider is about to make.
      return countInquiry(ctx, claim, answer.kind);
    case 'unknown':
      // An open breaker sent nothing: no inquiry was made, so none is counted.
      if (answer.cause === 'circuit_open') return { kind: 'wait', delayMs: ctx.deps.settings.retryDelayMs };
      return countInquiry(ctx, claim, `unknown: ${answer.cause}`);
    default:
      return assertNever(answer);
  }
}

async function countInquiry(ctx: Context, claim: Claim, lastAnswer: string): Promise<Step> {
  const inquiries = claim.inquiries + 1;
  if (inquiries >= ctx.deps.settings.inquiriesMax) return escalate(ctx, claim, inquiries, lastAnswer);
  const counted = await recordInquiry(
    ctx.deps.db,
    claim.id,
    { owner: claim.token, ms: ctx.deps.settings.leaseMs },
    { from: claim.inquiries, to: inquiries },
  );
  if (!counted) throw new LeaseLost(`intent ${claim.id} changed while this worker held it`);
  return { kind: 'wait', delayMs: ctx.deps.settings.inquiryDelayMs };
}

async function escalate(ctx: Context, claim: Claim, inquiries: number, lastAnswer: string): Promise<Step> {
  const escalation = {
    inquiries,
    lastAnswer,
    inquiryRef: claim.inquiryRef,
    amount: claim.amount.toString(),
    preFeeAmount: claim.preFeeAmount.toString(),
    postFeeAmount: claim.postFeeAmount.toString(),
    payoutAmount: payoutAmount(claim).toString(),
    currency: claim.currency,
    receiver: claim.receiver,
  };
  const result = await move(ctx, claim, {
    to: 'MANUAL_REVIEW',
    status: 'MANUAL_REVIEW',
    inquiries,
    reason: INQUIRIES_EXHAUSTED,
    payload: escalation,
  });
  ctx.log.warn({ event: 'manual_review_required', ...escalation }, 'PSPX payout without a final answer: manual review required');
  ctx.deps.metrics?.pspEscalation();
  return result;
}

function confirmed(ctx: Context, claim: Claim, settlementDate: string): Promise<Step> {
  return move(ctx, claim, { to: 'CONFIRMED', settlementDate, payload: { settlementDate }, job: { kind: 'post_pending', payload: {} } });
}

function fail(ctx: Context, claim: Claim, reason: string): Promise<Step> {
  return move(ctx, claim, { to: 'FAILED', reason, job: { kind: 'void_pending', payload: { reason } } });
}

/** What the provider pays the receiver: the amount less the POST fee, which is also what the nostro is credited. */
const payoutAmount = (claim: Claim) => claim.amount - claim.postFeeAmount;

interface Move {
  readonly to: PspSubState;
  readonly reason?: string;
  readonly payload?: Record<string, unknown>;
  readonly inquiryRef?: string;
  readonly settlementDate?: string;
  readonly inquiries?: number;
  readonly status?: 'MANUAL_REVIEW';
  readonly job?: { readonly kind: OutboxKind; readonly payload: OutboxPayload };
}

/** One sub-state move: guarded update, its audit row and its outbox job commit together. */
async function move(ctx: Context, claim: Claim, change: Move): Promise<Step> {
  const { deps } = ctx;
  await deps.db.transaction(async (tx) => {
    const moved = await moveIntent(tx, claim.id, {
      from: 'AUTHORIZED',
      to: change.status ?? 'AUTHORIZED',
      subState: { from: claim.state, to: change.to, leaseOwner: claim.token, leaseMs: deps.settings.leaseMs },
      reason: change.reason ?? null,
      payload: change.payload ?? null,
      changes: { psp: { inquiryRef: change.inquiryRef, settlementDate: change.settlementDate, inquiries: change.inquiries } },
      ...(change.job === undefined ? {} : { job: change.job }),
    });
    if (moved === null) throw new LeaseLost(`intent ${claim.id} left ${claim.state} while this worker held it`);
  });
  ctx.log.info(
    { event: 'psp_state', from: claim.state, to: change.to, ...(change.reason === undefined ? {} : { reason: change.reason }) },
    'PSPX sub-state moved',
  );
  return {
    kind: 'moved',
    next: { ...claim, state: change.to, inquiryRef: change.inquiryRef ?? claim.inquiryRef, inquiries: change.inquiries ?? claim.inquiries },
  };
}
