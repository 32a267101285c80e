import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import {
  newQuickJSWASMModule,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSWASMModule,
} from 'quickjs-emscripten';
import { FeeEvaluationError, type FeeEvaluationReason } from './fee-evaluation-error.js';
import { HARDEN_SOURCE, harnessSource, ruleSource } from './sandbox-realm.js';

/**
 * A sandbox for fee expressions on QuickJS (WebAssembly).
 *
 * Isolation choice: ONE hardened context shared by all compiled rules, not one context per
 * rule. At creation every built-in the context can reach is deep-frozen (see HARDEN_SOURCE),
 * so a rule can only create and change its own objects and cannot change what another rule
 * sees. One context per rule would isolate by construction, but a full compiled-rule cache of
 * contexts would not fit the runtime's memory limit, and a runtime per rule costs more still
 * (see docs/perf-log/2026-11.md, "Fee sandbox").
 *
 * After a time-out, an out-of-memory or a stack overflow the whole runtime is discarded and
 * rebuilt lazily; compiled expressions recompile themselves into the new context on their
 * next evaluation. A runtime in which the interpreter was cut short is not trusted again.
 */

/**
 * The sandbox's clock is this process's CPU time, not the wall clock: on a busy machine a cheap
 * expression that waits for a core must not fail as a time-out, while a loop that really burns
 * its 100 ms is stopped all the same.
 */
function cpuNowMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

/**
 * The latest reading of the CPU clock, shared by the evaluations that start soon after it:
 * reading it is a system call, and one per evaluation showed in the service's profile (see
 * docs/perf-log/2026-11.md, "Fee sandbox").
 */
let latestReading = { cpuMs: cpuNowMs(), wallMs: performance.now() };
const READING_REUSE_MS = 5;
const CORES = availableParallelism();

function readCpuClock(): { cpuMs: number; wallMs: number } {
  latestReading = { cpuMs: cpuNowMs(), wallMs: performance.now() };
  return latestReading;
}

/**
 * A budget of CPU time from now. The wall clock is read in user space, and while less than the
 * budget has passed on it the CPU clock need not be read at all (this process's CPU time may run
 * ahead of it on several cores, so that only ever detects a spent budget later, never sooner).
 * The start is the shared reading when it is recent: whatever CPU time the process can have spent
 * since that reading (the wall-clock gap on every core) is not counted as this evaluation's, so
 * it too is stopped late by at most that, never early.
 */
class CpuDeadline {
  private readonly wallStartMs = performance.now();
  private readonly cpuStartMs: number;
  private readonly notOursMs: number;

  constructor(private readonly budgetMs: number) {
    const start = this.wallStartMs - latestReading.wallMs <= READING_REUSE_MS ? latestReading : readCpuClock();
    this.cpuStartMs = start.cpuMs;
    this.notOursMs = (this.wallStartMs - start.wallMs) * CORES;
  }

  passed(): boolean {
    if (performance.now() - this.wallStartMs <= this.budgetMs) return false;
    return readCpuClock().cpuMs - this.cpuStartMs - this.notOursMs > this.budgetMs;
  }
}

/** No code of ours runs in the VM. */
const NO_DEADLINE = { passed: () => false };

export type FeeSandboxOptions = {
  /** CPU-time limit of one evaluation (and of one compilation), see CpuDeadline. Spec: 100 ms. */
  timeoutMs?: number;
  /** Heap limit of the QuickJS runtime shared by all compiled rules. */
  memoryBytesMax?: number;
  /** QuickJS stack limit; see STACK_BYTES_MAX_DEFAULT before raising it. */
  stackBytesMax?: number;
};

/** The variables a fee expression sees (besides Math and the standard built-ins). */
export type FeeExpressionInput = {
  operationType: string;
  /** Satang as a JS number; the caller keeps it within Number.MAX_SAFE_INTEGER. */
  amount: number;
  currency: string;
  /** Plain JSON; passed as JSON text and parsed inside the sandbox into a fresh object. */
  metadata: Readonly<Record<string, unknown>>;
};

/** One element of an expression's result after validation; the amount is not floored yet. */
export type RawFeeSplit = { readonly account: string; readonly amount: number };

export type CompiledExpression = {
  readonly expression: string;
  /** Throws FeeEvaluationError (exception, timeout, memory, shape, amount). */
  evaluate(input: FeeExpressionInput): RawFeeSplit[];
  /** Frees the compiled function inside the sandbox; evaluate() afterwards is a bug. */
  dispose(): void;
};

export type FeeSandbox = {
  /** Throws FeeEvaluationError('syntax') when the text is not one expression. */
  compile(expression: string): CompiledExpression;
  dispose(): void;
};

export const TIMEOUT_MS_DEFAULT = 100;
export const MEMORY_BYTES_MAX_DEFAULT = 16 * 1024 * 1024;
/**
 * QuickJS measures its stack in WebAssembly linear memory, but each QuickJS frame also uses
 * host (V8) stack, several times more for the parser. 16 KiB is small enough that QuickJS reports
 * its own "stack overflow" before the host stack runs out, and still far deeper than a fee
 * expression needs (see docs/perf-log/2026-11.md, "Fee sandbox").
 */
export const STACK_BYTES_MAX_DEFAULT = 16 * 1024;
/** Longer fee expressions are refused before parsing (they only make parsing slower). */
export const EXPRESSION_LENGTH_MAX = 10_000;
/** Limits on one result, checked inside the sandbox before anything is copied out. */
export const SPLITS_PER_EXPRESSION_MAX = 100;
export const ACCOUNT_LENGTH_MAX = 200;
/** Building and hardening a context walks every built-in once; generous but bounded. */
const REALM_SETUP_TIMEOUT_MS = 2_000;

let modulePromise: Promise<QuickJSWASMModule> | undefined;

/**
 * The WebAssembly module is instantiated once per process. It is our own instance rather than
 * getQuickJS()'s shared singleton, so no other QuickJS user in the process shares its memory.
 */
function loadModule(): Promise<QuickJSWASMModule> {
  modulePromise ??= newQuickJSWASMModule().catch((error: unknown) => {
    modulePromise = undefined; // let a later call retry instead of caching the failure
    throw error;
  });
  return modulePromise;
}

type Limits = { timeoutMs: number; memoryBytesMax: number; stackBytesMax: number };

/** One runtime + hardened context + harness, and every rule function compiled into it. */
type Realm = {
  readonly runtime: QuickJSRuntime;
  readonly context: QuickJSContext;
  readonly harness: QuickJSHandle;
  readonly functions: Set<QuickJSHandle>;
};

export async function createFeeSandbox(options: FeeSandboxOptions = {}): Promise<FeeSandbox> {
  const limits: Limits = {
    timeoutMs: options.timeoutMs ?? TIMEOUT_MS_DEFAULT,
    memoryBytesMax: options.memoryBytesMax ?? MEMORY_BYTES_MAX_DEFAULT,
    stackBytesMax: options.stackBytesMax ?? STACK_BYTES_MAX_DEFAULT,
  };
  assert.ok(limits.timeoutMs > 0 && limits.memoryBytesMax > 0 && limits.stackBytesMax > 0, 'sandbox limits must be positive');
  const module = await loadModule();
  return new Sandbox(module, limits);
}

class Sandbox implements FeeSandbox {
  /** Read by the interrupt handler; NO_DEADLINE while no code of ours runs in the VM. */
  private deadline: { passed(): boolean } = NO_DEADLINE;
  private realm: Realm | undefined;
  private disposed = false;

  constructor(
    private readonly module: QuickJSWASMModule,
    private readonly limits: Limits,
  ) {
    this.realm = this.createRealm();
  }

  compile(expression: string): CompiledExpression {
    if (expression.length > EXPRESSION_LENGTH_MAX) {
      throw new FeeEvaluationError('syntax', `the expression is longer than ${EXPRESSION_LENGTH_MAX} characters`);
    }
    let bound: { realm: Realm; fn: QuickJSHandle } | undefined;
    const functionFor = (): { realm: Realm; fn: QuickJSHandle } => {
      const realm = this.currentRealm();
      if (bound?.realm !== realm) bound = { realm, fn: this.compileIn(realm, expression) };
      return bound;
    };
    functionFor(); // compile now so a syntax error surfaces at compile(), not at first use
    return {
      expression,
      evaluate: (input) => {
        const { realm, fn } = functionFor();
        return this.evaluateIn(realm, fn, input);
      },
      dispose: () => {
        // After a realm was discarded its handles are already freed; only a live one is ours to free.
        if (bound !== undefined && bound.realm === this.realm && bound.fn.alive) {
          bound.realm.functions.delete(bound.fn);
          bound.fn.dispose();
        }
        bound = undefined;
      },
    };
  }

  dispose(): void {
    this.discardRealm();
    this.disposed = true;
  }

  private currentRealm(): Realm {
    assert.ok(!this.disposed, 'fee sandbox used after dispose()');
    this.realm ??= this.createRealm();
    return this.realm;
  }

  private createRealm(): Realm {
    const runtime = this.module.newRuntime();
    runtime.setMemoryLimit(this.limits.memoryBytesMax);
    runtime.setMaxStackSize(this.limits.stackBytesMax);
    // One handler for the runtime's life, reading a deadline we move per call: cheaper than
    // installing a new handler per evaluation.
    runtime.setInterruptHandler(() => this.deadline.passed());
    const context = runtime.newContext();
    this.deadline = new CpuDeadline(REALM_SETUP_TIMEOUT_MS);
    try {
      context.unwrapResult(context.evalCode(HARDEN_SOURCE, 'fee-sandbox-harden.js', { type: 'global' })).dispose();
      const harness = context.unwrapResult(
        context.evalCode(
          harnessSource({ splitsMax: SPLITS_PER_EXPRESSION_MAX, accountLengthMax: ACCOUNT_LENGTH_MAX }),
          'fee-sandbox-harness.js',
          { type: 'global' },
        ),
      );
      return { runtime, context, harness, functions: new Set() };
    } catch (error) {
      context.dispose();
      runtime.dispose();
      throw error;
    } finally {
      this.deadline = NO_DEADLINE;
    }
  }

  /** Frees every handle before the context and the runtime, as QuickJS requires. */
  private discardRealm(): void {
    const realm = this.realm;
    this.realm = undefined;
    if (realm === undefined) return;
    for (const fn of realm.functions) if (fn.alive) fn.dispose();
    realm.functions.clear();
    realm.harness.dispose();
    realm.context.dispose();
    realm.runtime.dispose();
  }

  private compileIn(realm: Realm, expression: string): QuickJSHandle {
    const { context } = realm;
    this.deadline = new CpuDeadline(this.limits.timeoutMs);
    let failure: FeeEvaluationError | undefined;
    let fn: QuickJSHandle | undefined;
    try {
      const result = context.evalCode(ruleSource(expression), 'fee-rule.js', { type: 'global', strict: true });
      if (result.error !== undefined) {
        failure = this.classifyVmError(context, result.error);
        result.error.dispose();
        // Compiling only creates the function; any other run-time error means the text closed
        // our wrapper and ran code of its own, so it was not a single expression.
        if (failure.reason === 'exception') {
          failure = new FeeEvaluationError('syntax', `not a single expression: ${failure.message}`);
        }
      } else if (context.typeof(result.value) !== 'function') {
        result.value.dispose();
        failure = new FeeEvaluationError('syntax', 'not a single expression');
      } else {
        fn = result.value;
      }
    } finally {
      this.deadline = NO_DEADLINE;
    }
    if (failure !== undefined) this.failWith(failure);
    assert.ok(fn !== undefined);
    realm.functions.add(fn);
    return fn;
  }

  private evaluateIn(realm: Realm, fn: QuickJSHandle, input: FeeExpressionInput): RawFeeSplit[] {
    const { context } = realm;
    let metadataJson: string;
    try {
      metadataJson = JSON.stringify(input.metadata) ?? '{}';
    } catch (error) {
      throw new FeeEvaluationError('exception', 'metadata is not serialisable as JSON', { cause: error });
    }
    const args = [
      context.newString(input.operationType),
      context.newNumber(input.amount),
      context.newString(input.currency),
      context.newString(metadataJson),
    ];
    let outcome: string | FeeEvaluationError;
    const deadline = new CpuDeadline(this.limits.timeoutMs);
    this.deadline = deadline;
    try {
      const result = context.callFunction(realm.harness, context.undefined, fn, ...args);
      if (result.error !== undefined) {
        outcome = this.classifyVmError(context, result.error);
        result.error.dispose();
      } else {
        outcome =
          context.typeof(result.value) === 'string'
            ? context.getString(result.value)
            : new FeeEvaluationError('exception', 'the sandbox harness returned no result');
        result.value.dispose();
      }
      // QuickJS polls the interrupt handler only every few thousand bytecodes, so a short loop
      // of heavy built-in calls (`new Array(1e6).fill(1)` a few hundred times) returns long after
      // the deadline without being interrupted: such a result is refused all the same. Measured
      // in CPU time, so that a busy machine (or a GC pause) does not fail a cheap expression.
      if (!(outcome instanceof FeeEvaluationError) && deadline.passed()) {
        outcome = new FeeEvaluationError('timeout', `the evaluation ran longer than ${this.limits.timeoutMs} ms`);
      }
    } catch (error) {
      // Only a failure of the WebAssembly machine itself lands here (e.g. the host stack ran
      // out under QuickJS). Nothing in that runtime can be trusted any more.
      this.discardRealmQuietly();
      throw new FeeEvaluationError('memory', 'the sandbox failed while evaluating', { cause: error });
    } finally {
      this.deadline = NO_DEADLINE;
      for (const handle of args) handle.dispose();
    }
    if (realm.runtime.hasPendingJob()) {
      // Queued promise jobs would run inside a later rule's evaluation; drop them with the runtime.
      this.discardRealmQuietly();
      throw new FeeEvaluationError('exception', 'the expression started asynchronous work; fee expressions must be synchronous');
    }
    if (outcome instanceof FeeEvaluationError) this.failWith(outcome);
    return parseOutcome(outcome);
  }

  /** Throws the error, first discarding the runtime when a resource limit cut the VM short. */
  private failWith(error: FeeEvaluationError): never {
    if (error.reason === 'timeout' || error.reason === 'memory') this.discardRealmQuietly();
    throw error;
  }

  private discardRealmQuietly(): void {
    try {
      this.discardRealm();
    } catch {
      // A runtime that cannot even be freed is abandoned; a fresh one is created on next use.
      this.realm = undefined;
    }
  }

  /** Reads name and message of an error that escaped the VM; the deadline is still set. */
  private classifyVmError(context: QuickJSContext, error: QuickJSHandle): FeeEvaluationError {
    const timedOut = this.deadline.passed();
    const name = readStringProp(context, error, 'name');
    const message = readStringProp(context, error, 'message');
    let reason: FeeEvaluationReason = 'exception';
    if (timedOut || (name === 'InternalError' && message === 'interrupted')) reason = 'timeout';
    else if (name === 'InternalError' && message === 'out of memory') reason = 'memory';
    // The parser reports a too deeply nested expression as SyntaxError "stack overflow".
    else if ((name === 'InternalError' || name === 'SyntaxError') && message === 'stack overflow') reason = 'memory';
    else if (name === 'SyntaxError') reason = 'syntax';
    const detail =
      reason === 'timeout'
        ? `the evaluation ran longer than ${this.limits.timeoutMs} ms`
        : reason === 'memory'
          ? `${message} (limits: ${this.limits.memoryBytesMax} bytes heap, ${this.limits.stackBytesMax} bytes stack)`
          : `${name}: ${message}`;
    return new FeeEvaluationError(reason, detail);
  }
}

function readStringProp(context: QuickJSContext, handle: QuickJSHandle, key: string): string {
  if (context.typeof(handle) !== 'object') return '';
  try {
    const value = context.getProp(handle, key);
    try {
      return context.typeof(value) === 'string' ? context.getString(value) : '';
    } finally {
      value.dispose();
    }
  } catch {
    return ''; // a getter that throws or is interrupted tells us nothing more
  }
}

/**
 * Parses the harness's JSON. The harness already validated the result; this re-checks the
 * types on the host side because the text crossed a trust boundary.
 */
function parseOutcome(text: string): RawFeeSplit[] {
  const parsed: unknown = JSON.parse(text);
  assert.ok(typeof parsed === 'object' && parsed !== null, 'sandbox harness returned a non-object');
  if ('e' in parsed) {
    const { e: reason, m: message } = parsed as { e: unknown; m: unknown };
    assert.ok(reason === 'exception' || reason === 'shape' || reason === 'amount', `unexpected harness reason ${String(reason)}`);
    throw new FeeEvaluationError(reason, String(message));
  }
  const splits = (parsed as { s?: unknown }).s;
  assert.ok(Array.isArray(splits), 'sandbox harness returned no splits');
  return splits.map((entry: unknown): RawFeeSplit => {
    assert.ok(Array.isArray(entry) && entry.length === 2);
    const [account, amount] = entry as [unknown, unknown];
    assert.ok(typeof account === 'string' && account.length > 0);
    assert.ok(typeof amount === 'number' && Number.isFinite(amount) && amount >= 0 && amount <= Number.MAX_SAFE_INTEGER);
    return { account, amount };
  });
}
