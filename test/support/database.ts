import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { DATABASE_POOL_MODES, type Database, type DatabasePoolMode, openDatabase } from '../../src/adapters/database.js';
import { migrate } from '../../src/adapters/migrations.js';

/** The pool mode the suite runs in: DATABASE_POOL_MODE=transaction when CI goes through PgBouncer. */
export const testPoolMode: DatabasePoolMode = DATABASE_POOL_MODES.find((mode) => mode === process.env.DATABASE_POOL_MODE) ?? 'session';

export interface TestSchema {
  /** DATABASE_URL for this schema alone. */
  readonly url: string;
  readonly schema: string;
  drop(): Promise<void>;
}

async function asAdmin(serverUrl: string, statements: readonly string[]): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    for (const statement of statements) await admin.query(statement);
  } finally {
    await admin.end();
  }
}

/**
 * A schema of its own on the server DATABASE_URL names, for one test file (files run in parallel),
 * reached as a role of the same name whose search_path is that schema. A role setting, not the
 * `options=-c search_path` startup parameter, because PgBouncer refuses startup parameters it does
 * not know, and it keeps one server pool per role, so the setting holds on every connection.
 */
export async function createTestSchema(serverUrl: string, prefix: string): Promise<TestSchema> {
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  // A superuser as the suite's own is: tests terminate backends and read pg_locks.
  await asAdmin(serverUrl, [
    `CREATE ROLE ${schema} LOGIN SUPERUSER`,
    `CREATE SCHEMA ${schema} AUTHORIZATION ${schema}`,
    `ALTER ROLE ${schema} SET search_path = ${schema}`,
  ]);
  const scoped = new URL(serverUrl);
  scoped.username = schema;
  scoped.password = '';
  return {
    url: scoped.toString(),
    schema,
    drop: () => asAdmin(serverUrl, [`DROP SCHEMA IF EXISTS ${schema} CASCADE`, `DROP ROLE IF EXISTS ${schema}`]),
  };
}

/**
 * A migrated, empty database for one test file. With DATABASE_URL=postgres://… each file gets a
 * schema of its own on that server (createTestSchema); otherwise an in-memory PGlite.
 */
export async function openTestDatabase(): Promise<Database> {
  const url = process.env.DATABASE_URL;
  if (url === undefined || !url.startsWith('postgres')) {
    const db = await openDatabase('memory://', '', testPoolMode);
    await migrate(db);
    return db;
  }
  const scoped = await createTestSchema(url, 'test');
  const db = await openDatabase(scoped.url, '', testPoolMode);
  await migrate(db);
  return {
    ...db,
    async close() {
      await db.close();
      await scoped.drop();
    },
  };
}
