import { expect } from 'vitest';
import type { Sql } from '../../src/adapters/database.js';
import { checkLedgerInvariants } from '../../src/ledger/invariants.js';

/**
 * The money invariants after a test moved money: the ledger's own (all balances sum to zero,
 * pending sides agree, no guarded account overdrawn), and every transit account nets to zero
 * posted, holding in pending exactly what its channel's in-flight intents reserved.
 */
export async function expectLedgerInvariants(sql: Sql): Promise<void> {
  expect(await checkLedgerInvariants(sql)).toEqual([]);
  const { rows } = await sql.query<{ account_name: string; net_posted: bigint; credits_pending: bigint; reserved: bigint }>(
    `SELECT a.account_name,
            coalesce(sum(b.credits_posted - b.debits_posted), 0)::bigint AS net_posted,
            coalesce(sum(b.credits_pending), 0)::bigint AS credits_pending,
            (SELECT coalesce(sum(i.amount + i.pre_fee_amount), 0)::bigint FROM intents i
              WHERE i.status IN ('AUTHORIZED', 'MANUAL_REVIEW', 'SETTLING')
                AND 'system.transit.' || CASE i.channel WHEN 'PSPX_TRANSFER' THEN 'PSPX' WHEN 'ADMIN' THEN 'INTERNAL' ELSE i.channel END
                    || '.' || i.currency = a.account_name) AS reserved
       FROM accounts a JOIN ledger_balances b ON b.account_id = a.ledger_account_id
      WHERE a.account_type = 'TRANSIT'
      GROUP BY a.account_name`,
  );
  for (const row of rows) {
    expect({ account: row.account_name, netPosted: row.net_posted, pending: row.credits_pending }).toEqual({
      account: row.account_name,
      netPosted: 0n,
      pending: row.reserved,
    });
  }
}

export async function balanceOf(sql: Sql, accountName: string): Promise<bigint> {
  const { rows } = await sql.query<{ balance: bigint }>(
    `SELECT coalesce(sum(b.credits_posted - b.debits_posted), 0)::bigint AS balance
       FROM accounts a JOIN ledger_balances b ON b.account_id = a.ledger_account_id WHERE a.account_name = $1`,
    [accountName],
  );
  return rows[0]?.balance ?? 0n;
}
