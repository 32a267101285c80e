import assert from 'node:assert/strict';
import type { App } from '../typed-app.js';
import Type from 'typebox';
import type { Database } from '../../adapters/database.js';
import { STEP_UP_LEVELS } from '../../domain/model.js';
import { decide, policyScopes } from '../../domain/rules/policies.js';
import { cachedPolicies, sharedPayerFacts } from '../../domain/rules/policy-queries.js';
import { Money, responses } from '../schemas.js';

/** 19 digits hold every int8 amount the ledger can carry; longer strings are not amounts. */
export const EVALUATE_AMOUNT_DIGITS_MAX = 19;

const Label = Type.String({ minLength: 1, maxLength: 50 });

export const EvaluateBody = Type.Object(
  {
    userId: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
    merchantId: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
    amount: Type.String({ pattern: `^[0-9]{1,${EVALUATE_AMOUNT_DIGITS_MAX}}$`, description: 'minor units (satang), digits only' }),
    currency: Type.String({ minLength: 3, maxLength: 3 }),
    channel: Label,
    appId: Label,
    operationType: Label,
  },
  { additionalProperties: false },
);

export const EvaluateResponse = Type.Object({
  required: Type.Enum(STEP_UP_LEVELS),
  reasonCode: Type.String(),
  policyId: Type.Integer({ description: '0 when no policy matched' }),
  context: Type.Object({ dailyCumulative: Money, isNewPayee: Type.Boolean() }),
});

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
