import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/database.js';
import { checkLedgerInvariants } from '../../src/ledger/invariants.js';
import { AccountFlags, LEDGER_THB, type TransferInput, TransferFlags } from '../../src/ledger/ledger.js';
import { SqlLedger } from '../../src/ledger/sql-ledger.js';
import { openTestDatabase } from '../support/database.js';

// docs/rules.md R58 at the ledger: the balance after each posting, in both write paths, and the
// commit check that keeps a balance in the past from moving.
const ledger = new SqlLedger();
let db: Database;
const code = 1;
const historyFlags = AccountFlags.debitsMustNotExceedCredits | AccountFlags.history;

beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  await db.close();
});
afterEach(async () => {
  expect(await checkLedgerInvariants(db)).toEqual([]);
});

async function account(flags: number): Promise<string> {
  const id = randomUUID();
  expect(await ledger.createAccounts(db, [{ id, ledger: LEDGER_THB, code, flags }])).toEqual([]);
  return id;
}

function transfer(debit: string, credit: string, amount: bigint, extra: Partial<TransferInput> = {}): TransferInput {
  return { id: randomUUID(), debitAccountId: debit, creditAccountId: credit, amount, ledger: LEDGER_THB, code, flags: 0, ...extra };
}

interface HistoryRow {
  transfer_id: string | null;
  intent_id: string | null;
  amount: string;
  balance_after: string;
  posted_at: Date;
  /** To the microsecond, as stamped (a Date keeps milliseconds). */
  posted_text: string;
}

async function history(accountId: string): Promise<HistoryRow[]> {
  const { rows } = await db.query<HistoryRow>(
    `SELECT transfer_id, intent_id, amount::text, balance_after::text, posted_at, posted_at::text AS posted_text
       FROM ledger_account_history WHERE account_id = $1 ORDER BY posted_at, seq`,
    [accountId],
  );
  return rows;
}

async function balanceAt(accountId: string, at: Date | string): Promise<string> {
  const { rows } = await db.query<{ balance: string }>('SELECT ledger_balance_at($1, $2::timestamptz)::text AS balance', [accountId, at]);
  return rows[0]?.balance ?? 'missing';
}

describe('balance history', () => {
  it('records the balance after each posting of a set-based batch, with the intent, and none for system accounts', async () => {
    const equity = await account(AccountFlags.none);
    const user = await account(historyFlags);
    const other = await account(historyFlags);
    const intentId = randomUUID();
    const batch = [
      transfer(equity, user, 1_000n, { userData128: intentId }),
      transfer(user, other, 300n),
      transfer(equity, user, 50n),
      transfer(user, equity, 25n),
    ];
    expect(await ledger.createTransfers(db, batch)).toEqual([]);
    const rows = await history(user);
    expect(rows.map((r) => [r.transfer_id, r.amount, r.balance_after])).toEqual([
      [batch[0]?.id, '1000', '1000'],
      [batch[1]?.id, '-300', '700'],
      [batch[2]?.id, '50', '750'],
      [batch[3]?.id, '-25', '725'],
    ]);
    expect(rows[0]?.intent_id).toBe(intentId);
    expect((await history(other)).map((r) => r.balance_after)).toEqual(['300']);
    expect(await history(equity)).toEqual([]);
  });

  it('writes history for what applied on the event-by-event path, and nothing for a refused transfer or a rolled-back chain', async () => {
    const equity = await account(AccountFlags.none);
    const user = await account(historyFlags);
    const other = await account(historyFlags);
    expect(await ledger.createTransfers(db, [transfer(equity, user, 100n)])).toEqual([]);
    const refusedChain = [transfer(user, other, 10n, { flags: TransferFlags.linked }), transfer(user, other, 1_000n)];
    const batch = [transfer(user, other, 40n), transfer(user, other, 500n), ...refusedChain, transfer(equity, user, 5n)];
    const results = await ledger.createTransfers(db, batch);
    expect(results).toEqual([
      { index: 1, result: 'exceeds_credits' },
      { index: 2, result: 'linked_event_failed' },
      { index: 3, result: 'exceeds_credits' },
    ]);
    expect((await history(user)).map((r) => [r.amount, r.balance_after])).toEqual([
      ['100', '100'],
      ['-40', '60'],
      ['5', '65'],
    ]);
    expect((await history(other)).map((r) => r.balance_after)).toEqual(['40']);
  });

  it('records a reservation only when it is posted, at the posted amount', async () => {
    const equity = await account(AccountFlags.none);
    const user = await account(historyFlags);
    expect(await ledger.createTransfers(db, [transfer(equity, user, 200n)])).toEqual([]);
    const reserve = transfer(user, equity, 120n, { flags: TransferFlags.pending });
    expect(await ledger.createTransfers(db, [reserve])).toEqual([]);
    expect((await history(user)).length).toBe(1);
    const voided = transfer(user, equity, 30n, { flags: TransferFlags.pending });
    expect(
      await ledger.createTransfers(db, [
        voided,
        { id: randomUUID(), pendingId: voided.id, ledger: 0, code: 0, flags: TransferFlags.voidPendingTransfer },
        { id: randomUUID(), pendingId: reserve.id, ledger: 0, code: 0, flags: TransferFlags.postPendingTransfer },
      ]),
    ).toEqual([]);
    expect((await history(user)).map((r) => [r.amount, r.balance_after])).toEqual([
      ['200', '200'],
      ['-120', '80'],
    ]);
  });

  it('answers the balance at instants before, between and after postings', async () => {
    const equity = await account(AccountFlags.none);
    const user = await account(historyFlags);
    const before = new Date();
    await sleep(5);
    expect(await ledger.createTransfers(db, [transfer(equity, user, 70n)])).toEqual([]);
    await sleep(5);
    const between = new Date();
    await sleep(5);
    expect(await ledger.createTransfers(db, [transfer(user, equity, 20n)])).toEqual([]);
    const [first, second] = await history(user);
    expect(await balanceAt(user, before)).toBe('0');
    expect(await balanceAt(user, between)).toBe('70');
    expect(await balanceAt(user, first?.posted_text ?? before)).toBe('70');
    const { rows } = await db.query<{ just_before: string }>("SELECT ($1::timestamptz - interval '1 microsecond')::text AS just_before", [
      second?.posted_text,
    ]);
    expect(await balanceAt(user, rows[0]?.just_before ?? before)).toBe('70');
    expect(await balanceAt(user, second?.posted_text ?? before)).toBe('50');
  });

  it('refuses at COMMIT a transaction whose postings were stamped more than the bound before it, and nothing of it stays', async () => {
    const equity = await account(AccountFlags.none);
    const user = await account(historyFlags);
    const late = db.transaction(async (tx) => {
      expect(await ledger.createTransfers(tx, [transfer(equity, user, 99n)])).toEqual([]);
      await sleep(2_300);
    });
    await expect(late).rejects.toThrow(/LDG02|more than/);
    expect(await history(user)).toEqual([]);
    const [row] = (
      await db.query<{ balance: string }>(
        'SELECT (credits_posted - debits_posted)::text AS balance FROM ledger_balances WHERE account_id = $1',
        [user],
      )
    ).rows;
    expect(row?.balance).toBe('0');
  });
});

describe.runIf(process.env.DATABASE_URL?.startsWith('postgres'))('immutability under concurrent writers (PostgreSQL)', () => {
  it('a transaction held open across t does not change the balance at t once t is more than 5 s past', async () => {
    const equity = await account(AccountFlags.none);
    const user = await account(historyFlags);
    expect(await ledger.createTransfers(db, [transfer(equity, user, 1_000n)])).toEqual([]);
    const url = new URL(process.env.DATABASE_URL ?? '');
    const { rows } = await db.query<{ role: string }>('SELECT current_user AS role');
    url.username = rows[0]?.role ?? '';
    url.password = '';
    const held = new pg.Client({ connectionString: url.toString() });
    const steady = new pg.Client({ connectionString: url.toString() });
    await held.connect();
    await steady.connect();
    try {
      // A writer posts before t and holds its transaction open past t + 5 s.
      await held.query('BEGIN');
      await held.query('SELECT ledger_create_transfers($1::jsonb)', [JSON.stringify([toEvent(transfer(user, equity, 400n))])]);
      await sleep(200);
      const t = new Date();
      // Another keeps posting across t while the first is open (it waits for the row lock the first holds).
      const waiting = steady.query('SELECT ledger_create_transfers($1::jsonb)', [JSON.stringify([toEvent(transfer(equity, user, 5n))])]);
      await sleep(5_300);
      const answered = await balanceAt(user, t);
      await expect(held.query('COMMIT')).rejects.toThrow(/more than/);
      await waiting;
      for (let round = 0; round < 3; round++) {
        expect(await balanceAt(user, t)).toBe(answered);
        await sleep(300);
      }
      expect(answered).toBe('1000');
      expect(await balanceAt(user, new Date())).toBe('1005');
    } finally {
      await held.end();
      await steady.end();
    }
  }, 20_000);
});

function toEvent(t: TransferInput) {
  return {
    id: t.id,
    debit_account_id: t.debitAccountId,
    credit_account_id: t.creditAccountId,
    amount: t.amount?.toString(),
    ledger: t.ledger,
    code: t.code,
    flags: t.flags,
  };
}
