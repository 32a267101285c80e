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

export type FeeJobRequest = FeeJob & { readonly id: number };

export type FeeJobAnswer =
  | { readonly id: number; readonly ok: true; readonly result: FeeResult | DryRunResult }
  | { readonly id: number; readonly ok: false; readonly failure: FeeJobFailure };

/** Sent once by a worker whose sandbox is built: jobs are sent to it from then on. */
export const WORKER_READY = 'fee-worker-ready';
