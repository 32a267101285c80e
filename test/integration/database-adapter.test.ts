import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/database.js';
import { openTestDatabase } from '../support/database.js';

let db: Database;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => db?.close());

describe.runIf(process.env.DATABASE_URL?.startsWith('postgres'))('statements on PostgreSQL', () => {
  it('go out as named prepared statements, one per text, each parsed once per connection', async () => {
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
});
