import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Database, Sql } from '../adapters/database.js';
import type { WorkerMetrics } from '../observability/metrics.js';
import { isReceiverType, type PspxClient, type Receiver } from '../adapters/pspx/pspx-client.js';
import { assertNever } from '../domain/errors.js';
import { isDatabaseUnreachable } from '../adapters/database-outage.js';
import {
  claimPayouts,
  countInquiry as recordInquiry,
  moveIntent,
  releasePayout,
  renewPayoutLeases,
} from '../domain/intents/store/intent-writer.js';
import type { OutboxKind, OutboxPayload } from '../domain/intents/store/outbox-jobs.js';
import { PSP_ACTIVE_SUB_STATES, type PspSubState } from '../domain/intents/store/state-machine.js';
import type { Logger } from '../adapters/logger.js';
import { INTENT_ID_ATTRIBUTE, inSpan, withIntentIds } from '../adapters/tracing.js';
import { LeaseHeartbeat } from './lease-heartbeat.js';

/**
 * The PSP worker drives PSPX payouts through their sub-states (docs/rules.md, PSP sub-states):
 *
 *   NEW → QUERY_PENDING → QUERIED → CONFIRM_PENDING → CONFIRMED   (post_pending job: outbox settles)
 *   QUERY_PENDING → FAILED            inquiry rejected             (void_pending job: outbox fails)
 *   CONFIRM_PENDING → FAILED          confirm rejected
 *   CONFIRM_PENDING → INQUIRING       confirm timed out, answered pending or unknown, or a restart
 *   INQUIRING → CONFIRMED | FAILED    a final status inquiry answer
 *   INQUIRING → FAILED                not_found long after a dead worker's CONFIRM_PENDING or a confirm
 *                                     the provider answered 503 or the breaker never sent (confirm_not_received)
 *   INQUIRING → MANUAL_REVIEW         inquiriesMax answers without a final one (intent MANUAL_REVIEW)
 *   QUERY_PENDING | QUERIED → FAILED  the reservation would expire before a confirm could finish
 *
 * Claim and lease: a batch is claimed in one statement (FOR UPDATE SKIP LOCKED, then a lease
 * token and expiry written on the rows), so concurrent workers and instances never claim one
 * intent at once; the row locks last only for that statement, never across a provider call. Every
 * state write is a guarded UPDATE on (status, psp_state, lease token) with its audit row and any
 * outbox job in the same transaction: a worker whose lease expired and was taken over writes
 * nothing more. Leases are short (PSP_LEASE_MS, 3 s) and a live worker extends the ones it holds
 * on a heartbeat (a third of the lease), whatever its provider calls are waiting for: a crashed or
 * killed worker's leases run out within one lease, and the next claim (its own restarted process
 * or another) resumes from the recorded sub-state (docs/rules.md R65). A worker that cannot reach
 * the database cannot renew either, so after an outage longer than a lease every payout is free
 * again the moment the database answers.
 *
 * Independence: a worker keeps up to concurrencyMax payouts in flight and claims more as they
 * finish (start()), so one slow provider answer delays its own payout only, never a batch.
 *
 * Never a second confirm: CONFIRM_PENDING is committed before the confirm is sent, by the one
 * worker whose guarded QUERIED → CONFIRM_PENDING update succeeded, and that worker sends it in the
 * same step. A claim that finds CONFIRM_PENDING (or INQUIRING) therefore knows a confirm may have
 * gone out, and only asks with statusInquiry.
 */

/** failureReason when the reservation's time ran out before the confirm could be sent. */
export const CONFIRM_WINDOW_CLOSED = 'confirm_window_closed';
export const INQUIRIES_EXHAUSTED = 'psp_inquiries_exhausted';
/** failureReason of a payout whose confirm provably never reached the provider (docs/rules.md R65). */
export const CONFIRM_NOT_RECEIVED = 'confirm_not_received';
/** confirmAnswer of the INQUIRING move made by a claim that found CONFIRM_PENDING: its worker stopped there. */
const AFTER_RESTART = 'not_known_after_restart';
/** confirmAnswer of a confirm the provider answered 503, Service Unavailable: turned away, not taken on. */
const TURNED_AWAY = 'http_503';
/**
 * The confirmAnswers after which a late not_found proves the confirm never arrived (docs/rules.md
 * R65); an open breaker's confirm was never even sent.
 */
const NOT_RECEIVED_EVIDENCE: readonly string[] = [AFTER_RESTART, TURNED_AWAY, 'circuit_open'];

export interface PspWorkerSettings {
  /** Intents claimed per run. */
  readonly batchSizeMax: number;
  /** How long a claim stays exclusive without a heartbeat; the heartbeat renews it every third of it. */
  readonly leaseMs: number;
  /** Payouts one worker drives at once (start()); each waits on its own provider calls. */
  readonly concurrencyMax: number;
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
  /**
   * Twice the PSPX client's time-out: a confirm sent by a worker that then died has either reached
   * the provider by this long after CONFIRM_PENDING was recorded, or never will (docs/rules.md R65).
   */
  readonly confirmNotReceivedAfterMs: number;
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
  /**
   * Drives payouts continuously: claims at once, then every `intervalMs`, and again as soon as
   * payouts in flight finish while the last claim found more than it could take; never more than
   * concurrencyMax in flight. stop() ends the claiming and waits for the payouts in flight.
   */
  start(intervalMs: number): { stop(): Promise<void> };
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
  const { settings } = deps;
  assert.ok(
    settings.batchSizeMax > 0 && settings.leaseMs > 0 && settings.inquiriesMax > 0 && settings.concurrencyMax > 0,
    'PSP worker limits must be > 0',
  );
  const heartbeat = new LeaseHeartbeat<string>({
    leaseMs: settings.leaseMs,
    renew: (held) => renewPayoutLeases(deps.db, { ids: [...held.keys()], owners: [...held.values()] }, settings.leaseMs),
    log: deps.log,
    name: 'psp',
  });
  const active = new Set<Promise<void>>();
  let running: Promise<number> | null = null;

  /** Claims up to `limit` and starts driving them; the promises end when each claim is given back. */
  const claimAndDrive = async (limit: number): Promise<Promise<void>[]> => {
    const claims = await claimBatch(deps, randomUUID(), limit);
    return claims.map((claim) => {
      heartbeat.hold(claim.id, claim.token);
      deps.metrics?.pspInFlight.inc();
      const driven = inSpan('psp drive', { [INTENT_ID_ATTRIBUTE]: claim.id, 'payorch.psp_state': claim.state }, () =>
        withIntentIds([claim.id], () => drive(deps, claim)),
      ).finally(() => {
        void heartbeat.drop(claim.id, claim.token);
        deps.metrics?.pspInFlight.dec();
        active.delete(driven);
      });
      active.add(driven);
      return driven;
    });
  };

  return {
    runOnce() {
      // One batch at a time per worker: a manual run during a timed one waits for it.
      const previous = running ?? Promise.resolve(0);
      const run = previous
        .catch(() => 0)
        .then(async () => {
          const driven = await claimAndDrive(settings.batchSizeMax);
          await Promise.all(driven);
          return driven.length;
        });
      running = run;
      return run.finally(() => {
        if (running === run) running = null;
      });
    },
    start(intervalMs) {
      return startPump(deps, intervalMs, active, claimAndDrive);
    },
  };
}

/**
 * The continuous claimer behind start(). A claim that came back full means more payouts are due:
 * then every payout that finishes frees its place for the next claim (taken once a batch's worth
 * of places, or half of concurrencyMax, is free, so claims stay batched); otherwise the next tick
 * looks again.
 */
function startPump(
  deps: PspWorkerDeps,
  intervalMs: number,
  active: ReadonlySet<Promise<void>>,
  claimAndDrive: (limit: number) => Promise<Promise<void>[]>,
): { stop(): Promise<void> } {
  const { settings } = deps;
  const refillAt = Math.max(1, Math.min(settings.batchSizeMax, Math.floor(settings.concurrencyMax / 2)));
  let stopped = false;
  let backlog = false;
  let again = false;
  let filling: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;

  const fill = (): Promise<void> => {
    if (filling !== null) {
      again = true;
      return filling;
    }
    const run = (async () => {
      do {
        again = false;
        while (!stopped && settings.concurrencyMax - active.size >= (backlog ? refillAt : 1)) {
          const limit = Math.min(settings.batchSizeMax, settings.concurrencyMax - active.size);
          const driven = await claimAndDrive(limit);
          for (const one of driven) void one.then(onFinished);
          backlog = driven.length === limit;
          if (!backlog) break;
        }
      } while (again && !stopped);
    })();
    filling = run
      .catch((error: unknown) => {
        backlog = false;
        deps.log.error(
          { event: 'worker_run_failed', worker: 'psp-worker', err: error },
          'psp-worker claim failed; tried again at the next tick',
        );
      })
      .finally(() => {
        filling = null;
      });
    return filling;
  };
  const onFinished = () => {
    if (backlog && !stopped && settings.concurrencyMax - active.size >= refillAt) void fill();
  };
  const tick = () => {
    void fill().finally(() => {
      if (!stopped) timer = setTimeout(tick, intervalMs);
    });
  };
  tick();

  return {
    async stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      await filling;
      await Promise.all([...active]);
    },
  };
}

async function claimBatch(deps: PspWorkerDeps, token: string, limit: number): Promise<Claim[]> {
  const { settings } = deps;
  const rows = await claimPayouts(deps.db, {
    owner: token,
    limit,
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
    // The database gone: the payout is due again as soon as it answers (nothing to wait out at
    // the provider), usually by its lease lapsing since this release fails too.
    delayMs = isDatabaseUnreachable(error) ? 0 : deps.settings.retryDelayMs;
  }
  // A payout that left the PSP's active sub-states is never claimed again: its lease needs no
  // release, which spares one write per payout.
  if (!PSP_ACTIVE_SUB_STATES.includes(current.state)) return;
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
      return move(ctx, claim, { to: 'INQUIRING', payload: { confirmAnswer: AFTER_RESTART } });
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
    case 'unknown': {
      const confirmAnswer = answer.httpStatus === 503 ? TURNED_AWAY : answer.cause;
      return move(ctx, pending, { to: 'INQUIRING', payload: { confirmAnswer, detail: answer.detail } });
    }
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
    case 'not_found':
      return notFound(ctx, claim);
    case 'pending':
      return countInquiry(ctx, claim, answer.kind);
    case 'unknown':
      // An open breaker sent nothing: no inquiry was made, so none is counted.
      if (answer.cause === 'circuit_open') return { kind: 'wait', delayMs: ctx.deps.settings.retryDelayMs };
      return countInquiry(ctx, claim, `unknown: ${answer.cause}`);
    default:
      return assertNever(answer);
  }
}

/**
 * not_found: no confirm reached the provider. One may still be on its way (sent just before a
 * crash, or passed on late by a front end that answered 503), so failing at once could void a
 * payout the provider is about to make. When the worker that recorded CONFIRM_PENDING died there,
 * or the provider answered its confirm 503, or the open breaker never sent it, a not_found answered more than
 * confirmNotReceivedAfterMs after that record proves the confirm never arrived: the payout fails
 * and its reservation is voided (docs/rules.md R65); before then the claim waits for that moment
 * without counting towards MANUAL_REVIEW. After a time-out or another 5xx the provider may still
 * be working on the confirm: counted as before, towards MANUAL_REVIEW.
 */
async function notFound(ctx: Context, claim: Claim): Promise<Step> {
  const evidence = await confirmEvidence(ctx.deps.db, claim.id);
  if (!evidence.notReceivedUnlessLate) return countInquiry(ctx, claim, 'not_found');
  const waitMs = ctx.deps.settings.confirmNotReceivedAfterMs - evidence.sinceConfirmPendingMs;
  if (waitMs < 0) return fail(ctx, claim, CONFIRM_NOT_RECEIVED);
  return { kind: 'wait', delayMs: Math.ceil(waitMs) };
}

/**
 * From the audit trail: whether the confirm left CONFIRM_PENDING without being taken on (a dead
 * worker's, or one answered 503), and how long ago CONFIRM_PENDING was recorded.
 */
async function confirmEvidence(sql: Sql, intentId: string): Promise<{ notReceivedUnlessLate: boolean; sinceConfirmPendingMs: number }> {
  const { rows } = await sql.query<{ not_received_unless_late: boolean | null; since_ms: number | null }>(
    `SELECT bool_or(status_from = 'CONFIRM_PENDING' AND status_to = 'INQUIRING' AND payload->>'confirmAnswer' = ANY($2::text[]))
              AS not_received_unless_late,
            (extract(epoch FROM clock_timestamp() - max(created_at) FILTER (WHERE status_to = 'CONFIRM_PENDING')) * 1000)::float8 AS since_ms
       FROM intent_events WHERE intent_id = $1`,
    [intentId, NOT_RECEIVED_EVIDENCE],
  );
  const row = rows[0];
  return { notReceivedUnlessLate: row?.not_received_unless_late === true, sinceConfirmPendingMs: row?.since_ms ?? 0 };
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
