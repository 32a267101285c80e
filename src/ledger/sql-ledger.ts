import assert from 'node:assert/strict';
import type { Sql } from '../adapters/database.js';
import { inSpan, intentAttributes } from '../adapters/tracing.js';
import {
  type Account,
  type AccountInput,
  AccountFlags,
  CreateAccountError,
  type CreateAccountResult,
  CreateTransferError,
  type CreateTransferResult,
  type Ledger,
  type Transfer,
  type TransferInput,
} from './ledger.js';

/** TigerBeetle's own request limit; a larger batch would also hold its row locks for longer. */
export const createBatchSizeMax = 8190;
/** Lookups go out as one array parameter; past this a caller should page. */
export const lookupSizeMax = 8190;

const amountMax = 2n ** 63n - 1n; // int8
const timeoutSMax = 2 ** 31 - 1; // int4
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const pendingStatuses = ['pending', 'posted', 'voided', 'expired'] as const;

/**
 * The ledger on PostgreSQL or PGlite: every batch is one call of a PL/pgSQL function
 * (sql/ledger/), which holds all of the semantics; this class only shapes the
 * input and checks the output.
 */
export class SqlLedger implements Ledger {
  async createAccounts(sql: Sql, accounts: readonly AccountInput[]): Promise<CreateAccountResult[]> {
    assertBatchSize(accounts.length);
    if (accounts.length === 0) return [];
    const events = accounts.map((account) => {
      assertUuid(account.id, 'id');
      assertInt4(account.ledger, 'ledger');
      assertInt4(account.code, 'code');
      assertInt4(account.flags, 'flags');
      // The SQL applies account chains, but CreateAccountError has no linked_event_failed or
      // linked_event_chain_open to report a broken one with.
      assert.equal(account.flags & AccountFlags.linked, 0, 'linked accounts are not supported');
      return { id: account.id, ledger: account.ledger, code: account.code, flags: account.flags };
    });
    const { rows } = await sql.query<{ results: unknown }>('SELECT ledger_create_accounts($1::jsonb) AS results', [JSON.stringify(events)]);
    return parseResults(rows[0]?.results, accounts.length, CreateAccountError);
  }

  async createTransfers(sql: Sql, transfers: readonly TransferInput[]): Promise<CreateTransferResult[]> {
    assertBatchSize(transfers.length);
    if (transfers.length === 0) return [];
    const events = transfers.map(toTransferEvent);
    const attributes = { ...intentAttributes(), 'payorch.ledger.transfers': transfers.length };
    return inSpan('ledger create_transfers', attributes, async (span) => {
      const { rows } = await sql.query<{ results: unknown }>('SELECT ledger_create_transfers($1::jsonb) AS results', [
        JSON.stringify(events),
      ]);
      const results = parseResults(rows[0]?.results, transfers.length, CreateTransferError);
      span.setAttribute('payorch.ledger.refused', results.filter((result) => result.result !== 'exists').length);
      return results;
    });
  }

  async lookupAccounts(sql: Sql, ids: readonly string[]): Promise<Account[]> {
    assertLookupSize(ids.length);
    // No short cut for an empty list: the health probe looks up zero accounts to learn whether
    // the ledger answers at all.
    for (const id of ids) assertUuid(id, 'id');
    // Found accounts in request order, as TigerBeetle answers; the shards add up to the balance.
    const { rows } = await sql.query<AccountRow>(
      `SELECT a.id, a.ledger, a.code, a.flags, a.created_at,
              sum(b.debits_pending)::bigint AS debits_pending, sum(b.debits_posted)::bigint AS debits_posted,
              sum(b.credits_pending)::bigint AS credits_pending, sum(b.credits_posted)::bigint AS credits_posted
         FROM unnest($1::uuid[]) WITH ORDINALITY AS q (id, ord)
         JOIN ledger_accounts a ON a.id = q.id
         JOIN ledger_balances b ON b.account_id = a.id
        GROUP BY a.id, q.ord
        ORDER BY q.ord`,
      [ids],
    );
    return rows.map(toAccount);
  }

  async lookupTransfers(sql: Sql, ids: readonly string[]): Promise<Transfer[]> {
    assertLookupSize(ids.length);
    if (ids.length === 0) return [];
    for (const id of ids) assertUuid(id, 'id');
    const { rows } = await sql.query<TransferRow>(
      `SELECT t.id, t.debit_account_id, t.credit_account_id, t.amount, t.pending_id, t.timeout_s, t.ledger,
              t.code, t.flags, t.created_at, t.expires_at, t.pending_status
         FROM unnest($1::uuid[]) WITH ORDINALITY AS q (id, ord)
         JOIN ledger_transfers t ON t.id = q.id
        ORDER BY q.ord`,
      [ids],
    );
    return rows.map(toTransfer);
  }

  async expirePendingTransfers(sql: Sql, batchSizeMax: number): Promise<string[]> {
    assert.ok(Number.isSafeInteger(batchSizeMax) && batchSizeMax > 0, 'batchSizeMax must be > 0');
    const { rows } = await sql.query<{ id: string }>('SELECT ledger_expire_pending($1) AS id', [batchSizeMax]);
    return rows.map((row) => row.id);
  }
}

interface AccountRow {
  id: string;
  ledger: number;
  code: number;
  flags: number;
  created_at: Date;
  debits_pending: bigint;
  debits_posted: bigint;
  credits_pending: bigint;
  credits_posted: bigint;
}

interface TransferRow {
  id: string;
  debit_account_id: string;
  credit_account_id: string;
  amount: bigint;
  pending_id: string | null;
  timeout_s: number;
  ledger: number;
  code: number;
  flags: number;
  created_at: Date;
  expires_at: Date | null;
  pending_status: string | null;
}

/** The JSON event the SQL function reads: snake_case, amounts as strings (int8 exceeds a double). */
export function toTransferEvent(transfer: TransferInput): Record<string, string | number | null> {
  assertUuid(transfer.id, 'id');
  for (const [name, id] of [
    ['debitAccountId', transfer.debitAccountId],
    ['creditAccountId', transfer.creditAccountId],
    ['pendingId', transfer.pendingId],
    ['userData128', transfer.userData128],
  ] as const) {
    if (id !== undefined) assertUuid(id, name);
  }
  if (transfer.amount !== undefined) {
    assert.equal(typeof transfer.amount, 'bigint', 'amount must be a bigint');
    assert.ok(transfer.amount >= 0n && transfer.amount <= amountMax, `amount out of range: ${transfer.amount}`);
  }
  const timeoutS = transfer.timeoutS ?? 0;
  assert.ok(Number.isInteger(timeoutS) && timeoutS >= 0 && timeoutS <= timeoutSMax, `timeoutS out of range: ${timeoutS}`);
  assertInt4(transfer.ledger, 'ledger');
  assertInt4(transfer.code, 'code');
  assertInt4(transfer.flags, 'flags');
  return {
    id: transfer.id,
    debit_account_id: transfer.debitAccountId ?? null,
    credit_account_id: transfer.creditAccountId ?? null,
    amount: transfer.amount === undefined ? null : transfer.amount.toString(),
    pending_id: transfer.pendingId ?? null,
    user_data_128: transfer.userData128 ?? null,
    timeout_s: timeoutS,
    ledger: transfer.ledger,
    code: transfer.code,
    flags: transfer.flags,
  };
}

function toAccount(row: AccountRow): Account {
  assertNonNegative(row.debits_pending, 'debits_pending');
  assertNonNegative(row.credits_pending, 'credits_pending');
  return {
    id: row.id,
    ledger: row.ledger,
    code: row.code,
    flags: row.flags,
    debitsPending: row.debits_pending,
    debitsPosted: row.debits_posted,
    creditsPending: row.credits_pending,
    creditsPosted: row.credits_posted,
    timestamp: row.created_at,
  };
}

function toTransfer(row: TransferRow): Transfer {
  assertNonNegative(row.amount, 'amount');
  const status = row.pending_status;
  assert.ok(status === null || isOneOf(status, pendingStatuses), `unknown pending_status ${String(status)}`);
  return {
    id: row.id,
    debitAccountId: row.debit_account_id,
    creditAccountId: row.credit_account_id,
    amount: row.amount,
    pendingId: row.pending_id,
    timeoutS: row.timeout_s,
    ledger: row.ledger,
    code: row.code,
    flags: row.flags,
    timestamp: row.created_at,
    pendingStatus: status,
    expiresAt: row.expires_at,
  };
}

/** Failures only, each once, in index order; anything else means the SQL and this file disagree. */
function parseResults<Result extends string>(
  raw: unknown,
  eventCount: number,
  known: readonly Result[],
): { index: number; result: Result }[] {
  assert.ok(Array.isArray(raw), 'the ledger function must return a JSON array');
  let previousIndex = -1;
  return raw.map((item: unknown) => {
    assert.ok(typeof item === 'object' && item !== null, 'a ledger result must be an object');
    const { index, result } = item as { index?: unknown; result?: unknown };
    assert.ok(typeof index === 'number' && Number.isInteger(index), 'a ledger result needs an integer index');
    assert.ok(index > previousIndex && index < eventCount, `ledger result index out of order: ${index}`);
    assert.ok(typeof result === 'string' && isOneOf(result, known), `unknown ledger result ${String(result)}`);
    previousIndex = index;
    return { index, result };
  });
}

function isOneOf<T extends string>(value: string, values: readonly T[]): value is T {
  return (values as readonly string[]).includes(value);
}

function assertUuid(value: string, name: string): void {
  assert.ok(uuidPattern.test(value), `${name} must be a UUID`);
}

function assertInt4(value: number, name: string): void {
  assert.ok(Number.isInteger(value) && value >= 0 && value <= 2 ** 31 - 1, `${name} must be an int4 >= 0`);
}

function assertNonNegative(value: bigint, name: string): void {
  assert.equal(typeof value, 'bigint', `${name} must come back as a bigint`);
  assert.ok(value >= 0n, `${name} must not be negative`);
}

function assertBatchSize(size: number): void {
  assert.ok(size <= createBatchSizeMax, `batch of ${size} exceeds createBatchSizeMax ${createBatchSizeMax}`);
}

function assertLookupSize(size: number): void {
  assert.ok(size <= lookupSizeMax, `lookup of ${size} exceeds lookupSizeMax ${lookupSizeMax}`);
}

/**
 * What ledger_surely_exceeds_credits (sql/ledger/14-funds.sql) reads for a batch about to be sent
 * as one ledger call, group after group (a payment's transfers): for each group, its first
 * transfer when that is a new one, with every amount the earlier groups credit its debit account;
 * null for the others. All null when a transfer resolves a reservation stored before the batch,
 * whose release that bound does not see.
 */
export function fundsCheckEvents(groups: ReadonlyArray<readonly TransferInput[]>): Array<Record<string, string | number | null> | null> {
  const madeInBatch = new Set(groups.flatMap((group) => group.map((transfer) => transfer.id)));
  if (groups.some((group) => group.some((transfer) => transfer.pendingId !== undefined && !madeInBatch.has(transfer.pendingId))))
    return groups.map(() => null);
  const credited = new Map<string, bigint>();
  return groups.map((group) => {
    const first = group[0];
    const event =
      first === undefined || first.pendingId !== undefined || first.debitAccountId === undefined
        ? null
        : { ...toTransferEvent(first), credited_before: (credited.get(first.debitAccountId) ?? 0n).toString() };
    for (const transfer of group) {
      if (transfer.creditAccountId !== undefined && transfer.amount !== undefined)
        credited.set(transfer.creditAccountId, (credited.get(transfer.creditAccountId) ?? 0n) + transfer.amount);
    }
    return event;
  });
}
