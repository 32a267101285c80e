import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type AuthPolicy, comparePolicies, conditionMatches, decide, type PolicyFacts } from '../../src/domain/rules/policies.js';

const facts: PolicyFacts = { amount: 500n, currency: 'THB', dailyCumulative: 0n, isNewPayee: false };

const policyArb = fc.record({
  id: fc.integer({ min: 1, max: 60 }),
  priority: fc.integer({ min: 0, max: 5 }),
  matches: fc.boolean(),
});

describe('decide', () => {
  it('answers the first matching policy of all scopes together in (priority, id) order', () => {
    fc.assert(
      fc.property(fc.array(fc.uniqueArray(policyArb, { selector: (p) => p.id, maxLength: 12 }), { maxLength: 3 }), (scopes) => {
        const seen = new Set<number>();
        const lists = scopes.map((scope) =>
          scope
            .filter((p) => !seen.has(p.id) && seen.add(p.id))
            .map(
              (p): AuthPolicy => ({
                id: p.id,
                scope: 'global',
                condition: p.matches ? { amount_gte: 1 } : { amount_lt: 1 },
                requiredStepUp: 'OTP',
                reasonCode: `r${p.id}`,
                priority: p.priority,
              }),
            )
            .sort(comparePolicies),
        );
        const expected = lists
          .flat()
          .sort(comparePolicies)
          .find((p) => conditionMatches(p.condition, facts));
        expect(decide(lists, facts).policyId).toBe(expected?.id ?? 0);
      }),
    );
  });
});
