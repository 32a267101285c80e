import assert from 'node:assert/strict';
import { COMPILED_RULES_MAX_DEFAULT, CompiledRuleCache } from './compiled-rule-cache.js';
import { FeeEvaluationError } from './fee-evaluation-error.js';
import { compareRules, FEE_TIMINGS, type FeeRule, type FeeTiming, metadataTags, ruleApplies } from './fee-rule.js';
import { type FeeSplit, floorAndSum, sumSplits } from './fee-splits.js';
import { createFeeSandbox, type FeeExpressionInput, type FeeSandboxOptions, type RawFeeSplit } from './sandbox.js';

/** What a fee is calculated for: the intent's operation, in satang. */
export type FeeContext = {
  readonly operationType: string;
  /** Satang, 0 to Number.MAX_SAFE_INTEGER (request validation guarantees the bound). */
  readonly amount: bigint;
  readonly currency: string;
  readonly metadata: Readonly<Record<string, unknown>>;
};

export type FeeResult = {
  /** Charged to the sender on top of the amount: total debit = amount + preFee. */
  readonly preFee: bigint;
  /** Taken from the receiver: the receiver gets amount - postFee. */
  readonly postFee: bigint;
  /** One entry per account (the quote's breakdown, docs/rules.md R31). */
  readonly preSplits: FeeSplit[];
  readonly postSplits: FeeSplit[];
  /** PRE and POST together, summed per account. */
  readonly splits: FeeSplit[];
};

export type DryRunResult = { readonly splits: FeeSplit[]; readonly totalFee: bigint };

/**
 * The fee calculation on this thread's own sandbox. The service runs it inside the fee workers
 * (fee-worker-pool.ts), where a runaway evaluation can be killed; tests of the arithmetic use it
 * directly.
 */
export type LocalFeeEngine = {
  /** Throws FeeEvaluationError (with ruleId) when any applicable rule fails: no partial fees. */
  calculateFees(rules: readonly FeeRule[], context: FeeContext): FeeResult;
  /** For POST /admin/fee-rules/dry-run: one expression, not cached. Throws FeeEvaluationError. */
  dryRun(expression: string, context: FeeContext): DryRunResult;
  dispose(): void;
};

export type LocalFeeEngineOptions = FeeSandboxOptions & {
  /** Compiled expressions kept between requests. */
  compiledRulesMax?: number;
};

/** True when at least one rule applies to the context: otherwise the result is known without evaluating anything. */
export function anyRuleApplies(rules: readonly FeeRule[], context: FeeContext): boolean {
  const tags = metadataTags(context.metadata);
  return rules.some((rule) => FEE_TIMINGS.some((timing) => ruleApplies(rule, timing, context.operationType, tags)));
}

export const NO_FEES: FeeResult = Object.freeze({ preFee: 0n, postFee: 0n, preSplits: [], postSplits: [], splits: [] });

export async function createLocalFeeEngine(options: LocalFeeEngineOptions = {}): Promise<LocalFeeEngine> {
  const { compiledRulesMax = COMPILED_RULES_MAX_DEFAULT, ...sandboxOptions } = options;
  const sandbox = await createFeeSandbox(sandboxOptions);
  const cache = new CompiledRuleCache(sandbox, compiledRulesMax);

  const evaluateRule = (rule: FeeRule, input: FeeExpressionInput): RawFeeSplit[] => {
    try {
      return cache.get(rule.id, rule.expression).evaluate(input);
    } catch (error) {
      if (!(error instanceof FeeEvaluationError)) throw error;
      throw new FeeEvaluationError(error.reason, `fee rule ${rule.id} (${rule.name}): ${error.message}`, {
        ruleId: rule.id,
        cause: error,
      });
    }
  };

  const splitsFor = (timing: FeeTiming, rules: readonly FeeRule[], context: FeeContext): FeeSplit[] => {
    const tags = metadataTags(context.metadata);
    const input = expressionInput(context);
    const applicable = rules.filter((rule) => ruleApplies(rule, timing, context.operationType, tags)).sort(compareRules);
    return floorAndSum(applicable.flatMap((rule) => evaluateRule(rule, input)));
  };

  return {
    calculateFees(rules, context) {
      const preSplits = splitsFor('PRE', rules, context);
      const postSplits = splitsFor('POST', rules, context);
      return {
        preFee: sumSplits(preSplits),
        postFee: sumSplits(postSplits),
        preSplits,
        postSplits,
        splits: floorAndSum([...preSplits, ...postSplits]),
      };
    },
    dryRun(expression, context) {
      const compiled = sandbox.compile(expression);
      try {
        const splits = floorAndSum(compiled.evaluate(expressionInput(context)));
        return { splits, totalFee: sumSplits(splits) };
      } finally {
        compiled.dispose();
      }
    },
    dispose() {
      cache.clear();
      sandbox.dispose();
    },
  };
}

/** The sandbox sees the amount as a JS number; exact because it is a safe integer. */
function expressionInput(context: FeeContext): FeeExpressionInput {
  assert.ok(
    context.amount >= 0n && context.amount <= BigInt(Number.MAX_SAFE_INTEGER),
    `fee amount ${context.amount} is outside 0..Number.MAX_SAFE_INTEGER`,
  );
  return {
    operationType: context.operationType,
    amount: Number(context.amount),
    currency: context.currency,
    metadata: context.metadata,
  };
}
