import assert from 'node:assert/strict';
import { anyRuleApplies, type DryRunResult, type FeeContext, type FeeResult, type LocalFeeEngineOptions, NO_FEES } from './fee-engine.js';
import type { FeeRule } from './fee-rule.js';
import { FEE_QUEUE_MAX, FEE_WALL_LIMIT_MS, FeeWorkerPool } from './fee-worker-pool.js';
import { threadEntry } from '../../../adapters/thread-entry.js';

/** The fee calculation the service uses: evaluations run on worker threads a runaway cannot hold (docs/SECURITY.md §7). */
export type FeeEngine = {
  /**
   * Rejects with FeeEvaluationError (a rule failed, or was cut at the wall limit) or FeePoolBusyError.
   * `owner`: the service asking; each gets a fair share of the workers (docs/rules.md R61).
   */
  calculateFees(rules: readonly FeeRule[], context: FeeContext, owner?: string): Promise<FeeResult>;
  /** One expression, not cached (the admin dry-run and trial run). */
  dryRun(expression: string, context: FeeContext, owner?: string): Promise<DryRunResult>;
  /** Ends the workers. */
  dispose(): Promise<void>;
};

export type FeeEngineOptions = LocalFeeEngineOptions & {
  /** Worker threads (FEE_WORKERS). */
  workers?: number;
  wallLimitMs?: number;
  queueMax?: number;
};

/** Two: the event loop of this process keeps a core, the evaluations share the other (docs/perf-log/2026-11.md, "batched fee workers"). */
export const FEE_WORKERS_DEFAULT = 2;

const WORKER_ENTRY = threadEntry('./fee-worker.js', import.meta.url);

export async function createFeeEngine(options: FeeEngineOptions = {}): Promise<FeeEngine> {
  const { workers = FEE_WORKERS_DEFAULT, wallLimitMs = FEE_WALL_LIMIT_MS, queueMax = FEE_QUEUE_MAX, ...sandbox } = options;
  const pool = await FeeWorkerPool.create({ workers, wallLimitMs, queueMax, sandbox, entry: WORKER_ENTRY });
  return {
    async calculateFees(rules, context, owner) {
      // Most payments meet no applicable rule: their answer needs no thread hop.
      if (!anyRuleApplies(rules, context)) return NO_FEES;
      const result = await pool.run({ kind: 'fees', rules, context }, owner);
      assert.ok('preFee' in result, 'a fees job answers a FeeResult');
      return result;
    },
    async dryRun(expression, context, owner) {
      const result = await pool.run({ kind: 'dry-run', expression, context }, owner);
      assert.ok('totalFee' in result, 'a dry-run job answers a DryRunResult');
      return result;
    },
    dispose: () => pool.close(),
  };
}
