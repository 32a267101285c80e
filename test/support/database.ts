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
  const schema = `test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const scoped = new URL(url);
  scoped.searchParams.set('options', `-c search_path=${schema}`);
  const db = await openDatabase(scoped.toString(), '');
  await migrate(db);
  return {
    ...db,
    async close() {
      await db.close();
      const cleanup = new pg.Client({ connectionString: url });
      await cleanup.connect();
      await cleanup.query(`DROP SCHEMA ${schema} CASCADE`);
      await cleanup.end();
    },
  };
}
