// Fee evaluation cost per intent on the rule set a P2P intent meets, timed call by call in this
// process: through the fee workers as the service runs it (`medianUs`: the round trip one intent
// waits), on this thread alone (`inThreadMedianUs`: the evaluation itself, now done on a worker),
// the thread hop alone (`hopMedianUs`: a rule whose evaluation is next to nothing), and the cost
// per intent with 32 evaluations under way at once (`loadedUs`: wall time over count;
// `eventLoopUs`: the part of it this thread's event loop was busy, what the service pays).
// node bench/fee-eval.js '<json options>'  → one JSON line on stdout.
import { performance } from 'node:perf_hooks';
import { createFeeEngine, createLocalFeeEngine } from '../dist/domain/rules/fees/index.js';

/** @typedef {import('../dist/domain/rules/fees/index.js').FeeRule} FeeRule */
/** @typedef {import('../dist/domain/rules/fees/index.js').FeeContext} FeeContext */
/** @typedef {import('../dist/domain/rules/fees/index.js').FeeResult} FeeResult */
/**
 * What the run prints: its JSON line on stdout.
 * @typedef {{ rules: number, iterations: number, medianUs: number, p99Us: number, hopMedianUs: number, loadedUs: number, eventLoopUs: number, inThreadMedianUs: number, timeouts: number }} FeeEvalResult
 */

/** @type {{ iterations?: number, warmup?: number }} */
const { iterations = 20_000, warmup = 2_000 } = JSON.parse(process.argv[2] ?? '{}');
/**
 * @param {number} id
 * @param {string} operationType
 * @param {string} expression
 * @param {FeeRule['timing']} [timing]
 * @param {Partial<FeeRule>} [extra]
 * @returns {FeeRule}
 */
const rule = (id, operationType, expression, timing = 'PRE', extra = {}) => ({
  id,
  name: `rule ${id}`,
  operationType,
  expression,
  timing,
  tagsInclude: [],
  tagsExclude: ['fee_exempt'],
  priority: id,
  active: true,
  ...extra,
});
// What the bench config and a busier deployment hold for P2P: a flat fee, a percentage with a
// floor and a cap, and a tagged promotion that does not apply to these requests.
const rules = [
  rule(1, 'P2P_TRANSFER', "[{account: 'system.revenue.THB', amount: 1}]"),
  rule(2, 'P2P_TRANSFER', "[{account: 'system.revenue.THB', amount: Math.min(2000, Math.max(100, amount * 0.001))}]", 'POST'),
  rule(3, 'P2P_TRANSFER', "[{account: 'system.revenue.THB', amount: 0}]", 'PRE', { tagsInclude: ['promo'] }),
];
const hopRules = [rule(4, 'P2P_TRANSFER', '[]')];
/**
 * @param {number} i
 * @returns {FeeContext}
 */
const contextOf = (i) => ({
  operationType: 'P2P_TRANSFER',
  amount: BigInt(100 + (i % 1000) * 37),
  currency: 'THB',
  metadata: { channel: 'app' },
});

// A process descheduled on a busy machine can overrun the 100 ms limit: counted, not fatal.
let timeouts = 0;
/**
 * @param {(context: FeeContext) => FeeResult | Promise<FeeResult>} evaluate
 * @returns {Promise<(percentile: number) => number>}
 */
async function timed(evaluate) {
  /** @type {number[]} */
  const timesUs = [];
  for (let i = 0; i < warmup + iterations; i++) {
    const t0 = performance.now();
    try {
      await evaluate(contextOf(i));
    } catch (error) {
      if (!(error instanceof Error && 'reason' in error && error.reason === 'timeout')) throw error;
      timeouts++;
    }
    if (i >= warmup) timesUs.push((performance.now() - t0) * 1000);
  }
  timesUs.sort((a, b) => a - b);
  return (p) => Math.round((timesUs[Math.floor((p / 100) * (timesUs.length - 1))] ?? Number.NaN) * 10) / 10;
}

/** Per intent when IN_FLIGHT evaluations are under way at once, as in a loaded service: wall time over count. */
const IN_FLIGHT = 32;
/** @param {import('../dist/domain/rules/fees/index.js').FeeEngine} engine */
async function loadedUsPerIntent(engine) {
  const count = warmup + iterations;
  let next = 0;
  const started = performance.now();
  const utilization = performance.eventLoopUtilization();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      for (let i = next++; i < count; i = next++) await engine.calculateFees(rules, contextOf(i));
    }),
  );
  const wallUs = (performance.now() - started) * 1000;
  const busy = performance.eventLoopUtilization(utilization).utilization;
  return { loadedUs: Math.round((wallUs * 10) / count) / 10, eventLoopUs: Math.round((wallUs * busy * 10) / count) / 10 };
}

const pooled = await createFeeEngine();
const local = await createLocalFeeEngine();
const viaWorkers = await timed((context) => pooled.calculateFees(rules, context));
const { loadedUs, eventLoopUs } = await loadedUsPerIntent(pooled);
const hop = await timed((context) => pooled.calculateFees(hopRules, context));
const inThread = await timed((context) => local.calculateFees(rules, context));
await pooled.dispose();
local.dispose();
process.stdout.write(
  `${JSON.stringify({ rules: rules.length, iterations, medianUs: viaWorkers(50), p99Us: viaWorkers(99), hopMedianUs: hop(50), loadedUs, eventLoopUs, inThreadMedianUs: inThread(50), timeouts })}\n`,
);
