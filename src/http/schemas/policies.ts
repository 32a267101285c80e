import Type from 'typebox';
import { STEP_UP_LEVELS } from '../../domain/model.js';
import { Currency } from '../../domain/wire-types.js';
import { Money } from './shared.js';

/** 19 digits hold every int8 amount the ledger can carry; longer strings are not amounts. */
export const EVALUATE_AMOUNT_DIGITS_MAX = 19;

const Label = Type.String({ minLength: 1, maxLength: 50 });

export const EvaluateBody = Type.Object(
  {
    userId: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
    merchantId: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
    amount: Type.String({ pattern: `^[0-9]{1,${EVALUATE_AMOUNT_DIGITS_MAX}}$`, description: 'minor units (satang), digits only' }),
    currency: Currency,
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
