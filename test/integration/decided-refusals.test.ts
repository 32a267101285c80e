import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database, Sql } from '../../src/adapters/database.js';
import { checkLedgerInvariants } from '../../src/ledger/invariants.js';
import { AccountFlags, type CreateTransferResult, LEDGER_THB, type TransferInput, TransferFlags } from '../../src/ledger/ledger.js';
import { SqlLedger } from '../../src/ledger/sql-ledger.js';
import { openTestDatabase } from '../support/database.js';
import { eventByEventAnswers } from '../support/event-by-event.js';

/**
 * A batch of payments in which some payers lack the funds keeps the ledger's set-based path
 * (sql/ledger/11-plan.sql, ledger_plan_decided_refusals): one plan, no event run one by one, and
 * the answers of the event-by-event path, transfer by transfer.
 */

const ledger = new SqlLedger();
let db: Database;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => db?.close());

const FUNDING = 1_000n;
const account = (flags: number) => ({ id: randomUUID(), ledger: LEDGER_THB, code: 1, flags });
const single = (debit: string, credit: string, amount: bigint, flags: number = TransferFlags.none): TransferInput => ({
  id: randomUUID(),
  debitAccountId: debit,
  creditAccountId: credit,
  amount,
  ledger: LEDGER_THB,
  code: 1,
  flags,
});

interface Pool {
  readonly source: string;
  readonly transit: string;
  readonly revenue: string;
  readonly funded: readonly string[];
  readonly unfunded: readonly string[];
}

async function freshPool(): Promise<Pool> {
  const [source, transit, revenue] = [account(AccountFlags.none), account(AccountFlags.none), account(AccountFlags.none)];
  const funded = Array.from({ length: 6 }, () => account(AccountFlags.debitsMustNotExceedCredits));
  const unfunded = Array.from({ length: 3 }, () => account(AccountFlags.debitsMustNotExceedCredits));
  await ledger.createAccounts(db, [source, transit, revenue, ...funded, ...unfunded]);
  expect(
    await ledger.createTransfers(
      db,
      funded.map((wallet) => single(source.id, wallet.id, FUNDING)),
    ),
  ).toEqual([]);
  return {
    source: source.id,
    transit: transit.id,
    revenue: revenue.id,
    funded: funded.map((w) => w.id),
    unfunded: unfunded.map((w) => w.id),
  };
}

/** One payment as group commit sends it: the reservation, then its settlement chain (post, payee, fee). */
function payment(pool: Pool, payer: string, payee: string, amount: bigint): TransferInput[] {
  const reservation = single(payer, pool.transit, amount, TransferFlags.pending);
  const linked = TransferFlags.linked;
  return [
    reservation,
    { id: randomUUID(), pendingId: reservation.id, ledger: LEDGER_THB, code: 1, flags: TransferFlags.postPendingTransfer | linked },
    single(pool.transit, payee, amount - 1n, linked),
    single(pool.transit, pool.revenue, 1n),
  ];
}

/** The batch through SqlLedger, with how often the plan and the event-by-event loop ran. */
async function throughLedger(batch: readonly TransferInput[]) {
  return db.transaction(async (tx) => {
    await tx.query(`SET LOCAL track_functions = 'pl'`);
    const results = await ledger.createTransfers(tx, batch);
    return { results, calls: await callsOf(tx) };
  });
}

async function callsOf(sql: Sql): Promise<Record<string, number>> {
  const { rows } = await sql.query<{ funcname: string; calls: string }>(
    `SELECT funcname, calls FROM pg_stat_xact_user_functions
      WHERE funcname IN ('ledger_plan_until_refusal', 'ledger_run_events', 'ledger_apply_transfer')`,
  );
  return Object.fromEntries(rows.map((row) => [row.funcname, Number(row.calls)]));
}

const resultsOnly = (results: readonly CreateTransferResult[]) => results.map(({ index, result }) => ({ index, result }));

describe('payments refused for funds in a batch of paying ones', () => {
  it('are answered from the one plan of the batch, as event by event, and the rest is written set-based', async () => {
    const pool = await freshPool();
    const [a, b, c, d, e, f] = pool.funded as [string, string, string, string, string, string];
    const [x, y, z] = pool.unfunded as [string, string, string];
    const batch = [
      ...payment(pool, a, b, 100n),
      ...payment(pool, x, a, 50n),
      ...payment(pool, c, d, 200n),
      // Paid 20 earlier in the batch, pays 30: refused whatever the earlier payments do.
      ...payment(pool, y, a, 10n),
      ...payment(pool, d, y, 21n),
      ...payment(pool, y, c, 30n),
      ...payment(pool, e, f, FUNDING),
      ...payment(pool, z, f, 1n),
      ...payment(pool, f, e, 1_500n),
      ...payment(pool, b, x, 5n),
    ];
    const expected = await eventByEventAnswers(db, batch);
    // The event-by-event path refuses four reservations, and each settlement chain that posts one.
    expect(expected.filter((r) => r.result === 'exceeds_credits').map((r) => r.index)).toEqual([4, 12, 20, 28]);

    const { results, calls } = await throughLedger(batch);
    expect(resultsOnly(results)).toEqual(resultsOnly(expected));
    expect(calls).toEqual({ ledger_plan_until_refusal: 1 });
    expect(await checkLedgerInvariants(db)).toEqual([]);

    const balances = await ledger.lookupAccounts(db, [x, y, z, f]);
    // y received 20 (21 less the fee) and paid nothing; f received 999 from e and then paid 1,500 of its 1,999.
    expect(balances.map((w) => w.creditsPosted - w.debitsPosted - w.debitsPending)).toEqual([4n, 20n, 0n, 499n]);
  });

  it('leaves to the plan a refusal it cannot decide: a payer funded earlier in the batch by enough', async () => {
    const pool = await freshPool();
    const [a, b] = pool.funded as [string, string];
    const [x] = pool.unfunded as [string];
    // x is paid 100 (99 after the fee) by a, but a's payment is refused after b's drains a: x's
    // payment of 60 would have fitted, so it cannot be decided from the plan, and is refused by
    // the running sums once a's payment is known refused.
    const batch = [...payment(pool, a, b, FUNDING), ...payment(pool, a, x, 100n), ...payment(pool, x, b, 60n), ...payment(pool, b, a, 10n)];
    const expected = await eventByEventAnswers(db, batch);
    const { results } = await throughLedger(batch);
    expect(resultsOnly(results)).toEqual(resultsOnly(expected));
    expect(expected.filter((r) => r.result === 'exceeds_credits').map((r) => r.index)).toEqual([4, 8]);
    expect(await checkLedgerInvariants(db)).toEqual([]);
  });
});

/**
 * Random batches of payments among wallets some of which start empty, so that refusals depend on
 * each other: a payee paid earlier in the batch pays on (A pays B, then B pays C with what it got),
 * a payer pays twice, a refused payer's payee pays on what it never got. Whatever the ledger
 * decides from its first plan, cuts and plans again, or runs event by event, its answers must be
 * the event-by-event path's for the same batch on the same state.
 */
describe('random batches with refusals that depend on each other', () => {
  const WALLETS = 6;
  const payments = fc.array(
    fc.record({
      payer: fc.integer({ min: 0, max: WALLETS - 1 }),
      payee: fc.integer({ min: 1, max: WALLETS - 1 }),
      // Around what a funded wallet holds: some fit, some do not, some only after being paid.
      amount: fc.oneof(fc.bigInt({ min: 2n, max: 400n }), fc.bigInt({ min: 900n, max: 1_200n })),
    }),
    { minLength: 2, maxLength: 14 },
  );

  it('answer as the event-by-event path, transfer by transfer', async () => {
    await fc.assert(
      fc.asyncProperty(payments, fc.integer({ min: 0, max: WALLETS }), async (drawn, fundedCount) => {
        const pool = await freshPool();
        // The first fundedCount wallets hold FUNDING; the rest start empty.
        const wallets = [
          ...pool.funded.slice(0, Math.min(fundedCount, pool.funded.length)),
          ...pool.unfunded,
          ...pool.funded.slice(fundedCount),
        ].slice(0, WALLETS);
        const batch = drawn.flatMap(({ payer, payee, amount }) => {
          const to = (payer + payee) % WALLETS;
          return payment(pool, wallets[payer]!, wallets[to]!, amount);
        });
        const expected = await eventByEventAnswers(db, batch);
        const { results } = await throughLedger(batch);
        expect(resultsOnly(results)).toEqual(resultsOnly(expected));
        expect(await checkLedgerInvariants(db)).toEqual([]);
      }),
      { numRuns: 40 },
    );
  });
});
