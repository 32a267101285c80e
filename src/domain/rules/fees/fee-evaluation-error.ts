/**
 * Why a fee expression could not produce splits. The HTTP layer maps every reason to
 * 422 EVAL_ERROR; the reason tells an operator which part of the rule to fix.
 * - syntax: the text is not one JavaScript expression (or is longer than allowed).
 * - exception: the expression threw (ReferenceError for `process`, TypeError for a frozen global, ...).
 * - timeout: the evaluation ran past its time limit.
 * - memory: the evaluation ran past its memory or stack limit.
 * - shape: the result is not an array of objects with a non-empty string `account`.
 * - amount: a split amount is not a finite number in [0, Number.MAX_SAFE_INTEGER].
 */
export const FEE_EVALUATION_REASONS = ['syntax', 'exception', 'timeout', 'memory', 'shape', 'amount'] as const;
export type FeeEvaluationReason = (typeof FEE_EVALUATION_REASONS)[number];

export class FeeEvaluationError extends Error {
  override readonly name = 'FeeEvaluationError';
  readonly reason: FeeEvaluationReason;
  /** The rule being evaluated, when the error comes from the fee engine rather than a dry-run. */
  readonly ruleId: number | undefined;

  constructor(reason: FeeEvaluationReason, message: string, options: { ruleId?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.reason = reason;
    this.ruleId = options.ruleId;
  }
}
