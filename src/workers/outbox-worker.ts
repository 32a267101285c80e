import assert from 'node:assert/strict';
import type { Database, LockSession, Sql } from '../adapters/database.js';
import type { WorkerMetrics } from '../observability/metrics.js';
import { assertNever } from '../domain/errors.js';
import {
  type DeferredOutcome,
  lockIntent,
  PENDING_EXPIRED_REASON,
  lockIntents,
  releaseReservation,
  type SettleRequest,
  settleReservation,
  settleReservations,
} from '../domain/intents/money/deferred-money.js';
import type { Intent } from '../domain/intents/store/intent-store.js';
import type { OutboxKind, OutboxPayload } from '../domain/intents/store/outbox-jobs.js';
import type { StatusPublisher } from '../domain/intents/store/status-publisher.js';
import type { Logger } from '../adapters/logger.js';
import type { Ledger } from '../ledger/ledger.js';
import { INTENT_ID_ATTRIBUTE, inSpan, withIntentIds } from '../adapters/tracing.js';

/**
 * The outbox worker carries out the money work that status changes queued: post_pending settles
 * a reservation (AUTHORIZED or MANUAL_REVIEW → SETTLED), void_pending releases one (→ FAILED).
 * Each job's ledger call, status change, audit row and completion commit in one transaction; the
 * settle jobs of a run share one (settleTogether), and any that cannot go with it get their own.
 *
 * Exactly one active instance (docs/rules.md, Outbox, R68): the leader holds a lease row and
 * renews it on every tick; the others stay standby and try it on every tick, so one of them takes
 * over as soon as the leader hands it back (stop) or it lapses (crash, lost connection: at most
 * LEASE_MS_DEFAULT). Correctness does not rest on the election alone: a job is locked (SKIP LOCKED)
 * and re-checked open inside its transaction, so a leader that lost its session mid-job and the
 * new leader cannot both carry it out.
 */

/** failureReason of a void_pending job queued without one. */
export const PSP_FAILED_REASON = 'psp_failed';

export interface OutboxWorkerSettings {
  /** Jobs per run. */
  readonly batchSizeMax: number;
  /** Failed attempts after which a job is reported as stuck (it keeps being retried at the cap). */
  readonly attemptsMax: number;
  readonly backoffBaseMs: number;
  readonly backoffCapMs: number;
  /** Pending transfers released per run by ledger.expirePendingTransfers. */
  readonly expiryBatchSizeMax: number;
  /** The lease's name; one per deployment and schema. */
  readonly lockName: string;
}

/** Outbox jobs carried out at once, each on its own connection of the process's pool (20). */
const JOBS_IN_FLIGHT = 8;
/** How long one run may go on taking full batches. */
const DRAIN_MS_MAX = 2_000;

export const OUTBOX_DEFAULTS = {
  batchSizeMax: 50,
  attemptsMax: 10,
  backoffBaseMs: 1000,
  backoffCapMs: 300_000,
  expiryBatchSizeMax: 100,
  lockName: 'payorch.outbox',
} as const satisfies OutboxWorkerSettings;

export interface OutboxWorkerDeps {
  readonly db: Database;
  readonly ledger: Ledger;
  readonly publisher: StatusPublisher;
  readonly log: Logger;
  readonly settings: OutboxWorkerSettings;
  /** Counts the intents a job finished; absent in tests that do not look. */
  readonly metrics?: WorkerMetrics;
}

export interface OutboxRun {
  /** False: standby, nothing was done. */
  readonly leader: boolean;
  readonly jobsDone: number;
  readonly jobsFailed: number;
  /** Reservations the ledger released because they timed out. */
  readonly expired: number;
}

export interface OutboxWorker {
  /** Keeps or tries to take the leadership; as leader, runs one batch of due jobs. */
  runOnce(): Promise<OutboxRun>;
  readonly isLeader: boolean;
  /** Waits for a run in progress, then ends the lock session: a standby takes over. */
  stop(): Promise<void>;
}

const STANDBY: OutboxRun = { leader: false, jobsDone: 0, jobsFailed: 0, expired: 0 };
const LAST_ERROR_LENGTH_MAX = 1000;

export function createOutboxWorker(deps: OutboxWorkerDeps): OutboxWorker {
  const { settings } = deps;
  assert.ok(settings.batchSizeMax > 0 && settings.attemptsMax > 0 && settings.expiryBatchSizeMax > 0, 'outbox limits must be > 0');
  const election = new Election(deps);
  let running: Promise<OutboxRun> | null = null;
  let stopped = false;

  const runOnce = (): Promise<OutboxRun> => {
    const previous = running ?? Promise.resolve(STANDBY);
    const run = previous
      .catch(() => STANDBY)
      .then(async () => {
        if (stopped || !(await election.lead())) return STANDBY;
        return runAsLeader(deps);
      });
    running = run;
    return run.finally(() => {
      if (running === run) running = null;
    });
  };

  return {
    runOnce,
    get isLeader() {
      return election.leader;
    },
    async stop() {
      stopped = true;
      await running?.catch(() => STANDBY);
      await election.resign();
    },
  };
}

/** The leadership of one worker: its lock session and whether the lock is held on it. */
class Election {
  leader = false;
  private session: LockSession | null = null;

  constructor(private readonly deps: OutboxWorkerDeps) {}

  /** True while this worker leads; a standby tries to take the lock. */
  async lead(): Promise<boolean> {
    const { log, settings } = this.deps;
    try {
      this.session ??= await this.deps.db.openLockSession();
      if (this.leader) {
        if (await this.session.alive()) return true;
        log.error({ event: 'outbox_leadership_lost' }, 'outbox lock session ended: this worker is standby now');
        await this.resign();
        return false;
      }
      this.leader = await this.session.tryLock(settings.lockName);
      if (this.leader) log.info({ event: 'outbox_leader_elected', lock: settings.lockName }, 'this outbox worker is the leader');
      return this.leader;
    } catch (error) {
      log.warn({ event: 'outbox_election_failed', err: error }, 'outbox leader election failed; tried again at the next tick');
      await this.resign();
      return false;
    }
  }

  async resign(): Promise<void> {
    this.leader = false;
    const session = this.session;
    this.session = null;
    await session?.close();
  }
}

async function runAsLeader(deps: OutboxWorkerDeps): Promise<OutboxRun> {
  const expired = await expireReservations(deps);
  let jobsDone = 0;
  let jobsFailed = 0;
  // A full batch means more are due: the next is taken at once rather than a tick later, for a
  // bounded time so that the run ends and the loop goes on (a backlog after a restart drains
  // at the rate jobs run, not at one batch a tick).
  const started = performance.now();
  for (;;) {
    const { done, failed, taken } = await runDueJobs(deps);
    jobsDone += done;
    jobsFailed += failed;
    if (taken < deps.settings.batchSizeMax || performance.now() - started > DRAIN_MS_MAX) break;
  }
  return { leader: true, jobsDone, jobsFailed, expired };
}

interface DueJob {
  readonly id: bigint;
  readonly intentId: string;
}

/**
 * One batch of due jobs. Its settle jobs go together (settleTogether): one transaction and one
 * ledger call for them all, which is what lets one workers process settle as fast as its PSP
 * worker confirms; the other jobs run side by side, each its own transaction.
 */
async function runDueJobs(deps: OutboxWorkerDeps): Promise<{ done: number; failed: number; taken: number }> {
  const { rows } = await deps.db.query<{ id: bigint; intent_id: string; kind: OutboxKind }>(
    'SELECT id, intent_id, kind FROM outbox WHERE done_at IS NULL AND run_at <= now() ORDER BY run_at, id LIMIT $1',
    [deps.settings.batchSizeMax],
  );
  let jobsDone = 0;
  let jobsFailed = 0;
  const count = (result: JobOutcome) => {
    if (result === 'done') jobsDone += 1;
    if (result === 'failed') jobsFailed += 1;
  };
  const settles = rows.filter((row) => row.kind === 'post_pending').map((row) => ({ id: row.id, intentId: row.intent_id }));
  const queue: DueJob[] = rows.filter((row) => row.kind !== 'post_pending').map((row) => ({ id: row.id, intentId: row.intent_id }));
  // Jobs run side by side, each its own short transaction. A job locks its intent, then its
  // accounts in the ledger's id order, so two jobs never wait for each other in a circle. One job
  // at a time (a commit each) held a workers process at about 24 settled payouts a second.
  const lane = async () => {
    for (let job = queue.shift(); job !== undefined; job = queue.shift()) count(await runOneJob(deps, job));
  };
  const together = async () => {
    if (settles.length === 0) return;
    const { results, alone } = await settleTogether(deps, settles);
    for (const result of results) count(result);
    // Left to their own transactions: the batch failed, or these could not go with it.
    queue.push(...alone);
    await lane();
  };
  await Promise.all([together(), ...Array.from({ length: Math.min(JOBS_IN_FLIGHT, queue.length) }, lane)]);
  return { done: jobsDone, failed: jobsFailed, taken: rows.length };
}

type JobOutcome = 'done' | 'skipped' | 'failed';

const runOneJob = (deps: OutboxWorkerDeps, { id, intentId }: DueJob): Promise<JobOutcome> =>
  inSpan('outbox job', { [INTENT_ID_ATTRIBUTE]: intentId, 'payorch.outbox.job_id': String(id) }, () =>
    withIntentIds([intentId], () => runJob(deps, id, intentId)),
  );

/**
 * Settle jobs carried out together in one transaction: their intents locked in id order (so two
 * batches, or a batch and a single job, never wait for each other in a circle), then their jobs,
 * then settleReservations' one ledger call and set-based writes, then the jobs marked done. The
 * same locks and guards as a single job, so each intent still settles exactly once. What cannot
 * go with the batch is answered in `alone` for a transaction of its own, which records its
 * failure and retry as for any job: an intent the ledger refused, one not in a status to settle
 * from, a missing intent, and every job of a batch whose transaction failed.
 */
async function settleTogether(deps: OutboxWorkerDeps, jobs: readonly DueJob[]): Promise<{ results: JobOutcome[]; alone: DueJob[] }> {
  const intentIds = jobs.map((job) => job.intentId);
  let settled: { results: JobOutcome[]; alone: DueJob[]; announced: JobResult[] };
  try {
    settled = await inSpan('outbox settle batch', { 'payorch.outbox.jobs': jobs.length }, () =>
      withIntentIds(intentIds, () =>
        deps.db.transaction(async (tx) => {
          const intents = await lockIntents(tx, intentIds);
          const { rows: locked } = await tx.query<LockedJob & { intent_id: string }>(
            'SELECT id, kind, payload, intent_id FROM outbox WHERE id = ANY($1::bigint[]) AND done_at IS NULL FOR UPDATE SKIP LOCKED',
            [jobs.map((job) => job.id.toString())],
          );
          const alone: DueJob[] = [];
          const requests: (SettleRequest & { job: LockedJob })[] = [];
          for (const job of locked) {
            const intent = intents.get(job.intent_id);
            if (job.kind === 'post_pending' && intent !== undefined && settlesFrom(intent))
              requests.push({ intent, payload: settlePayload(job), job });
            else alone.push({ id: job.id, intentId: job.intent_id });
          }
          const { outcomes, refused } = await settleReservations(deps.ledger, tx, requests, SETTLE_FROM);
          const finished = requests.filter(({ intent }) => outcomes.has(intent.id));
          for (const { intent, job } of requests) if (refused.has(intent.id)) alone.push({ id: job.id, intentId: intent.id });
          const done = await tx.query(
            'UPDATE outbox SET done_at = now(), attempts = attempts + 1, last_error = NULL WHERE id = ANY($1::bigint[]) AND done_at IS NULL',
            [finished.map(({ job }) => job.id.toString())],
          );
          if (done.rowCount !== finished.length) throw new Error(`outbox jobs of a settle batch were completed under their own locks`);
          // Jobs that were not locked are done meanwhile, or another worker has them.
          const skipped = jobs.length - locked.length;
          const announced = finished.map(({ intent, job }): JobResult => {
            const outcome = outcomes.get(intent.id);
            assert.ok(outcome !== undefined);
            return { kind: job.kind, intent, outcome };
          });
          return {
            results: [...announced.map((): JobOutcome => 'done'), ...Array.from({ length: skipped }, (): JobOutcome => 'skipped')],
            alone,
            announced,
          };
        }),
      ),
    );
  } catch (error) {
    deps.log.warn({ event: 'outbox_settle_batch_failed', jobs: jobs.length, err: error }, 'settle batch failed; its jobs run one by one');
    return { results: [], alone: [...jobs] };
  }
  for (const result of settled.announced) announce(deps, result);
  return { results: settled.results, alone: settled.alone };
}

const SETTLE_FROM = ['AUTHORIZED', 'MANUAL_REVIEW'] as const;
const settlesFrom = (intent: Intent) => intent.status === 'SETTLED' || (SETTLE_FROM as readonly string[]).includes(intent.status);

/** The SETTLED event's payload: an operator's resolution when the job came from one. */
function settlePayload(job: LockedJob): Record<string, unknown> | null {
  const { resolvedBy, reason } = job.payload;
  return resolvedBy === undefined ? null : { resolution: 'CONFIRMED', resolvedBy, ...(reason === undefined ? {} : { reason }) };
}

async function expireReservations(deps: OutboxWorkerDeps): Promise<number> {
  try {
    const ids = await deps.ledger.expirePendingTransfers(deps.db, deps.settings.expiryBatchSizeMax);
    if (ids.length > 0)
      deps.log.warn({ event: 'pending_transfers_expired', count: ids.length }, 'ledger reservations timed out and were released');
    return ids.length;
  } catch (error) {
    deps.log.error({ event: 'pending_expiry_failed', err: error }, 'releasing timed-out reservations failed; tried again at the next run');
    return 0;
  }
}

interface LockedJob {
  id: bigint;
  kind: OutboxKind;
  payload: OutboxPayload;
}

interface JobResult {
  readonly kind: OutboxKind;
  readonly intent: Intent;
  readonly outcome: DeferredOutcome;
}

async function runJob(deps: OutboxWorkerDeps, jobId: bigint, intentId: string): Promise<JobOutcome> {
  let result: JobResult | null;
  try {
    result = await deps.db.transaction(async (tx) => {
      // The intent row first, then the job: the order of every writer that queues jobs.
      const intent = await lockIntent(tx, intentId);
      const { rows } = await tx.query<LockedJob>(
        'SELECT id, kind, payload FROM outbox WHERE id = $1 AND done_at IS NULL FOR UPDATE SKIP LOCKED',
        [jobId],
      );
      const job = rows[0];
      if (job === undefined) return null; // done meanwhile, or another worker has it
      if (intent === null) throw new Error(`outbox job ${jobId} names a missing intent ${intentId}`);
      const outcome = await carryOut(deps, tx, job, intent);
      const done = await tx.query(
        'UPDATE outbox SET done_at = now(), attempts = attempts + 1, last_error = NULL WHERE id = $1 AND done_at IS NULL',
        [jobId],
      );
      if (done.rowCount !== 1) throw new Error(`outbox job ${jobId} was completed under its own lock`);
      return { kind: job.kind, intent, outcome };
    });
  } catch (error) {
    await recordFailure(deps, jobId, intentId, error);
    return 'failed';
  }
  if (result === null) return 'skipped';
  announce(deps, result);
  return 'done';
}

function carryOut(deps: OutboxWorkerDeps, tx: Sql, job: LockedJob, intent: Intent): Promise<DeferredOutcome> {
  switch (job.kind) {
    case 'post_pending':
      return settleReservation(deps.ledger, tx, intent, { fromStatuses: SETTLE_FROM, payload: settlePayload(job) });
    case 'void_pending':
      return releaseReservation(deps.ledger, tx, intent, { fromStatuses: SETTLE_FROM, reason: job.payload.reason ?? PSP_FAILED_REASON });
    default:
      return assertNever(job.kind);
  }
}

/** After the commit: the log line and, for a live intent, its status message. */
function announce(deps: OutboxWorkerDeps, { kind, intent, outcome }: JobResult): void {
  const log = deps.log.child({ traceId: intent.id });
  if (outcome.kind === 'unchanged') {
    log.info({ event: 'outbox_job_done', job: kind, status: outcome.status }, 'outbox job found the intent already final');
    return;
  }
  log.info({ event: 'outbox_job_done', job: kind, from: outcome.from, to: outcome.to, reason: outcome.reason }, `intent ${outcome.to}`);
  deps.metrics?.intentFinished(intent.operationType, intent.channel, outcome.to);
  if (outcome.reason === PENDING_EXPIRED_REASON) {
    // An expired reservation fails the intent (docs/rules.md R23), but a PSPX payout may have been made already: the books need a look.
    log.error(
      { event: 'pending_expired', pspState: intent.pspState, amount: intent.amount.toString() },
      'reservation expired before it was posted; intent FAILED',
    );
  }
  if (intent.live) void deps.publisher.publish(intent.id, [outcome.to], outcome.updatedAt);
}

async function recordFailure(deps: OutboxWorkerDeps, jobId: bigint, intentId: string, error: unknown): Promise<void> {
  const { settings } = deps;
  const message = (error instanceof Error ? error.message : String(error)).slice(0, LAST_ERROR_LENGTH_MAX);
  const log = deps.log.child({ traceId: intentId });
  try {
    const { rows } = await deps.db.query<{ attempts: number }>(
      `UPDATE outbox SET attempts = attempts + 1, last_error = $2,
              run_at = now() + least($3::bigint, ($4::bigint * power(2, least(attempts, 30)))::bigint) * interval '1 millisecond'
        WHERE id = $1 AND done_at IS NULL RETURNING attempts`,
      [jobId, message, settings.backoffCapMs, settings.backoffBaseMs],
    );
    const attempts = rows[0]?.attempts ?? 0;
    if (attempts >= settings.attemptsMax)
      log.error(
        { event: 'outbox_job_stuck', jobId: jobId.toString(), attempts, err: error },
        'outbox job keeps failing; it needs an operator',
      );
    else log.warn({ event: 'outbox_job_retry', jobId: jobId.toString(), attempts, err: error }, 'outbox job failed; retried with backoff');
  } catch (recordError) {
    log.error(
      { event: 'outbox_job_retry', jobId: jobId.toString(), err: recordError, cause: message },
      'outbox job failed and its failure could not be recorded',
    );
  }
}
