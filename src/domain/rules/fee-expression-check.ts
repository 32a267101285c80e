import { apiError } from '../errors.js';
import { type DryRunResult, type FeeContext, FeeEvaluationError } from './fees/index.js';
import { refusedSplitMessage, refusedSplitTarget } from './fees/fee-split-targets.js';

/**
 * A typical amount for the trial run: large enough that percentage fees give a non-zero split,
 * small enough that no sane rule overflows.
 */
export const TRIAL_AMOUNT_SATANG = 10_000n;

export interface FeeExpressionSubject {
  readonly expression: string;
  readonly operationType: string;
  readonly tagsInclude: readonly string[];
}

/**
 * Refuses (422 EVAL_ERROR) a fee expression that would fail every intent it applies to: a syntax
 * error, an exception, a time-out, or a result of the wrong shape. It runs once, through the same
 * engine and limits as the real calculation, on a sample intent of the rule's operation type
 * whose metadata carries the tags the rule requires. It cannot prove the rule right for every
 * amount and metadata; it keeps obviously broken rules out of the table.
 */
/** The fee workers (admin API) or this thread's own sandbox (CONFIG_FILE at start). */
export interface FeeTrialEngine {
  dryRun(expression: string, context: FeeContext): DryRunResult | Promise<DryRunResult>;
}

export async function checkFeeExpression(engine: FeeTrialEngine, rule: FeeExpressionSubject): Promise<void> {
  let trial: DryRunResult;
  try {
    trial = await engine.dryRun(rule.expression, {
      operationType: rule.operationType,
      amount: TRIAL_AMOUNT_SATANG,
      currency: 'THB',
      metadata: { tags: [...rule.tagsInclude] },
    });
  } catch (error) {
    if (!(error instanceof FeeEvaluationError)) throw error;
    throw apiError('EVAL_ERROR', `fee expression refused (${error.reason}): ${error.message}`);
  }
  // docs/rules.md R62: refused here rather than failing every payment it applies to at settlement.
  const refused = refusedSplitTarget(trial.splits);
  if (refused !== undefined) throw apiError('VALIDATION_ERROR', `body.expression: ${refusedSplitMessage(refused)}`);
}
