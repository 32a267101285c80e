// The bench's sections about plans and size (docs/PERFORMANCE.md): `fresh-plans`, P2P saturated
// on a fresh database with autovacuum off and no ANALYZE, its second stretch against its first;
// `stored-10m`, P2P with ten million settled intents stored against an empty twin.
import { seedManySettledIntents, seedWallets } from './seed.js';

/**
 * @typedef {import('../dist/adapters/database.js').Database} Database
 * @typedef {import('./load.js').LoadOptions} LoadOptions
 * @typedef {import('./load.js').LoadResult} LoadResult
 * @typedef {{ url: string, pid: number, stop(): Promise<void> }} Server
 * @typedef {{
 *   benchDb: string,
 *   configFile: string,
 *   ledger: import('../dist/ledger/sql-ledger.js').SqlLedger,
 *   base: { secret: string, service: string, users: [number, number], durationS: number },
 *   userBalance: number,
 *   concurrency: number,
 *   recreateDatabase(name: string): Promise<string>,
 *   dropDatabase(name: string): Promise<void>,
 *   openDatabase(url: string, dataDir: string): Promise<Database>,
 *   startPayorch(env: Record<string, string>, label: string): Promise<Server>,
 *   load(options: LoadOptions): Promise<LoadResult>,
 *   log(...m: unknown[]): void,
 * }} SizeContext
 */

/**
 * The bench's funded users, as the main database has them.
 * @param {SizeContext} context
 * @param {Database} db
 */
function seedBenchUsers(context, db) {
  const [first, count] = context.base.users;
  return seedWallets(db, context.ledger, { prefix: 'user', type: 'USER_WALLET', first, count, balance: context.userBalance });
}

/**
 * Two back-to-back saturated P2P stretches of `stretchS` on a database as a fresh installation has
 * it: every table with autovacuum off and no statistics ever taken, so each session plans on
 * tables it believes empty and keeps those plans as they grow (docs/design.md#hot-stable-plans).
 * The figure is the second stretch's rate over the first's; the sequential scans of the growing
 * tables over both, read after payorch stopped (a backend's counters reach the statistics when it
 * ends), say where a fall would come from.
 * @param {SizeContext} context
 * @param {number} stretchS
 */
export async function freshPlansSection(context, stretchS) {
  const { benchDb, configFile, base, concurrency, log } = context;
  const name = `${benchDb}_fresh`;
  const url = await context.recreateDatabase(name);
  const server = await context.startPayorch({ DATABASE_URL: url, CONFIG_FILE: configFile }, 'postgres-fresh');
  const db = await context.openDatabase(url, '');
  // A server's stop waits for its process's exit, which comes once.
  let running = true;
  try {
    const { rows } = await db.query(
      `SELECT c.oid::regclass::text AS name FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')`,
    );
    for (const row of rows) await db.exec(`ALTER TABLE ${row.name} SET (autovacuum_enabled = off)`);
    await seedBenchUsers(context, db);
    /** @type {LoadOptions} */
    const options = { ...base, url: server.url, kind: 'p2p', mode: 'closed', concurrency, durationS: stretchS };
    const first = await context.load(options);
    log('fresh plans, first stretch', first.throughputPerS, '/s');
    const second = await context.load(options);
    log('fresh plans, second stretch', second.throughputPerS, '/s');
    await server.stop();
    running = false;
    const { rows: scans } = await db.query(
      `SELECT relname, seq_scan::float8 AS seq_scan, n_live_tup::float8 AS rows FROM pg_stat_user_tables
        WHERE relname IN ('intents', 'intent_events', 'event_feed', 'transactions', 'ledger_transfers', 'ledger_account_history')
        ORDER BY relname`,
    );
    return {
      stretchS,
      concurrency,
      first,
      second,
      secondToFirst: Math.round((second.throughputPerS / first.throughputPerS) * 100) / 100,
      sequentialScans: Object.fromEntries(scans.map((r) => [r.relname, { seqScans: Number(r.seq_scan), rows: Number(r.rows) }])),
    };
  } finally {
    if (running) await server.stop();
    await db.close();
    await context.dropDatabase(name);
  }
}

/**
 * A database of its own with `count` settled intents seeded in bulk (bench/seed.js,
 * seedManySettledIntents) beside the bench's users, vacuumed and analyzed as autovacuum would
 * leave it, and payorch started on it and warmed up: the stored side of `stored-10m`.
 * @param {SizeContext} context
 * @param {number} count
 */
export async function startLargeStored(context, count) {
  const { benchDb, configFile, base, concurrency, log } = context;
  const name = `${benchDb}_large`;
  const url = await context.recreateDatabase(name);
  // Started once to migrate and apply the config (the system accounts the wallets are funded from).
  const migrating = await context.startPayorch({ DATABASE_URL: url, CONFIG_FILE: configFile }, 'postgres-large');
  await migrating.stop();
  const db = await context.openDatabase(url, '');
  await seedBenchUsers(context, db);
  const startedAt = Date.now();
  await seedManySettledIntents(db, { first: base.users[0], users: base.users[1], count, log });
  await db.exec('VACUUM ANALYZE');
  const seedS = Math.round((Date.now() - startedAt) / 1000);
  const size = await db.query(`SELECT pg_database_size(current_database())::float8 AS bytes`);
  const databaseGb = Math.round((Number(size.rows[0]?.bytes) / 2 ** 30) * 10) / 10;
  log(`stored side: ${count} intents seeded in ${seedS} s, ${databaseGb} GB`);
  const server = await context.startPayorch({ DATABASE_URL: url, CONFIG_FILE: configFile }, 'postgres-large');
  await context.load({ ...base, url: server.url, kind: 'p2p', mode: 'closed', concurrency, durationS: 5 });
  await db.exec('VACUUM ANALYZE');
  return { name, server, db, seedS, databaseGb, stored: count };
}
