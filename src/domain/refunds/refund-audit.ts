import type { AuditViolation } from '@payorch/client';
import type { Sql } from '../../adapters/database.js';
import { TransferFlags } from '../../ledger/ledger.js';
import { LEDGER_CODE_REFUND } from '../model.js';

/**
 * The invariant audit's refund checks (docs/rules.md R57), set-based like the rest of the audit
 * (domain/audit.ts): refunds never return more than their original credited; every ledger transfer
 * with the refund code is named by exactly one refund, and through it its original; a SETTLED
 * refund has its postings, a FAILED one moved nothing.
 */
export async function checkRefunds(sql: Sql, violationsMax: number): Promise<AuditViolation[]> {
  return [
    ...(await withinOriginal(sql, violationsMax)),
    ...(await transfersNamed(sql, violationsMax)),
    ...(await postings(sql, violationsMax)),
  ];
}

async function withinOriginal(sql: Sql, limit: number): Promise<AuditViolation[]> {
  const { rows } = await sql.query<{ intent_id: string; credited: string; refunded: string; counted: string | null }>(
    `SELECT i.id AS intent_id, (i.amount - i.post_fee_amount)::text AS credited, r.refunded::text, t.refunded::text AS counted
       FROM (SELECT intent_id, sum(amount) AS refunded FROM refunds WHERE status = 'SETTLED' GROUP BY intent_id) r
       JOIN intents i ON i.id = r.intent_id
       LEFT JOIN refund_totals t ON t.original_id = r.intent_id
      WHERE r.refunded > i.amount - i.post_fee_amount OR t.refunded IS DISTINCT FROM r.refunded
      ORDER BY i.id
      LIMIT $1`,
    [limit],
  );
  return rows.map((row) => ({
    check: 'refund_within_original',
    intentId: row.intent_id,
    detail: `refunds settled ${row.refunded} of the ${row.credited} the original credited (its remainder row counts ${row.counted ?? 'nothing'})`,
  }));
}

async function transfersNamed(sql: Sql, limit: number): Promise<AuditViolation[]> {
  const { rows } = await sql.query<{ id: string; refunds: number; original: string | null }>(
    `SELECT l.id, count(r.id)::int AS refunds, min(i.id::text) AS original
       FROM ledger_transfers l
       LEFT JOIN refunds r ON l.id = ANY (r.transfer_ids)
       LEFT JOIN intents i ON i.id = r.intent_id
      WHERE l.code = $1
      GROUP BY l.id
     HAVING count(r.id) <> 1 OR min(i.id::text) IS NULL
      ORDER BY l.id
      LIMIT $2`,
    [LEDGER_CODE_REFUND, limit],
  );
  return rows.map((row) => ({
    check: 'refund_transfer_named',
    detail: `ledger transfer ${row.id} carries the refund code but is named by ${row.refunds} refunds${row.original === null ? ', none with its original' : ''}`,
  }));
}

/**
 * A SETTLED refund: its reservation posted, and every other transfer it lists applied. A FAILED
 * one: nothing posted (no transfer, or a reservation voided).
 */
async function postings(sql: Sql, limit: number): Promise<AuditViolation[]> {
  const { rows } = await sql.query<{
    id: string;
    intent_id: string;
    status: string;
    listed: number;
    found: number;
    posted_reserve: boolean;
    moved: number;
  }>(
    `SELECT r.id, r.intent_id, r.status, cardinality(r.transfer_ids) AS listed, count(l.id)::int AS found,
            coalesce(bool_or(l.flags & $1 <> 0 AND l.pending_status = 'posted'), false) AS posted_reserve,
            count(l.id) FILTER (WHERE l.flags & $1 = 0 AND l.flags & $2 = 0)::int AS moved
       FROM refunds r
       LEFT JOIN ledger_transfers l ON l.id = ANY (r.transfer_ids)
      GROUP BY r.id
     HAVING (r.status = 'SETTLED' AND (cardinality(r.transfer_ids) < 3 OR count(l.id) <> cardinality(r.transfer_ids)
                                       OR NOT coalesce(bool_or(l.flags & $1 <> 0 AND l.pending_status = 'posted'), false)))
         OR (r.status = 'FAILED' AND (count(l.id) FILTER (WHERE l.flags & $1 = 0 AND l.flags & $2 = 0) > 0
                                      OR coalesce(bool_or(l.flags & $1 <> 0 AND l.pending_status IN ('pending', 'posted')), false)))
      ORDER BY r.id
      LIMIT $3`,
    [TransferFlags.pending, TransferFlags.voidPendingTransfer, limit],
  );
  return rows.map((row) => ({
    check: 'refund_postings',
    intentId: row.intent_id,
    detail:
      row.status === 'SETTLED'
        ? `refund ${row.id} is SETTLED but ${row.found} of its ${row.listed} transfers are in the ledger${row.posted_reserve ? '' : ', its reservation not posted'}`
        : `refund ${row.id} is FAILED but moved money (${row.moved} transfers applied)`,
  }));
}
