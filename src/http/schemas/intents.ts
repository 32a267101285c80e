import Type from 'typebox';
import { ChannelSchema, Currency, IntentStatusSchema, OperationTypeSchema } from '../../domain/wire-types.js';
import { Money, Timestamp, Uuid } from './shared.js';

/** What the intent routes answer: a created intent, an intent, its trail, a fee quote. */

export const IntentCreated = Type.Object({
  intentId: Uuid,
  status: IntentStatusSchema,
  channel: ChannelSchema,
  amount: Type.Optional(Money),
  currency: Type.Optional(Currency),
  preFeeAmount: Money,
  postFeeAmount: Money,
  requiresMonitoring: Type.Boolean(),
  createdAt: Timestamp,
  expiresAt: Type.Optional(Timestamp),
  qrSignature: Type.Optional(Type.String()),
  version: Type.Integer(),
});

export const IntentView = Type.Object({
  intentId: Uuid,
  status: IntentStatusSchema,
  operationType: OperationTypeSchema,
  channel: ChannelSchema,
  amount: Money,
  currency: Currency,
  preFeeAmount: Money,
  postFeeAmount: Money,
  fromAccount: Type.Union([Type.String(), Type.Null()]),
  toAccount: Type.String(),
  failureReason: Type.Union([Type.String(), Type.Null()]),
  version: Type.Integer(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

/** The trail records the PSP worker's steps too, so an event's status is an intent status or a PSP sub-state. */
const EventStatus = Type.String({ description: 'an intent status, or a PSP sub-state (QUERY_PENDING, CONFIRM_PENDING…)' });

export const IntentEventView = Type.Object({
  id: Type.Integer(),
  statusFrom: Type.Union([EventStatus, Type.Null()]),
  statusTo: EventStatus,
  reason: Type.Union([Type.String(), Type.Null()]),
  payload: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
  createdAt: Timestamp,
});

export const IntentEvents = Type.Object({ events: Type.Array(IntentEventView) });

export const FeeSplit = Type.Object({ account: Type.String(), amount: Money });
export const Quote = Type.Object({ fee: Money, totalCharge: Money, breakdown: Type.Array(FeeSplit) });
