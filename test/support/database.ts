import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { migrate } from '../../src/adapters/migrations.js';

/**
 * A migrated, empty database for one test file. With DATABASE_URL=postgres://… each file gets a
 * schema of its own on that server (files run in parallel); otherwise an in-memory PGlite.
 */
export async function openTestDatabase(): Promise<Database> {
  const url = process.env.DATABASE_URL;
  if (url === undefined || !url.startsWith('postgres')) {
    const db = await openDatabase('memory://', '');
    await migrate(db);
    return db;
  }
  const scoped = await createSchema(url, 'test');
  const db = await openDatabase(scoped.url, '');
  await migrate(db);
  return {
    ...db,
    async close() {
      await db.close();
      await scoped.drop();
    },
  };
}

export interface ScopedSchema {
  /** `url` with a search_path of the new schema: everything the service creates lands there. */
  readonly url: string;
  /** Drops the schema and all it holds. */
  drop(): Promise<void>;
}

/** A fresh schema `<prefix>_<random>` on the PostgreSQL server at `url`, for one test file's database. */
export async function createSchema(url: string, prefix: string): Promise<ScopedSchema> {
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  const run = async (statement: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await run(`CREATE SCHEMA ${schema}`);
  const scoped = new URL(url);
  scoped.searchParams.set('options', `-c search_path=${schema}`);
  return { url: scoped.toString(), drop: () => run(`DROP SCHEMA ${schema} CASCADE`) };
}
