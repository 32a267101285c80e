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
  const schema = await createTestSchema(url, 'test');
  const db = await openDatabase(schema.url, '');
  await migrate(db);
  return {
    ...db,
    async close() {
      await db.close();
      await schema.drop();
    },
  };
}

/** An empty schema of its own on the PostgreSQL server at `serverUrl`, for a test that hands its URL to a process. */
export async function createTestSchema(serverUrl: string, prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: serverUrl });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE SCHEMA ${schema}`);
  const scoped = new URL(serverUrl);
  scoped.searchParams.set('options', `-c search_path=${schema}`);
  return { url: scoped.toString(), drop: () => admin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`) };
}
