import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import type { DryRunResult, FeeResult, LocalFeeEngineOptions } from './fee-engine.js';
import { FeeEvaluationError } from './fee-evaluation-error.js';
import { type FeeJob, type FeeJobAnswer, WORKER_READY } from './fee-worker-messages.js';

/** The wall time after which an evaluation is cut, whatever the expression is doing (docs/SECURITY.md §7). */
export const FEE_WALL_LIMIT_MS = 100;
/** Evaluations waiting for a worker; past this the service is overloaded and says so (503). */
export const FEE_QUEUE_MAX = 1_000;
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
  resolve(result: FeeResult | DryRunResult): void;
  reject(error: Error): void;
}

/** One worker thread and the job it runs; a slot that overran is dead and its late answer ignored. */
interface Slot {
  readonly worker: Worker;
  current: { readonly id: number; readonly pending: Pending; readonly timer: NodeJS.Timeout } | null;
  dead: boolean;
}

/**
 * Fee evaluations on worker threads, one job per worker at a time, in arrival order. QuickJS
 * cannot interrupt a long built-in call (`new Array(n).fill(0)`), so a watchdog on this thread
 * terminates a worker whose job passes the wall limit, fails that job as a time-out and starts a
 * replacement: no expression can hold the event loop that answers every other request.
 */
export class FeeWorkerPool {
  private readonly idle: Slot[] = [];
  private readonly queue: Pending[] = [];
  private readonly slots = new Set<Slot>();
  private nextJobId = 1;
  private closed = false;

  private constructor(private readonly options: FeeWorkerPoolOptions) {
    assert.ok(Number.isInteger(options.workers) && options.workers >= 1, 'a fee pool needs at least one worker');
  }

  static async create(options: FeeWorkerPoolOptions): Promise<FeeWorkerPool> {
    const pool = new FeeWorkerPool(options);
    await Promise.all(Array.from({ length: options.workers }, () => pool.start()));
    return pool;
  }

  run(job: FeeJob): Promise<FeeResult | DryRunResult> {
    if (this.closed) return Promise.reject(new Error('fee worker pool is closed'));
    if (this.queue.length >= this.options.queueMax) return Promise.reject(new FeePoolBusyError('fee evaluation is overloaded; try again'));
    return new Promise((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      this.pump();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const pending of this.queue.splice(0)) pending.reject(new Error('fee worker pool is closed'));
    await Promise.all([...this.slots].map((slot) => this.kill(slot, new Error('fee worker pool is closed'))));
  }

  private pump(): void {
    for (let slot = this.idle.pop(); slot !== undefined; slot = this.idle.pop()) {
      const pending = this.queue.shift();
      if (pending === undefined) {
        this.idle.push(slot);
        return;
      }
      this.dispatch(slot, pending);
    }
  }

  private dispatch(slot: Slot, pending: Pending): void {
    const id = this.nextJobId++;
    const timer = setTimeout(() => {
      const cut = new FeeEvaluationError('timeout', `fee evaluation cut at ${this.options.wallLimitMs} ms of wall time`);
      void this.kill(slot, cut).then(() => this.replace());
    }, this.options.wallLimitMs);
    slot.current = { id, pending, timer };
    slot.worker.postMessage({ ...pending.job, id });
  }

  private onAnswer(slot: Slot, answer: FeeJobAnswer): void {
    const current = slot.current;
    if (slot.dead || current === null || current.id !== answer.id) return;
    clearTimeout(current.timer);
    slot.current = null;
    this.idle.push(slot);
    if (answer.ok) current.pending.resolve(answer.result);
    else {
      const { reason, message, ruleId } = answer.failure;
      current.pending.reject(new FeeEvaluationError(reason, message, ruleId === undefined ? {} : { ruleId }));
    }
    this.pump();
  }

  /** Ends a worker and fails its job, once; the slot leaves the pool. */
  private async kill(slot: Slot, jobError: Error): Promise<void> {
    if (slot.dead) return;
    slot.dead = true;
    this.slots.delete(slot);
    const idleAt = this.idle.indexOf(slot);
    if (idleAt >= 0) this.idle.splice(idleAt, 1);
    if (slot.current !== null) {
      clearTimeout(slot.current.timer);
      slot.current.pending.reject(jobError);
      slot.current = null;
    }
    await slot.worker.terminate();
  }

  private replace(): void {
    if (this.closed) return;
    this.start().catch(() => {
      setTimeout(() => this.replace(), RESPAWN_PAUSE_MS).unref();
    });
  }

  /** Resolves once the worker's sandbox is built and it is idle in the pool. */
  private start(): Promise<void> {
    const worker = new Worker(this.options.entry, { workerData: this.options.sandbox });
    // A worker must not keep the process alive: close() ends them, and a forgotten pool must not hang an exit.
    worker.unref();
    const slot: Slot = { worker, current: null, dead: false };
    this.slots.add(slot);
    let ready = false;
    return new Promise((resolve, reject) => {
      worker.on('message', (message: FeeJobAnswer | typeof WORKER_READY) => {
        if (message !== WORKER_READY) return this.onAnswer(slot, message);
        if (this.closed) return void this.kill(slot, new Error('fee worker pool is closed'));
        ready = true;
        this.idle.push(slot);
        this.pump();
        resolve();
      });
      worker.on('error', (error) => {
        const failed = this.kill(slot, new FeeEvaluationError('exception', `fee worker failed: ${error.message}`));
        // One that never got ready is the starter's failure to handle; one that crashed later is replaced.
        if (!ready) reject(error);
        else void failed.then(() => this.replace());
      });
    });
  }
}
