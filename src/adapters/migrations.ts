import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Database, Sql, Tx } from './database.js';

const migrationsDir = fileURLToPath(new URL('../../migrations/', import.meta.url));
const sqlSourcesDir = fileURLToPath(new URL('../../sql/', import.meta.url));
/** Any constant works; it only has to be the same for every instance that migrates one database. */
const MIGRATION_LOCK_KEY = 7_310_001;

/** A file under migrations/ or sql/ as this version of payorch ships it. */
interface SqlFile {
  /** migrations: the version (`012-sql-functions`); sql sources: the path under sql/, which also orders them. */
  readonly name: string;
  readonly text: string;
  readonly sha256: string;
}

/** A migration already applied whose file no longer reads as it did: the schema and the code disagree. */
export class MigrationChangedError extends Error {
  override readonly name = 'MigrationChangedError';
  constructor(readonly version: string) {
    super(`migration ${version} was changed after it was applied (its checksum differs); restore migrations/${version}.sql`);
  }
}

/** MIGRATE_ON_START=false and the database is behind this version of payorch. */
export class MigrationsPendingError extends Error {
  override readonly name = 'MigrationsPendingError';
  constructor(readonly pending: readonly string[]) {
    super(
      `the database is behind: migration ${pending[0]} is pending (of ${pending.length}); run 'payorch migrate' or start with MIGRATE_ON_START unset`,
    );
  }
}

export interface MigrationStatus {
  readonly applied: ReadonlyArray<{ readonly version: string; readonly appliedAt: Date }>;
  /** Numbered migrations not applied yet: the schema lacks what this version needs. */
  readonly pendingMigrations: readonly string[];
  /**
   * SQL function sources (`sql/…`) whose recorded text differs from this version's. Apart, because
   * during a rolling upgrade the previous version's processes see the new text as different too,
   * and must not become unready for it.
   */
  readonly changedSources: readonly string[];
  /** Both, in the order `payorch migrate` would apply them. */
  readonly pending: readonly string[];
}

/**
 * Applies every `migrations/NNN-name.sql` not yet recorded, each in its own transaction, under an
 * advisory lock so that instances starting together do not race; then the SQL function sources
 * (`sql/**.sql`) that changed. Returns what it applied: migration versions, then source names.
 * Throws MigrationChangedError, before applying anything, when an applied migration was edited.
 * `through`: the last version to apply, and then no source: a test of an upgrade starts from an
 * older schema, which this version's function sources (written for the whole schema) do not fit.
 */
export async function migrate(db: Database, options: { readonly through?: string } = {}): Promise<string[]> {
  await ensureMigrationsTable(db);
  const { through } = options;
  const files = (await readMigrations()).filter((file) => through === undefined || file.name <= through);
  await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await recordMissingChecksums(tx, files);
  });
  await assertUnchanged(db, files);
  const applied: string[] = [];
  for (const file of files) {
    const didApply = await db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      const done = await tx.query('SELECT 1 FROM schema_migrations WHERE version = $1', [file.name]);
      if (done.rowCount > 0) return false;
      await tx.exec(file.text);
      await tx.query('INSERT INTO schema_migrations (version, sha256) VALUES ($1, $2)', [file.name, file.sha256]);
      return true;
    });
    if (didApply) applied.push(file.name);
  }
  if (through !== undefined) return applied;
  return [...applied, ...(await applySqlSources(db, applied.length > 0))];
}

/**
 * What `payorch migrate --status` and /readyz report; reads only. Throws MigrationChangedError
 * when an applied migration was edited since.
 */
export async function migrationStatus(sql: Sql): Promise<MigrationStatus> {
  const { migrations: files, sources } = await shippedFiles();
  const { rows: tables } = await sql.query<{ migrations: string | null; sources: string | null }>(
    "SELECT to_regclass('schema_migrations')::text AS migrations, to_regclass('sql_function_sources')::text AS sources",
  );
  const recorded =
    tables[0]?.migrations == null
      ? []
      : (
          await sql.query<{ version: string; sha256: string | null; applied_at: Date }>(
            'SELECT version, sha256, applied_at FROM schema_migrations ORDER BY version',
          )
        ).rows;
  const byVersion = new Map(recorded.map((row) => [row.version, row]));
  for (const file of files) {
    const sha256 = byVersion.get(file.name)?.sha256;
    if (sha256 != null && sha256 !== file.sha256) throw new MigrationChangedError(file.name);
  }
  const sourceChecksums =
    tables[0]?.sources == null
      ? new Map<string, string>()
      : new Map(
          (await sql.query<{ name: string; sha256: string }>('SELECT name, sha256 FROM sql_function_sources')).rows.map((row) => [
            row.name,
            row.sha256,
          ]),
        );
  const pendingMigrations = files.filter((file) => !byVersion.has(file.name)).map((file) => file.name);
  const changedSources = sources
    .filter((source) => sourceChecksums.get(source.name) !== source.sha256)
    .map((source) => `sql/${source.name}`);
  return {
    applied: recorded.map((row) => ({ version: row.version, appliedAt: row.applied_at })),
    pendingMigrations,
    changedSources,
    pending: [...pendingMigrations, ...changedSources],
  };
}

/** For MIGRATE_ON_START=false: the start stops unless the database is exactly this version's. */
export async function assertMigrated(sql: Sql): Promise<void> {
  const { pending } = await migrationStatus(sql);
  if (pending.length > 0) throw new MigrationsPendingError(pending);
}

/** The checksum column came with migration checksums; databases from before have it empty. */
async function ensureMigrationsTable(db: Database): Promise<void> {
  await db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
  );
  ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS sha256 text`);
}

/** Migrations applied by a version without checksums are taken as they read now: the first start of this version records them. */
async function recordMissingChecksums(tx: Tx, files: readonly SqlFile[]): Promise<void> {
  const { rows } = await tx.query<{ version: string }>('SELECT version FROM schema_migrations WHERE sha256 IS NULL');
  const checksums = new Map(files.map((file) => [file.name, file.sha256]));
  for (const { version } of rows) {
    const sha256 = checksums.get(version);
    if (sha256 !== undefined)
      await tx.query('UPDATE schema_migrations SET sha256 = $2 WHERE version = $1 AND sha256 IS NULL', [version, sha256]);
  }
}

async function assertUnchanged(sql: Sql, files: readonly SqlFile[]): Promise<void> {
  const { rows } = await sql.query<{ version: string; sha256: string | null }>('SELECT version, sha256 FROM schema_migrations');
  const recorded = new Map(rows.map((row) => [row.version, row.sha256]));
  const changed = files.find((file) => {
    const sha256 = recorded.get(file.name);
    return sha256 != null && sha256 !== file.sha256;
  });
  if (changed !== undefined) throw new MigrationChangedError(changed.name);
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

/** Read once per process: the files are this version's, and /readyz asks on every probe. */
let shipped: Promise<{ migrations: SqlFile[]; sources: SqlFile[] }> | undefined;
function shippedFiles(): Promise<{ migrations: SqlFile[]; sources: SqlFile[] }> {
  shipped ??= Promise.all([readSqlFiles(migrationsDir, { recursive: false }), readSqlFiles(sqlSourcesDir, { recursive: true })]).then(
    ([migrations, sources]) => ({ migrations, sources }),
  );
  return shipped;
}
const readMigrations = async (): Promise<SqlFile[]> => (await shippedFiles()).migrations;
const readSqlSources = async (): Promise<SqlFile[]> => (await shippedFiles()).sources;

/** The .sql files of a directory in name order; migrations are named by their version (no extension). */
async function readSqlFiles(dir: string, { recursive }: { recursive: boolean }): Promise<SqlFile[]> {
  const names = (await readdir(dir, { recursive }))
    .filter((name) => name.endsWith('.sql'))
    .map((name) => name.split('\\').join('/'))
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const text = await readFile(dir + name, 'utf8');
      return { name: recursive ? name : name.replace(/\.sql$/, ''), text, sha256: createHash('sha256').update(text).digest('hex') };
    }),
  );
}

async function recordedChecksums(tx: Tx): Promise<Map<string, string>> {
  const { rows } = await tx.query<{ name: string; sha256: string }>('SELECT name, sha256 FROM sql_function_sources');
  return new Map(rows.map((row) => [row.name, row.sha256]));
}
