import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/database.js';
import { createTestSchema, type TestSchema, testPoolMode } from '../support/database.js';
import { buildIfStale, spawnService } from '../support/service-process.js';

/**
 * Migrations as an operator meets them: `payorch migrate [--status]` and `payorch serve` as real
 * processes on a database of this file's own (a PostgreSQL schema, or an embedded one in a
 * directory, which only one process may hold at a time: the test opens it between the runs).
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const pgUrl = (process.env.DATABASE_URL ?? '').startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const LATEST = '021-confirm-attempt';
const EDITED = '003-policies-admin';
const STARTUP_MS_MAX = 60_000;
/** Each test runs several processes that each open the embedded database: slow on a loaded 2-core machine. */
const TEST_MS_MAX = 300_000;

let schema: TestSchema | null = null;
let dataDir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  await buildIfStale();
  dataDir = await mkdtemp(join(tmpdir(), 'payorch-migrations-'));
  schema = pgUrl === undefined ? null : await createTestSchema(pgUrl, 'migr');
  env = { DATABASE_URL: schema?.url ?? '', DATA_DIR: dataDir };
}, TEST_MS_MAX);
afterAll(async () => {
  await schema?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

interface Run {
  readonly code: number;
  readonly out: string;
}

function payorch(args: readonly string[], extraEnv: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['bin/payorch.js', ...args],
      { cwd: root, env: { ...process.env, ...env, ...extraEnv } },
      (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : Number(error.code ?? -1), out: `${stdout}${stderr}` });
      },
    );
  });
}

async function withDatabase<T>(work: (db: Database) => Promise<T>): Promise<T> {
  const db = await openDatabase(schema?.url, dataDir, testPoolMode);
  try {
    return await work(db);
  } finally {
    await db.close();
  }
}

/** The latest migration pending again: its record gone (020 is written to run again over its own result). */
const undoLatest = (db: Database) => db.query('DELETE FROM schema_migrations WHERE version = $1', [LATEST]);

describe('payorch migrate and migrate --status', () => {
  it(
    '--status lists every migration as pending on an empty database and exits 1; migrate applies them; then exit 0',
    async () => {
      const before = await payorch(['migrate', '--status']);
      expect(before.code).toBe(1);
      expect(before.out).toContain('pending  001-ledger\n');
      expect(before.out).toContain(`pending  ${LATEST}\n`);

      const applied = await payorch(['migrate']);
      expect(applied.code).toBe(0);
      expect(applied.out).toMatch(new RegExp(`^applied 001-ledger, .*${LATEST}`));

      const after = await payorch(['migrate', '--status']);
      expect(after.code).toBe(0);
      expect(after.out).toMatch(new RegExp(`applied {2}${LATEST} {2}\\d{4}-\\d\\d-\\d\\dT`));
      expect(after.out).not.toContain('pending  ');
      expect(after.out).toContain('database is up to date');
      expect((await payorch(['migrate', '--status', '--all'])).code).toBe(2);
    },
    TEST_MS_MAX,
  );

  it(
    'records a sha256 per applied migration, and fills in the ones an older version applied without one',
    async () => {
      const recorded = await withDatabase(async (db) => {
        const { rows } = await db.query<{ version: string; sha256: string }>(
          'SELECT version, sha256 FROM schema_migrations ORDER BY version',
        );
        await db.query('UPDATE schema_migrations SET sha256 = NULL');
        return rows;
      });
      expect(recorded.map((row) => row.version)).toContain(LATEST);
      for (const row of recorded) expect(row.sha256, row.version).toMatch(/^[0-9a-f]{64}$/);

      const run = await payorch(['migrate']);
      expect([run.code, run.out]).toEqual([0, 'database is up to date\n']);
      const filled = await withDatabase(
        async (db) =>
          (await db.query<{ version: string; sha256: string }>('SELECT version, sha256 FROM schema_migrations ORDER BY version')).rows,
      );
      expect(filled).toEqual(recorded);
    },
    TEST_MS_MAX,
  );

  it(
    'an applied migration whose file changed stops migrate (exit 2) and serve (exit 1), naming it; nothing else is applied',
    async () => {
      const original = await withDatabase(async (db) => {
        const { rows } = await db.query<{ sha256: string }>('SELECT sha256 FROM schema_migrations WHERE version = $1', [EDITED]);
        await db.query('UPDATE schema_migrations SET sha256 = $2 WHERE version = $1', [EDITED, '0'.repeat(64)]);
        await undoLatest(db);
        return rows[0]?.sha256;
      });
      try {
        const migrated = await payorch(['migrate']);
        expect(migrated.code).toBe(2);
        expect(migrated.out).toContain(`migration ${EDITED} was changed after it was applied`);
        const status = await payorch(['migrate', '--status']);
        expect([status.code, status.out]).toEqual([2, expect.stringContaining(EDITED)]);
        await expect(spawnService(env, STARTUP_MS_MAX)).rejects.toThrow(new RegExp(`exited \\(1\\)[^]*migration ${EDITED} was changed`));
        const untouched = await withDatabase(
          async (db) => (await db.query('SELECT 1 FROM schema_migrations WHERE version = $1', [LATEST])).rowCount,
        );
        expect(untouched).toBe(0);
      } finally {
        await withDatabase((db) => db.query('UPDATE schema_migrations SET sha256 = $2 WHERE version = $1', [EDITED, original]));
      }
      expect((await payorch(['migrate'])).out).toContain(`applied ${LATEST}`);
    },
    TEST_MS_MAX,
  );
});

describe('serve and MIGRATE_ON_START', () => {
  it(
    'MIGRATE_ON_START=false on a database that is behind: serve exits 1 naming the first pending migration, and applies nothing',
    async () => {
      await withDatabase(undoLatest);
      await expect(spawnService({ ...env, MIGRATE_ON_START: 'false' }, STARTUP_MS_MAX)).rejects.toThrow(
        new RegExp(`exited \\(1\\)[^]*migration ${LATEST} is pending`),
      );
      const status = await payorch(['migrate', '--status']);
      expect([status.code, status.out]).toEqual([1, expect.stringContaining(`pending  ${LATEST}\n`)]);
    },
    TEST_MS_MAX,
  );

  it(
    'serve migrates at start by default; with MIGRATE_ON_START=false it starts on an up-to-date database and is ready',
    async () => {
      for (const extra of [{}, { MIGRATE_ON_START: 'false' }]) {
        const service = await spawnService({ ...env, ...extra }, STARTUP_MS_MAX);
        try {
          const ready = await fetch(`${service.url}/readyz`);
          // With REDIS_URL set, readiness also names Redis's state (docs/rules.md R64).
          const redis = process.env.REDIS_URL ? { redis: 'ok' } : {};
          expect([ready.status, await ready.json()]).toEqual([200, { status: 'ok', ...redis }]);
        } finally {
          service.child.kill('SIGTERM');
          await service.exited;
        }
      }
      expect((await payorch(['migrate', '--status'])).code).toBe(0);
    },
    TEST_MS_MAX,
  );

  it(
    'refuses a MIGRATE_ON_START that is neither true nor false (exit 1, nothing started)',
    async () => {
      await expect(spawnService({ ...env, MIGRATE_ON_START: 'no' }, STARTUP_MS_MAX)).rejects.toThrow(
        /MIGRATE_ON_START must be true or false \(got no\)/,
      );
    },
    TEST_MS_MAX,
  );
});
