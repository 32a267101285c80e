import assert from 'node:assert/strict';
import type { App } from '../typed-app.js';
import type { Database } from '../../adapters/database.js';
import { decide, policyScopes } from '../../domain/rules/policies.js';
import { cachedPolicies, sharedPayerFacts } from '../../domain/rules/policy-queries.js';
import { responses } from '../schemas/shared.js';
import { EvaluateBody, EvaluateResponse } from '../schemas/policies.js';

export function policyRoutes(app: App, deps: { db: Database }): void {
  const { db } = deps;
  const payerFacts = sharedPayerFacts(db);
  app.post(
    '/policies/evaluate',
    {
      schema: {
        tags: ['policies'],
        operationId: 'evaluatePolicy',
        summary: 'Step-up decision for a payment: the first active policy (by priority) whose condition matches',
        body: EvaluateBody,
        response: responses({ 200: EvaluateResponse }, []),
      },
    },
    async (request) => {
      const body = request.body;
      const scopes = policyScopes(body.appId, body.merchantId);
      // A signed request always carries the configuration it was checked against (auth.ts).
      const snapshot = request.configSnapshot;
      assert.ok(snapshot !== null, 'a signed request has a configuration snapshot');
      const policies = cachedPolicies(snapshot.policies, scopes);
      const facts = await payerFacts(body.userId, body.currency, body.merchantId);
      const { dailyCumulative, isNewPayee: newPayee } = facts;
      const decision = decide(policies, {
        amount: BigInt(body.amount),
        currency: body.currency,
        dailyCumulative,
        isNewPayee: newPayee,
      });
      return { ...decision, context: { dailyCumulative: dailyCumulative.toString(), isNewPayee: newPayee } };
    },
  );
}
