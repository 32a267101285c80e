import Type from 'typebox';
import { Currency, OperationTypeSchema } from '../../domain/wire-types.js';
import { Money, Uuid } from './shared.js';

/** A client's instant, checked by the domain (422 when it is not one), not by the schema (400). */
export const InstantText = Type.String({ minLength: 1, maxLength: 64, description: 'ISO 8601 date and time with an offset' });

export const StatementEntry = Type.Object({
  at: Type.String({ description: 'the posting time, ISO 8601 UTC to the microsecond' }),
  intentId: Type.Union([Uuid, Type.Null()]),
  refundId: Type.Union([Uuid, Type.Null()]),
  operationType: Type.Union([OperationTypeSchema, Type.Null()]),
  direction: Type.Union([Type.Literal('DEBIT'), Type.Literal('CREDIT')]),
  amount: Money,
  feeAmount: Money,
  balanceAfter: Money,
});

export const Statement = Type.Object({
  accountName: Type.String(),
  currency: Currency,
  from: Type.String(),
  to: Type.String(),
  openingBalance: Money,
  closingBalance: Money,
  entries: Type.Array(StatementEntry),
});
