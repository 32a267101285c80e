import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/database.js';
import { openTestDatabase } from '../support/database.js';

/**
 * Audit events and history rows name an existing intent, and an intent they name is neither
 * deleted nor renumbered: what the foreign keys to intents enforced row by row, sql/intents/01-references.sql
 * enforces per statement. Each refusal answers the foreign key's SQLSTATE, 23503.
 */

let db: Database;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => db?.close());

const FOREIGN_KEY_VIOLATION = { code: '23503' };

async function storeIntent(): Promise<string> {
  const id = randomUUID();
  await db.query(
    `INSERT INTO intents (id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel, to_account_name, amount, status)
     VALUES ($1, $2, 'references-test', 'f', 1, 'P2P_TRANSFER', 'INTERNAL', 'user.2.THB', 5, 'SETTLED')`,
    [id, randomUUID()],
  );
  return id;
}

const addEvents = (ids: readonly string[]) =>
  db.query("INSERT INTO intent_events (intent_id, status_to) SELECT unnest($1::uuid[]), 'SETTLED'", [ids]);
const addHistory = (ids: readonly string[]) =>
  db.query(
    `INSERT INTO transactions (intent_id, account_name, operation_type, direction, amount, currency)
     SELECT unnest($1::uuid[]), 'user.2.THB', 'P2P_TRANSFER', 'CREDIT', 5, 'THB'`,
    [ids],
  );
/** A refund's history row: it names the refunded intent and the refund (its own rows name none). */
const addRefundHistory = (id: string) =>
  db.query(
    `INSERT INTO transactions (intent_id, refund_id, account_name, operation_type, direction, amount, currency)
     VALUES ($1, $2, 'user.2.THB', 'P2P_TRANSFER', 'DEBIT', 5, 'THB')`,
    [id, randomUUID()],
  );
const count = async (table: 'intent_events' | 'transactions', id: string) =>
  (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE intent_id = $1`, [id])).rows[0]!.n;

describe('references to intents', () => {
  it('refuses a statement of audit events or history rows of which one names no intent, and stores none of its rows', async () => {
    const stored = await storeIntent();
    await expect(addEvents([stored, randomUUID()])).rejects.toMatchObject(FOREIGN_KEY_VIOLATION);
    await expect(addHistory([randomUUID(), stored])).rejects.toMatchObject(FOREIGN_KEY_VIOLATION);
    expect([await count('intent_events', stored), await count('transactions', stored)]).toEqual([0, 0]);
  });

  it('stores the rows of a statement naming existing intents, one intent several times', async () => {
    const [first, second] = [await storeIntent(), await storeIntent()];
    await addEvents([first, first, second]);
    await addHistory([first, second]);
    expect([await count('intent_events', first), await count('transactions', second)]).toEqual([2, 1]);
  });

  it('refuses to delete or renumber an intent that rows name, and lets an unnamed one go', async () => {
    const [named, historied, unnamed] = [await storeIntent(), await storeIntent(), await storeIntent()];
    await addEvents([named]);
    await addHistory([historied]);
    for (const id of [named, historied]) {
      await expect(db.query('DELETE FROM intents WHERE id = $1', [id])).rejects.toMatchObject(FOREIGN_KEY_VIOLATION);
      await expect(db.query('UPDATE intents SET id = $2 WHERE id = $1', [id, randomUUID()])).rejects.toMatchObject(FOREIGN_KEY_VIOLATION);
    }
    await expect(db.query('UPDATE transactions SET intent_id = $2 WHERE intent_id = $1', [historied, unnamed])).rejects.toMatchObject(
      FOREIGN_KEY_VIOLATION,
    );
    expect((await db.query('DELETE FROM intents WHERE id = $1', [unnamed])).rowCount).toBe(1);
  });

  it("refuses to delete an intent a refund's history row names", async () => {
    const refunded = await storeIntent();
    await addRefundHistory(refunded);
    await expect(db.query('DELETE FROM intents WHERE id = $1', [refunded])).rejects.toMatchObject(FOREIGN_KEY_VIOLATION);
    await expect(db.query('UPDATE intents SET id = $2 WHERE id = $1', [refunded, randomUUID()])).rejects.toMatchObject(
      FOREIGN_KEY_VIOLATION,
    );
  });

  it('checks a deleted intent against the history rows by index, not by reading the whole table', async () => {
    // Every batch that holds a payment refused for funds deletes that intent again: a check that
    // read all of `transactions` cost each such batch the size of the payments' history.
    const [historied, unnamed] = [await storeIntent(), await storeIntent()];
    await addHistory([historied]);
    await addRefundHistory(historied);
    const seqScans = await db.transaction(async (tx) => {
      // Sequential scans priced out, as on a table large enough for them to cost: one is taken
      // only where no index can answer.
      await tx.query('SET LOCAL enable_seqscan = off');
      // Counted as a difference: PGlite's "xact" counters also hold what earlier transactions of
      // its one session did since its statistics were last flushed; PostgreSQL's start at zero.
      const scans = async () =>
        (
          await tx.query<{ n: number }>(
            "SELECT coalesce(sum(seq_scan), 0)::int AS n FROM pg_stat_xact_user_tables WHERE relname IN ('transactions', 'intent_events')",
          )
        ).rows[0]!.n;
      const before = await scans();
      expect((await tx.query('DELETE FROM intents WHERE id = $1', [unnamed])).rowCount).toBe(1);
      return (await scans()) - before;
    });
    expect(seqScans).toBe(0);
  });
});
