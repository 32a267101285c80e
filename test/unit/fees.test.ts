import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompiledRuleCache } from '../../src/domain/rules/fees/compiled-rule-cache.js';
import { type FeeContext, type LocalFeeEngine, createLocalFeeEngine } from '../../src/domain/rules/fees/fee-engine.js';
import { FeeEvaluationError } from '../../src/domain/rules/fees/fee-evaluation-error.js';
import { type FeeRule, metadataTags } from '../../src/domain/rules/fees/fee-rule.js';
import { floorAndSum } from '../../src/domain/rules/fees/fee-splits.js';
import { type CompiledExpression, type FeeSandbox, createFeeSandbox } from '../../src/domain/rules/fees/sandbox.js';

let nextRuleId = 1;

function rule(overrides: Partial<FeeRule> & Pick<FeeRule, 'expression'>): FeeRule {
  const id = overrides.id ?? nextRuleId++;
  return {
    id,
    name: `rule ${id}`,
    operationType: 'P2P_TRANSFER',
    timing: 'PRE',
    tagsInclude: [],
    tagsExclude: [],
    priority: 0,
    active: true,
    ...overrides,
  };
}

function context(overrides: Partial<FeeContext> = {}): FeeContext {
  return { operationType: 'P2P_TRANSFER', amount: 100_000n, currency: 'THB', metadata: {}, ...overrides };
}

function catchError(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  return undefined;
}

const revenue = (amount: string) => `[{account: 'system.revenue.THB', amount: ${amount}}]`;

let engine: LocalFeeEngine;

beforeAll(async () => {
  engine = await createLocalFeeEngine();
});

afterAll(() => {
  engine.dispose();
});

describe('calculateFees', () => {
  it('charges PRE and POST fees on one operation', () => {
    const rules = [
      rule({ expression: revenue('Math.max(100, amount * 0.01)'), timing: 'PRE' }),
      rule({ expression: "[{account: 'system.partner.THB', amount: 250}]", timing: 'POST' }),
    ];
    const result = engine.calculateFees(rules, context());
    expect(result.preFee).toBe(1000n);
    expect(result.postFee).toBe(250n);
    expect(result.preSplits).toEqual([{ account: 'system.revenue.THB', amount: 1000n }]);
    expect(result.postSplits).toEqual([{ account: 'system.partner.THB', amount: 250n }]);
    expect(result.splits).toEqual([
      { account: 'system.revenue.THB', amount: 1000n },
      { account: 'system.partner.THB', amount: 250n },
    ]);
  });

  it('sums one account across PRE and POST in `splits` only', () => {
    const rules = [rule({ expression: revenue('10'), timing: 'PRE' }), rule({ expression: revenue('5'), timing: 'POST' })];
    const result = engine.calculateFees(rules, context());
    expect(result.preSplits).toEqual([{ account: 'system.revenue.THB', amount: 10n }]);
    expect(result.postSplits).toEqual([{ account: 'system.revenue.THB', amount: 5n }]);
    expect(result.splits).toEqual([{ account: 'system.revenue.THB', amount: 15n }]);
  });

  it('floors each split before summing (docs/rules.md R31): 10.6 + 10.6 on one account is 20', () => {
    const rules = [rule({ expression: revenue('10.6') }), rule({ expression: revenue('10.6') })];
    const result = engine.calculateFees(rules, context());
    expect(result.preFee).toBe(20n);
    expect(result.preSplits).toEqual([{ account: 'system.revenue.THB', amount: 20n }]);
  });

  it('floors splits inside one result too, and drops accounts that sum to zero', () => {
    const expression = "[{account: 'a', amount: 0.9}, {account: 'b', amount: 2.5}, {account: 'b', amount: 2.5}, {account: 'c', amount: 0}]";
    const result = engine.calculateFees([rule({ expression })], context());
    expect(result.preSplits).toEqual([{ account: 'b', amount: 4n }]);
    expect(result.preFee).toBe(4n);
  });

  it('applies tagsInclude only when all listed tags are present', () => {
    const rules = [rule({ expression: revenue('7'), tagsInclude: ['vip', 'promo'] })];
    expect(engine.calculateFees(rules, context({ metadata: { tags: ['vip', 'promo', 'x'] } })).preFee).toBe(7n);
    expect(engine.calculateFees(rules, context({ metadata: { tags: ['vip'] } })).preFee).toBe(0n);
    expect(engine.calculateFees(rules, context()).preFee).toBe(0n);
  });

  it('skips a rule when any tagsExclude tag is present', () => {
    const rules = [rule({ expression: revenue('7'), tagsExclude: ['internal', 'promo'] })];
    expect(engine.calculateFees(rules, context({ metadata: { tags: ['promo'] } })).preFee).toBe(0n);
    expect(engine.calculateFees(rules, context({ metadata: { tags: ['vip'] } })).preFee).toBe(7n);
  });

  it('exempts an operation tagged fee_exempt from rules that list it in tagsExclude, and only those', () => {
    const rules = [
      rule({ expression: revenue('100'), tagsExclude: ['fee_exempt'] }),
      rule({ expression: "[{account: 'system.tax.THB', amount: 3}]" }),
    ];
    const exempt = engine.calculateFees(rules, context({ metadata: { tags: ['fee_exempt'] } }));
    expect(exempt.preSplits).toEqual([{ account: 'system.tax.THB', amount: 3n }]);
    expect(engine.calculateFees(rules, context()).preFee).toBe(103n);
  });

  it('treats metadata.tags that is missing or not an array of strings as no tags', () => {
    expect(metadataTags({})).toEqual(new Set());
    expect(metadataTags({ tags: 'fee_exempt' })).toEqual(new Set());
    expect(metadataTags({ tags: ['fee_exempt', 1] })).toEqual(new Set());
    const rules = [rule({ expression: revenue('5'), tagsExclude: ['fee_exempt'] })];
    expect(engine.calculateFees(rules, context({ metadata: { tags: 'fee_exempt' } })).preFee).toBe(5n);
  });

  it('evaluates rules in priority order, then id order', () => {
    const rules = [
      rule({ id: 9001, priority: 5, expression: "[{account: 'third', amount: 1}]" }),
      rule({ id: 9003, priority: 1, expression: "[{account: 'second', amount: 1}]" }),
      rule({ id: 9002, priority: 1, expression: "[{account: 'first', amount: 1}]" }),
    ];
    const accounts = engine.calculateFees(rules, context()).preSplits.map((split) => split.account);
    expect(accounts).toEqual(['first', 'second', 'third']);
  });

  it('ignores inactive rules and rules of other operation types', () => {
    const rules = [
      rule({ expression: revenue('1') }),
      rule({ expression: revenue('1000'), active: false }),
      rule({ expression: revenue('1000'), operationType: 'WITHDRAWAL' }),
      rule({ expression: '(() => { throw new Error("must not run") })()', active: false }),
    ];
    expect(engine.calculateFees(rules, context()).preFee).toBe(1n);
  });

  it('returns zero fees when no rule applies', () => {
    expect(engine.calculateFees([], context())).toEqual({
      preFee: 0n,
      postFee: 0n,
      preSplits: [],
      postSplits: [],
      splits: [],
    });
  });

  it('passes operationType, amount as a number, currency and metadata to the expression', () => {
    const expression = "[{account: [operationType, typeof amount, currency, metadata.merchantId].join('|'), amount: amount / 1000}]";
    const result = engine.calculateFees(
      [rule({ expression, operationType: 'THAI_QR_PAY' })],
      context({ operationType: 'THAI_QR_PAY', amount: 123_456n, metadata: { merchantId: 42 } }),
    );
    expect(result.preSplits).toEqual([{ account: 'THAI_QR_PAY|number|THB|42', amount: 123n }]);
  });

  it('fails the whole calculation with the rule id when one rule fails', () => {
    const failing = rule({ id: 7777, name: 'broken', expression: "[{account: 'a', amount: -1}]" });
    const error = catchError(() => engine.calculateFees([rule({ expression: revenue('1') }), failing], context()));
    expect(error).toBeInstanceOf(FeeEvaluationError);
    const feeError = error as FeeEvaluationError;
    expect(feeError.reason).toBe('amount');
    expect(feeError.ruleId).toBe(7777);
    expect(feeError.message).toContain('fee rule 7777 (broken)');
  });

  it('refuses an amount beyond Number.MAX_SAFE_INTEGER instead of rounding it', () => {
    expect(() => engine.calculateFees([rule({ expression: '[]' })], context({ amount: BigInt(Number.MAX_SAFE_INTEGER) + 1n }))).toThrow(
      /MAX_SAFE_INTEGER/,
    );
  });
});

describe('dryRun', () => {
  it('returns floored splits per account and the total fee', () => {
    const expression = "[{account: 'system.revenue.THB', amount: amount * 0.015}, {account: 'system.revenue.THB', amount: 0.7}]";
    expect(engine.dryRun(expression, context({ amount: 1_001n }))).toEqual({
      splits: [{ account: 'system.revenue.THB', amount: 15n }],
      totalFee: 15n,
    });
  });

  it('throws FeeEvaluationError for a syntax error, a bad shape, an exception and a time-out', () => {
    const reasons: Array<[string, string]> = [
      ['[{', 'syntax'],
      ["{account: 'a', amount: 1}", 'shape'],
      ['nope()', 'exception'],
      ['(() => { while (true) {} })()', 'timeout'],
    ];
    for (const [expression, reason] of reasons) {
      const error = catchError(() => engine.dryRun(expression, context()));
      expect(error).toBeInstanceOf(FeeEvaluationError);
      expect({ expression, reason: (error as FeeEvaluationError).reason }).toEqual({ expression, reason });
    }
    expect(engine.dryRun(revenue('1'), context()).totalFee).toBe(1n);
  });
});

describe('floorAndSum', () => {
  it('floors each split, sums per account in first-seen order and drops zero totals', () => {
    expect(
      floorAndSum([
        { account: 'b', amount: 1.9 },
        { account: 'a', amount: 0.5 },
        { account: 'b', amount: 1.9 },
      ]),
    ).toEqual([{ account: 'b', amount: 2n }]);
  });
});

describe('CompiledRuleCache', () => {
  let sandbox: FeeSandbox;
  let compilations: string[];

  beforeAll(async () => {
    sandbox = await createFeeSandbox();
  });

  afterAll(() => {
    sandbox.dispose();
  });

  /** A sandbox that records what it compiles, to count compilations. */
  function countingSandbox(): FeeSandbox {
    compilations = [];
    return {
      compile(expression: string): CompiledExpression {
        compilations.push(expression);
        return sandbox.compile(expression);
      },
      dispose() {},
    };
  }

  const input = { operationType: 'P2P_TRANSFER', amount: 1, currency: 'THB', metadata: {} };

  it('compiles a rule once across calls', () => {
    const cache = new CompiledRuleCache(countingSandbox(), 10);
    const first = cache.get(1, "[{account: 'a', amount: 1}]");
    const second = cache.get(1, "[{account: 'a', amount: 1}]");
    expect(second).toBe(first);
    expect(compilations).toHaveLength(1);
    cache.clear();
  });

  it('replaces and frees the stale compilation when a rule expression changes', () => {
    const cache = new CompiledRuleCache(countingSandbox(), 10);
    cache.get(1, "[{account: 'a', amount: 1}]");
    const changed = cache.get(1, "[{account: 'a', amount: 2}]");
    expect(cache.size).toBe(1);
    expect(changed.evaluate(input)).toEqual([{ account: 'a', amount: 2 }]);
    expect(compilations).toHaveLength(2);
    cache.clear();
  });

  it('evicts the least recently used rule beyond its size limit', () => {
    const cache = new CompiledRuleCache(countingSandbox(), 2);
    cache.get(1, '[]');
    cache.get(2, '[]');
    cache.get(1, '[]'); // 1 is now the most recently used
    cache.get(3, '[]'); // evicts 2
    expect(cache.size).toBe(2);
    cache.get(1, '[]');
    expect(compilations).toHaveLength(3);
    cache.get(2, '[]');
    expect(compilations).toHaveLength(4);
    cache.clear();
  });

  it('does not cache an expression that fails to compile', () => {
    const cache = new CompiledRuleCache(countingSandbox(), 10);
    expect(() => cache.get(1, '[{')).toThrow(FeeEvaluationError);
    expect(cache.size).toBe(0);
  });
});
