import type { DryRunResult, FeeContext, FeeResult } from './fee-engine.js';
import type { FeeEvaluationReason } from './fee-evaluation-error.js';
import type { FeeRule } from './fee-rule.js';

/** One request's evaluation: every rule of its operation type (the worker picks the applicable ones), or one dry-run expression. */
export type FeeJob =
  | { readonly kind: 'fees'; readonly rules: readonly FeeRule[]; readonly context: FeeContext }
  | { readonly kind: 'dry-run'; readonly expression: string; readonly context: FeeContext };

/** A FeeEvaluationError as it crosses the thread boundary (structured clone keeps no class). */
export interface FeeJobFailure {
  readonly reason: FeeEvaluationReason;
  readonly message: string;
  readonly ruleId: number | undefined;
}

export type FeeJobAnswer =
  | { readonly ok: true; readonly result: FeeResult | DryRunResult }
  | { readonly ok: false; readonly failure: FeeJobFailure };

/**
 * Jobs sent together to one worker. Structured clone copies an object once per message however
 * many jobs refer to it, so the rules of one operation type cross the boundary once per batch.
 */
export interface FeeBatch {
  readonly id: number;
  readonly jobs: readonly FeeJob[];
}

/** The answers of a batch, in the order of its jobs. */
export interface FeeBatchAnswer {
  readonly id: number;
  readonly answers: readonly FeeJobAnswer[];
}

/** The worker's start data: the sandbox limits and the memory where it says which job it is on. */
export interface FeeWorkerData<Sandbox> {
  readonly sandbox: Sandbox;
  /**
   * A Float64Array over it: entry i is the time (ms since the epoch) job i of the current batch
   * began, 0 until then, and the last entry the time the batch finished; the pool's watchdog reads
   * it to cut the one job that overran, and never one that finished before it looked.
   */
  readonly progress: SharedArrayBuffer;
}

/** Sent once by a worker whose sandbox is built: jobs are sent to it from then on. */
export const WORKER_READY = 'fee-worker-ready';
