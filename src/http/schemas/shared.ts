import Type from 'typebox';
import { ERROR_STATUS, type ErrorCode } from '../../domain/errors.js';
import { Currency, Money, OperationTypeSchema, Timestamp, Uuid } from '../../domain/wire-types.js';

/** Shared pieces of the request and response schemas. */

const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];
const ERROR_CODE_DESCRIPTION = 'machine-readable code; clients decide on this alone';

const errorBody = (codes: readonly ErrorCode[]) =>
  Type.Object(
    {
      error: Type.Enum(codes, { description: ERROR_CODE_DESCRIPTION }),
      message: Type.Optional(Type.String()),
      detail: Type.Optional(Type.Record(Type.String(), Type.String())),
    },
    { additionalProperties: true },
  );

/** The one error body: `error` is a code of the catalogue (domain/errors.ts). */
export const ErrorResponse = errorBody(ERROR_CODES);

export { Money, Timestamp, Uuid, UuidV4 } from '../../domain/wire-types.js';
/** A moment that may not have happened yet (a first attempt, an expiry). */
export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

/**
 * A code a route answers with: at its catalogue status, or as `[status, code]` where the route
 * answers it at another one (VALIDATION_ERROR is 400 on confirm and cancel, docs/rules.md R6).
 */
export type RouteError = ErrorCode | readonly [status: number, code: ErrorCode];

export const statusOf = (routeError: RouteError): number => (typeof routeError === 'string' ? ERROR_STATUS[routeError] : routeError[0]);
export const codeOf = (routeError: RouteError): ErrorCode => (typeof routeError === 'string' ? routeError : routeError[1]);

/** The codes listed per status, each status once, codes in the order given. */
export function codesByStatus(routeErrors: readonly RouteError[]): Map<number, ErrorCode[]> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const routeError of routeErrors) {
    const codes = byStatus.get(statusOf(routeError)) ?? [];
    if (!codes.includes(codeOf(routeError))) codes.push(codeOf(routeError));
    byStatus.set(statusOf(routeError), codes);
  }
  return byStatus;
}

/**
 * Response map of a route: its success bodies, and per error status the error body whose `error`
 * lists the codes this route's own work can answer there. The codes that every signed or
 * validated route can answer (authentication, rate limits, validation) are added to the OpenAPI
 * document by plugins/openapi.ts, not listed here. The `enum` is documentation: the serializer
 * does not check it, so the body the error handler writes goes out as it is.
 */
export function responses<T extends Record<number, unknown>>(ok: T, routeErrors: readonly RouteError[]): T {
  const errors = Object.fromEntries([...codesByStatus(routeErrors)].map(([status, codes]) => [status, errorBody(codes)]));
  // Typed as the success bodies alone: handlers return those, and every error body is written by
  // the one error handler (plugins/errors.ts) from a thrown ApiError, never returned by a handler.
  return { ...errors, ...ok };
}

/** One row of an account's transaction history, as both history endpoints answer it. */
export const HistoryEntry = Type.Object({
  id: Type.Integer(),
  intentId: Uuid,
  /** The refund the row belongs to, null on an intent's own rows; intentId and operationType are then the original's (docs/rules.md R57). */
  refundId: Type.Union([Uuid, Type.Null()]),
  operationType: OperationTypeSchema,
  direction: Type.Union([Type.Literal('DEBIT'), Type.Literal('CREDIT')]),
  amount: Money,
  feeAmount: Money,
  currency: Currency,
  createdAt: Timestamp,
  /** The account's balance after this posting; null on accounts no user owns, which keep no history (docs/rules.md R58). */
  balanceAfter: Type.Union([Money, Type.Null()]),
});
