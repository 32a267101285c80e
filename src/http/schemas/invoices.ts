import Type from 'typebox';
import { INTENT_STATUSES } from '../../domain/model.js';
import { ChannelSchema } from '../../domain/wire-types.js';
import { Money, Timestamp, Uuid } from './shared.js';

/** The two-phase merchant invoice: the payer's confirm and the issuer's cancel, asked and answered. */

export const ConfirmBody = Type.Object(
  {
    payerLedgerAccountId: Uuid,
    payerUserId: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
    idempotencyKey: Uuid,
  },
  { additionalProperties: false },
);

export const ConfirmResult = Type.Object({
  intentId: Uuid,
  status: Type.Enum(INTENT_STATUSES, {
    description: 'SETTLED, or FAILED when the payer lacks funds, a limit blocks or the ledger refuses the settlement',
  }),
  channel: ChannelSchema,
  createdAt: Timestamp,
  version: Type.Integer(),
  replayed: Type.Boolean(),
});

export const CancelBody = Type.Object(
  { reason: Type.Optional(Type.String({ minLength: 1, maxLength: 50 })) },
  { additionalProperties: false },
);

export const CancelResult = Type.Object({
  intentId: Uuid,
  status: Type.Literal('CANCELED'),
  channel: ChannelSchema,
  preFeeAmount: Money,
  postFeeAmount: Money,
  requiresMonitoring: Type.Boolean(),
  createdAt: Timestamp,
});
