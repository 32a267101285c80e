import Type, { type Static } from 'typebox';
import { UuidV4 } from '../wire-types.js';
import { sha256Hex } from '../auth/signing.js';

/** POST /intents/{id}/refunds (docs/rules.md R57). */
export const RefundBody = Type.Object(
  {
    idempotencyKey: UuidV4,
    amount: Type.Optional(
      Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'satang; default: all that remains refundable' }),
    ),
    reason: Type.String({ minLength: 1, maxLength: 100 }),
    refundFees: Type.Optional(Type.Boolean({ description: "default false: also return the original's fees, in proportion" })),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'default {}' })),
  },
  { additionalProperties: false },
);
export type RefundInput = Static<typeof RefundBody>;

/** The request as the domain reads it: defaults in place. */
export interface RefundRequest {
  readonly idempotencyKey: string;
  readonly amount: bigint | null;
  readonly reason: string;
  readonly refundFees: boolean;
  readonly metadata: Readonly<Record<string, unknown>>;
}

export const refundRequest = (input: RefundInput): RefundRequest => ({
  idempotencyKey: input.idempotencyKey,
  amount: input.amount === undefined ? null : BigInt(input.amount),
  reason: input.reason,
  refundFees: input.refundFees ?? false,
  metadata: input.metadata ?? {},
});

/** What a replay must repeat to be the same refund (docs/rules.md R57, as R14 for intents): original, asker and body. */
export function refundFingerprint(intentId: string, actor: number, request: RefundRequest): string {
  return sha256Hex(
    JSON.stringify([
      intentId.toLowerCase(),
      actor,
      request.amount?.toString() ?? null,
      request.reason,
      request.refundFees,
      request.metadata,
    ]),
  );
}
