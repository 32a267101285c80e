import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { PgliteThread } from '../../src/adapters/pglite-thread-client.js';
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

describe('values as the driver returns them', () => {
  it('keeps int8 as bigint, timestamptz as Date, jsonb as objects and bytea as bytes, both ways', async () => {
    const at = new Date('2026-11-26T12:00:00.123Z');
    const { rows } = await db.query<{ big: bigint; at: Date; doc: unknown; bytes: Uint8Array }>(
      'SELECT $1::int8 AS big, $2::timestamptz AS at, $3::jsonb AS doc, $4::bytea AS bytes',
      [9_007_199_254_740_993n, at, JSON.stringify({ amount: '10', nested: [1, null] }), Buffer.from([0, 255, 7])],
    );
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect(row.big).toBe(9_007_199_254_740_993n);
    expect(row.at).toBeInstanceOf(Date);
    expect(row.at.toISOString()).toBe(at.toISOString());
    expect(row.doc).toEqual({ amount: '10', nested: [1, null] });
    expect([...row.bytes]).toEqual([0, 255, 7]);
  });
});

describe.runIf(!onPostgres)('PGlite on a thread of its own', () => {
  beforeAll(async () => {
    await db.exec('CREATE TABLE thread_rows (id integer PRIMARY KEY)');
  });

  it('runs a statement outside a transaction after the open one ends, never inside it', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const open = db.transaction(async (tx) => {
      await tx.query('INSERT INTO thread_rows (id) VALUES (1)');
      await held;
      await tx.query('INSERT INTO thread_rows (id) VALUES (2)');
      throw new Error('rolled back on purpose');
    });
    const outside = db.query<{ n: bigint }>('SELECT count(*) AS n FROM thread_rows');
    release();
    await expect(open).rejects.toThrow('rolled back on purpose');
    expect((await outside).rows).toEqual([{ n: 0n }]);
  });

  it('commits transactions one at a time, in the order they began, whatever their statements interleave', async () => {
    const order: number[] = [];
    await Promise.all(
      [10, 11, 12].map((id) =>
        db.transaction(async (tx) => {
          const { rows } = await tx.query<{ n: bigint }>('SELECT count(*) AS n FROM thread_rows WHERE id >= 10');
          await new Promise((resolve) => setTimeout(resolve, 5));
          await tx.query('INSERT INTO thread_rows (id) VALUES ($1)', [id]);
          order.push(Number(rows[0]!.n));
        }),
      ),
    );
    // Each saw the rows of the ones before it, and no more: none ran inside another.
    expect(order).toEqual([0, 1, 2]);
  });

  it('refuses a parameter that cannot cross to the thread, and keeps answering', async () => {
    const hostile = [() => 'not a value', Symbol('not a value'), { toString: () => 1n, nested: new WeakMap() }];
    for (const param of hostile) await expect(db.query('SELECT $1::text AS x', [param])).rejects.toThrow();
    expect((await db.query('SELECT 1 AS alive')).rows).toEqual([{ alive: 1 }]);
  });

  it('rejects a statement in a transaction that was never opened, without a hang', async () => {
    const thread = await PgliteThread.start(undefined);
    try {
      await expect(thread.call({ kind: 'query', tx: 999, text: 'SELECT 1', params: undefined })).rejects.toThrow(/not open/);
      await expect(thread.call({ kind: 'end', tx: 999, commit: true })).rejects.toThrow(/not open/);
    } finally {
      await thread.close();
    }
  });

  it('rejects every waiting call and every later one when the thread dies, and hangs on none', async () => {
    const thread = await PgliteThread.start(undefined);
    const waiting = [
      thread.call({ kind: 'query', tx: null, text: 'SELECT pg_sleep(2)', params: undefined }),
      thread.call({ kind: 'query', tx: null, text: 'SELECT 1', params: undefined }),
    ];
    // What a crash of the WebAssembly or an out-of-memory kill looks like from this side.
    await thread['worker'].terminate();
    for (const call of waiting) await expect(call).rejects.toThrow(/PGlite thread exited/);
    await expect(thread.call({ kind: 'query', tx: null, text: 'SELECT 1', params: undefined })).rejects.toThrow(/PGlite thread exited/);
    await thread.close();
  });

  it('refuses to open a data directory PGlite cannot use, rather than waiting', async () => {
    const notADirectory = join(mkdtempSync(join(tmpdir(), 'payorch-pglite-')), 'a-file');
    writeFileSync(notADirectory, 'not a database');
    await expect(openDatabase(undefined, notADirectory)).rejects.toThrow();
  });

  it('answers nothing after close', async () => {
    const closing = await openDatabase('memory://', '');
    await closing.close();
    await expect(closing.query('SELECT 1')).rejects.toThrow(/closed/);
  });
});
