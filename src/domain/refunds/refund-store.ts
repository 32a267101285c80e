import Type from 'typebox';
import type { Sql } from '../../adapters/database.js';
import { apiError } from '../errors.js';
import { isUuid } from '../accounts/accounts.js';
import { Money, Timestamp, Uuid } from '../wire-types.js';

/** A refund as stored (migrations/022-refunds.sql). */
export interface Refund {
  readonly id: string;
  readonly serviceId: string;
  readonly idempotencyKey: string;
  readonly requestFingerprint: string;
  readonly intentId: string;
  readonly amount: bigint;
  readonly feeAmount: bigint;
  readonly currency: string;
  readonly status: RefundStatus;
  readonly reason: string;
  readonly failureReason: string | null;
  readonly requestedByUserId: number;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly transferIds: readonly string[];
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export const REFUND_STATUSES = ['SETTLED', 'FAILED'] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

const REFUND_SELECT = `id, service_id, idempotency_key, request_fingerprint, intent_id, amount, fee_amount, currency, status,
  reason, failure_reason, requested_by_user_id, metadata, transfer_ids, created_at, updated_at`;

export function toRefund(row: Record<string, unknown>): Refund {
  return {
    id: row.id as string,
    serviceId: row.service_id as string,
    idempotencyKey: row.idempotency_key as string,
    requestFingerprint: row.request_fingerprint as string,
    intentId: row.intent_id as string,
    amount: BigInt(row.amount as string | bigint),
    feeAmount: BigInt(row.fee_amount as string | bigint),
    currency: row.currency as string,
    status: row.status as RefundStatus,
    reason: row.reason as string,
    failureReason: (row.failure_reason as string | null) ?? null,
    requestedByUserId: Number(row.requested_by_user_id),
    metadata: row.metadata as Record<string, unknown>,
    transferIds: (row.transfer_ids as string[] | null) ?? [],
    createdAt: new Date(row.created_at as string | Date),
    updatedAt: new Date(row.updated_at as string | Date),
  };
}

export async function findRefundByKey(sql: Sql, serviceId: string, idempotencyKey: string): Promise<Refund | null> {
  const { rows } = await sql.query(`SELECT ${REFUND_SELECT} FROM refunds WHERE service_id = $1 AND idempotency_key = $2`, [
    serviceId,
    idempotencyKey,
  ]);
  return rows[0] === undefined ? null : toRefund(rows[0]);
}

/** Tenant isolation as for intents: another service's refund is a missing one (404). */
export async function findOwnRefund(sql: Sql, serviceId: string, id: string): Promise<Refund> {
  const { rows } = isUuid(id)
    ? await sql.query(`SELECT ${REFUND_SELECT} FROM refunds WHERE id = $1 AND service_id = $2`, [id, serviceId])
    : { rows: [] };
  if (rows[0] === undefined) throw apiError('NOT_FOUND', 'refund not found');
  return toRefund(rows[0]);
}

/** The refunds of one original, oldest first. */
export async function listRefunds(sql: Sql, intentId: string): Promise<Refund[]> {
  const { rows } = await sql.query(`SELECT ${REFUND_SELECT} FROM refunds WHERE intent_id = $1 ORDER BY created_at, id`, [intentId]);
  return rows.map(toRefund);
}

/** GET /intents/{id}'s refundedAmount: the sum of the original's SETTLED refunds. */
export async function refundedAmountOf(sql: Sql, intentId: string): Promise<bigint> {
  const { rows } = await sql.query<{ refunded: string | bigint }>(
    `SELECT coalesce(sum(amount), 0)::bigint AS refunded FROM refunds WHERE intent_id = $1 AND status = 'SETTLED'`,
    [intentId],
  );
  return BigInt(rows[0]?.refunded ?? 0);
}

export const RefundView = Type.Object({
  refundId: Uuid,
  intentId: Uuid,
  amount: Money,
  feeAmount: Money,
  currency: Type.String(),
  status: Type.Enum(REFUND_STATUSES),
  reason: Type.String(),
  failureReason: Type.Union([Type.String(), Type.Null()]),
  requestedByUserId: Type.Integer(),
  metadata: Type.Record(Type.String(), Type.Unknown()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const RefundList = Type.Object({ refunds: Type.Array(RefundView) });

export function refundView(refund: Refund) {
  return {
    refundId: refund.id,
    intentId: refund.intentId,
    amount: refund.amount.toString(),
    feeAmount: refund.feeAmount.toString(),
    currency: refund.currency,
    status: refund.status,
    reason: refund.reason,
    failureReason: refund.failureReason,
    requestedByUserId: refund.requestedByUserId,
    metadata: refund.metadata,
    createdAt: refund.createdAt.toISOString(),
    updatedAt: refund.updatedAt.toISOString(),
  };
}
