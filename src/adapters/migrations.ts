import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Database, Tx } from './database.js';

const migrationsDir = fileURLToPath(new URL('../../migrations/', import.meta.url));
const sqlSourcesDir = fileURLToPath(new URL('../../sql/', import.meta.url));
/** Any constant works; it only has to be the same for every instance that migrates one database. */
const MIGRATION_LOCK_KEY = 7_310_001;

/**
 * Applies every `migrations/NNN-name.sql` not yet recorded, each in its own transaction, under an
 * advisory lock so that instances starting together do not race; then the SQL function sources
 * (`sql/**.sql`) that changed. Returns what it applied: migration versions, then source names.
 */
export async function migrate(db: Database): Promise<string[]> {
  await db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`);
  const files = (await readdir(migrationsDir)).filter((name) => name.endsWith('.sql')).sort();
  const applied: string[] = [];
  for (const file of files) {
    const version = file.replace(/\.sql$/, '');
    const sql = await readFile(migrationsDir + file, 'utf8');
    const didApply = await db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      const done = await tx.query('SELECT 1 FROM schema_migrations WHERE version = $1', [version]);
      if (done.rowCount > 0) return false;
      await tx.exec(sql);
      await tx.query('INSERT INTO schema_migrations (version) VALUES ($1)', [version]);
      return true;
    });
    if (didApply) applied.push(version);
  }
  return [...applied, ...(await applySqlSources(db, applied.length > 0))];
}

interface SqlSource {
  /** Its path under sql/, which also orders the files: a file may use what an earlier one defines. */
  readonly name: string;
  readonly text: string;
  readonly sha256: string;
}

/**
 * The functions' current definitions (`CREATE OR REPLACE`), all in one transaction so that the
 * database never holds half of a new set. A file runs when its text differs from the one recorded
 * in `sql_function_sources`; after a numbered migration every file runs, because a migration may
 * have dropped or replaced what one defines.
 */
async function applySqlSources(db: Database, afterMigration: boolean): Promise<string[]> {
  const sources = await readSqlSources();
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    const recorded = await recordedChecksums(tx);
    const changed = sources.filter((source) => afterMigration || recorded.get(source.name) !== source.sha256);
    for (const source of changed) {
      await tx.exec(source.text);
      await tx.query(
        `INSERT INTO sql_function_sources (name, sha256) VALUES ($1, $2)
         ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, applied_at = now()`,
        [source.name, source.sha256],
      );
    }
    return changed.map((source) => `sql/${source.name}`);
  });
}

async function readSqlSources(): Promise<SqlSource[]> {
  const names = (await readdir(sqlSourcesDir, { recursive: true }))
    .filter((name) => name.endsWith('.sql'))
    .map((name) => name.split('\\').join('/'))
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const text = await readFile(sqlSourcesDir + name, 'utf8');
      return { name, text, sha256: createHash('sha256').update(text).digest('hex') };
    }),
  );
}

async function recordedChecksums(tx: Tx): Promise<Map<string, string>> {
  const { rows } = await tx.query<{ name: string; sha256: string }>('SELECT name, sha256 FROM sql_function_sources');
  return new Map(rows.map((row) => [row.name, row.sha256]));
}
