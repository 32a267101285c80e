// Fee evaluation cost per intent: FeeEngine.calculateFees (QuickJS sandbox, compiled rules kept)
// on the rule set a P2P intent meets, timed call by call in this process.
// node bench/fee-eval.js '<json options>'  → one JSON line on stdout.
import { performance } from 'node:perf_hooks';
import { createFeeEngine } from '../dist/domain/fees/index.js';

const { iterations = 20_000, warmup = 2_000 } = JSON.parse(process.argv[2] ?? '{}');
const rule = (id, operationType, expression, timing = 'PRE', extra = {}) => ({
  id, name: `rule ${id}`, operationType, expression, timing, tagsInclude: [], tagsExclude: ['fee_exempt'], priority: id, active: true, ...extra,
});
// What the bench config and a busier deployment hold for P2P: a flat fee, a percentage with a
// floor and a cap, and a tagged promotion that does not apply to these requests.
const rules = [
  rule(1, 'P2P_TRANSFER', "[{account: 'system.revenue.THB', amount: 1}]"),
  rule(2, 'P2P_TRANSFER', "[{account: 'system.revenue.THB', amount: Math.min(2000, Math.max(100, amount * 0.001))}]", 'POST'),
  rule(3, 'P2P_TRANSFER', "[{account: 'system.revenue.THB', amount: 0}]", 'PRE', { tagsInclude: ['promo'] }),
];
const engine = await createFeeEngine();
const timesUs = [];
// A process descheduled on a busy machine can overrun the sandbox's 100 ms budget: counted, not fatal.
let timeouts = 0;
for (let i = 0; i < warmup + iterations; i++) {
  const context = { operationType: 'P2P_TRANSFER', amount: BigInt(100 + (i % 1000) * 37), currency: 'THB', metadata: { channel: 'app' } };
  const t0 = performance.now();
  try {
    engine.calculateFees(rules, context);
  } catch (error) {
    if (error?.reason !== 'timeout') throw error;
    timeouts++;
  }
  const t1 = performance.now();
  if (i >= warmup) timesUs.push((t1 - t0) * 1000);
}
engine.dispose();
timesUs.sort((a, b) => a - b);
const at = (p) => Math.round(timesUs[Math.floor((p / 100) * (timesUs.length - 1))] * 10) / 10;
process.stdout.write(`${JSON.stringify({ rules: rules.length, iterations, medianUs: at(50), p99Us: at(99), timeouts })}\n`);
