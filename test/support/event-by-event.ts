import type { Database } from '../../src/adapters/database.js';
import type { CreateTransferResult, TransferInput } from '../../src/ledger/ledger.js';
import { toTransferEvent } from '../../src/ledger/sql-ledger.js';

/**
 * The ledger's reference answers for a batch: its event-by-event path (ledger_run_batch) on the
 * state as it is, rolled back, so the batch can then go through the path under test.
 */
export async function eventByEventAnswers(db: Database, batch: readonly TransferInput[]): Promise<CreateTransferResult[]> {
  const rolledBack = new Error('rolled back');
  let answers: CreateTransferResult[] = [];
  await db
    .transaction(async (tx) => {
      const { rows } = await tx.query<{ results: CreateTransferResult[] }>(`SELECT ledger_run_batch('transfer', $1::jsonb) AS results`, [
        JSON.stringify(batch.map(toTransferEvent)),
      ]);
      answers = rows[0]?.results ?? [];
      throw rolledBack;
    })
    .catch((error: unknown) => {
      if (error !== rolledBack) throw error;
    });
  return answers;
}
