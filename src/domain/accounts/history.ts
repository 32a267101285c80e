import type { Sql } from '../../adapters/database.js';
import { LEDGER_CODE_REFUND, type OperationType } from '../model.js';

export interface HistoryEntry {
  readonly id: number;
  readonly intentId: string;
  /** The refund this row belongs to (docs/rules.md R57); intentId and operationType are then its original's. */
  readonly refundId: string | null;
  /** A transaction row is written with its intent, whose type is one of the catalogue's. */
  readonly operationType: OperationType;
  readonly direction: 'DEBIT' | 'CREDIT';
  readonly amount: string;
  readonly feeAmount: string;
  readonly currency: string;
  readonly createdAt: string;
  /** docs/rules.md R58; null on accounts that keep no balance history. */
  readonly balanceAfter: string | null;
}

export async function listTransactions(sql: Sql, accountName: string, limit: number, offset: number): Promise<HistoryEntry[]> {
  const { rows } = await sql.query<{
    id: bigint;
    intent_id: string;
    refund_id: string | null;
    operation_type: OperationType;
    direction: 'DEBIT' | 'CREDIT';
    amount: bigint;
    fee_amount: bigint;
    currency: string;
    created_at: Date;
    balance_after: string | null;
  }>(
    // The posting of a history row is in the transaction that wrote the row, so it is stamped at
    // or after the row's created_at (the transaction's start): a short scan of the account's history.
    // A refund's posting carries its original's intent id and the refund code, told apart so.
    `SELECT t.id, t.intent_id, t.refund_id, t.operation_type, t.direction, t.amount, t.fee_amount, t.currency, t.created_at,
            (SELECT h.balance_after::text FROM ledger_account_history h
              WHERE h.account_id = a.ledger_account_id AND h.posted_at >= t.created_at AND h.intent_id = t.intent_id
                AND (h.amount > 0) = (t.direction = 'CREDIT') AND (h.code = ${LEDGER_CODE_REFUND}) = (t.refund_id IS NOT NULL)
              ORDER BY h.posted_at, h.seq LIMIT 1) AS balance_after
       FROM transactions t LEFT JOIN accounts a ON a.account_name = t.account_name
      WHERE t.account_name = $1
      ORDER BY t.created_at DESC, t.id DESC LIMIT $2 OFFSET $3`,
    [accountName, limit, offset],
  );
  return rows.map((row) => ({
    id: Number(row.id),
    intentId: row.intent_id,
    refundId: row.refund_id,
    operationType: row.operation_type,
    direction: row.direction,
    amount: row.amount.toString(),
    feeAmount: row.fee_amount.toString(),
    currency: row.currency,
    createdAt: row.created_at.toISOString(),
    balanceAfter: row.balance_after,
  }));
}
