import { setTimeout as sleep } from 'node:timers/promises';
import type { Sql } from '../../adapters/database.js';
import { parseAccountName } from '../accounts/account-names.js';
import { type AccountRecord, findAccount, isUuid } from '../accounts/accounts.js';
import { apiError } from '../errors.js';
import { LEDGER_CODE_BY_OPERATION, LEDGER_CODE_REFUND, type OperationType } from '../model.js';

/**
 * docs/rules.md R58: the balance of an account a user owns at any instant, and its statements,
 * read from the ledger's balance history (sql/ledger/13-history.sql). A balance more than
 * `finalAfterMs` in the past is final: no posting can still arrive stamped at or before it.
 */

/** What the ledger's commit check and a COMMIT's own time allow (docs/design.md, Balances at a time). */
export const finalAfterMs = 5_000;
/** The json format answers at most this many entries; more needs csv or camt053. */
export const jsonEntriesMax = 10_000;
/** Rows per keyset page of a streamed statement: one round trip each, memory bounded by it. */
const streamPageRows = 1_000;

const OPERATION_BY_CODE = new Map<number, OperationType>(
  Object.entries(LEDGER_CODE_BY_OPERATION).map(([type, code]) => [code, type as OperationType]),
);

/** ISO 8601 with a date, a time and an offset; seconds and up to microseconds optional. */
const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,6})?)?(?:Z|[+-](\d{2}):(\d{2}))$/;
const yearMin = 1970;
const yearMax = 9999;

/**
 * An instant as the client wrote it, refused (422) unless it is a real ISO 8601 date and time with
 * an offset. Kept as text: PostgreSQL reads it to the microsecond, a Date only to the millisecond.
 */
export function parseInstant(value: string, name: string): string {
  const match = ISO_INSTANT.exec(value);
  const [, year, month, day, hour, minute, second, offsetHours, offsetMinutes] = match ?? [];
  const y = Number(year);
  const m = Number(month);
  const d = Number(day);
  const valid =
    match !== null &&
    y >= yearMin &&
    y <= yearMax &&
    m >= 1 &&
    m <= 12 &&
    d >= 1 &&
    d === new Date(Date.UTC(y, m - 1, d)).getUTCDate() &&
    Number(hour) < 24 &&
    Number(minute) < 60 &&
    Number(second ?? 0) < 60 &&
    Number(offsetHours ?? 0) < 24 &&
    Number(offsetMinutes ?? 0) < 60;
  if (!valid) throw apiError('VALIDATION_ERROR', `${name} must be an ISO 8601 date and time with an offset, e.g. 2026-01-31T23:59:59Z`);
  return value;
}

/**
 * The account by name or ledger id: 422 for a name no account could have, 404 when unknown, 422
 * when no user owns it (system accounts keep no history).
 */
export async function accountWithHistory(sql: Sql, name: string): Promise<AccountRecord> {
  if (parseAccountName(name) === null && !isUuid(name)) throw apiError('VALIDATION_ERROR', 'not an account name or a ledger account id');
  const account = await findAccount(sql, name);
  if (account === null) throw apiError('NOT_FOUND', 'account not found');
  if (account.userId === null) {
    throw apiError(
      'VALIDATION_ERROR',
      `${account.accountName} belongs to no user: balances at a time and statements are kept for users' accounts`,
    );
  }
  return account;
}

export interface BalanceAt {
  readonly accountName: string;
  readonly at: string;
  readonly balance: string;
  readonly currency: string;
}

/** GET /accounts/{name}/balance?at=: credits posted minus debits posted, every posting stamped at or before `at`. */
export async function balanceAt(sql: Sql, name: string, atText: string): Promise<BalanceAt> {
  const at = parseInstant(atText, 'at');
  const account = await accountWithHistory(sql, name);
  const { rows } = await sql.query<{ balance: string; future: boolean }>(
    'SELECT ledger_balance_at($1, $2::timestamptz)::text AS balance, $2::timestamptz > clock_timestamp() AS future',
    [account.ledgerAccountId, at],
  );
  const row = rows[0];
  if (row === undefined) throw new Error('balance at a time answered no row');
  if (row.future) throw apiError('VALIDATION_ERROR', 'at must not be in the future');
  return { accountName: account.accountName, at, balance: row.balance, currency: account.currency };
}

export interface StatementEntry {
  readonly at: string;
  readonly intentId: string | null;
  /** The refund whose posting this is; intentId and operationType are then its original's. */
  readonly refundId: string | null;
  readonly operationType: OperationType | null;
  readonly direction: 'DEBIT' | 'CREDIT';
  /** What the posting moved on this account, fee included. */
  readonly amount: string;
  readonly feeAmount: string;
  readonly balanceAfter: string;
}

export interface StatementHeader {
  readonly accountName: string;
  readonly currency: string;
  readonly from: string;
  readonly to: string;
  readonly openingBalance: string;
  readonly closingBalance: string;
}

export interface Statement extends StatementHeader {
  readonly entries: StatementEntry[];
}

export interface StatementRange {
  readonly account: AccountRecord;
  readonly from: string;
  readonly to: string;
}

/** Validates a statement's range: 404/422 as for a balance at a time; `from` < `to`, `to` not in the future. */
export async function statementRange(
  sql: Sql,
  name: string,
  fromText: string,
  toText: string,
): Promise<StatementRange & { waitMs: number }> {
  const from = parseInstant(fromText, 'from');
  const to = parseInstant(toText, 'to');
  const account = await accountWithHistory(sql, name);
  const { rows } = await sql.query<{ ordered: boolean; future: boolean; wait_ms: number }>(
    `SELECT $1::timestamptz < $2::timestamptz AS ordered, $2::timestamptz > clock_timestamp() AS future,
            greatest(0, ceil(extract(epoch FROM $2::timestamptz + $3 * interval '1 millisecond' - clock_timestamp()) * 1000))::float8 AS wait_ms`,
    [from, to, finalAfterMs],
  );
  const row = rows[0];
  if (row === undefined) throw new Error('statement range answered no row');
  if (!row.ordered) throw apiError('VALIDATION_ERROR', 'from must be before to');
  if (row.future) throw apiError('VALIDATION_ERROR', 'to must not be in the future');
  return { account, from, to, waitMs: row.wait_ms };
}

interface EntryRow {
  at: string;
  seq: string;
  intent_id: string | null;
  refund_id: string | null;
  operation_type: OperationType | null;
  code: number;
  transfer_id: string | null;
  amount: string;
  fee_amount: string | null;
  balance_after: string;
}

/**
 * The entries of [from, to) after the key (posted_at, seq), in posting order, each with its history
 * row (transactions) for the fee and the operation type, found by a unique key. A refund's postings
 * carry the original's intent id and the refund code; the refund is the one of that original that
 * lists the transfer (few per original), and its history rows are its own (docs/rules.md R57).
 */
const ENTRIES_SQL = `
  SELECT to_char(h.posted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at, h.seq::text AS seq,
         h.intent_id, rf.id AS refund_id, h.code, h.transfer_id, h.amount::text AS amount,
         coalesce(xi.fee_amount, xr.fee_amount)::text AS fee_amount,
         coalesce(xi.operation_type, xr.operation_type) AS operation_type, h.balance_after::text AS balance_after
    FROM ledger_account_history h
    LEFT JOIN LATERAL (SELECT r.id FROM refunds r
                        WHERE h.code = ${LEDGER_CODE_REFUND} AND r.intent_id = h.intent_id AND h.transfer_id = ANY (r.transfer_ids)
                        LIMIT 1) AS rf ON true
    LEFT JOIN transactions xi ON h.code <> ${LEDGER_CODE_REFUND} AND xi.refund_id IS NULL AND xi.intent_id = h.intent_id
                             AND xi.account_name = $2 AND xi.direction = CASE WHEN h.amount > 0 THEN 'CREDIT' ELSE 'DEBIT' END
    LEFT JOIN transactions xr ON xr.refund_id = rf.id AND xr.account_name = $2
                             AND xr.direction = CASE WHEN h.amount > 0 THEN 'CREDIT' ELSE 'DEBIT' END
   WHERE h.account_id = $1 AND h.posted_at < $4::timestamptz
     AND (h.posted_at, h.seq) > ($3::timestamptz, $5::bigint)
   ORDER BY h.posted_at, h.seq
   LIMIT $6`;

function toEntry(row: EntryRow): StatementEntry {
  const credit = !row.amount.startsWith('-');
  return {
    at: row.at,
    intentId: row.intent_id,
    refundId: row.refund_id,
    // The opening row of a balance that predates the history has no transfer.
    operationType: row.transfer_id === null ? null : (row.operation_type ?? OPERATION_BY_CODE.get(row.code) ?? null),
    direction: credit ? 'CREDIT' : 'DEBIT',
    amount: credit ? row.amount : row.amount.slice(1),
    feeAmount: row.fee_amount ?? '0',
    balanceAfter: row.balance_after,
  };
}

/** The balance before `at` (postings stamped strictly before it): a statement's opening at `from`, closing at `to`. */
const BALANCE_BEFORE_SQL = (param: string) => `
  coalesce((SELECT h.balance_after FROM ledger_account_history h
             WHERE h.account_id = $1 AND h.posted_at < ${param}::timestamptz
             ORDER BY h.posted_at DESC, h.seq DESC LIMIT 1), 0)::text`;

export async function statementHeader(sql: Sql, range: StatementRange): Promise<StatementHeader> {
  const { rows } = await sql.query<{ opening: string; closing: string }>(
    `SELECT ${BALANCE_BEFORE_SQL('$2')} AS opening, ${BALANCE_BEFORE_SQL('$3')} AS closing`,
    [range.account.ledgerAccountId, range.from, range.to],
  );
  const row = rows[0];
  if (row === undefined) throw new Error('statement header answered no row');
  return {
    accountName: range.account.accountName,
    currency: range.account.currency,
    from: range.from,
    to: range.to,
    openingBalance: row.opening,
    closingBalance: row.closing,
  };
}

/** json: at most jsonEntriesMax entries (422 naming csv past that), balances and entries from one snapshot. */
export async function statementJson(sql: Sql, range: StatementRange): Promise<Statement> {
  const { rows } = await sql.query<EntryRow & { opening: string; closing: string }>(
    `WITH e AS (${ENTRIES_SQL})
     SELECT o.opening, o.closing, e.* FROM (SELECT ${BALANCE_BEFORE_SQL('$3')} AS opening, ${BALANCE_BEFORE_SQL('$4')} AS closing) AS o
       LEFT JOIN e ON true
      ORDER BY e.at, e.seq::bigint`,
    // The keyset starts at the range's own start: (from, 0) precedes every row stamped at from.
    [range.account.ledgerAccountId, range.account.accountName, range.from, range.to, '0', jsonEntriesMax + 1],
  );
  const first = rows[0];
  if (first === undefined) throw new Error('statement answered no row');
  const entries = rows.filter((row) => row.seq !== null).map(toEntry);
  if (entries.length > jsonEntriesMax) {
    throw apiError(
      'VALIDATION_ERROR',
      `more than ${jsonEntriesMax} entries in this range: ask for format=csv or camt053, which stream any length`,
    );
  }
  return {
    accountName: range.account.accountName,
    currency: range.account.currency,
    from: range.from,
    to: range.to,
    openingBalance: first.opening,
    closingBalance: first.closing,
    entries,
  };
}

/**
 * Every entry of the range, a keyset page at a time, as the consumer pulls: memory holds two pages
 * whatever the range, and a writer turns each page into one chunk. The next page is read while the
 * consumer writes this one, so the database and the writer work side by side, not in turn.
 */
export async function* statementPages(sql: Sql, range: StatementRange): AsyncGenerator<StatementEntry[]> {
  const page = (key: { at: string; seq: string }) => {
    const read = sql.query<EntryRow>(ENTRIES_SQL, [
      range.account.ledgerAccountId,
      range.account.accountName,
      key.at,
      range.to,
      key.seq,
      streamPageRows,
    ]);
    // A consumer that stops (the client went away) leaves the page read ahead unawaited: its
    // failure then concerns no one, and must not end the process as an unhandled rejection.
    read.catch(() => undefined);
    return read;
  };
  let next = page({ at: range.from, seq: '0' });
  for (;;) {
    const { rows } = await next;
    const last = rows.at(-1);
    const more = last !== undefined && rows.length === streamPageRows;
    if (more) next = page({ at: last.at, seq: last.seq });
    if (rows.length > 0) yield rows.map(toEntry);
    if (!more) return;
  }
}

/** Waits until the range's end is final (at most finalAfterMs), for the streamed formats. */
export async function untilFinal(waitMs: number): Promise<void> {
  if (waitMs > 0) await sleep(Math.min(waitMs, finalAfterMs));
}
