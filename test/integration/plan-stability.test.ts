import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { migrate } from '../../src/adapters/migrations.js';
import { formatViolation, runAudit } from '../../src/domain/audit/audit.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createTestSchema, type TestSchema, testPoolMode } from '../support/database.js';
import { expectLedgerInvariants } from '../support/invariants.js';
import { createMerchant, createUser, topUp } from '../support/payments.js';

/**
 * The hot path's plans hold as the tables grow without statistics: a fresh database, autovacuum
 * off for its tables and no ANALYZE, so every session plans against tables the planner believes
 * empty. A plan that joins or filters a growing table without its key turns into a sequential scan
 * that reads the whole table at every batch, and throughput falls as the table fills
 * (docs/design.md#hot-stable-plans). PostgreSQL only: its statistics counters are the evidence,
 * and PGlite replans its one session as the tables grow (src/workers/table-maintenance.ts).
 */

const serverUrl = process.env.DATABASE_URL;
const onPostgres = serverUrl?.startsWith('postgres') === true;
/** User ids of this file only: payer locks are advisory locks, shared by every schema on a server. */
const FIRST_USER = 8_100;
const USERS = 64;
const MERCHANTS = 4;
const FIRST_MERCHANT = 8_190;
const ROUNDS = Number(process.env.PLAN_STABILITY_ROUNDS ?? 40);
/** The last rounds, counted once the tables have grown. */
const MEASURED_ROUNDS = 10;
const IN_FLIGHT = 32;
/** The tables every payment adds rows to. */
const GROWING = [
  'intents',
  'intent_events',
  'event_feed',
  'transactions',
  'ledger_transfers',
  'ledger_account_history',
  'refunds',
  'refund_totals',
] as const;

let schema: TestSchema;
let t: TestApp;
let admin: pg.Client;

interface Counters {
  readonly seqScan: number;
  readonly liveRows: number;
}

async function counters(): Promise<Map<string, Counters>> {
  const { rows } = await admin.query<{ relname: string; seq_scan: string; n_live_tup: string }>(
    'SELECT relname, seq_scan, n_live_tup FROM pg_stat_user_tables WHERE schemaname = $1',
    [schema.schema],
  );
  return new Map(rows.map((r) => [r.relname, { seqScan: Number(r.seq_scan), liveRows: Number(r.n_live_tup) }]));
}

/** Backends flush their counters when they end: close every session of the schema's role, then read. */
async function countersAfterSessionsEnd(): Promise<Map<string, Counters>> {
  // A session flushes its counters when it ends. Through PgBouncer the server sessions outlive the
  // app's close until the pooler's idle time-out (10 s in .ci/run), so wait past it.
  for (let i = 0; i < 400; i += 1) {
    const { rows } = await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1', [
      schema.schema,
    ]);
    if (rows[0]!.n === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return counters();
}

const wallet = (user: number) => `user.${user}.THB`;
const user = (i: number) => FIRST_USER + (i % USERS);
const merchant = (i: number) => FIRST_MERCHANT + (i % MERCHANTS);

async function expectStatus(res: Promise<{ statusCode: number; body: string; json(): unknown }>, code: number, status: string) {
  const answer = await res;
  expect(answer.statusCode, answer.body).toBe(code);
  expect((answer.json() as { status: string }).status, answer.body).toBe(status);
  return answer.json() as { intentId: string; status: string };
}

/** One round: per worker a P2P payment, an invoice issued and confirmed, a withdrawal, and a refund of the payment. */
async function round(offset: number): Promise<void> {
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async (_, w) => {
      const i = offset + w;
      const payer = user(i);
      // A payer pays from one worker at a time (a second concurrent payment is answered 409).
      const paid = await expectStatus(
        t.call('POST', '/intents', {
          user: payer,
          body: { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: 100, recipientUserId: user(i + 7) },
        }),
        201,
        'SETTLED',
      );
      const issued = await expectStatus(
        t.call('POST', '/intents', {
          user: merchant(i),
          body: {
            idempotencyKey: randomUUID(),
            operationType: 'INVOICE_PAYMENT',
            amount: 300,
            toLedgerAccountId: ledgerAccountId(`merchant.${merchant(i)}.THB`),
          },
        }),
        201,
        'CREATED',
      );
      await expectStatus(
        t.call('POST', `/intents/${issued.intentId}/confirm`, {
          user: payer,
          body: { payerLedgerAccountId: ledgerAccountId(wallet(payer)), payerUserId: payer, idempotencyKey: randomUUID() },
        }),
        200,
        'SETTLED',
      );
      await expectStatus(
        t.call('POST', '/intents', {
          user: payer,
          body: { idempotencyKey: randomUUID(), operationType: 'WITHDRAWAL', amount: 2_000, externalRef: `w-${i}` },
        }),
        201,
        'SETTLED',
      );
      const refund = await t.call('POST', `/intents/${paid.intentId}/refunds`, {
        user: 77,
        body: { idempotencyKey: randomUUID(), reason: 'plan test', amount: 40 },
      });
      expect(refund.statusCode, refund.body).toBe(201);
    }),
  );
}

describe.runIf(onPostgres)('the hot path on a database without statistics (PostgreSQL)', () => {
  let db: Database;
  beforeAll(async () => {
    schema = await createTestSchema(serverUrl!, 'plans');
    admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    db = await openDatabase(schema.url, '', testPoolMode);
    await migrate(db);
    const { rows } = await admin.query<{ relname: string }>(
      "SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind IN ('r', 'p')",
      [schema.schema],
    );
    // Autovacuum would ANALYZE the tables as they grow, and the plans made afterwards would hide
    // the ones made while they were empty.
    for (const { relname } of rows) await admin.query(`ALTER TABLE ${schema.schema}.${relname} SET (autovacuum_enabled = off)`);
    t = await startTestApp({ db });
    for (let m = 0; m < MERCHANTS; m += 1) await createMerchant(t, FIRST_MERCHANT + m);
    for (let u = 0; u < USERS; u += 1) {
      await createUser(t, FIRST_USER + u);
      await topUp(t, FIRST_USER + u, 100_000_000);
    }
  }, 120_000);
  afterAll(async () => {
    await admin?.end();
    await schema?.drop();
  });

  it('thousands of payments, invoices, withdrawals and refunds scan no growing table', async () => {
    // The first rounds plan every statement while the tables hold a few rows; the sessions keep
    // the plans PL/pgSQL caches (functions, triggers) for their lives.
    for (let r = 0; r < ROUNDS - MEASURED_ROUNDS; r += 1) await round(r * IN_FLIGHT);
    // Read at once: the pool closes a connection idle for 10 s, and its replacement would plan
    // again on the grown tables. A backend flushes its counters between transactions at most once
    // a second, so what this reads late is at most the last second's, when the tables had grown.
    const grown = await counters();
    for (let r = ROUNDS - MEASURED_ROUNDS; r < ROUNDS; r += 1) await round(r * IN_FLIGHT);
    await t.close();
    const after = await countersAfterSessionsEnd();
    expect(after.get('intents')!.liveRows).toBeGreaterThanOrEqual(ROUNDS * IN_FLIGHT * 3);
    // Once the tables have grown, no statement of the money path reads one of them whole. While
    // they were small a scan was a fair choice; the plans a session keeps for its life (PL/pgSQL's,
    // and a prepared statement's generic plan) were made then, and would scan here.
    const scanned = GROWING.map((table) => ({ table, seqScans: after.get(table)!.seqScan - grown.get(table)!.seqScan })).filter(
      (s) => s.seqScans > 0,
    );
    expect(scanned).toEqual([]);
    const check = await openDatabase(schema.url, '', testPoolMode);
    try {
      await expectLedgerInvariants(check);
      expect((await runAudit(check)).violations.map(formatViolation)).toEqual([]);
    } finally {
      await check.close();
    }
  }, 600_000);
});
