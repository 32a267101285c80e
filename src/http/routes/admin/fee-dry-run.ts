import type { App } from '../../typed-app.js';
import Type from 'typebox';
import { apiError } from '../../../domain/errors.js';
import { type FeeEngine, FeeEvaluationError } from '../../../domain/rules/fees/index.js';
import { Money, responses } from '../../schemas/shared.js';
import { FeeSplit } from '../../schemas/intents.js';
import { ADMIN_SECURITY } from '../../plugins/openapi-security.js';
import { Currency } from '../../../domain/wire-types.js';

export function feeDryRunRoutes(app: App, deps: { fees: FeeEngine }) {
  app.post(
    '/admin/fee-rules/dry-run',
    {
      config: { auth: 'admin' },
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        operationId: 'dryRunFeeExpression',
        summary: 'Evaluate a fee expression against a context, without storing anything',
        body: Type.Object(
          {
            expression: Type.String({ minLength: 1, maxLength: 10_000 }),
            context: Type.Object(
              {
                operationType: Type.String({ minLength: 1, maxLength: 50 }),
                amount: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
                currency: Currency,
                metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { default: {} })),
              },
              { additionalProperties: false },
            ),
          },
          { additionalProperties: false },
        ),
        response: responses({ 200: Type.Object({ splits: Type.Array(FeeSplit), totalFee: Money }) }, ['EVAL_ERROR']),
      },
    },
    async (request) => {
      const { expression, context } = request.body;
      try {
        const result = await deps.fees.dryRun(
          expression,
          { ...context, amount: BigInt(context.amount), metadata: context.metadata ?? {} },
          request.caller.serviceId,
        );
        return {
          splits: result.splits.map((split) => ({ account: split.account, amount: split.amount.toString() })),
          totalFee: result.totalFee.toString(),
        };
      } catch (error) {
        if (error instanceof FeeEvaluationError) throw apiError('EVAL_ERROR', error.message);
        throw error;
      }
    },
  );
}
