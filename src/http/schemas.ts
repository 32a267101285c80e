import Type, { type TSchema } from 'typebox';

/** Shared pieces of the request and response schemas. */

export const ErrorResponse = Type.Object(
  {
    error: Type.String({ description: 'machine-readable code; clients decide on this alone' }),
    message: Type.Optional(Type.String()),
    detail: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  { additionalProperties: true },
);

/** Money leaves the service as a decimal string of satang. */
export const Money = Type.String({ pattern: '^-?[0-9]+$', description: 'amount in satang, as a decimal string' });

export const Uuid = Type.String({ format: 'uuid' });
export const UuidV4 = Type.String({
  pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$',
  description: 'UUID version 4',
});

export const SignedHeaders = Type.Object({
  'x-service-id': Type.Optional(Type.String()),
  'x-timestamp': Type.Optional(Type.String()),
  'x-signature': Type.Optional(Type.String()),
});

/**
 * Response map with the standard error body for the listed statuses. A signed route (one that can
 * answer 401) can also answer 429: its service's rate limit, or a source that keeps failing.
 */
export function responses<T extends Record<number, TSchema>>(ok: T, errorStatuses: readonly number[]) {
  const statuses = errorStatuses.includes(401) && !errorStatuses.includes(429) ? [...errorStatuses, 429] : errorStatuses;
  const errors = Object.fromEntries(statuses.map((status) => [status, ErrorResponse]));
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
