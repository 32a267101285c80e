import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { migrate } from '../../src/adapters/migrations.js';
import { AccountFlags, LEDGER_THB, TransferFlags } from '../../src/ledger/ledger.js';
import { createTestSchema, openTestDatabase, testPoolMode } from '../support/database.js';

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
    // Custom plans looked cheaper for a one-element unnest() and were made again per call (docs/design.md#hot-generic-plans).
    const { rows } = await db.query<{ config: string[] | null }>(
      `SELECT proconfig AS config FROM pg_proc WHERE oid = 'ledger_create_transfers'::regproc`,
    );
    // With sequential scans priced out, so that a generic plan made on small tables keeps its key look-ups (docs/design.md#hot-stable-plans).
    expect(rows).toEqual([{ config: ['plan_cache_mode=force_generic_plan', 'enable_seqscan=off'] }]);
  });
});

describe('the SQL sources', () => {
  it('are applied again only when their text changed', async () => {
    expect(await migrate(db)).toEqual([]);
    await db.query(`UPDATE sql_function_sources SET sha256 = 'stale' WHERE name = 'ledger/01-flags.sql'`);
    expect(await migrate(db)).toEqual(['sql/ledger/01-flags.sql']);
    expect(await migrate(db)).toEqual([]);
  });

  it('hold the current text of every function in the database, each written once, so none is defined only in a migration', async () => {
    const sources = await sqlSourceText();
    const functions = await functionsOf(db);
    expect(functions.length).toBeGreaterThan(50);
    const overloads = (name: string) => functions.filter((f) => f.name === name).length;
    const astray = functions
      .filter((f) => !sources.includes(`$$${f.source}$$`) || definitionsIn(sources, f.name) !== overloads(f.name))
      .map((f) => `${f.name}(${f.args})`);
    expect(astray).toEqual([]);
  });

  it('hold every trigger as it stands in the database, dropped and created again, so a rerun leaves one of each', async () => {
    const sources = (await sqlSourceText()).replace(/\s+/g, ' ');
    const triggers = await triggersOf(db);
    expect(triggers.length).toBeGreaterThan(10);
    const astray = triggers
      .filter((t) => !sources.includes(`DROP TRIGGER IF EXISTS ${t.name} ON ${t.table}; ${t.definition};`))
      .map((t) => t.definition);
    expect(astray).toEqual([]);
  });

  it('leave a database upgraded from the last migration before them (021) exactly as a fresh one', async () => {
    const schema = pgUrl === undefined ? undefined : await createTestSchema(pgUrl, 'sqlupg');
    const upgraded = await openDatabase(schema?.url ?? 'memory://', '', testPoolMode);
    try {
      expect(await migrate(upgraded, { through: '021-confirm-attempt' })).toContain('021-confirm-attempt');
      // As the release before wrote them: the migrations' bodies, the feed's and guard's among them.
      expect((await functionsOf(upgraded)).find((f) => f.name === 'intent_open_batch')).toBeDefined();
      await migrate(upgraded);
      expect(await functionsOf(upgraded)).toEqual(await functionsOf(db));
      expect(await triggersOf(upgraded)).toEqual(await triggersOf(db));
    } finally {
      await upgraded.close();
      await schema?.drop();
    }
  });
});

const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;

/** Every file under sql/, in the order the runner applies them. */
async function sqlSourceText(): Promise<string> {
  const root = new URL('../../sql/', import.meta.url);
  const names = (await readdir(root, { recursive: true })).filter((name) => name.endsWith('.sql')).sort();
  return (await Promise.all(names.map((name) => readFile(new URL(name, root), 'utf8')))).join('\n');
}

/** CREATE OR REPLACE, or CREATE after a DROP FUNCTION IF EXISTS where the result type changed. */
const definitionsIn = (sources: string, name: string) =>
  sources.match(new RegExp(`CREATE (OR REPLACE )?FUNCTION ${name}\\(`, 'g'))?.length ?? 0;

interface FunctionRow {
  readonly name: string;
  readonly args: string;
  readonly source: string;
  readonly shape: string;
}

/** The functions of the schema in use, with what CREATE OR REPLACE sets besides the body. */
async function functionsOf(database: Database): Promise<FunctionRow[]> {
  const { rows } = await database.query<FunctionRow>(
    `SELECT p.proname AS name, pg_get_function_identity_arguments(p.oid) AS args, p.prosrc AS source,
            concat_ws(' ', pg_get_function_result(p.oid), l.lanname, p.provolatile, p.proisstrict, p.proparallel, p.proconfig::text) AS shape
       FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
      WHERE p.pronamespace = current_schema()::regnamespace
      ORDER BY 1, 2`,
  );
  return rows;
}

/** The schema's triggers as CREATE TRIGGER statements, without the schema's name. */
async function triggersOf(database: Database): Promise<Array<{ name: string; table: string; definition: string }>> {
  const { rows } = await database.query<{ name: string; table: string; definition: string }>(
    `SELECT t.tgname AS name, c.relname AS "table", replace(pg_get_triggerdef(t.oid), current_schema() || '.', '') AS definition
       FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
      WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
      ORDER BY 2, 1`,
  );
  return rows;
}

async function explain(query: string): Promise<string> {
  const { rows } = await db.query<Record<string, string>>(`EXPLAIN (VERBOSE, COSTS OFF) ${query}`);
  return rows.map((row) => Object.values(row).join('')).join('\n');
}
