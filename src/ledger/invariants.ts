import type { Sql } from '../adapters/database.js';

/** Per check; past this the ledger is broken enough that more lines add nothing. */
const violationsPerCheckMax = 20;

/**
 * What must hold between the ledger tables at any commit, checked set-based so that it is cheap
 * enough for tests after every money move and for a periodic monitor. Returns one readable line
 * per violation; an empty list means the ledger is consistent.
 *
 * A pending transfer past its timeout is reported even though a sweep is due, not overdue: callers
 * that want a clean answer sweep (expirePendingTransfers) first.
 */
export async function checkLedgerInvariants(sql: Sql): Promise<string[]> {
  const checks = [checkLedgerTotals, checkPendingAgainstTransfers, checkGuardedAccounts, checkExpiredStillPending, checkBalanceHistory];
  const violations: string[] = [];
  for (const check of checks) {
    violations.push(...(await check(sql)));
  }
  return violations;
}

/**
 * The same checks one by one, for a caller that reports each under its own name (the invariant
 * audit, src/domain/audit/audit.ts, which applies its own grace to the expiry check).
 */
export const LEDGER_INVARIANT_CHECKS = {
  ledgerTotals: checkLedgerTotals,
  pendingAgainstTransfers: checkPendingAgainstTransfers,
  guardedAccounts: checkGuardedAccounts,
  expiredStillPending: checkExpiredStillPending,
  balanceHistory: checkBalanceHistory,
} as const satisfies Record<string, (sql: Sql) => Promise<string[]>>;

/** Double entry: every amount was debited once and credited once, per ledger (currency). */
async function checkLedgerTotals(sql: Sql): Promise<string[]> {
  const { rows } = await sql.query<{ ledger: number; net_posted: string; debits_pending: string; credits_pending: string }>(
    `SELECT a.ledger,
            sum(b.credits_posted - b.debits_posted)::text AS net_posted,
            sum(b.debits_pending)::text AS debits_pending,
            sum(b.credits_pending)::text AS credits_pending
       FROM ledger_balances b JOIN ledger_accounts a ON a.id = b.account_id
      GROUP BY a.ledger
     HAVING sum(b.credits_posted - b.debits_posted) <> 0 OR sum(b.debits_pending) <> sum(b.credits_pending)
      ORDER BY a.ledger
      LIMIT $1`,
    [violationsPerCheckMax],
  );
  return rows.flatMap((row) => [
    ...(row.net_posted === '0'
      ? []
      : [`ledger ${row.ledger}: credits posted minus debits posted over all accounts is ${row.net_posted}, not 0`]),
    ...(row.debits_pending === row.credits_pending
      ? []
      : [`ledger ${row.ledger}: debits pending ${row.debits_pending} differ from credits pending ${row.credits_pending}`]),
  ]);
}

/** Each account's reservations are exactly the pending transfers that still hold them. */
async function checkPendingAgainstTransfers(sql: Sql): Promise<string[]> {
  const { rows } = await sql.query<{ account_id: string; held_dp: string; held_cp: string; owed_dp: string; owed_cp: string }>(
    `WITH held AS (
       SELECT account_id, sum(debits_pending) AS dp, sum(credits_pending) AS cp
         FROM ledger_balances GROUP BY account_id
     ), owed AS (
       SELECT account_id, sum(dp) AS dp, sum(cp) AS cp FROM (
         SELECT debit_account_id AS account_id, amount AS dp, 0::bigint AS cp
           FROM ledger_transfers WHERE pending_status = 'pending'
         UNION ALL
         SELECT credit_account_id, 0::bigint, amount
           FROM ledger_transfers WHERE pending_status = 'pending'
       ) AS moves GROUP BY account_id
     )
     SELECT coalesce(h.account_id, o.account_id) AS account_id,
            coalesce(h.dp, 0)::text AS held_dp, coalesce(h.cp, 0)::text AS held_cp,
            coalesce(o.dp, 0)::text AS owed_dp, coalesce(o.cp, 0)::text AS owed_cp
       FROM held h FULL JOIN owed o ON o.account_id = h.account_id
      WHERE coalesce(h.dp, 0) <> coalesce(o.dp, 0) OR coalesce(h.cp, 0) <> coalesce(o.cp, 0)
      ORDER BY 1
      LIMIT $1`,
    [violationsPerCheckMax],
  );
  return rows.map(
    (row) =>
      `account ${row.account_id}: pending debits/credits ${row.held_dp}/${row.held_cp} but its pending transfers ` +
      `hold ${row.owed_dp}/${row.owed_cp}`,
  );
}

/** A guarded account has one balance row and never goes past its limit, reservations included. */
async function checkGuardedAccounts(sql: Sql): Promise<string[]> {
  const { rows } = await sql.query<{
    id: string;
    flags: number;
    shards: string;
    dp: string;
    dpo: string;
    cp: string;
    cpo: string;
  }>(
    `SELECT a.id, a.flags, count(*)::text AS shards,
            sum(b.debits_pending)::text AS dp, sum(b.debits_posted)::text AS dpo,
            sum(b.credits_pending)::text AS cp, sum(b.credits_posted)::text AS cpo
       FROM ledger_accounts a JOIN ledger_balances b ON b.account_id = a.id
      WHERE ledger_is_guarded(a.flags)
      GROUP BY a.id, a.flags
     HAVING count(*) <> 1 OR bool_or(b.shard <> 0)
         OR (ledger_debits_must_not_exceed_credits(a.flags) AND sum(b.debits_pending) + sum(b.debits_posted) > sum(b.credits_posted))
         OR (ledger_credits_must_not_exceed_debits(a.flags) AND sum(b.credits_pending) + sum(b.credits_posted) > sum(b.debits_posted))
      ORDER BY a.id
      LIMIT $1`,
    [violationsPerCheckMax],
  );
  return rows.map(
    (row) =>
      `guarded account ${row.id} (flags ${row.flags}, ${row.shards} balance rows) is past its limit or sharded: ` +
      `debits ${row.dp} pending + ${row.dpo} posted, credits ${row.cp} pending + ${row.cpo} posted`,
  );
}

async function checkExpiredStillPending(sql: Sql): Promise<string[]> {
  const { rows } = await sql.query<{ overdue: string; oldest: Date | null }>(
    `SELECT count(*)::text AS overdue, min(expires_at) AS oldest
       FROM ledger_transfers
      WHERE pending_status = 'pending' AND expires_at <= now()`,
  );
  const row = rows[0];
  if (row === undefined || row.overdue === '0') return [];
  return [`${row.overdue} pending transfers are past their timeout and still pending (oldest expired ${row.oldest?.toISOString()})`];
}

/**
 * docs/rules.md R58: every account with history replays to its ledger balance. Each row's balance
 * is the one before it plus its amount (in (posted_at, seq) order), and the last equals credits
 * posted minus debits posted; an account with postings and no history is caught by the same sum.
 */
async function checkBalanceHistory(sql: Sql): Promise<string[]> {
  const { rows } = await sql.query<{ account_id: string; ledger_balance: string; replayed: string; last: string; broken: string }>(
    `WITH replay AS (
       SELECT account_id, amount, balance_after,
              sum(amount) OVER w AS running, row_number() OVER w AS n, count(*) OVER (PARTITION BY account_id) AS rows
         FROM ledger_account_history
       WINDOW w AS (PARTITION BY account_id ORDER BY posted_at, seq ROWS UNBOUNDED PRECEDING)
     ), per_account AS (
       SELECT account_id, coalesce(sum(amount), 0) AS replayed,
              coalesce(max(balance_after) FILTER (WHERE n = rows), 0) AS last,
              count(*) FILTER (WHERE running <> balance_after) AS broken
         FROM replay GROUP BY account_id
     )
     SELECT a.id AS account_id, (b.credits_posted - b.debits_posted)::text AS ledger_balance,
            coalesce(p.replayed, 0)::text AS replayed, coalesce(p.last, 0)::text AS last, coalesce(p.broken, 0)::text AS broken
       FROM ledger_accounts a
       JOIN ledger_balances b ON b.account_id = a.id
       LEFT JOIN per_account p ON p.account_id = a.id
      WHERE ledger_keeps_history(a.flags)
        AND (coalesce(p.replayed, 0) <> b.credits_posted - b.debits_posted
             OR coalesce(p.last, 0) <> b.credits_posted - b.debits_posted OR coalesce(p.broken, 0) <> 0)
      ORDER BY a.id
      LIMIT $1`,
    [violationsPerCheckMax],
  );
  return rows.map(
    (row) =>
      `account ${row.account_id}: balance history replays to ${row.replayed} (last balance ${row.last}, ` +
      `${row.broken} rows off the running sum) but its ledger balance is ${row.ledger_balance}`,
  );
}
