import Type, { type TSchema } from 'typebox';
import { Money, Uuid } from '../domain/wire-types.js';

/** Shared pieces of the request and response schemas. */

export const ErrorResponse = Type.Object(
  {
    error: Type.String({ description: 'machine-readable code; clients decide on this alone' }),
    message: Type.Optional(Type.String()),
    detail: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  { additionalProperties: true },
);

export { Money, Uuid, UuidV4 } from '../domain/wire-types.js';

export const SignedHeaders = Type.Object({
  'x-service-id': Type.Optional(Type.String()),
  'x-timestamp': Type.Optional(Type.String()),
  'x-signature': Type.Optional(Type.String()),
});

/**
 * Response map with the standard error body for the listed statuses. A signed route (one that can
 * answer 401) can also answer 429: its service's rate limit, or a source that keeps failing.
 */
export function responses<T extends Record<number, TSchema>>(ok: T, errorStatuses: readonly number[]): T {
  const statuses = errorStatuses.includes(401) && !errorStatuses.includes(429) ? [...errorStatuses, 429] : errorStatuses;
  const errors = Object.fromEntries(statuses.map((status) => [status, ErrorResponse]));
  // Typed as the success bodies alone: handlers return those, and every error body is written by
  // the one error handler (plugins/errors.ts) from a thrown ApiError, never returned by a handler.
  return { ...errors, ...ok };
}

/** One row of an account's transaction history, as both history endpoints answer it. */
export const HistoryEntry = Type.Object({
  id: Type.Integer(),
  intentId: Uuid,
  operationType: Type.String(),
  direction: Type.Union([Type.Literal('DEBIT'), Type.Literal('CREDIT')]),
  amount: Money,
  feeAmount: Money,
  currency: Type.String(),
  createdAt: Type.String(),
});
