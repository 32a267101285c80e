import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import type { DryRunResult, FeeResult, LocalFeeEngineOptions } from './fee-engine.js';
import { FeeEvaluationError } from './fee-evaluation-error.js';
import { type FeeBatch, type FeeBatchAnswer, type FeeJob, type FeeWorkerData, WORKER_READY } from './fee-worker-messages.js';

/** The wall time after which an evaluation is cut, whatever the expression is doing (docs/SECURITY.md §7). */
export const FEE_WALL_LIMIT_MS = 100;
/** Evaluations waiting for a worker; past this the service is overloaded and says so (503). */
export const FEE_QUEUE_MAX = 1_000;
/**
 * A batch a worker has not begun is a thread waiting for a core, not an expression running: it is
 * cut only after this many wall limits, which catches a wedged worker without cutting a busy machine's.
 */
const NOT_BEGUN_LIMITS = 10;
/** A worker that cannot be started is tried again after this pause, not in a tight loop. */
const RESPAWN_PAUSE_MS = 1_000;

export interface FeeWorkerPoolOptions {
  readonly workers: number;
  readonly wallLimitMs: number;
  readonly queueMax: number;
  /** The sandbox limits each worker builds its engine with. */
  readonly sandbox: LocalFeeEngineOptions;
  /** The worker's module (fee-worker.js). */
  readonly entry: URL;
}

/** Every worker is busy and FEE_QUEUE_MAX evaluations wait: the caller answers 503, nothing is evaluated. */
export class FeePoolBusyError extends Error {
  override readonly name = 'FeePoolBusyError';
}

interface Pending {
  readonly job: FeeJob;
  /** Whose evaluation this is (the service id): the unit of the fair share. */
  readonly owner: string;
  resolve(result: FeeResult | DryRunResult): void;
  reject(error: Error): void;
}

/** One worker thread and the batch it runs; a slot that overran is dead and its late answer ignored. */
interface Slot {
  readonly worker: Worker;
  /** When each job of the current batch began (fee-worker-messages.ts, FeeWorkerData). */
  readonly startedAt: Float64Array;
  current: {
    readonly id: number;
    /** Every job of a batch has this owner. */
    readonly owner: string;
    readonly batch: readonly Pending[];
    readonly dispatchedAt: number;
    timer: NodeJS.Timeout;
  } | null;
  dead: boolean;
}

/**
 * Jobs per message to a worker. Jobs wait only while every worker is busy, and then go together:
 * the hop (a message each way, a wake-up of each thread) is paid once per batch instead of once
 * per payment (docs/perf-log/2026-11.md, "batched fee workers").
 */
export const FEE_BATCH_MAX = 32;

/**
 * Fee evaluations on worker threads, a fair share per owner (docs/rules.md R61): each owner (a
 * service) has its own queue, owners are served in turn, a batch holds one owner's jobs, and no
 * owner holds more than all workers but one at once, its workers being restarted after a cut
 * included. So a service whose evaluations are slow
 * (up to the wall limit each) delays another's by at most one evaluation: a worker is always free
 * of it, or frees within one wall limit when there is only one. Within an owner, arrival order.
 * Jobs wait only while workers are busy, and then go together, in batches of what waited. QuickJS cannot interrupt a long built-in call (`new Array(n).fill(0)`), so a
 * watchdog on this thread terminates a worker whose current job passes the wall limit, fails that
 * job as a time-out, sends the rest of its batch again and starts a replacement: no expression can
 * hold the event loop that answers every other request, nor cost another request its answer.
 */
export class FeeWorkerPool {
  private readonly idle: Slot[] = [];
  /** Waiting jobs per owner; an owner is in the map only while it has some, in the order it is next served. */
  private readonly queues = new Map<string, Pending[]>();
  private queued = 0;
  private readonly slots = new Set<Slot>();
  /**
   * Workers being replaced after a job of this owner was cut (or crashed its worker), counted as
   * still held by it until the replacement is ready: the restart is the owner's cost, not everyone's.
   */
  private readonly replacing = new Map<string, number>();
  private nextBatchId = 1;
  private closed = false;

  private constructor(private readonly options: FeeWorkerPoolOptions) {
    assert.ok(Number.isInteger(options.workers) && options.workers >= 1, 'a fee pool needs at least one worker');
  }

  static async create(options: FeeWorkerPoolOptions): Promise<FeeWorkerPool> {
    const pool = new FeeWorkerPool(options);
    await Promise.all(Array.from({ length: options.workers }, () => pool.start()));
    return pool;
  }

  /** `owner`: whose evaluation this is; each owner gets its fair share of the workers. */
  run(job: FeeJob, owner = ''): Promise<FeeResult | DryRunResult> {
    if (this.closed) return Promise.reject(new Error('fee worker pool is closed'));
    // One owner may fill half the queue: the other half stays for everyone else.
    const ownQueued = this.queues.get(owner)?.length ?? 0;
    if (this.queued >= this.options.queueMax || ownQueued >= Math.max(1, Math.floor(this.options.queueMax / 2))) {
      return Promise.reject(new FeePoolBusyError('fee evaluation is overloaded; try again'));
    }
    return new Promise((resolve, reject) => {
      this.enqueue([{ job, owner, resolve, reject }], 'back');
      this.pump();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const queue of this.queues.values()) for (const pending of queue) pending.reject(new Error('fee worker pool is closed'));
    this.queues.clear();
    this.queued = 0;
    await Promise.all([...this.slots].map((slot) => this.kill(slot)));
  }

  private enqueue(pending: readonly Pending[], end: 'front' | 'back'): void {
    for (const item of pending) {
      const queue = this.queues.get(item.owner);
      if (queue === undefined) this.queues.set(item.owner, [item]);
      else if (end === 'back') queue.push(item);
      else queue.unshift(item);
    }
    this.queued += pending.length;
  }

  /**
   * Whether `owner` may take one more worker: it holds at most all workers but one, counting the
   * ones being replaced after its own jobs were cut, so that its slow jobs always leave one to the
   * others, also while its cut workers restart (a restart builds a sandbox: up to a second on a
   * loaded machine). Before, a restart made the remaining worker nobody's, and every service's
   * payment waited for the replacement. With a single worker, one at a time.
   */
  private mayTakeWorker(owner: string): boolean {
    const held = this.busySlotsOf(owner) + (this.replacing.get(owner) ?? 0);
    return held < Math.max(1, this.options.workers - 1);
  }

  private busySlotsOf(owner: string): number {
    let busy = 0;
    for (const slot of this.slots) if (slot.current?.owner === owner) busy += 1;
    return busy;
  }

  private pump(): void {
    while (this.queued > 0 && this.idle.length > 0) {
      const owner = this.nextEligibleOwner();
      if (owner === undefined) return;
      const queue = this.queues.get(owner) ?? [];
      const batch = queue.splice(0, FEE_BATCH_MAX);
      // Served: to the back of the turn, or out of it when nothing of it waits.
      this.queues.delete(owner);
      if (queue.length > 0) this.queues.set(owner, queue);
      this.queued -= batch.length;
      this.dispatch(this.idle.pop() as Slot, owner, batch);
    }
  }

  private nextEligibleOwner(): string | undefined {
    for (const owner of this.queues.keys()) if (this.mayTakeWorker(owner)) return owner;
    return undefined;
  }

  private dispatch(slot: Slot, owner: string, batch: readonly Pending[]): void {
    const id = this.nextBatchId++;
    slot.startedAt.fill(0);
    slot.current = {
      id,
      owner,
      batch,
      dispatchedAt: performance.now(),
      timer: setTimeout(() => this.watch(slot, id), this.options.wallLimitMs),
    };
    slot.worker.postMessage({ id, jobs: batch.map((pending) => pending.job) } satisfies FeeBatch);
  }

  /** Cuts the job the worker is on once it has run for the wall limit; until then looks again when it would reach it. */
  private watch(slot: Slot, batchId: number): void {
    const current = slot.current;
    if (slot.dead || current === null || current.id !== batchId) return;
    const lookAgainAfterMs = this.nextLookMs(slot, current.dispatchedAt);
    if (lookAgainAfterMs !== null) {
      current.timer = setTimeout(() => this.watch(slot, batchId), Math.ceil(lookAgainAfterMs));
      return;
    }
    const began = slot.startedAt[this.jobOn(slot)]!;
    this.abandon(
      slot,
      new FeeEvaluationError(
        'timeout',
        began === 0
          ? `fee worker did not begin within ${this.options.wallLimitMs * NOT_BEGUN_LIMITS} ms`
          : `fee evaluation cut at ${this.options.wallLimitMs} ms of wall time`,
      ),
    );
  }

  /** When the watchdog should look at a busy worker again, or null when its current job is over its time. */
  private nextLookMs(slot: Slot, dispatchedAt: number): number | null {
    const limitMs = this.options.wallLimitMs;
    // The worker has finished and its answer waits for this thread: work that is done is never cut
    // because this thread was held up (a loaded machine, the embedded database) past the limit.
    if (slot.startedAt[slot.startedAt.length - 1]! > 0) return limitMs;
    const began = slot.startedAt[this.jobOn(slot)]!;
    if (began === 0) {
      const graceLeftMs = limitMs * NOT_BEGUN_LIMITS - (performance.now() - dispatchedAt);
      return graceLeftMs > 0 ? Math.min(limitMs, graceLeftMs) : null;
    }
    const leftMs = limitMs - (performance.timeOrigin + performance.now() - began);
    return leftMs > 0 ? leftMs : null;
  }

  /** The index in its batch of the job a busy worker is on: the last one it began (0 before any). */
  private jobOn(slot: Slot): number {
    const size = slot.current?.batch.length ?? 0;
    let index = 0;
    while (index + 1 < size && slot.startedAt[index + 1]! > 0) index += 1;
    return index;
  }

  /**
   * Fails the job the worker is on with `error`, ends the worker and starts a replacement. The
   * batch's other jobs run again, first in line: evaluations are pure, and they did no wrong.
   */
  private abandon(slot: Slot, error: Error): void {
    const current = slot.current;
    if (slot.dead) return;
    const owner = current?.owner ?? null;
    if (current !== null) {
      clearTimeout(current.timer);
      const culprit = current.batch[this.jobOn(slot)]!;
      this.enqueue(current.batch.filter((pending) => pending !== culprit).reverse(), 'front');
      slot.current = null;
      culprit.reject(error);
    }
    if (owner !== null) this.replacing.set(owner, (this.replacing.get(owner) ?? 0) + 1);
    void this.kill(slot).then(() => this.replace(owner));
    this.pump();
  }

  private onAnswer(slot: Slot, answer: FeeBatchAnswer): void {
    const current = slot.current;
    if (slot.dead || current === null || current.id !== answer.id) return;
    clearTimeout(current.timer);
    slot.current = null;
    this.idle.push(slot);
    current.batch.forEach((pending, index) => {
      const outcome = answer.answers[index];
      if (outcome === undefined) pending.reject(new Error(`fee worker answered ${answer.answers.length} of ${current.batch.length} jobs`));
      else if (outcome.ok) pending.resolve(outcome.result);
      else {
        const { reason, message, ruleId } = outcome.failure;
        pending.reject(new FeeEvaluationError(reason, message, ruleId === undefined ? {} : { ruleId }));
      }
    });
    this.pump();
  }

  /** Ends a worker, once, failing the jobs it still holds with `jobError`; the slot leaves the pool. */
  private async kill(slot: Slot, jobError: Error = new Error('fee worker pool is closed')): Promise<void> {
    if (slot.dead) return;
    slot.dead = true;
    this.slots.delete(slot);
    const idleAt = this.idle.indexOf(slot);
    if (idleAt >= 0) this.idle.splice(idleAt, 1);
    if (slot.current !== null) {
      clearTimeout(slot.current.timer);
      for (const pending of slot.current.batch) pending.reject(jobError);
      slot.current = null;
    }
    await slot.worker.terminate();
  }

  /** `owner`: whose cut job this replacement pays for; it holds the slot until the new worker is ready. */
  private replace(owner: string | null): void {
    if (this.closed) return;
    this.start(() => {
      if (owner === null) return;
      const left = (this.replacing.get(owner) ?? 1) - 1;
      if (left > 0) this.replacing.set(owner, left);
      else this.replacing.delete(owner);
    }).catch(() => {
      setTimeout(() => this.replace(owner), RESPAWN_PAUSE_MS).unref();
    });
  }

  /** Resolves once the worker's sandbox is built and it is idle in the pool. */
  private start(onReady: () => void = () => {}): Promise<void> {
    // One entry per job of a batch, and a last one for when the batch finished.
    const progress = new SharedArrayBuffer((FEE_BATCH_MAX + 1) * Float64Array.BYTES_PER_ELEMENT);
    const workerData: FeeWorkerData<LocalFeeEngineOptions> = { sandbox: this.options.sandbox, progress };
    const worker = new Worker(this.options.entry, { workerData });
    // A worker must not keep the process alive: close() ends them, and a forgotten pool must not hang an exit.
    worker.unref();
    const slot: Slot = { worker, startedAt: new Float64Array(progress), current: null, dead: false };
    this.slots.add(slot);
    let ready = false;
    return new Promise((resolve, reject) => {
      worker.on('message', (message: FeeBatchAnswer | typeof WORKER_READY) => {
        if (message !== WORKER_READY) return this.onAnswer(slot, message);
        if (this.closed) return void this.kill(slot);
        ready = true;
        onReady();
        this.idle.push(slot);
        this.pump();
        resolve();
      });
      worker.on('error', (error) => {
        // One that never got ready is the starter's failure to handle; one that crashed later is replaced.
        if (!ready) {
          void this.kill(slot);
          reject(error);
        } else this.abandon(slot, new FeeEvaluationError('exception', `fee worker failed: ${error.message}`));
      });
    });
  }
}
