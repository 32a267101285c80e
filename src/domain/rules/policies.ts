import { assertNever } from '../errors.js';
import type { StepUpLevel } from '../model.js';

/** The step-up decision rules (docs/rules.md, Step-up policies); pure, no SQL. */

export interface AuthPolicy {
  readonly id: number;
  readonly scope: string;
  /** As stored: the known keys below, plus any others, which are ignored. */
  readonly condition: Readonly<Record<string, unknown>>;
  readonly requiredStepUp: StepUpLevel;
  readonly reasonCode: string;
  readonly priority: number;
}

/** What a condition is matched against: the request and the two figures read for it. */
export interface PolicyFacts {
  readonly amount: bigint;
  readonly currency: string;
  /** Settled DEBIT total of the user for the current UTC day in `currency` (docs/rules.md R33). */
  readonly dailyCumulative: bigint;
  /** False without a merchantId in the request (docs/rules.md R33). */
  readonly isNewPayee: boolean;
}

export interface PolicyDecision {
  readonly required: StepUpLevel;
  readonly reasonCode: string;
  /** 0 when no policy matched (docs/rules.md R4). */
  readonly policyId: number;
}

export const NO_MATCH: PolicyDecision = { required: 'NONE', reasonCode: 'no_match', policyId: 0 };

/** Scopes have no hierarchy: these three are simply loaded together. */
export function policyScopes(appId: string, merchantId: number | undefined): string[] {
  return ['global', `app:${appId}`, ...(merchantId === undefined ? [] : [`merchant:${merchantId}`])];
}

/** Priority ascending, then id, so that equal priorities still give one answer. */
export function comparePolicies(a: AuthPolicy, b: AuthPolicy): number {
  return a.priority - b.priority || a.id - b.id;
}

/**
 * The first policy in (priority, id) order whose condition holds; levels are never compared.
 * Each list must already be in that order (the config snapshot keeps one per scope): the first
 * match of each list is a candidate, and a list is left as soon as it reaches the best so far.
 */
export function decide(lists: readonly (readonly AuthPolicy[])[], facts: PolicyFacts): PolicyDecision {
  let match: AuthPolicy | undefined;
  for (const list of lists) {
    for (const policy of list) {
      if (match !== undefined && comparePolicies(policy, match) >= 0) break;
      if (conditionMatches(policy.condition, facts)) {
        match = policy;
        break;
      }
    }
  }
  if (match === undefined) return NO_MATCH;
  return { required: match.requiredStepUp, reasonCode: match.reasonCode, policyId: match.id };
}

/**
 * AND of the known keys that are present. A known key with a value of the wrong type (the admin
 * API refuses those, but a hand-edited row could hold one) makes the condition false: a policy
 * nobody can read should not silently apply to everyone.
 */
export function conditionMatches(condition: Readonly<Record<string, unknown>>, facts: PolicyFacts): boolean {
  const has = (key: string) => Object.hasOwn(condition, key);
  if (has('amount_lt') && !compare(facts.amount, '<', condition.amount_lt)) return false;
  if (has('amount_gte') && !compare(facts.amount, '>=', condition.amount_gte)) return false;
  if (has('amount_lte') && !compare(facts.amount, '<=', condition.amount_lte)) return false;
  if (has('currency') && condition.currency !== facts.currency) return false;
  if (has('daily_cumulative_gte') && !compare(facts.dailyCumulative, '>=', condition.daily_cumulative_gte)) return false;
  if (has('new_payee') && condition.new_payee !== facts.isNewPayee) return false;
  return true;
}

/**
 * Exact comparison of a bigint with a JSON number, fractional ones included: for an integer n
 * and a real x, n < x ⇔ n < ceil(x), n >= x ⇔ n >= ceil(x), n <= x ⇔ n <= floor(x).
 */
function compare(value: bigint, operator: '<' | '>=' | '<=', bound: unknown): boolean {
  if (typeof bound !== 'number' || !Number.isFinite(bound)) return false;
  switch (operator) {
    case '<':
      return value < BigInt(Math.ceil(bound));
    case '>=':
      return value >= BigInt(Math.ceil(bound));
    case '<=':
      return value <= BigInt(Math.floor(bound));
    default:
      return assertNever(operator);
  }
}
