import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Database, Sql } from '../../src/adapters/database.js';
import { checkLedgerInvariants } from '../../src/ledger/invariants.js';
import {
  type Account,
  AccountFlags,
  type CreateTransferResult,
  LEDGER_THB,
  type TransferInput,
  TransferFlags,
} from '../../src/ledger/ledger.js';
import { SqlLedger } from '../../src/ledger/sql-ledger.js';
import { openTestDatabase } from '../support/database.js';

const ledger = new SqlLedger();
let db: Database;

const code = 1;
/** Longer than the 1 s timeout used below, with room for a slow clock tick. */
const expiryWaitMs = 1_200;

beforeAll(async () => {
  db = await openTestDatabase();
});

afterAll(async () => {
  await db.close();
});

// Every test moves money; each must leave the whole ledger consistent.
afterEach(async () => {
  expect(await checkLedgerInvariants(db)).toEqual([]);
});

async function createAccount(flags: number, ledgerNumber: number = LEDGER_THB): Promise<string> {
  const id = randomUUID();
  expect(await ledger.createAccounts(db, [{ id, ledger: ledgerNumber, code, flags }])).toEqual([]);
  return id;
}

/** A guarded user wallet, funded from a fresh unguarded equity account. */
async function fundedUser(amount: bigint): Promise<{ user: string; equity: string }> {
  const user = await createAccount(AccountFlags.debitsMustNotExceedCredits);
  const equity = await createAccount(AccountFlags.none);
  if (amount > 0n) {
    expect(await ledger.createTransfers(db, [transfer(equity, user, amount)])).toEqual([]);
  }
  return { user, equity };
}

function transfer(debitAccountId: string, creditAccountId: string, amount: bigint, extra: Partial<TransferInput> = {}) {
  return { id: randomUUID(), debitAccountId, creditAccountId, amount, ledger: LEDGER_THB, code, flags: 0, ...extra };
}

function post(pendingId: string, extra: Partial<TransferInput> = {}): TransferInput {
  return { id: randomUUID(), pendingId, ledger: 0, code: 0, flags: TransferFlags.postPendingTransfer, ...extra };
}

function voidOf(pendingId: string): TransferInput {
  return { id: randomUUID(), pendingId, ledger: 0, code: 0, flags: TransferFlags.voidPendingTransfer };
}

async function counters(id: string): Promise<[bigint, bigint, bigint, bigint]> {
  const [account] = await ledger.lookupAccounts(db, [id]);
  if (account === undefined) throw new Error(`account ${id} not found`);
  return [account.debitsPending, account.debitsPosted, account.creditsPending, account.creditsPosted];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Keeps a transaction open after its ledger call, so that on PostgreSQL the others really wait on
 * its row locks and unique-index entries (PGlite runs transactions one at a time anyway).
 */
const holdS = 0.02;
async function holdOpen(tx: Sql): Promise<void> {
  if (db.kind === 'postgres') await tx.query('SELECT pg_sleep($1)', [holdS]);
}

async function inTransaction(events: readonly TransferInput[]): Promise<CreateTransferResult[]> {
  return db.transaction(async (tx) => {
    const results = await ledger.createTransfers(tx, events);
    await holdOpen(tx);
    return results;
  });
}

describe('accounts', () => {
  it('creates a guarded account with one balance row and an unguarded one with several', async () => {
    const guarded = await createAccount(AccountFlags.debitsMustNotExceedCredits);
    const hot = await createAccount(AccountFlags.none);
    const { rows } = await db.query<{ account_id: string; shards: bigint }>(
      'SELECT account_id, count(*) AS shards FROM ledger_balances WHERE account_id = ANY($1::uuid[]) GROUP BY 1',
      [[guarded, hot]],
    );
    const shards = new Map(rows.map((row) => [row.account_id, row.shards]));
    expect(shards.get(guarded)).toBe(1n);
    expect(shards.get(hot)).toBeGreaterThan(1n);
    const accounts: Account[] = await ledger.lookupAccounts(db, [hot, guarded]);
    expect(accounts.map((account) => account.id)).toEqual([hot, guarded]);
    expect(accounts[0]?.debitsPosted).toBe(0n);
  });

  it('answers exists for the same account and names the first different field otherwise', async () => {
    const id = randomUUID();
    const account = { id, ledger: LEDGER_THB, code, flags: AccountFlags.debitsMustNotExceedCredits };
    expect(await ledger.createAccounts(db, [account])).toEqual([]);
    expect(await ledger.createAccounts(db, [account])).toEqual([{ index: 0, result: 'exists' }]);
    expect(await ledger.createAccounts(db, [{ ...account, flags: 0 }])).toEqual([{ index: 0, result: 'exists_with_different_flags' }]);
    expect(await ledger.createAccounts(db, [{ ...account, code: 2 }])).toEqual([{ index: 0, result: 'exists_with_different_code' }]);
    expect(await ledger.createAccounts(db, [{ id: randomUUID(), ledger: LEDGER_THB, code, flags: 6 }])).toEqual([
      { index: 0, result: 'flags_are_mutually_exclusive' },
    ]);
  });

  it('refuses linked accounts, whose chain failures CreateAccountError cannot name', async () => {
    await expect(ledger.createAccounts(db, [{ id: randomUUID(), ledger: LEDGER_THB, code, flags: AccountFlags.linked }])).rejects.toThrow(
      /linked/,
    );
  });
});

describe('single-phase transfers', () => {
  it('posts directly on both accounts', async () => {
    const { user, equity } = await fundedUser(1_000n);
    expect(await counters(user)).toEqual([0n, 0n, 0n, 1_000n]);
    expect(await counters(equity)).toEqual([0n, 1_000n, 0n, 0n]);
    const [stored] = await ledger.lookupTransfers(db, [randomUUID()]);
    expect(stored).toBeUndefined();
  });

  it('refuses exceeds_credits on a guarded account, counting its reservations', async () => {
    const { user } = await fundedUser(100n);
    const transit = await createAccount(AccountFlags.none);
    expect(await ledger.createTransfers(db, [transfer(user, transit, 101n)])).toEqual([{ index: 0, result: 'exceeds_credits' }]);
    expect(await ledger.createTransfers(db, [transfer(user, transit, 60n, { flags: TransferFlags.pending })])).toEqual([]);
    expect(await ledger.createTransfers(db, [transfer(user, transit, 41n)])).toEqual([{ index: 0, result: 'exceeds_credits' }]);
    expect(await ledger.createTransfers(db, [transfer(user, transit, 40n)])).toEqual([]);
    expect(await counters(user)).toEqual([60n, 40n, 0n, 100n]);
  });

  it('refuses exceeds_debits on an account whose credits must not exceed its debits', async () => {
    const limited = await createAccount(AccountFlags.creditsMustNotExceedDebits);
    const other = await createAccount(AccountFlags.none);
    expect(await ledger.createTransfers(db, [transfer(other, limited, 1n)])).toEqual([{ index: 0, result: 'exceeds_debits' }]);
    expect(await ledger.createTransfers(db, [transfer(limited, other, 5n), transfer(other, limited, 5n)])).toEqual([]);
    expect(await counters(limited)).toEqual([0n, 5n, 0n, 5n]);
  });

  it('lets an unguarded account go negative', async () => {
    const transit = await createAccount(AccountFlags.none);
    const user = await createAccount(AccountFlags.debitsMustNotExceedCredits);
    expect(await ledger.createTransfers(db, [transfer(transit, user, 500n)])).toEqual([]);
    expect(await counters(transit)).toEqual([0n, 500n, 0n, 0n]);
  });

  it('validates before it touches anything', async () => {
    const a = await createAccount(AccountFlags.none);
    const b = await createAccount(AccountFlags.none);
    const usd = await createAccount(AccountFlags.none, 2);
    const results = await ledger.createTransfers(db, [
      transfer(a, a, 1n),
      transfer(a, b, 0n),
      transfer(randomUUID(), b, 1n),
      transfer(a, randomUUID(), 1n),
      transfer(a, usd, 1n),
      transfer(a, b, 1n, { pendingId: randomUUID() }),
      transfer(a, b, 1n, { timeoutS: 5 }),
      transfer(a, b, 1n, { flags: TransferFlags.pending | TransferFlags.postPendingTransfer }),
      post(randomUUID()),
      transfer(a, b, 1n, { ledger: 2 }),
    ]);
    expect(results).toEqual([
      { index: 0, result: 'accounts_must_be_different' },
      { index: 1, result: 'amount_must_not_be_zero' },
      { index: 2, result: 'debit_account_not_found' },
      { index: 3, result: 'credit_account_not_found' },
      { index: 4, result: 'accounts_must_have_the_same_ledger' },
      { index: 5, result: 'pending_id_must_be_zero' },
      { index: 6, result: 'timeout_reserved_for_pending_transfer' },
      { index: 7, result: 'flags_are_mutually_exclusive' },
      { index: 8, result: 'pending_transfer_not_found' },
      { index: 9, result: 'transfer_must_have_the_same_ledger_as_accounts' },
    ]);
    expect(await counters(a)).toEqual([0n, 0n, 0n, 0n]);
  });
});

describe('two-phase transfers', () => {
  async function reserve(amount: bigint, timeoutS = 0) {
    const { user } = await fundedUser(1_000n);
    const transit = await createAccount(AccountFlags.none);
    const pending = transfer(user, transit, amount, { flags: TransferFlags.pending, timeoutS });
    expect(await ledger.createTransfers(db, [pending])).toEqual([]);
    expect(await counters(user)).toEqual([amount, 0n, 0n, 1_000n]);
    expect(await counters(transit)).toEqual([0n, 0n, amount, 0n]);
    return { user, transit, pendingId: pending.id };
  }

  it('posts the full pending amount when the post names no amount', async () => {
    const { user, transit, pendingId } = await reserve(300n);
    const posting = post(pendingId);
    expect(await ledger.createTransfers(db, [posting])).toEqual([]);
    expect(await counters(user)).toEqual([0n, 300n, 0n, 1_000n]);
    expect(await counters(transit)).toEqual([0n, 0n, 0n, 300n]);
    const [pending, posted] = await ledger.lookupTransfers(db, [pendingId, posting.id]);
    expect(pending?.pendingStatus).toBe('posted');
    expect(posted).toMatchObject({ amount: 300n, debitAccountId: user, creditAccountId: transit, pendingStatus: null });
  });

  it('posts part of the pending amount and releases the rest', async () => {
    const { user, transit, pendingId } = await reserve(300n);
    expect(await ledger.createTransfers(db, [post(pendingId, { amount: 301n })])).toEqual([
      { index: 0, result: 'exceeds_pending_transfer_amount' },
    ]);
    expect(await ledger.createTransfers(db, [post(pendingId, { amount: 120n })])).toEqual([]);
    expect(await counters(user)).toEqual([0n, 120n, 0n, 1_000n]);
    expect(await counters(transit)).toEqual([0n, 0n, 0n, 120n]);
  });

  it('voids: the reservation goes back and nothing posts', async () => {
    const { user, transit, pendingId } = await reserve(300n);
    expect(await ledger.createTransfers(db, [voidOf(pendingId)])).toEqual([]);
    expect(await counters(user)).toEqual([0n, 0n, 0n, 1_000n]);
    expect(await counters(transit)).toEqual([0n, 0n, 0n, 0n]);
    const [pending] = await ledger.lookupTransfers(db, [pendingId]);
    expect(pending?.pendingStatus).toBe('voided');
    expect(await ledger.createTransfers(db, [post(pendingId)])).toEqual([{ index: 0, result: 'pending_transfer_already_voided' }]);
  });

  it('resolves a pending transfer once: a second post or a void reads already_posted', async () => {
    const { user, pendingId } = await reserve(300n);
    const posting = post(pendingId);
    expect(await ledger.createTransfers(db, [posting])).toEqual([]);
    expect(await ledger.createTransfers(db, [posting])).toEqual([{ index: 0, result: 'exists' }]);
    expect(await ledger.createTransfers(db, [post(pendingId)])).toEqual([{ index: 0, result: 'pending_transfer_already_posted' }]);
    expect(await ledger.createTransfers(db, [voidOf(pendingId)])).toEqual([{ index: 0, result: 'pending_transfer_already_posted' }]);
    expect(await counters(user)).toEqual([0n, 300n, 0n, 1_000n]);
  });

  it('expires a pending transfer past its timeout when it is posted, and releases it', async () => {
    const { user, transit, pendingId } = await reserve(300n, 1);
    const [pending] = await ledger.lookupTransfers(db, [pendingId]);
    expect(pending?.expiresAt).not.toBeNull();
    await sleep(expiryWaitMs);
    expect(await ledger.createTransfers(db, [post(pendingId)])).toEqual([{ index: 0, result: 'pending_transfer_expired' }]);
    expect(await counters(user)).toEqual([0n, 0n, 0n, 1_000n]);
    expect(await counters(transit)).toEqual([0n, 0n, 0n, 0n]);
    const [expired] = await ledger.lookupTransfers(db, [pendingId]);
    expect(expired?.pendingStatus).toBe('expired');
    expect(await ledger.createTransfers(db, [voidOf(pendingId)])).toEqual([{ index: 0, result: 'pending_transfer_expired' }]);
  });

  it('keeps the release of an expired pending transfer when its linked chain fails', async () => {
    const { user, transit, pendingId } = await reserve(300n, 1);
    await sleep(expiryWaitMs);
    const fee = transfer(user, transit, 5n);
    const results = await db.transaction((tx) =>
      ledger.createTransfers(tx, [post(pendingId, { flags: TransferFlags.postPendingTransfer | TransferFlags.linked }), fee]),
    );
    expect(results).toEqual([
      { index: 0, result: 'pending_transfer_expired' },
      { index: 1, result: 'linked_event_failed' },
    ]);
    expect(await counters(user)).toEqual([0n, 0n, 0n, 1_000n]);
    expect(await ledger.lookupTransfers(db, [fee.id])).toEqual([]);
  });

  it('sweeps expired pending transfers', async () => {
    const { user, pendingId } = await reserve(300n, 1);
    const lasting = await reserve(200n, 3_600);
    await sleep(expiryWaitMs);
    expect(await checkLedgerInvariants(db)).toEqual([expect.stringContaining('past their timeout and still pending')]);
    const expired = await ledger.expirePendingTransfers(db, 100);
    expect(expired).toContain(pendingId);
    expect(expired).not.toContain(lasting.pendingId);
    expect(await counters(user)).toEqual([0n, 0n, 0n, 1_000n]);
    expect(await counters(lasting.user)).toEqual([200n, 0n, 0n, 1_000n]);
    expect(await ledger.expirePendingTransfers(db, 100)).toEqual([]);
  });
});

describe('linked chains', () => {
  it('applies nothing when the last member fails', async () => {
    const { user, equity } = await fundedUser(100n);
    const transit = await createAccount(AccountFlags.none);
    const chain = [
      transfer(equity, user, 50n, { flags: TransferFlags.linked }),
      transfer(user, transit, 100n, { flags: TransferFlags.linked }),
      transfer(user, transit, 51n),
    ];
    const alone = transfer(equity, transit, 7n);
    expect(await ledger.createTransfers(db, [...chain, alone])).toEqual([
      { index: 0, result: 'linked_event_failed' },
      { index: 1, result: 'linked_event_failed' },
      { index: 2, result: 'exceeds_credits' },
    ]);
    expect(
      await ledger.lookupTransfers(
        db,
        chain.map((t) => t.id),
      ),
    ).toEqual([]);
    expect(await counters(user)).toEqual([0n, 0n, 0n, 100n]);
    expect(await counters(transit)).toEqual([0n, 0n, 0n, 7n]);
  });

  it('applies a whole chain, sees earlier members, and reads exists for every member on retry', async () => {
    const { user, equity } = await fundedUser(0n);
    const transit = await createAccount(AccountFlags.none);
    const chain = [transfer(equity, user, 50n, { flags: TransferFlags.linked }), transfer(user, transit, 50n)];
    expect(await ledger.createTransfers(db, chain)).toEqual([]);
    expect(await ledger.createTransfers(db, chain)).toEqual([
      { index: 0, result: 'exists' },
      { index: 1, result: 'exists' },
    ]);
    expect(await counters(user)).toEqual([0n, 50n, 0n, 50n]);
  });

  // Unguarded balances are written once at the end of a batch (migration 008): every kind of
  // movement in one batch must still add up, and a failed chain's share must not.
  it('sums an unguarded account over one batch of reservations, posts, voids and a failed chain', async () => {
    const { user, equity } = await fundedUser(1_000n);
    const transit = await createAccount(AccountFlags.none);
    const kept = transfer(user, transit, 300n, { flags: TransferFlags.pending, timeoutS: 60 });
    const dropped = transfer(user, transit, 200n, { flags: TransferFlags.pending, timeoutS: 60 });
    const batch = [
      kept,
      dropped,
      post(kept.id, { amount: 250n }),
      voidOf(dropped.id),
      transfer(transit, equity, 40n, { flags: TransferFlags.linked }),
      transfer(user, transit, 5_000n),
      transfer(transit, equity, 10n),
    ];
    expect(await ledger.createTransfers(db, batch)).toEqual([
      { index: 4, result: 'linked_event_failed' },
      { index: 5, result: 'exceeds_credits' },
    ]);
    expect(await counters(transit)).toEqual([0n, 10n, 0n, 250n]);
    expect(await counters(user)).toEqual([0n, 250n, 0n, 1_000n]);
  });

  // A batch that applies in full is written at once (migration 010); the guarded checks must
  // still follow the batch's order, not its totals.
  it('checks a guarded account after each event of a batch, in order, not against the batch total', async () => {
    const { user, equity } = await fundedUser(0n);
    const transit = await createAccount(AccountFlags.none);
    const fundThenSpend = [
      transfer(equity, user, 100n),
      transfer(user, transit, 60n, { flags: TransferFlags.pending }),
      transfer(user, transit, 40n),
    ];
    expect(await ledger.createTransfers(db, fundThenSpend)).toEqual([]);
    expect(await counters(user)).toEqual([60n, 40n, 0n, 100n]);

    const spendThenFund = [transfer(user, transit, 1n), transfer(equity, user, 100n), post(fundThenSpend[1]!.id, { amount: 50n })];
    expect(await ledger.createTransfers(db, spendThenFund)).toEqual([{ index: 0, result: 'exceeds_credits' }]);
    expect(await counters(user)).toEqual([0n, 90n, 0n, 200n]);
    expect(await counters(transit)).toEqual([0n, 0n, 0n, 90n]);
    expect((await ledger.lookupTransfers(db, [fundThenSpend[1]!.id]))[0]?.pendingStatus).toBe('posted');
  });

  it('refuses a chain left open at the end of the batch', async () => {
    const a = await createAccount(AccountFlags.none);
    const b = await createAccount(AccountFlags.none);
    const single = transfer(a, b, 1n);
    expect(
      await ledger.createTransfers(db, [
        single,
        transfer(a, b, 2n, { flags: TransferFlags.linked }),
        transfer(a, b, 3n, { flags: TransferFlags.linked }),
      ]),
    ).toEqual([
      { index: 1, result: 'linked_event_failed' },
      { index: 2, result: 'linked_event_chain_open' },
    ]);
    expect(await counters(b)).toEqual([0n, 0n, 0n, 1n]);
  });
});

describe('idempotency', () => {
  it('answers exists for the same transfer and exists_with_different_amount for another amount', async () => {
    const { user, equity } = await fundedUser(0n);
    const funding = transfer(equity, user, 70n);
    expect(await ledger.createTransfers(db, [funding])).toEqual([]);
    expect(await ledger.createTransfers(db, [funding])).toEqual([{ index: 0, result: 'exists' }]);
    expect(await ledger.createTransfers(db, [{ ...funding, amount: 71n }])).toEqual([{ index: 0, result: 'exists_with_different_amount' }]);
    expect(await ledger.createTransfers(db, [{ ...funding, flags: TransferFlags.pending }])).toEqual([
      { index: 0, result: 'exists_with_different_flags' },
    ]);
    expect(await counters(user)).toEqual([0n, 0n, 0n, 70n]);
  });
});

describe('concurrency', () => {
  it('lets exactly as many debits through as the guarded account can pay', async () => {
    const amount = 10n;
    const affordable = 20;
    const attempts = 50;
    const { user } = await fundedUser(amount * BigInt(affordable));
    const merchant = await createAccount(AccountFlags.debitsMustNotExceedCredits);
    const outcomes: CreateTransferResult[][] = await Promise.all(
      Array.from({ length: attempts }, () => inTransaction([transfer(user, merchant, amount)])),
    );
    const succeeded = outcomes.filter((results) => results.length === 0).length;
    const refused = outcomes.filter((results) => results[0]?.result === 'exceeds_credits').length;
    expect([succeeded, refused]).toEqual([affordable, attempts - affordable]);
    expect(await counters(user)).toEqual([0n, amount * BigInt(affordable), 0n, amount * BigInt(affordable)]);
    expect(await counters(merchant)).toEqual([0n, 0n, 0n, amount * BigInt(affordable)]);
  });

  // No balance row is shared, so nothing serialises the two but the id: the second batch is
  // planned before the first commits and meets its row only when it inserts (migration 010).
  it('answers a batch whose id another transaction stored meanwhile event by event, leaving nothing of its own', async () => {
    const first = await fundedUser(100n);
    const second = await fundedUser(100n);
    const id = randomUUID();
    const mine = { ...transfer(first.equity, first.user, 10n), id };
    const theirs = { ...transfer(second.equity, second.user, 20n), id };
    const alongside = transfer(second.equity, second.user, 5n);
    const [a, b] = await Promise.all([inTransaction([mine]), inTransaction([alongside, theirs])]);
    // Exactly one wins; the other reads the stored transfer, event by event.
    const mineWon = a.length === 0;
    expect(mineWon ? b : a).toEqual([{ index: mineWon ? 1 : 0, result: 'exists_with_different_debit_account_id' }]);
    expect(mineWon ? a : b).toEqual([]);
    const [stored] = await ledger.lookupTransfers(db, [id]);
    const winner = mineWon ? mine : theirs;
    expect(stored).toMatchObject({ debitAccountId: winner.debitAccountId, amount: winner.amount });
    expect(await counters(first.user)).toEqual([0n, 0n, 0n, mineWon ? 110n : 100n]);
    expect(await counters(second.user)).toEqual([0n, 0n, 0n, mineWon ? 105n : 125n]);
  });

  it('applies a transfer submitted concurrently under one id once', async () => {
    const { user, equity } = await fundedUser(0n);
    const duplicate = transfer(equity, user, 25n);
    const copies = 10;
    const outcomes = await Promise.all(Array.from({ length: copies }, () => inTransaction([duplicate])));
    expect(outcomes.filter((results) => results.length === 0)).toHaveLength(1);
    expect(outcomes.filter((results) => results[0]?.result === 'exists')).toHaveLength(copies - 1);
    expect(await counters(user)).toEqual([0n, 0n, 0n, 25n]);
  });

  it('posts a pending transfer once when a post and a void race', async () => {
    const { user } = await fundedUser(100n);
    const transit = await createAccount(AccountFlags.none);
    const pending = transfer(user, transit, 100n, { flags: TransferFlags.pending });
    expect(await ledger.createTransfers(db, [pending])).toEqual([]);
    const outcomes = await Promise.all(
      [post(pending.id), voidOf(pending.id), post(pending.id), voidOf(pending.id)].map((event) => inTransaction([event])),
    );
    expect(outcomes.filter((results) => results.length === 0)).toHaveLength(1);
    const [resolved] = await ledger.lookupTransfers(db, [pending.id]);
    const [dp, dpo] = await counters(user);
    expect(dp).toBe(0n);
    expect(dpo).toBe(resolved?.pendingStatus === 'posted' ? 100n : 0n);
  });
});
