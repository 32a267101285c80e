import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FeeEvaluationError, type FeeEvaluationReason } from '../../src/domain/rules/fees/fee-evaluation-error.js';
import { createFeeSandbox, type FeeExpressionInput, type FeeSandbox } from '../../src/domain/rules/fees/sandbox.js';

const input: FeeExpressionInput = {
  operationType: 'P2P_TRANSFER',
  amount: 100_000,
  currency: 'THB',
  metadata: { tags: ['vip'], note: 'hello' },
};

const GOOD_RULE = "[{account: 'system.revenue.THB', amount: Math.max(100, amount * 0.01)}]";

let sandbox: FeeSandbox;

beforeAll(async () => {
  sandbox = await createFeeSandbox();
});

afterAll(() => {
  sandbox.dispose();
});

function evaluate(expression: string, overrides: Partial<FeeExpressionInput> = {}) {
  const compiled = sandbox.compile(expression);
  try {
    return compiled.evaluate({ ...input, ...overrides });
  } finally {
    compiled.dispose();
  }
}

/** Runs `action`, expects a FeeEvaluationError and returns it for further checks. */
function expectFeeError(action: () => unknown, reason: FeeEvaluationReason): FeeEvaluationError {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(FeeEvaluationError);
    const feeError = error as FeeEvaluationError;
    expect({ reason: feeError.reason, message: feeError.message }).toMatchObject({ reason });
    return feeError;
  }
  throw new Error(`expected a FeeEvaluationError(${reason}), nothing was thrown`);
}

function expectGoodRuleStillWorks(): void {
  expect(evaluate(GOOD_RULE)).toEqual([{ account: 'system.revenue.THB', amount: 1000 }]);
}

describe('fee sandbox: evaluation', () => {
  it('evaluates an expression over operationType, amount, currency, metadata and Math', () => {
    expect(evaluate(GOOD_RULE)).toEqual([{ account: 'system.revenue.THB', amount: 1000 }]);
    expect(evaluate("[{account: 'a.' + currency + '.' + operationType, amount: metadata.tags.includes('vip') ? 0.5 : 7}]")).toEqual([
      { account: 'a.THB.P2P_TRANSFER', amount: 0.5 },
    ]);
  });

  it('compiles once and evaluates many times with fresh arguments', () => {
    const compiled = sandbox.compile("[{account: 'x', amount: amount / 100}]");
    expect(compiled.evaluate({ ...input, amount: 500 })).toEqual([{ account: 'x', amount: 5 }]);
    expect(compiled.evaluate({ ...input, amount: 900 })).toEqual([{ account: 'x', amount: 9 }]);
    compiled.dispose();
  });

  it('gives each evaluation its own metadata object', () => {
    const compiled = sandbox.compile("(metadata.seen = (metadata.seen || 0) + 1, [{account: 'x', amount: metadata.seen}])");
    expect(compiled.evaluate(input)).toEqual([{ account: 'x', amount: 1 }]);
    expect(compiled.evaluate(input)).toEqual([{ account: 'x', amount: 1 }]);
    compiled.dispose();
  });

  it('accepts an empty array and a trailing line comment', () => {
    expect(evaluate('[] // no fee')).toEqual([]);
  });

  it('rejects a syntax error at compile time', () => {
    expectFeeError(() => sandbox.compile('[{account: }'), 'syntax');
    expectFeeError(() => sandbox.compile('x'.repeat(10_001)), 'syntax');
  });

  it('rejects text that closes the wrapper to run code while compiling', () => {
    expectFeeError(() => sandbox.compile('0), (undefinedThing()), (0'), 'syntax');
    expectFeeError(() => sandbox.compile('0), 5, (0'), 'syntax');
  });

  it('reports an exception thrown by the expression', () => {
    const error = expectFeeError(() => evaluate("(() => { throw new Error('boom') })()"), 'exception');
    expect(error.message).toContain('boom');
    expectFeeError(() => evaluate('(() => { throw 42 })()'), 'exception');
  });
});

describe('fee sandbox: result shape', () => {
  const cases: Array<[string, string, FeeEvaluationReason]> = [
    ['a non-array', "({account: 'a', amount: 1})", 'shape'],
    ['undefined', 'undefined', 'shape'],
    ['a string', "'[]'", 'shape'],
    ['an element that is not an object', '[1]', 'shape'],
    ['a null element', '[null]', 'shape'],
    ['an array element', "[['a', 1]]", 'shape'],
    ['a missing account', '[{amount: 1}]', 'shape'],
    ['an empty account', "[{account: '', amount: 1}]", 'shape'],
    ['a numeric account', '[{account: 7, amount: 1}]', 'shape'],
    ['a negative amount', "[{account: 'a', amount: -1}]", 'amount'],
    ['a NaN amount', "[{account: 'a', amount: NaN}]", 'amount'],
    ['an Infinity amount', "[{account: 'a', amount: Infinity}]", 'amount'],
    ['a string amount', "[{account: 'a', amount: '100'}]", 'amount'],
    ['a missing amount', "[{account: 'a'}]", 'amount'],
    ['an amount beyond MAX_SAFE_INTEGER', "[{account: 'a', amount: 2 ** 60}]", 'amount'],
    ['too many splits', "Array.from({length: 101}, () => ({account: 'a', amount: 1}))", 'shape'],
  ];
  for (const [what, expression, reason] of cases) {
    it(`rejects ${what} with reason ${reason}`, () => {
      expectFeeError(() => evaluate(expression), reason);
    });
  }

  it('reads each property once, so a getter cannot pass the check and then change', () => {
    const expression = "(() => { let n = 0; return [{account: 'a', get amount() { n += 1; return n === 1 ? 5 : -5; }}]; })()";
    expect(evaluate(expression)).toEqual([{ account: 'a', amount: 5 }]);
  });
});

describe('fee sandbox: escapes', () => {
  it('has no host objects reachable through constructors', () => {
    const error = expectFeeError(() => evaluate("this.constructor.constructor('return process')()"), 'exception');
    expect(error.message).toMatch(/TypeError/);
    const viaFunction = expectFeeError(() => evaluate("(() => 0).constructor('return process')()"), 'exception');
    expect(viaFunction.message).toContain('code generation is disabled');
    expectFeeError(() => evaluate("Object.getPrototypeOf(function* () {}).constructor('yield 1')"), 'exception');
  });

  it('treats process, require and globalThis.process as missing', () => {
    expect(expectFeeError(() => evaluate('process.exit(1)'), 'exception').message).toMatch(/ReferenceError/);
    expect(expectFeeError(() => evaluate("require('fs')"), 'exception').message).toMatch(/ReferenceError/);
    expect(evaluate("[{account: 'a', amount: typeof globalThis.process === 'undefined' ? 1 : 2}]")).toEqual([{ account: 'a', amount: 1 }]);
    expect(
      evaluate(
        "[{account: [typeof eval, typeof Function, typeof Date, typeof Proxy, typeof Promise, typeof console, typeof std, typeof os].join(','), amount: 0}]",
      ),
    ).toEqual([{ account: 'undefined,undefined,undefined,undefined,undefined,undefined,undefined,undefined', amount: 0 }]);
  });

  it('stops while(true){} at the time limit and keeps working afterwards', () => {
    const compiled = sandbox.compile('(() => { while (true) {} })()');
    // The limit is CPU time (a busy machine must not fail cheap rules), so it is measured as such.
    const started = process.cpuUsage();
    const error = expectFeeError(() => compiled.evaluate(input), 'timeout');
    const used = process.cpuUsage(started);
    const cpuMs = (used.user + used.system) / 1000;
    compiled.dispose();
    expect(cpuMs).toBeGreaterThanOrEqual(95);
    expect(cpuMs).toBeLessThan(250);
    expect(error.message).toContain('100 ms');
    expectGoodRuleStillWorks();
  });

  it('stops a loop that catches and retries', () => {
    expectFeeError(() => evaluate('(() => { for (;;) { try { while (true) {} } catch (e) {} } })()'), 'timeout');
    expectGoodRuleStillWorks();
  });

  it("fails 'x'.repeat(1e9) cleanly on the memory limit and keeps working afterwards", async () => {
    // A roomy time limit here: on a loaded machine the 100 ms clock could otherwise stop the
    // allocation first, and this test is about the memory limit.
    const patient = await createFeeSandbox({ timeoutMs: 5_000 });
    try {
      for (const expression of ["[{account: 'x'.repeat(1e9), amount: 1}]", 'new Array(5e6).fill(0)']) {
        const compiled = patient.compile(expression);
        expectFeeError(() => compiled.evaluate(input), 'memory');
        compiled.dispose();
        expectGoodRuleStillWorks();
      }
    } finally {
      patient.dispose();
    }
  });

  it('stops unbounded recursion on the stack limit', () => {
    expectFeeError(() => evaluate('(() => { const f = (n) => f(n + 1) + 1; return f(0); })()'), 'memory');
    expectFeeError(() => sandbox.compile(`${'('.repeat(4_000)}1${')'.repeat(4_000)}`), 'memory');
    expectGoodRuleStillWorks();
  });

  it('rejects an expression that leaves promise jobs queued', () => {
    expectFeeError(() => evaluate('((async () => 1)().then(() => 0), [])'), 'exception');
    expectGoodRuleStillWorks();
  });

  it('recompiles an existing compiled expression after the runtime was rebuilt', () => {
    const compiled = sandbox.compile(GOOD_RULE);
    expect(compiled.evaluate(input)).toEqual([{ account: 'system.revenue.THB', amount: 1000 }]);
    expectFeeError(() => evaluate('(() => { while (true) {} })()'), 'timeout');
    expect(compiled.evaluate(input)).toEqual([{ account: 'system.revenue.THB', amount: 1000 }]);
    compiled.dispose();
  });
});

describe('fee sandbox: one rule cannot change what another sees', () => {
  it('refuses to replace Math.max, and the next rule sees the real one', () => {
    expectFeeError(() => evaluate("(Math.max = () => 1e9, [{account: 'a', amount: 1}])"), 'exception');
    expectGoodRuleStillWorks();
  });

  it('refuses to replace Array.prototype.map', () => {
    expectFeeError(() => evaluate('(Array.prototype.map = function () { return [] }, [])'), 'exception');
    expect(evaluate("[1, 2].map((x) => ({account: 'a' + x, amount: x}))")).toEqual([
      { account: 'a1', amount: 1 },
      { account: 'a2', amount: 2 },
    ]);
  });

  it('refuses new globals, prototype pollution and redefinition of hidden intrinsics', () => {
    const attempts = [
      '(globalThis.amount = 1, [])',
      '(Object.prototype.amount = 1, [])',
      "(Object.defineProperty(Object.prototype, 'account', {get() { return 'evil' }}), [])",
      '(Object.getPrototypeOf([][Symbol.iterator]()).next = () => ({done: true}), [])',
      '(Object.getPrototypeOf(function* () {}).prototype.next = () => ({done: true}), [])',
      '(JSON.parse = () => ({}), [])',
      '(Object.setPrototypeOf(Math, {}), [])',
      "(Number.prototype.toFixed = () => '0', [])",
    ];
    for (const attempt of attempts) expectFeeError(() => evaluate(attempt), 'exception');
    expect(
      evaluate(
        "[{account: [typeof globalThis.amount, ({}).amount, ({}).account, [...[1, 2]].length, (1.5).toFixed(1)].join(','), amount: Math.max(1, 2)}]",
      ),
    ).toEqual([{ account: 'undefined,,,2,1.5', amount: 2 }]);
  });
});

describe('fee sandbox: speed', () => {
  it('evaluates a compiled simple rule in well under a millisecond (median of 2,000)', () => {
    const compiled = sandbox.compile(GOOD_RULE);
    const callsCount = 2_000;
    const durationsUs: number[] = [];
    for (let call = 0; call < callsCount; call += 1) {
      const started = performance.now();
      compiled.evaluate({ ...input, amount: 100_000 + call });
      durationsUs.push((performance.now() - started) * 1_000);
    }
    compiled.dispose();
    durationsUs.sort((a, b) => a - b);
    const medianUs = durationsUs[Math.floor(callsCount / 2)] ?? Number.NaN;
    const p99Us = durationsUs[Math.floor(callsCount * 0.99)] ?? Number.NaN;
    console.log(`fee sandbox: median ${medianUs.toFixed(1)} µs, p99 ${p99Us.toFixed(1)} µs per evaluation over ${callsCount} calls`);
    expect(medianUs).toBeLessThan(1_000);
  });
});
