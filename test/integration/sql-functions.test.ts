import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/database.js';
import { migrate } from '../../src/adapters/migrations.js';
import { AccountFlags, LEDGER_THB, TransferFlags } from '../../src/ledger/ledger.js';
import { openTestDatabase } from '../support/database.js';

let db: Database;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => db?.close());

const has = (flags: number, flag: number) => (flags & flag) !== 0;

/** Each SQL predicate of sql/ledger/01-flags.sql, as the TypeScript constants define it. */
const predicates: Record<string, (flags: number) => boolean | number | string | null> = {
  ledger_is_linked: (f) => has(f, TransferFlags.linked) && has(f, AccountFlags.linked),
  ledger_is_pending: (f) => has(f, TransferFlags.pending),
  ledger_posts_pending: (f) => has(f, TransferFlags.postPendingTransfer),
  ledger_voids_pending: (f) => has(f, TransferFlags.voidPendingTransfer),
  ledger_resolves_pending: (f) => has(f, TransferFlags.postPendingTransfer) || has(f, TransferFlags.voidPendingTransfer),
  ledger_transfer_flags_clash: (f) =>
    [TransferFlags.pending, TransferFlags.postPendingTransfer, TransferFlags.voidPendingTransfer].filter((flag) => has(f, flag)).length > 1,
  ledger_transfer_kind: (f) => {
    const kinds = [
      [TransferFlags.pending, 'pending'],
      [TransferFlags.postPendingTransfer, 'post'],
      [TransferFlags.voidPendingTransfer, 'void'],
    ] as const;
    const set = kinds.filter(([flag]) => has(f, flag));
    return set.length > 1 ? null : (set[0]?.[1] ?? 'single');
  },
  ledger_debits_must_not_exceed_credits: (f) => has(f, AccountFlags.debitsMustNotExceedCredits),
  ledger_credits_must_not_exceed_debits: (f) => has(f, AccountFlags.creditsMustNotExceedDebits),
  ledger_is_guarded: (f) => has(f, AccountFlags.debitsMustNotExceedCredits) || has(f, AccountFlags.creditsMustNotExceedDebits),
  ledger_account_flags_clash: (f) => has(f, AccountFlags.debitsMustNotExceedCredits) && has(f, AccountFlags.creditsMustNotExceedDebits),
  ledger_debit_guard: (f) => f & AccountFlags.debitsMustNotExceedCredits,
  ledger_credit_guard: (f) => f & AccountFlags.creditsMustNotExceedDebits,
};

describe('the SQL flag predicates', () => {
  const everyFlag = [...Object.values(TransferFlags), ...Object.values(AccountFlags)].reduce((all, flag) => all | flag, 0);
  // Every combination of the known bits, and one unknown bit above them.
  const combinations = Array.from({ length: (everyFlag + 1) * 2 }, (_, flags) => flags);

  it.each(Object.entries(predicates))('%s agrees with the TypeScript flags for every combination of bits', async (name, expected) => {
    const { rows } = await db.query<{ flags: number; answer: boolean | number | string | null }>(
      `SELECT f AS flags, ${name}(f) AS answer FROM unnest($1::integer[]) AS f ORDER BY f`,
      [combinations],
    );
    expect(rows).toEqual(combinations.map((flags) => ({ flags, answer: expected(flags) })));
  });

  it('reads an event whose flags are omitted as none', async () => {
    const { rows } = await db.query<{ flags: number }>(`SELECT ledger_event_flags('{}'::jsonb) AS flags`);
    expect(rows).toEqual([{ flags: TransferFlags.none }]);
  });

  it('are inlined: a query that asks one costs a bit test, not a function call', async () => {
    const plan = await explain('SELECT ledger_is_pending(flags), ledger_resolves_pending(flags) FROM ledger_transfers');
    expect(plan).not.toMatch(/ledger_(is_pending|resolves_pending|posts_pending|voids_pending)/);
    expect(plan).toMatch(/\(flags & 2\) <> 0/);
  });
});

describe('the plan of a batch (sql/ledger/11-plan.sql)', () => {
  it('inlines its SQL stages into one query, which PL/pgSQL plans and caches as one', async () => {
    const plan = await explain(`SELECT * FROM ledger_plan_events('[]'::jsonb, now())`);
    expect(plan).not.toMatch(/ledger_(plan_events|plan_lookups|batch_events)/);
    expect(plan).toMatch(/jsonb_array_elements/);
  });
  it('finds no refusal in a payment that applies, its post omitting the amount, so the batch is written at once', async () => {
    const [payer, transit, payee, reservation] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const account = (id: string) => ({ id, ledger: LEDGER_THB, code: 1, flags: AccountFlags.none });
    await db.query('SELECT ledger_create_accounts($1::jsonb)', [JSON.stringify([payer, transit, payee].map(account))]);
    const transfer = { ledger: LEDGER_THB, code: 1 };
    const batch = [
      { ...transfer, id: reservation, debit_account_id: payer, credit_account_id: transit, amount: 10, flags: TransferFlags.pending },
      { ...transfer, id: randomUUID(), pending_id: reservation, flags: TransferFlags.postPendingTransfer | TransferFlags.linked },
      { ...transfer, id: randomUUID(), debit_account_id: transit, credit_account_id: payee, amount: 10, flags: TransferFlags.none },
    ];
    const { rows } = await db.query<{ refused_at: number | null }>('SELECT refused_at FROM ledger_plan_until_refusal($1::jsonb, now())', [
      JSON.stringify(batch),
    ]);
    expect(rows).toEqual([{ refused_at: null }]);
  });
  it('runs on generic plans, so that a batch of one payment is not planned again at every call', async () => {
    // Custom plans looked cheaper for a one-element unnest() and were made again per call (docs/PERFORMANCE.md).
    const { rows } = await db.query<{ config: string[] | null }>(
      `SELECT proconfig AS config FROM pg_proc WHERE oid = 'ledger_create_transfers'::regproc`,
    );
    expect(rows).toEqual([{ config: ['plan_cache_mode=force_generic_plan'] }]);
  });
});

describe('the SQL sources', () => {
  it('are applied again only when their text changed', async () => {
    expect(await migrate(db)).toEqual([]);
    await db.query(`UPDATE sql_function_sources SET sha256 = 'stale' WHERE name = 'ledger/01-flags.sql'`);
    expect(await migrate(db)).toEqual(['sql/ledger/01-flags.sql']);
    expect(await migrate(db)).toEqual([]);
  });

  it('define or drop every function the migrations ever defined, so no current definition is left in a migration', async () => {
    const namedIn = async (dir: string, statement: RegExp) => {
      const names = (await readdir(new URL(`../../${dir}/`, import.meta.url), { recursive: true })).filter((n) => n.endsWith('.sql'));
      const texts = await Promise.all(names.map((name) => readFile(new URL(`../../${dir}/${name}`, import.meta.url), 'utf8')));
      return new Set(texts.flatMap((text) => [...text.matchAll(statement)].map((m) => m[1])));
    };
    const defines = /CREATE (?:OR REPLACE )?FUNCTION (ledger_\w+)/g;
    const inMigrations = await namedIn('migrations', defines);
    const inSources = await namedIn('sql', defines);
    const droppedInSources = await namedIn('sql', /DROP FUNCTION IF EXISTS (ledger_\w+)/g);
    expect([...inMigrations].filter((name) => !inSources.has(name) && !droppedInSources.has(name))).toEqual([]);
  });
});

async function explain(query: string): Promise<string> {
  const { rows } = await db.query<Record<string, string>>(`EXPLAIN (VERBOSE, COSTS OFF) ${query}`);
  return rows.map((row) => Object.values(row).join('')).join('\n');
}
