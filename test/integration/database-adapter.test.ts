import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { openTestDatabase, testPoolMode } from '../support/database.js';

let db: Database;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => db?.close());

const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') === true;

describe.runIf(onPostgres)('statements on PostgreSQL', () => {
  it.runIf(testPoolMode === 'session')('go out as named prepared statements, one per text, each parsed once per connection', async () => {
    const text = 'SELECT $1::int + 1 AS next';
    const prepared = await db.transaction(async (tx) => {
      for (let i = 0; i < 3; i += 1) expect((await tx.query<{ next: number }>(text, [i])).rows).toEqual([{ next: i + 1 }]);
      const { rows } = await tx.query<{ name: string }>('SELECT name FROM pg_prepared_statements WHERE statement = $1', [text]);
      return rows;
    });
    expect(prepared).toEqual([{ name: expect.stringMatching(/^payorch_\d+$/) }]);
  });

  it('answers a statement without parameters unnamed', async () => {
    const text = 'SELECT 41 + 1 AS answer';
    const prepared = await db.transaction(async (tx) => {
      expect((await tx.query<{ answer: number }>(text)).rows).toEqual([{ answer: 42 }]);
      return (await tx.query('SELECT 1 FROM pg_prepared_statements WHERE statement = $1', [text])).rows;
    });
    expect(prepared).toEqual([]);
  });

  it('go out unnamed in DATABASE_POOL_MODE=transaction, where the next statement may reach another server connection', async () => {
    const text = 'SELECT $1::int + 2 AS next';
    // No table is involved: the server's own database will do.
    const pooled = await openDatabase(process.env.DATABASE_URL, '', 'transaction');
    try {
      const prepared = await pooled.transaction(async (tx) => {
        for (let i = 0; i < 3; i += 1) expect((await tx.query<{ next: number }>(text, [i])).rows).toEqual([{ next: i + 2 }]);
        return (await tx.query('SELECT 1 FROM pg_prepared_statements WHERE statement = $1', [text])).rows;
      });
      expect(prepared).toEqual([]);
    } finally {
      await pooled.close();
    }
  });
});

describe('a transaction with statements sent and not awaited (Tx.send)', () => {
  beforeAll(async () => {
    await db.exec('CREATE TABLE sent_rows (id integer PRIMARY KEY, note text NOT NULL)');
  });

  const stored = async () => (await db.query<{ id: number }>('SELECT id FROM sent_rows ORDER BY id')).rows.map((row) => row.id);

  it('commits what was sent, in order with what was awaited', async () => {
    const answer = await db.transaction(async (tx) => {
      await tx.query('INSERT INTO sent_rows (id, note) VALUES ($1, $2)', [1, 'awaited']);
      tx.send('INSERT INTO sent_rows (id, note) VALUES ($1, $2)', [2, 'sent']);
      tx.send('UPDATE sent_rows SET note = $2 WHERE id = $1', [1, 'changed after']);
      return 'done';
    });
    expect(answer).toBe('done');
    expect(await stored()).toEqual([1, 2]);
    expect((await db.query('SELECT note FROM sent_rows WHERE id = 1')).rows).toEqual([{ note: 'changed after' }]);
  });

  it('fails as a whole when a sent statement fails: its error is thrown and nothing of the transaction stays', async () => {
    const failing = db.transaction(async (tx) => {
      await tx.query('INSERT INTO sent_rows (id, note) VALUES ($1, $2)', [3, 'before']);
      tx.send('INSERT INTO sent_rows (id, note) VALUES ($1, $2)', [1, 'duplicate key']);
      tx.send('INSERT INTO sent_rows (id, note) VALUES ($1, $2)', [4, 'after']);
      return 'not reached';
    });
    await expect(failing).rejects.toThrow(/SQLSTATE 23505/);
    await expect(failing).rejects.not.toThrow(/duplicate key/);
    expect(await stored()).toEqual([1, 2]);
    // The connection is usable afterwards: the next transaction commits.
    await db.transaction(async (tx) => tx.send('INSERT INTO sent_rows (id, note) VALUES ($1, $2)', [5, 'next']));
    expect(await stored()).toEqual([1, 2, 5]);
  });
});
