import type { Sql } from '../../adapters/database.js';
import type { OperationType } from '../model.js';

export interface HistoryEntry {
  readonly id: number;
  readonly intentId: string;
  /** A transaction row is written with its intent, whose type is one of the catalogue's. */
  readonly operationType: OperationType;
  readonly direction: 'DEBIT' | 'CREDIT';
  readonly amount: string;
  readonly feeAmount: string;
  readonly currency: string;
  readonly createdAt: string;
}

export async function listTransactions(sql: Sql, accountName: string, limit: number, offset: number): Promise<HistoryEntry[]> {
  const { rows } = await sql.query<{
    id: bigint;
    intent_id: string;
    operation_type: OperationType;
    direction: 'DEBIT' | 'CREDIT';
    amount: bigint;
    fee_amount: bigint;
    currency: string;
    created_at: Date;
  }>(
    `SELECT id, intent_id, operation_type, direction, amount, fee_amount, currency, created_at
       FROM transactions WHERE account_name = $1
      ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`,
    [accountName, limit, offset],
  );
  return rows.map((row) => ({
    id: Number(row.id),
    intentId: row.intent_id,
    operationType: row.operation_type,
    direction: row.direction,
    amount: row.amount.toString(),
    feeAmount: row.fee_amount.toString(),
    currency: row.currency,
    createdAt: row.created_at.toISOString(),
  }));
}
