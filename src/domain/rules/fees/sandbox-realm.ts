/**
 * JavaScript that runs inside the QuickJS context, as source text. It is trusted code: it runs
 * once per context, before any fee expression is compiled, so it sees the pristine built-ins.
 */

/**
 * Globals removed before freezing, each for a reason:
 * - Date, WeakRef, FinalizationRegistry: a fee must be a function of its inputs, not of the
 *   clock or of garbage collection timing.
 * - SharedArrayBuffer, Proxy: no fee needs them, and a Proxy result could answer differently to
 *   each read; removing them shrinks what a rule can do.
 * - eval, Function: no code generation from strings inside a rule.
 * - Promise: a fee is computed synchronously; the host never runs queued promise jobs.
 * The values are still frozen (they stay reachable through prototypes, e.g. Promise through
 * an async function's result).
 */
const REMOVED_GLOBALS = ['Date', 'WeakRef', 'FinalizationRegistry', 'SharedArrayBuffer', 'Proxy', 'eval', 'Function', 'Promise'] as const;

/**
 * Deep-freezes everything a rule can reach without creating it: the global object, every
 * built-in reachable from it through properties, accessors and prototypes, and the intrinsics
 * reachable only through syntax (generator, async and iterator prototypes, %ThrowTypeError%).
 * After this runs, a rule can create and change only its own objects, so rules compiled into
 * the same context cannot influence each other. The `constructor` of every function prototype
 * is replaced by a thrower so `(() => 0).constructor('return this')` cannot compile code.
 * Returns the number of frozen objects (a sanity figure for the host).
 */
export const HARDEN_SOURCE = `(function () {
  "use strict";
  const g = globalThis;
  const blocked = function () { throw new TypeError("code generation is disabled in fee rules"); };
  const functionPrototypes = [
    Object.getPrototypeOf(function () {}),
    Object.getPrototypeOf(function* () {}),
    Object.getPrototypeOf(async function () {}),
    Object.getPrototypeOf(async function* () {}),
  ];
  for (const prototype of functionPrototypes) {
    Object.defineProperty(prototype, "constructor", { value: blocked, writable: false, enumerable: false, configurable: false });
  }
  const roots = [
    g,
    blocked,
    ...functionPrototypes,
    [][Symbol.iterator](),
    new Map()[Symbol.iterator](),
    new Set()[Symbol.iterator](),
    ""[Symbol.iterator](),
    /x/[Symbol.matchAll]("x"),
    (function () { return arguments; })(),
    (function* () {})(),
    (async function* () {})(),
    (async function () {})(),
  ];
  if (typeof Iterator === "function") {
    if (typeof Iterator.prototype.map === "function") roots.push([].values().map((x) => x));
    if (typeof Iterator.from === "function") roots.push(Iterator.from({ next() { return { done: true }; } }));
  }
  for (const name of ${JSON.stringify(REMOVED_GLOBALS)}) {
    roots.push(g[name]);
    delete g[name];
  }
  const seen = new Set();
  const pending = roots;
  while (pending.length > 0) {
    const value = pending.pop();
    if ((typeof value !== "object" && typeof value !== "function") || value === null || seen.has(value)) continue;
    seen.add(value);
    Object.freeze(value);
    pending.push(Object.getPrototypeOf(value));
    for (const key of Reflect.ownKeys(value)) {
      const descriptor = Reflect.getOwnPropertyDescriptor(value, key);
      if (descriptor === undefined) continue;
      if ("value" in descriptor) pending.push(descriptor.value);
      else pending.push(descriptor.get, descriptor.set);
    }
  }
  return seen.size;
})()`;

/**
 * The trusted caller of every compiled rule: parses the metadata JSON into a fresh object,
 * calls the rule, validates the result while it is still a VM value (so NaN, Infinity and a
 * string amount are told apart, which JSON would blur), and returns one JSON string:
 * `{"s": [[account, amount], ...]}` or `{"e": reason, "m": message}`.
 * Every property of the result is read exactly once, so a getter cannot answer the check and
 * the copy differently. InternalError (out of memory, stack overflow) is rethrown for the host
 * to classify; an interrupt is uncatchable and reaches the host on its own.
 */
export function harnessSource(limits: { splitsMax: number; accountLengthMax: number }): string {
  return `(function (splitsMax, accountLengthMax) {
  "use strict";
  const isArray = Array.isArray;
  const isFinite = Number.isFinite;
  const maxSafe = Number.MAX_SAFE_INTEGER;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const InternalErrorClass = typeof InternalError === "function" ? InternalError : undefined;
  const fail = (reason, message) => stringify({ e: reason, m: message });
  const describe = (error) => {
    try {
      if (typeof error === "object" && error !== null) return String(error.name) + ": " + String(error.message);
      return "non-error value thrown: " + String(error);
    } catch (_) {
      return "an unprintable value was thrown";
    }
  };
  return function run(rule, operationType, amount, currency, metadataJson) {
    let result;
    try {
      result = rule(operationType, amount, currency, parse(metadataJson));
    } catch (error) {
      if (InternalErrorClass !== undefined && error instanceof InternalErrorClass) throw error;
      return fail("exception", describe(error));
    }
    if (!isArray(result)) return fail("shape", "the result is not an array (got " + (result === null ? "null" : typeof result) + ")");
    const length = result.length;
    if (length > splitsMax) return fail("shape", "the result has " + length + " splits, more than " + splitsMax);
    const splits = [];
    for (let i = 0; i < length; i++) {
      const element = result[i];
      if (typeof element !== "object" || element === null || isArray(element)) return fail("shape", "split " + i + " is not an object");
      const account = element.account;
      const splitAmount = element.amount;
      if (typeof account !== "string" || account.length === 0) return fail("shape", "split " + i + " has no non-empty string account");
      if (account.length > accountLengthMax) return fail("shape", "split " + i + " has an account longer than " + accountLengthMax);
      if (typeof splitAmount !== "number") return fail("amount", "split " + i + " amount is a " + typeof splitAmount + ", not a number");
      if (!isFinite(splitAmount) || splitAmount < 0 || splitAmount > maxSafe) return fail("amount", "split " + i + " amount " + String(splitAmount) + " is not a finite number in [0, " + maxSafe + "]");
      splits[i] = [account, splitAmount];
    }
    return stringify({ s: splits });
  };
})(${limits.splitsMax}, ${limits.accountLengthMax})`;
}

/**
 * Wraps one fee expression as a function of the four documented variables. Strict mode makes
 * writes to frozen built-ins throw instead of failing silently. The newlines keep a trailing
 * `// comment` in the expression from swallowing the closing parenthesis.
 * Evaluating this only creates the function; the expression runs on each call.
 */
export function ruleSource(expression: string): string {
  return `(function () {\n"use strict";\nreturn (operationType, amount, currency, metadata) => (\n${expression}\n);\n})()`;
}
