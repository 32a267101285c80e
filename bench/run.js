// npm run bench [-- --soak-s 600 --phase-s 20 --skip-pglite --profile --only p2p,floors --stored-count 10000000 --help]
//
// --stored-count sets the intents stored-10m seeds (ten million by default; fewer for a quick look).
//
// --only runs some sections (p2p, latency, invoice, invoice-rates, floors, floor-batch, hot-payee,
// cpu, replays, refusals, refunds, policies, stored, soak, pglite, pglite-refusals, pglite-replays, statements, reconciliation,
// payouts, fresh-plans, stored-10m; docs/PERFORMANCE.md,
// Reproducing the figures) for a
// quick A/B of one change; it writes bench/results/partial-<time>.json and leaves latest.json and
// the chart to full runs.
//
// Starts payorch (dist/) on PostgreSQL in a database of its own, then on embedded PGlite, drives
// it over HTTP from a separate generator process (bench/load.js), measures the floors in the same
// run (bench/sql-floor.js, bench/bare-server.js), and writes latest.json and a dated copy in bench/results/,
// and docs/bench.svg. Figures only compare within one run on one machine.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { openDatabase } from '../dist/adapters/database.js';
import { SqlLedger } from '../dist/ledger/sql-ledger.js';
import { writeChart } from './chart.js';
import { payoutsSection } from './payouts.js';
import { benchReconciliation } from './reconciliation.js';
import { refundsPhase } from './refunds.js';
import { rssGrowth } from './rss-growth.js';
import { seedPolicies, seedSettledIntents, seedWallets } from './seed.js';
import { freshPlansSection, startLargeStored } from './size.js';
import { statementsSection } from './statements.js';

/** @typedef {import('../dist/adapters/database.js').Database} Database */
/** @typedef {import('./load.js').LoadOptions} LoadOptions */
/** @typedef {import('./load.js').LoadResult} LoadResult */
/** @typedef {import('./load.js').Refusals} Refusals */
/** @typedef {import('./load.js').Replays} Replays */
/**
 * The measuring scripts this file runs as child processes: what each takes and what it prints.
 * @typedef {{
 *   'load.js': [LoadOptions, LoadResult],
 *   'sql-floor.js': [import('./sql-floor.js').SqlFloorOptions, import('./sql-floor.js').SqlFloorResult],
 *   'fee-eval.js': [{ iterations?: number, warmup?: number }, import('./fee-eval.js').FeeEvalResult],
 * }} Scripts
 */
/** @typedef {LoadResult & ReturnType<typeof rssGrowth> & { peakRssMb: number, samples: RssSample[] }} SoakResult */
/** @typedef {{ atS: number, rssMb: number, peakRssMb: number, liveHeapMb: number | null }} RssSample */
/**
 * @typedef {object} PostgresResults
 * @property {LoadResult[]} [p2pSaturation]
 * @property {number} [p2pSaturatedPerS]
 * @property {CpuMeasuredLoad[]} [p2pLatency]
 * @property {CpuMeasuredLoad[]} [invoiceSaturationByConcurrency]
 * @property {CpuMeasuredLoad} [invoiceSaturation] the fastest of invoiceSaturationByConcurrency
 * @property {LoadResult[]} [invoiceLatency]
 * @property {CpuMeasuredLoad} [p2pUniform]
 * @property {CpuMeasuredLoad} [p2pHotPayee]
 * @property {LoadResult[]} [p2pReplays] closed loops plain and with a share of retried payments
 * @property {LoadResult[]} [p2pWithRefusals] closed loops plain and with each share of REFUSED_SHARES refused
 * @property {LoadResult} [policyEvaluation]
 * @property {number} [storedIntentsBefore]
 * @property {StoredPair[]} [storedAgainstEmpty] P2P at the saturated level, 200,000+ intents stored against none, alternated
 * @property {SoakResult} [soak]
 * @property {Awaited<ReturnType<typeof refundsPhase>>} [refunds] refunds at saturation and at 250/s next to P2P (bench/refunds.js)
 * @property {Awaited<ReturnType<typeof statementsSection>>} [statements] history on / off, balance at a time, a streamed csv statement
 */
/**
 * @typedef {LoadResult & { walPerIntent: { bytes: number | null, fullPageImages: number | null } }} CheckpointedLoad
 * @typedef {{ empty: CheckpointedLoad, stored: CheckpointedLoad, ratio: number }} StoredPair
 */
/**
 * @typedef {object} FloorResults
 * @property {Scripts['sql-floor.js'][1]} [sqlWrites]
 * @property {Scripts['sql-floor.js'][1]} [sqlWritesGrouped]
 * @property {Scripts['sql-floor.js'][1]} [sqlWithReads]
 * @property {Scripts['sql-floor.js'][1]} [sqlBatchServer]
 * @property {Scripts['sql-floor.js'][1]} [sqlBatchPlain]
 * @property {LoadResult} [bareHttp]
 * @property {Scripts['fee-eval.js'][1]} [feeEvaluation]
 */
/**
 * CPU per settled intent over a load's measured window, by process: payorch, the PostgreSQL
 * backends serving the bench database, and every PostgreSQL process of the machine (its WAL
 * writer and checkpointer too, and any other database's backends).
 * @typedef {{ windowS: number, settledIntents: number, payorchUs: number | null, postgresBackendsUs: number | null, postgresAllUs: number | null, postgresBackends: number, wal: Awaited<ReturnType<typeof walPerIntent>>, heap: ReturnType<typeof heapPerIntent> }} CpuPerIntent
 */
/**
 * A load with the CPU its settled intents cost, and what else ran meanwhile: the server's event
 * loop delay and its collector's long pauses with their times (bench/heap-probe.js), to set beside
 * the slowest requests, and how busy the whole machine was.
 * @typedef {LoadResult & { cpuPerIntent: CpuPerIntent, server: { eventLoopDelayMs: HeapTotals['eventLoopDelayMs'], gcPauses: HeapTotals['gcPauses'] } | null, machineCpu: ReturnType<typeof machineCpuUsed> }} CpuMeasuredLoad
 */
/**
 * @typedef {object} PgliteResults
 * @property {LoadResult} [p2pSaturation]
 * @property {LoadResult[]} [p2pSaturationByConcurrency]
 * @property {LoadResult[]} [p2pLatency]
 * @property {LoadResult[]} [p2pWithRefusals] closed loops plain, then with a share of payments refused by the ledger, by share and in-flight level
 * @property {LoadResult[]} [p2pReplays] closed loops plain and with a share of retried payments
 * @property {number} peakRssMb
 */
/**
 * What bench/results/*.json hold.
 * @typedef {object} BenchResults
 * @property {string} startedAt
 * @property {ReturnType<typeof machine> & { autovacuum?: string }} machine
 * @property {number[]} loadAvgAtStart
 * @property {{ PHASE_S: number, SOAK_S: number, USERS: number[], MERCHANTS: number[] }} settings
 * @property {PostgresResults} [postgres]
 * @property {FloorResults} [floors]
 * @property {PgliteResults} [pglite]
 * @property {number[]} [loadAvgAtEnd]
 * @property {import('./reconciliation.js').ReconciliationBenchResult} [reconciliation] 1,000,000 statement lines against as many payouts
 * @property {Awaited<ReturnType<typeof freshPlansSection>>} [freshPlans] saturated P2P on a fresh database, autovacuum off, no ANALYZE
 * @property {{ stored: number, seedS: number, databaseGb: number, pairs: StoredPair[] }} [storedLarge] P2P with stored-count intents stored against none
 * @property {import('./payouts.js').PayoutsResult} [payouts] PSPX payouts per second of one workers process against the simulator
 * @property {Summary} [summary]
 */
/**
 * What a run without --only has gathered by the time it sums up: every PostgreSQL section ran.
 * @typedef {BenchResults & { postgres: Required<PostgresResults>, floors: Required<FloorResults>, loadAvgAtEnd: number[] }} FullRunResults
 */
/** @typedef {ReturnType<typeof summarize>} Summary */

const root = fileURLToPath(new URL('..', import.meta.url));
// strict: a mistyped option fails here, before a run of minutes measures the wrong thing.
const { values: args } = parseArgs({
  options: {
    'soak-s': { type: 'string' },
    'stored-count': { type: 'string' },
    'phase-s': { type: 'string' },
    only: { type: 'string' },
    'skip-pglite': { type: 'boolean' },
    profile: { type: 'boolean' },
    help: { type: 'boolean' },
  },
});
if (args.help) {
  // The usage is this file's opening comment.
  const lines = readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n');
  console.log(
    lines
      .slice(
        0,
        lines.findIndex((line) => !line.startsWith('//')),
      )
      .map((line) => line.replace(/^\/\/ ?/, ''))
      .join('\n'),
  );
  console.log(
    "Environment: BENCH_DB (the database's name, dropped first; one per concurrent bench), BENCH_PG_URL,\nBENCH_NODE_FLAGS (node options for payorch's process only).",
  );
  process.exit(0);
}
const SOAK_S = Number(args['soak-s'] ?? 600);
const PHASE_S = Number(args['phase-s'] ?? 20);
const STORED_LARGE_COUNT = Number(args['stored-count'] ?? 10_000_000);
/** Each of fresh-plans' two stretches: a minute in a full run (three phases). */
const FRESH_STRETCH_S = Math.min(3 * PHASE_S, 60);
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
// Dropped and created again by each run: two benches on one server need two names (BENCH_DB).
const BENCH_DB = process.env.BENCH_DB ?? 'payorch_bench';
if (!/^[a-z_][a-z0-9_]{0,62}$/.test(BENCH_DB)) throw new Error('BENCH_DB must be a lower-case SQL identifier');
/** @type {[first: number, count: number]} */
const USERS = [1, 20_000];
/** @type {[first: number, count: number]} */
const MERCHANTS = [500_001, 1_000];
const USER_BALANCE = 100_000_000;
const SATURATION_CONCURRENCY = [16, 32, 64, 128];
/**
 * PGlite's pass: 8 in flight, as every run before 2026-11-26 measured it, and the loads a user
 * trying a realistic load sends, where group commit fills its batches (docs/design.md#hot-group-commit).
 */
const PGLITE_SATURATION_CONCURRENCY = [8, 32, 64];
/**
 * The refusal sections: this share of the payments comes from payers who have no money, at the
 * in-flight levels where group commit's batches are large. A refused transfer is an everyday
 * answer, and a batch that holds one cannot commit the way one without does (docs/design.md#hot-ledger-bet).
 */
const REFUSED_SHARES = [0.05, 0.2];
const PGLITE_REFUSAL_CONCURRENCY = [32, 64];
/**
 * The replay sections: this share of the requests retries the worker's previous payment (same key
 * and body), as clients do whose answers were lost. A retry is answered from the stored intent,
 * and a batch that holds one cannot commit the way one without does (docs/design.md#hot-ledger-bet).
 */
const REPLAY_SHARE = 0.05;
/** Alternated pairs of the stored phase (one side 200,000+ intents, the other none). */
const STORED_PAIRS = 4;
const OFFERED_RATES = [250, 500, 1000];
// Pairs offered per second: the low rates show what a pair costs below saturation (two requests
// and a payer's wait), the high ones what queueing adds.
const INVOICE_OFFERED_RATES = [100, 250, 500, 1000];
const FLOOR_BATCH = 100;
const HOT_PAYEE_CONCURRENCY = 128;
/** @type {[first: number, count: number]} Never funded, never paid: the refusal section's payers, one per worker. */
const UNFUNDED = [USERS[0] + USERS[1], HOT_PAYEE_CONCURRENCY];
/** @type {import('./load.js').Payees} One payee takes ~61 % of the payments. */
const HOT_PAYEES = { zipfS: 2.0, count: 200 };
/** Units of /proc/<pid>/stat's utime and stime (`getconf CLK_TCK`, 100 on Linux). */
const CLOCK_TICKS_PER_S = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
const SOAK_RATE = 500;
/** PSPX payouts the payouts section creates and one workers process drives. */
const PAYOUTS = 3_000;
const RSS_SAMPLE_MS = 5_000;
const SERVICE = 'wallet-api';
// Production settings: at least 32 characters each (docs/SECURITY.md §4).
const BENCH_QR_SECRET = randomBytes(24).toString('base64url');
const BENCH_ADMIN_TOKEN = randomBytes(24).toString('base64url');
// A production start requires METRICS_TOKEN (docs/rules.md R60); the bench does not scrape.
const BENCH_METRICS_TOKEN = randomBytes(24).toString('base64url');
const SECTIONS = [
  'p2p',
  'latency',
  'invoice',
  'invoice-rates',
  'floors',
  'floor-batch',
  'hot-payee',
  'cpu',
  'replays',
  'refusals',
  'refunds',
  'policies',
  'stored',
  'soak',
  'pglite',
  'pglite-refusals',
  'pglite-replays',
  'statements',
  'reconciliation',
  'payouts',
  'fresh-plans',
  'stored-10m',
];
/** Sections that set up their own database and processes: they need nothing of the PostgreSQL pass. */
const OWN_DATABASE = new Set(['reconciliation', 'payouts', 'fresh-plans', 'stored-10m']);
const only = args.only === undefined ? null : new Set(String(args.only).split(','));
if (only !== null)
  for (const name of only) if (!SECTIONS.includes(name)) throw new Error(`--only: unknown section ${name} (${SECTIONS.join(', ')})`);
/** @param {string} section */
const runs = (section) => (section.startsWith('pglite') ? !args['skip-pglite'] : true) && (only === null || only.has(section));

/** @param {...unknown} m */
const log = (...m) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}]`, ...m);
/** @param {number} ms */
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** @returns {Promise<number>} */
async function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      // Listening on a TCP port: the address is always an AddressInfo.
      const { port } = /** @type {import('node:net').AddressInfo} */ (s.address());
      s.close(() => resolve(port));
    });
  });
}

/**
 * @template {keyof Scripts} S
 * @param {S} script
 * @param {Scripts[S][0]} options
 * @param {string[]} [nodeArgs]
 * @returns {Promise<Scripts[S][1]>}
 */
function runJson(script, options, nodeArgs = []) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...nodeArgs, join(root, 'bench', script), JSON.stringify(options)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    // A failed phase is recorded, not fatal: the other figures of a long run stay usable.
    // Its figures then read as undefined, which the summary keeps as null and the chart as n/a.
    /** @param {number | null} code */
    const failure = (code) => /** @type {Scripts[S][1]} */ (/** @type {unknown} */ ({ error: `${script} exited ${code}` }));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1) ?? '')) : resolve(failure(code))));
  });
}

/** @param {number} pid */
function procStatus(pid) {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  /** @param {string} key */
  const kb = (key) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(text)?.[1] ?? 0);
  return { rssMb: Math.round(kb('VmRSS') / 102.4) / 10, peakRssMb: Math.round(kb('VmHWM') / 102.4) / 10 };
}

/**
 * CPU seconds (user + system) a process has used; null once it has gone.
 * @param {number} pid
 */
function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which may hold spaces: state is the first, utime the 12th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S;
  } catch {
    return null;
  }
}

/** Every PostgreSQL process of the machine, by the name the server gives its processes. */
function postgresPids() {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres';
      } catch {
        return false;
      }
    });
}

/**
 * @param {number} payorchPid
 * @param {pg.Client} probe a connection of its own, left out of the backends it counts
 */
async function cpuSnapshot(payorchPid, probe) {
  const { rows } = await probe.query(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
  );
  const settled = Number((await probe.query(`SELECT count(*) AS n FROM intents WHERE status = 'SETTLED'`)).rows[0].n);
  // The server's WAL, not this database's: it counts this run's writes only while nothing else runs (the bench lock).
  const walLsn = String((await probe.query('SELECT pg_current_wal_flush_lsn()::text AS lsn')).rows[0].lsn);
  /** @param {readonly number[]} pids */
  const perPid = (pids) => new Map(pids.map((pid) => [pid, cpuSeconds(pid)]));
  return {
    atMs: Date.now(),
    settled,
    walLsn,
    payorch: cpuSeconds(payorchPid),
    backends: perPid(rows.map((row) => Number(row.pid))),
    postgres: perPid(postgresPids()),
  };
}

/**
 * CPU used between two snapshots by the processes seen in either: one that started meanwhile
 * counts from zero, one that ended is left out (its last seconds are lost: pools keep theirs).
 * @param {Map<number, number | null>} before
 * @param {Map<number, number | null>} after
 */
function cpuUsedS(before, after) {
  let used = 0;
  for (const [pid, end] of after) if (end !== null) used += end - (before.get(pid) ?? 0);
  return used;
}

/** @typedef {{ reading: number, allocatedBytes: number, scavenges: number, scavengeMs: number, markCompacts: number, markCompactMs: number, eventLoopDelayMs: { p99: number, max: number }, gcPauses: { at: string, kind: number, ms: number }[], liveBytesAfterMarkCompact: number | null }} HeapTotals */
/** How long a reading of the heap probe may take: 250 polls of 20 ms (a saturated process answers the signal late). */
const HEAP_READ_POLLS_MAX = 250;

/**
 * What the payorch process has allocated and collected so far (bench/heap-probe.js), read on a
 * signal; null when the probe did not answer in time.
 * @param {number} pid
 * @param {string} file
 * @returns {Promise<HeapTotals | null>}
 */
async function heapTotals(pid, file) {
  /** @returns {HeapTotals | null} */
  const read = () => {
    try {
      return JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      // Not written yet, or caught while being written.
      return null;
    }
  };
  const before = read()?.reading ?? 0;
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < HEAP_READ_POLLS_MAX; i++) {
    await sleep(20);
    const totals = read();
    if (totals !== null && totals.reading > before) return totals;
  }
  return null;
}

/**
 * The payorch process's allocation per settled intent and its collections between two readings.
 * @param {HeapTotals | null} before
 * @param {HeapTotals | null} after
 * @param {number} settledIntents
 */
function heapPerIntent(before, after, settledIntents) {
  if (before === null || after === null || settledIntents <= 0) return null;
  const scavenges = after.scavenges - before.scavenges;
  return {
    allocatedKbPerIntent: Math.round(((after.allocatedBytes - before.allocatedBytes) / 1024 / settledIntents) * 10) / 10,
    scavenges,
    scavengeMsMean: scavenges === 0 ? null : Math.round(((after.scavengeMs - before.scavengeMs) / scavenges) * 100) / 100,
    markCompacts: after.markCompacts - before.markCompacts,
  };
}

/**
 * WAL bytes per settled intent between two positions: the records themselves, and the full-page
 * images apart (they depend on when the last checkpoint was, not on what was written). Null
 * without pg_walinspect (PostgreSQL 15's contrib).
 * @param {pg.Client} probe
 * @param {string} from
 * @param {string} to
 * @param {number} settledIntents
 */
async function walPerIntent(probe, from, to, settledIntents) {
  if (settledIntents <= 0) return null;
  try {
    await probe.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
    const { rows } = await probe.query(
      'SELECT sum(count)::float8 AS records, sum(record_size)::float8 AS bytes, sum(fpi_size)::float8 AS fpi FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn)',
      [from, to],
    );
    const per = (/** @type {number} */ n) => Math.round((n * 10) / settledIntents) / 10;
    return { records: per(rows[0].records), recordBytes: Math.round(per(rows[0].bytes)), fullPageImageBytes: Math.round(per(rows[0].fpi)) };
  } catch {
    return null;
  }
}

/**
 * The machine's CPU counters: jiffies busy and in all (/proc/stat), and the microseconds some
 * task waited for a core (/proc/pressure/cpu, null where the kernel has no pressure counters).
 */
function machineCpu() {
  const jiffies = readFileSync('/proc/stat', 'utf8').split('\n')[0]?.trim().split(/\s+/).slice(1).map(Number) ?? [];
  const total = jiffies.reduce((a, b) => a + b, 0);
  // idle and iowait are the 4th and 5th.
  const idle = (jiffies[3] ?? 0) + (jiffies[4] ?? 0);
  /** @type {number | null} */
  let waitedUs = null;
  try {
    waitedUs = Number(/^some .*total=(\d+)/m.exec(readFileSync('/proc/pressure/cpu', 'utf8'))?.[1] ?? Number.NaN);
  } catch {}
  return { atMs: Date.now(), busy: total - idle, total, waitedUs };
}

/**
 * How busy the whole machine was over a window, every process included: a latency phase on a
 * machine busier than its own load explains stalls that no change of the code would.
 * @param {ReturnType<typeof machineCpu>} before
 * @param {ReturnType<typeof machineCpu>} after
 */
function machineCpuUsed(before, after) {
  const waitedUs = before.waitedUs === null || after.waitedUs === null ? null : after.waitedUs - before.waitedUs;
  return {
    busyFraction: Math.round(((after.busy - before.busy) / Math.max(1, after.total - before.total)) * 100) / 100,
    waitingForCpuPct: waitedUs === null || Number.isNaN(waitedUs) ? null : Math.round(waitedUs / 10 / (after.atMs - before.atMs)),
  };
}

/**
 * A load phase with the CPU its settled intents cost, measured from the end of its warm-up
 * (load.js's warmupS) to its end, over the intents the database shows settled meanwhile.
 * @param {{ pid: number, heap: () => Promise<HeapTotals | null> }} server
 * @param {string} databaseUrl
 * @param {LoadOptions} options
 * @returns {Promise<CpuMeasuredLoad>}
 */
async function cpuMeasuredLoad(server, databaseUrl, options) {
  const probe = new pg.Client({ connectionString: databaseUrl });
  await probe.connect();
  try {
    const load = runJson('load.js', options);
    await sleep((options.warmupS ?? 3) * 1000);
    // The first heap reading starts the window: the probe's figures run from one reading to the next.
    const heapBefore = await server.heap();
    const before = await cpuSnapshot(server.pid, probe);
    const machineBefore = machineCpu();
    const result = await load;
    const machineAfter = machineCpu();
    const after = await cpuSnapshot(server.pid, probe);
    const heapAfter = await server.heap();
    const settledIntents = after.settled - before.settled;
    /** @param {number | null} seconds */
    const perIntentUs = (seconds) => (seconds === null || settledIntents <= 0 ? null : Math.round((seconds * 1e6) / settledIntents));
    const payorchS = before.payorch === null || after.payorch === null ? null : after.payorch - before.payorch;
    return {
      ...result,
      cpuPerIntent: {
        windowS: Math.round((after.atMs - before.atMs) / 100) / 10,
        settledIntents,
        payorchUs: perIntentUs(payorchS),
        postgresBackendsUs: perIntentUs(cpuUsedS(before.backends, after.backends)),
        postgresAllUs: perIntentUs(cpuUsedS(before.postgres, after.postgres)),
        postgresBackends: after.backends.size,
        wal: await walPerIntent(probe, before.walLsn, after.walLsn, settledIntents),
        heap: heapPerIntent(heapBefore, heapAfter, settledIntents),
      },
      server: heapAfter === null ? null : { eventLoopDelayMs: heapAfter.eventLoopDelayMs, gcPauses: heapAfter.gcPauses },
      machineCpu: machineCpuUsed(machineBefore, machineAfter),
    };
  } finally {
    await probe.end();
  }
}

/**
 * @param {Record<string, string>} env
 * @param {string} label
 */
async function startPayorch(env, label) {
  const port = await freePort();
  // A directory per server, no file name: with --cpu-prof-name every thread (PGlite's, the fee
  // workers) wrote to the same file and only the last to end was kept.
  const profileDir = join(root, 'bench', 'results', 'profiles', `${label}-${Date.now()}`);
  const cpuProfile = args.profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [];
  const heapProbeFile = join(mkdtempSync(join(tmpdir(), 'payorch-bench-heap-')), 'totals.json');
  // BENCH_NODE_FLAGS: V8 options for payorch alone (not the load generator), for an A/B of one.
  const nodeFlags = (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean);
  const nodeArgs = [...cpuProfile, ...nodeFlags, '--import', join(root, 'bench', 'heap-probe.js')];
  const child = spawn(process.execPath, [...nodeArgs, join(root, 'bin', 'payorch.js'), 'serve'], {
    env: {
      ...process.env,
      BENCH_HEAP_PROBE_FILE: heapProbeFile,
      PORT: String(port),
      HOST: '127.0.0.1',
      NODE_ENV: 'production',
      LOG_LEVEL: 'info',
      QR_SIGNING_SECRET: BENCH_QR_SECRET,
      ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
      METRICS_TOKEN: BENCH_METRICS_TOKEN,
      PSPX_SIMULATOR: '1',
      REDIS_URL: '',
      ...env,
    },
    // Logs go to /dev/null: pino still formats and writes every line, as in production.
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`payorch (${label}) exited ${child.exitCode}`);
    try {
      const res = await fetch(`${url}/health`);
      if (res.status === 200) break;
    } catch {}
    await sleep(100);
  }
  const { pid } = child;
  if (pid === undefined) throw new Error(`payorch (${label}) was not spawned`);
  log(`payorch on ${label} at ${url}, pid ${pid}`);
  return {
    url,
    pid,
    status: () => procStatus(pid),
    heap: () => heapTotals(pid, heapProbeFile),
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

async function recreateDatabase(name = BENCH_DB) {
  await dropDatabase(name);
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** @param {string} name */
async function dropDatabase(name) {
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
}

/**
 * The stored phase's other side: payorch on a database of its own with the same wallets and no
 * intents, warmed up and with its first statistics as the main one's, run beside the main one.
 * @param {SqlLedger} ledger
 * @param {string} configFile
 * @param {{ secret: string, service: string, users: [number, number], durationS: number }} base
 * @param {number} concurrency
 */
async function startEmptyTwin(ledger, configFile, base, concurrency) {
  const name = `${BENCH_DB}_empty`;
  const url = await recreateDatabase(name);
  const server = await startPayorch({ DATABASE_URL: url, CONFIG_FILE: configFile }, 'postgres-empty');
  const db = await openDatabase(url, '');
  await seedWallets(db, ledger, { prefix: 'user', type: 'USER_WALLET', first: USERS[0], count: USERS[1], balance: USER_BALANCE });
  await settle(db);
  await runJson('load.js', { ...base, url: server.url, kind: 'p2p', mode: 'closed', concurrency, durationS: 5 });
  await settle(db);
  return { name, server, db };
}

function machine() {
  const gitCommit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['status', '--porcelain'], { cwd: root, encoding: 'utf8' }).trim() !== '';
  /** @type {string | null} Filled in once the PostgreSQL pass connects. */
  const postgres = null;
  return {
    cpuModel: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    gitCommit,
    gitDirty: dirty,
    postgres,
  };
}

async function main() {
  mkdirSync(join(root, 'bench', 'results'), { recursive: true });
  const { configFile, secret } = writeBenchConfig();
  /** @type {BenchResults} */
  const results = {
    startedAt: new Date().toISOString(),
    machine: machine(),
    loadAvgAtStart: loadavg().map((x) => Math.round(x * 100) / 100),
    settings: { PHASE_S, SOAK_S, USERS, MERCHANTS },
  };
  const base = { secret, service: SERVICE, users: USERS, durationS: PHASE_S };

  // ── PostgreSQL ──
  /** The saturated level of the P2P section, 128 in flight where it did not run. */
  let saturatedConcurrency = HOT_PAYEE_CONCURRENCY;
  if (SECTIONS.some((section) => !section.startsWith('pglite') && !OWN_DATABASE.has(section) && runs(section))) {
    const databaseUrl = await recreateDatabase();
    {
      const admin = new pg.Client({ connectionString: databaseUrl });
      await admin.connect();
      results.machine.postgres = (await admin.query('SELECT version()')).rows[0].version;
      results.machine.autovacuum = (await admin.query('SHOW autovacuum')).rows[0].autovacuum;
      await admin.end();
    }
    let server = await startPayorch({ DATABASE_URL: databaseUrl, CONFIG_FILE: configFile }, 'postgres');
    const db = await openDatabase(databaseUrl, '');
    const ledger = new SqlLedger();
    log('seeding users and merchants');
    await seedWallets(db, ledger, { prefix: 'user', type: 'USER_WALLET', first: USERS[0], count: USERS[1], balance: USER_BALANCE });
    await seedWallets(db, ledger, { prefix: 'merchant', type: 'MERCHANT_WALLET', first: MERCHANTS[0], count: MERCHANTS[1], balance: 0 });
    if (runs('refusals'))
      await seedWallets(db, ledger, { prefix: 'user', type: 'USER_WALLET', first: UNFUNDED[0], count: UNFUNDED[1], balance: 0 });
    await settle(db);
    /** @type {PostgresResults} */
    const pgr = {};
    results.postgres = pgr;

    log('warm-up');
    await runJson('load.js', { ...base, url: server.url, kind: 'p2p', mode: 'closed', concurrency: 32, durationS: 5 });
    // The first statistics of the intent tables, as autovacuum takes them within a minute of go-live
    // (it is off on this machine's PostgreSQL, see machine.autovacuum). Without them every session
    // keeps plans made for empty tables, among them the reference checks of the events and history
    // rows, which then scan the growing intents table: throughput halves within a minute.
    await settle(db);

    let best = { concurrency: 32 };
    if (runs('p2p')) {
      log('P2P saturation');
      const { byConcurrency, fastest } = await saturate(SATURATION_CONCURRENCY, (concurrency) =>
        runJson('load.js', { ...base, url: server.url, kind: 'p2p', mode: 'closed', concurrency }),
      );
      pgr.p2pSaturation = byConcurrency;
      // Closed loops: each one's concurrency is set.
      best = { concurrency: fastest.concurrency ?? best.concurrency };
      saturatedConcurrency = best.concurrency;
      pgr.p2pSaturatedPerS = fastest.throughputPerS;
      log('P2P saturated', fastest.throughputPerS, '/s at', fastest.concurrency, 'in flight');
    }

    if (runs('statements')) {
      log('statements: history on / off, balance at a time, a 1,000,000-line csv statement');
      const p2p = (/** @type {string} */ url, /** @type {number} */ concurrency) =>
        runJson('load.js', { ...base, url, kind: 'p2p', mode: 'closed', concurrency });
      pgr.statements = await statementsSection({
        databaseUrl,
        configFile,
        server,
        db,
        ledger,
        base,
        concurrency: best.concurrency,
        startPayorch,
        p2p,
        log,
      });
    }

    if (runs('latency')) {
      log('P2P latency at fixed rates');
      pgr.p2pLatency = [];
      for (const rate of OFFERED_RATES)
        pgr.p2pLatency.push(await cpuMeasuredLoad(server, databaseUrl, { ...base, url: server.url, kind: 'p2p', mode: 'open', rate }));
      log('P2P p99 at', OFFERED_RATES.join(' / '), '/s:', pgr.p2pLatency.map((x) => x.latencyMs.p99).join(' / '), 'ms');
      for (const x of pgr.p2pLatency)
        log(
          `  at ${x.offeredPerS}/s: slowest ${x.slowest
            ?.slice(0, 3)
            .map((r) => `${r.ms} ms due ${r.dueAt.slice(11)}`)
            .join(', ')};`,
          `loop delay max: server ${x.server?.eventLoopDelayMs.max}, generator ${x.generatorEventLoopDelayMs?.max} ms;`,
          `machine ${x.machineCpu.busyFraction} busy, some task waiting for a core ${x.machineCpu.waitingForCpuPct} % of the time;`,
          `CPU per intent: payorch ${x.cpuPerIntent.payorchUs}, PostgreSQL backends ${x.cpuPerIntent.postgresBackendsUs} µs`,
        );
    }

    // The same in-flight levels as P2P's, the best reported: a pair holds one request in flight at a
    // time, so at 32 pairs a group commit's batch fills to ~16, where P2P's figure is its best level.
    if (runs('invoice')) {
      log('invoice pairs saturation');
      // CPU per settled pair too: steadier than a pair's throughput on a shared machine.
      const { byConcurrency, fastest } = await saturate(SATURATION_CONCURRENCY, (concurrency) =>
        cpuMeasuredLoad(server, databaseUrl, {
          ...base,
          url: server.url,
          kind: 'invoice',
          mode: 'closed',
          concurrency,
          merchants: MERCHANTS,
        }),
      );
      pgr.invoiceSaturationByConcurrency = byConcurrency;
      pgr.invoiceSaturation = fastest;
      log(
        'invoice pairs saturated',
        pgr.invoiceSaturationByConcurrency.map((x) => x.throughputPerS).join(' / '),
        'pairs/s at',
        SATURATION_CONCURRENCY.join(' / '),
        'in flight; best',
        fastest.throughputPerS,
        'at',
        fastest.concurrency,
      );
      log(
        'CPU per settled pair (µs), payorch / PostgreSQL backends:',
        pgr.invoiceSaturationByConcurrency.map((x) => `${x.cpuPerIntent.payorchUs} / ${x.cpuPerIntent.postgresBackendsUs}`).join(', '),
      );
    }
    if (runs('invoice') || runs('invoice-rates')) {
      pgr.invoiceLatency = [];
      for (const rate of INVOICE_OFFERED_RATES)
        pgr.invoiceLatency.push(
          await runJson('load.js', { ...base, url: server.url, kind: 'invoice', mode: 'open', rate, merchants: MERCHANTS }),
        );
      log(
        'invoice pair p50 / p99 at',
        INVOICE_OFFERED_RATES.join(' / '),
        'pairs/s:',
        pgr.invoiceLatency.map((x) => `${x.latencyMs.p50} / ${x.latencyMs.p99}`).join(', '),
        'ms',
      );
    }

    // The uniform phase is the CPU measurement's too: one saturated P2P phase serves both sections.
    if (runs('hot-payee') || runs('cpu')) {
      log('P2P at', HOT_PAYEE_CONCURRENCY, 'in flight, payees uniform, CPU per intent');
      const closed = { ...base, url: server.url, kind: /** @type {const} */ ('p2p'), mode: /** @type {const} */ ('closed') };
      pgr.p2pUniform = await cpuMeasuredLoad(server, databaseUrl, { ...closed, concurrency: HOT_PAYEE_CONCURRENCY });
      log('uniform', pgr.p2pUniform.throughputPerS, '/s; CPU per intent (µs)', pgr.p2pUniform.cpuPerIntent);
      if (runs('hot-payee')) {
        log('P2P at', HOT_PAYEE_CONCURRENCY, 'in flight, payees Zipf', HOT_PAYEES);
        pgr.p2pHotPayee = await cpuMeasuredLoad(server, databaseUrl, {
          ...closed,
          concurrency: HOT_PAYEE_CONCURRENCY,
          payees: HOT_PAYEES,
        });
        log('hot payee', pgr.p2pHotPayee.throughputPerS, '/s; CPU per intent (µs)', pgr.p2pHotPayee.cpuPerIntent);
      }
    }
    if (runs('replays'))
      pgr.p2pReplays = await replayPhases('P2P', HOT_PAYEE_CONCURRENCY, (shares) =>
        runJson('load.js', { ...base, url: server.url, kind: 'p2p', mode: 'closed', concurrency: HOT_PAYEE_CONCURRENCY, ...shares }),
      );
    if (runs('refusals')) {
      pgr.p2pWithRefusals = [];
      for (const share of [0, ...REFUSED_SHARES]) {
        const refusals = share === 0 ? {} : { refusals: { share, payers: UNFUNDED } };
        const load = await cpuMeasuredLoad(server, databaseUrl, {
          ...base,
          url: server.url,
          kind: 'p2p',
          mode: 'closed',
          concurrency: HOT_PAYEE_CONCURRENCY,
          ...refusals,
        });
        pgr.p2pWithRefusals.push(load);
        logRefusalPhase('P2P', share, HOT_PAYEE_CONCURRENCY, load);
      }
    }
    if (runs('refunds')) pgr.refunds = await refundsPhase({ runJson, base, url: server.url, concurrency: HOT_PAYEE_CONCURRENCY, log });
    await server.stop();

    /** @type {FloorResults} */
    const floors = {};
    if (runs('floors') || runs('floor-batch')) results.floors = floors;
    if (runs('floor-batch')) {
      log('batched SQL floor:', FLOOR_BATCH, 'intents per transaction, one connection');
      const batched = { databaseUrl, users: USERS, concurrency: 1, batch: FLOOR_BATCH, durationS: PHASE_S };
      floors.sqlBatchServer = await runJson('sql-floor.js', { ...batched, style: 'server' });
      floors.sqlBatchPlain = await runJson('sql-floor.js', { ...batched, style: 'plain' });
      log(
        'batched floor: server functions',
        floors.sqlBatchServer.throughputPerS,
        '/s, plain SQL',
        floors.sqlBatchPlain.throughputPerS,
        '/s',
      );
    }
    if (runs('floors')) {
      log('floors');
      floors.sqlWrites = await runJson('sql-floor.js', {
        databaseUrl,
        users: USERS,
        concurrency: best.concurrency > 20 ? 16 : best.concurrency,
        durationS: PHASE_S,
      });
      floors.sqlWritesGrouped = await runJson('sql-floor.js', { databaseUrl, users: USERS, concurrency: 4, batch: 32, durationS: PHASE_S });
      floors.sqlWithReads = await runJson('sql-floor.js', {
        databaseUrl,
        users: USERS,
        concurrency: 16,
        durationS: PHASE_S,
        withReads: true,
      });
      floors.bareHttp = await runBareFloor(base, configFile);
      floors.feeEvaluation = await runJson('fee-eval.js', {});
      log(
        'floors',
        floors.sqlWrites.throughputPerS,
        floors.sqlWritesGrouped.throughputPerS,
        floors.sqlWithReads.throughputPerS,
        floors.bareHttp.throughputPerS,
        'fees per intent',
        floors.feeEvaluation.loadedUs,
        'µs, round trip',
        floors.feeEvaluation.medianUs,
        'µs',
      );
    }

    if (runs('policies') || runs('stored') || runs('soak')) {
      log('seeding 1,000 policies and 100,000 settled intents');
      await seedPolicies(db);
      await seedSettledIntents(db, { first: USERS[0], users: USERS[1], count: 100_000 });
      await settle(db);
    }
    if (runs('policies')) {
      server = await startPayorch({ DATABASE_URL: databaseUrl, CONFIG_FILE: configFile }, 'postgres');
      await runJson('load.js', { ...base, url: server.url, kind: 'policy', mode: 'closed', concurrency: 32, durationS: 3 });
      pgr.policyEvaluation = await runJson('load.js', { ...base, url: server.url, kind: 'policy', mode: 'closed', concurrency: 32 });
      log('policy evaluations', pgr.policyEvaluation.throughputPerS, '/s');
      await server.stop();
    }

    if (runs('stored') || runs('soak')) {
      log('seeding 100,000 more: 200,000 stored');
      await seedSettledIntents(db, { first: USERS[0], users: USERS[1], count: 100_000 });
      await settle(db);
      pgr.storedIntentsBefore = Number((await db.query('SELECT count(*) AS n FROM intents')).rows[0]?.n);
      server = await startPayorch({ DATABASE_URL: databaseUrl, CONFIG_FILE: configFile }, 'postgres');
      await runJson('load.js', { ...base, url: server.url, kind: 'p2p', mode: 'closed', concurrency: best.concurrency, durationS: 5 });
      if (runs('stored')) {
        const empty = await startEmptyTwin(ledger, configFile, base, best.concurrency);
        const pairs = await storedAgainstEmpty({ server, db }, empty, base, best.concurrency);
        pgr.storedAgainstEmpty = pairs;
        await empty.server.stop();
        await empty.db.close();
        await dropDatabase(empty.name);
      }
      if (runs('soak')) {
        log(`soak: ${SOAK_S} s at ${SOAK_RATE}/s`);
        pgr.soak = await soak(server, {
          ...base,
          url: server.url,
          kind: 'p2p',
          mode: 'open',
          rate: SOAK_RATE,
          durationS: SOAK_S,
          warmupS: 0,
        });
        log(
          'soak RSS',
          pgr.soak.rssStartMb,
          '→',
          pgr.soak.rssEndMb,
          'MB; live heap after full collections',
          pgr.soak.liveHeapStartMb,
          '→',
          pgr.soak.liveHeapEndMb,
          'MB',
        );
      }
      await server.stop();
    }
    await db.close();
  }

  if (runs('fresh-plans') || runs('stored-10m')) {
    /** @type {import('./size.js').SizeContext} */
    const sizeContext = {
      benchDb: BENCH_DB,
      configFile,
      ledger: new SqlLedger(),
      base,
      userBalance: USER_BALANCE,
      concurrency: saturatedConcurrency,
      recreateDatabase,
      dropDatabase,
      openDatabase,
      startPayorch,
      load: (options) => runJson('load.js', options),
      log,
    };
    if (runs('fresh-plans')) {
      log(`fresh plans: a fresh database, autovacuum off, no ANALYZE, two stretches of ${FRESH_STRETCH_S} s`);
      results.freshPlans = await freshPlansSection(sizeContext, FRESH_STRETCH_S);
      log('fresh plans: second stretch / first', results.freshPlans.secondToFirst);
    }
    if (runs('stored-10m')) {
      log(`stored-10m: seeding ${STORED_LARGE_COUNT} settled intents`);
      const large = await startLargeStored(sizeContext, STORED_LARGE_COUNT);
      const empty = await startEmptyTwin(sizeContext.ledger, configFile, base, saturatedConcurrency);
      const pairs = await storedAgainstEmpty(large, empty, base, saturatedConcurrency);
      results.storedLarge = { stored: large.stored, seedS: large.seedS, databaseGb: large.databaseGb, pairs };
      for (const side of [large, empty]) {
        await side.server.stop();
        await side.db.close();
        await dropDatabase(side.name);
      }
    }
  }

  // ── PGlite ──
  if (runs('pglite') || runs('pglite-refusals') || runs('pglite-replays')) results.pglite = await pglitePass(base, secret, configFile);

  if (runs('reconciliation')) results.reconciliation = await benchReconciliation({ lines: 1_000_000, log });

  if (runs('payouts')) {
    log('payouts: one workers process against the PSPX simulator at its default latency');
    results.payouts = await payoutsSection({ payouts: PAYOUTS, log });
  }

  results.loadAvgAtEnd = loadavg().map((x) => Math.round(x * 100) / 100);
  if (only !== null) {
    const path = join(root, 'bench', 'results', `partial-${results.startedAt.replace(/[:.]/g, '-')}.json`);
    writeFileSync(path, `${JSON.stringify(results, null, 2)}\n`);
    log('partial run written to', path);
    console.log(JSON.stringify({ ...roundTwoFigures(results), ...refusalFigures(results) }, null, 2));
    return;
  }
  // No --only: every PostgreSQL section ran (a failed phase stands in for its result, see runJson).
  const fullRun = /** @type {FullRunResults} */ (results);
  const summary = summarize(fullRun);
  results.summary = summary;
  const json = `${JSON.stringify(results, null, 2)}\n`;
  writeFileSync(join(root, 'bench', 'results', 'latest.json'), json);
  writeFileSync(join(root, 'bench', 'results', `${results.startedAt.replace(/[:.]/g, '-')}.json`), json);
  writeChart({ ...fullRun, summary }, join(root, 'docs', 'bench.svg'));
  console.log(JSON.stringify(summary, null, 2));
}

/**
 * P2P at `concurrency` in flight on a side with intents stored and on an empty twin, alternated in
 * STORED_PAIRS pairs, the order turned each pair (ABBA...), so that a drift of the machine's speed
 * during the section weighs on both sides alike: single phases swing by a fifth here. Each phase
 * starts right after a checkpoint.
 * @param {{ server: { url: string }, db: Database }} stored
 * @param {{ server: { url: string }, db: Database }} empty
 * @param {{ secret: string, service: string, users: [number, number], durationS: number }} base
 * @param {number} concurrency
 */
async function storedAgainstEmpty(stored, empty, base, concurrency) {
  /** @type {StoredPair[]} */
  const pairs = [];
  for (let pair = 0; pair < STORED_PAIRS; pair++) {
    /** @param {{ server: { url: string }, db: Database }} side */
    const measure = (side) => fromCheckpoint(side.db, { ...base, url: side.server.url, kind: 'p2p', mode: 'closed', concurrency });
    const emptyFirst = pair % 2 === 0;
    const firstLoad = await measure(emptyFirst ? empty : stored);
    const secondLoad = await measure(emptyFirst ? stored : empty);
    const [emptyLoad, storedLoad] = emptyFirst ? [firstLoad, secondLoad] : [secondLoad, firstLoad];
    pairs.push({
      empty: emptyLoad,
      stored: storedLoad,
      ratio: Math.round((storedLoad.throughputPerS / emptyLoad.throughputPerS) * 100) / 100,
    });
    log(
      `stored against empty, pair ${pair + 1}:`,
      storedLoad.throughputPerS,
      'vs',
      emptyLoad.throughputPerS,
      '/s; full page images per intent',
      storedLoad.walPerIntent.fullPageImages,
      'vs',
      emptyLoad.walPerIntent.fullPageImages,
    );
  }
  return pairs;
}

/**
 * Closed loops at each in-flight level in turn; the fastest is the saturated figure.
 * @template {{ throughputPerS: number }} R
 * @param {readonly number[]} levels
 * @param {(concurrency: number) => Promise<R>} measure
 */
async function saturate(levels, measure) {
  /** @type {R[]} */
  const byConcurrency = [];
  for (const concurrency of levels) byConcurrency.push(await measure(concurrency));
  return { byConcurrency, fastest: byConcurrency.reduce((a, b) => (b.throughputPerS > a.throughputPerS ? b : a)) };
}

/**
 * A P2P load that starts right after a checkpoint, with the WAL it wrote per settled intent. The
 * stored phase and its reference are both taken so: a checkpoint makes the next change of every
 * page write a full image of it, so where a phase falls in the checkpoint cycle moves its
 * throughput, and the seeding's WAL alone requests checkpoints right before the stored phase.
 * @param {Database} db
 * @param {LoadOptions} options
 * @returns {Promise<CheckpointedLoad>}
 */
async function fromCheckpoint(db, options) {
  await db.query('CHECKPOINT');
  const walThen = await walCounters(db);
  const result = await runJson('load.js', options);
  const walNow = await walCounters(db);
  const intents = walNow.intents - walThen.intents;
  const per = (/** @type {number} */ delta) => (intents > 0 ? Math.round((delta / intents) * 100) / 100 : null);
  return {
    ...result,
    walPerIntent: { bytes: per(walNow.bytes - walThen.bytes), fullPageImages: per(walNow.fullPageImages - walThen.fullPageImages) },
  };
}

/**
 * The server's WAL counters (pg_stat_wal: the whole server's, so only meaningful with nothing else
 * writing) and the intents stored.
 * @param {Database} db
 */
async function walCounters(db) {
  const { rows } = await db.query(
    `SELECT wal_bytes::float8 AS bytes, wal_fpi::float8 AS fpi, (SELECT count(*) FROM intents)::float8 AS intents FROM pg_stat_wal`,
  );
  const row = rows[0];
  return { bytes: Number(row?.bytes), fullPageImages: Number(row?.fpi), intents: Number(row?.intents) };
}

/**
 * After a bulk seed: what autovacuum would do over the next minutes, done now, so that neither
 * measurement pays for the other's seeding (statistics, visibility map, background CPU).
 */
/** @param {Database} db */
async function settle(db) {
  await db.query('VACUUM ANALYZE');
}

function writeBenchConfig() {
  const demo = JSON.parse(readFileSync(join(root, 'config', 'demo.json'), 'utf8'));
  // A P2P fee to the revenue account: every intent then touches two hot unguarded accounts
  // (the channel's transit and revenue): the hot-account case this bench measures.
  demo.feeRules = [
    ...(demo.feeRules ?? []),
    {
      name: 'p2p fee',
      operationType: 'P2P_TRANSFER',
      expression: "[{account: 'system.revenue.THB', amount: 1}]",
      timing: 'PRE',
      tagsExclude: ['fee_exempt'],
    },
  ];
  // payorch runs with NODE_ENV=production here, which refuses the demo's public secrets.
  demo.secrets = Object.fromEntries(Object.keys(demo.secrets).map((id) => [id, randomBytes(24).toString('base64url')]));
  const dir = mkdtempSync(join(tmpdir(), 'payorch-bench-'));
  const path = join(dir, 'config.json');
  writeFileSync(path, JSON.stringify(demo));
  return { configFile: path, secret: demo.secrets[SERVICE] };
}

/**
 * @param {Omit<LoadOptions, 'url' | 'kind' | 'mode'>} base
 * @param {string} configFile
 */
async function runBareFloor(base, configFile) {
  const child = spawn(process.execPath, [join(root, 'bench', 'bare-server.js'), configFile], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((resolve) => child.stdout.once('data', (d) => resolve(String(d).trim())));
  try {
    await runJson('load.js', { ...base, url, kind: 'bare', mode: 'closed', concurrency: 32, durationS: 3 });
    return await runJson('load.js', { ...base, url, kind: 'bare', mode: 'closed', concurrency: 32 });
  } finally {
    child.kill('SIGTERM');
  }
}

/**
 * @param {{ status: () => ReturnType<typeof procStatus>, heap: () => Promise<HeapTotals | null> }} server
 * @param {LoadOptions} options
 * @returns {Promise<SoakResult>}
 */
async function soak(server, options) {
  /** @type {RssSample[]} */
  const samples = [];
  const startedMs = Date.now();
  const sample = async () => {
    const live = (await server.heap())?.liveBytesAfterMarkCompact;
    const liveHeapMb = live === undefined || live === null ? null : Math.round((live / 2 ** 20) * 10) / 10;
    samples.push({ atS: Math.round((Date.now() - startedMs) / 1000), ...server.status(), liveHeapMb });
  };
  await sample();
  let running = true;
  const load = runJson('load.js', options).finally(() => {
    running = false;
  });
  const sampling = (async () => {
    for (;;) {
      await Promise.race([load.catch(() => {}), sleep(RSS_SAMPLE_MS)]);
      if (!running) return;
      await sample();
    }
  })();
  const result = await load;
  await sampling;
  await sample();
  return {
    ...result,
    ...rssGrowth(samples, result.durationS),
    peakRssMb: server.status().peakRssMb,
    samples,
  };
}

/**
 * @param {string} engine
 * @param {number} share
 * @param {number} concurrency
 * @param {LoadResult & { cpuPerIntent?: CpuPerIntent }} load
 */
function logRefusalPhase(engine, share, concurrency, load) {
  log(
    `${engine}, ${share * 100} % refused,`,
    concurrency,
    'in flight:',
    load.throughputPerS,
    'settled /s,',
    load.refusedPerS ?? 0,
    'refused /s, p99',
    load.latencyMs?.p99,
    'ms',
    ...(load.cpuPerIntent === undefined
      ? []
      : [
          '; CPU per settled intent (µs): payorch',
          load.cpuPerIntent.payorchUs,
          'PostgreSQL backends',
          load.cpuPerIntent.postgresBackendsUs,
        ]),
  );
}

/**
 * The replay sections' two phases: plain, then with REPLAY_SHARE of the requests retried.
 * @param {string} engine
 * @param {number} concurrency
 * @param {(shares: { replays?: Replays }) => Promise<LoadResult>} closedLoop
 * @returns {Promise<LoadResult[]>}
 */
async function replayPhases(engine, concurrency, closedLoop) {
  const loads = [];
  for (const share of [0, REPLAY_SHARE]) {
    const load = await closedLoop(share === 0 ? {} : { replays: { share } });
    loads.push(load);
    log(
      `${engine}, ${share * 100} % retried,`,
      concurrency,
      'in flight:',
      load.throughputPerS,
      'settled /s,',
      load.replayedPerS ?? 0,
      'replayed /s',
    );
  }
  return loads;
}

/**
 * @param {Omit<LoadOptions, 'url' | 'kind' | 'mode'>} base
 * @param {string} secret
 * @param {string} configFile
 * @returns {Promise<PgliteResults>}
 */
async function pglitePass(base, secret, configFile) {
  const dataDir = mkdtempSync(join(tmpdir(), 'payorch-bench-pglite-'));
  const server = await startPayorch({ DATABASE_URL: '', DATA_DIR: dataDir, CONFIG_FILE: configFile }, 'pglite');
  /** @type {[first: number, count: number]} */
  const users = [1, 400];
  /** @type {[first: number, count: number]} Never funded, never paid: the refused payers, one per worker. */
  const unfunded = [users[0] + users[1], Math.max(...PGLITE_REFUSAL_CONCURRENCY)];
  /** @type {PgliteResults} */
  const result = { peakRssMb: 0 };
  /**
   * @param {number} concurrency
   * @param {{ refusals?: Refusals, replays?: Replays }} [shares]
   */
  const closedLoop = (concurrency, shares = {}) =>
    runJson('load.js', {
      ...base,
      users,
      url: server.url,
      kind: 'p2p',
      mode: 'closed',
      concurrency,
      durationS: Math.min(PHASE_S, 15),
      ...shares,
    });
  try {
    log('PGlite: creating and funding', users[1], 'users over HTTP');
    await runSetup(server.url, secret, users, USER_BALANCE);
    if (runs('pglite-refusals')) await runSetup(server.url, secret, unfunded, 0);
    await runJson('load.js', { ...base, users, url: server.url, kind: 'p2p', mode: 'closed', concurrency: 8, durationS: 3 });
    if (runs('pglite')) {
      const { byConcurrency, fastest } = await saturate(PGLITE_SATURATION_CONCURRENCY, async (concurrency) => {
        const load = await closedLoop(concurrency);
        log('PGlite', concurrency, 'in flight:', load.throughputPerS, '/s, p99', load.latencyMs.p99, 'ms');
        return load;
      });
      result.p2pSaturationByConcurrency = byConcurrency;
      result.p2pSaturation = fastest;
      result.p2pLatency = [];
      for (const rate of [100, 250])
        result.p2pLatency.push(
          await runJson('load.js', { ...base, users, url: server.url, kind: 'p2p', mode: 'open', rate, durationS: Math.min(PHASE_S, 15) }),
        );
      log('PGlite saturated', fastest.throughputPerS, '/s at', fastest.concurrency, 'in flight');
    }
    if (runs('pglite-refusals')) {
      result.p2pWithRefusals = [];
      // Plain first, at the same levels on the same server: the refused shares' ratio is to it.
      for (const share of [0, ...REFUSED_SHARES])
        for (const concurrency of PGLITE_REFUSAL_CONCURRENCY) {
          const load = await closedLoop(concurrency, share === 0 ? {} : { refusals: { share, payers: unfunded } });
          result.p2pWithRefusals.push(load);
          logRefusalPhase('PGlite', share, concurrency, load);
        }
    }
    if (runs('pglite-replays')) {
      const concurrency = Math.max(...PGLITE_SATURATION_CONCURRENCY);
      result.p2pReplays = await replayPhases('PGlite', concurrency, (shares) => closedLoop(concurrency, shares));
    }
    result.peakRssMb = server.status().peakRssMb;
    return result;
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * Accounts and top-ups through the API (PGlite cannot be opened by a second process).
 * @param {string} url
 * @param {string} secret
 * @param {[first: number, count: number]} users
 * @param {number} balance satang each; 0: no top-up
 */
async function runSetup(url, secret, [first, count], balance) {
  const { signedHeaders } = await import('../dist/domain/auth/signing.js');
  /**
   * @param {string} path
   * @param {object} body
   * @param {number} user
   */
  const call = async (path, body, user) => {
    const raw = JSON.stringify(body);
    const res = await fetch(url + path, {
      method: 'POST',
      body: raw,
      headers: { 'content-type': 'application/json', ...signedHeaders(SERVICE, secret, 'POST', path, raw, { userId: user }) },
    });
    if (res.status >= 300) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  };
  for (let u = first; u < first + count; u++) {
    await call('/accounts', { userId: u, currency: 'THB' }, u);
    if (balance > 0)
      await call('/intents', { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: balance, currency: 'THB' }, u);
  }
}

/** @param {FullRunResults} r */
function summarize(r) {
  const p = r.postgres;
  /**
   * @param {readonly LoadResult[]} list
   * @param {number} rate
   */
  const at = (list, rate) => list.find((x) => x.offeredPerS === rate)?.latencyMs ?? null;
  return {
    postgresP2pSaturatedPerS: p.p2pSaturatedPerS,
    sqlFloorWritesPerS: r.floors.sqlWrites.throughputPerS,
    ratioToSqlFloor: Math.round((p.p2pSaturatedPerS / r.floors.sqlWrites.throughputPerS) * 100) / 100,
    sqlFloorGroupCommitPerS: r.floors.sqlWritesGrouped.throughputPerS,
    ratioToSqlGroupCommitFloor: Math.round((p.p2pSaturatedPerS / r.floors.sqlWritesGrouped.throughputPerS) * 100) / 100,
    sqlFloorWithReadsPerS: r.floors.sqlWithReads.throughputPerS,
    bareHttpFloorPerS: r.floors.bareHttp.throughputPerS,
    ratioToBareHttpFloor: Math.round((p.p2pSaturatedPerS / r.floors.bareHttp.throughputPerS) * 100) / 100,
    p2pLatencyMs: Object.fromEntries(OFFERED_RATES.map((rate) => [rate, at(p.p2pLatency, rate)])),
    // Below saturation batches are small, and what a batch costs whatever its size weighs per intent.
    p2pLatencyCpuPerIntentUs: Object.fromEntries(
      OFFERED_RATES.map((rate) => {
        const cpu = p.p2pLatency?.find((x) => x.offeredPerS === rate)?.cpuPerIntent;
        return [rate, cpu === undefined ? null : { payorch: cpu.payorchUs, postgresBackends: cpu.postgresBackendsUs }];
      }),
    ),
    invoicePairLatencyMs: Object.fromEntries(INVOICE_OFFERED_RATES.map((rate) => [rate, at(p.invoiceLatency, rate)])),
    // What a loaded service pays per intent for its fees (32 evaluations under way: the batches'
    // hop shared), and what one request of a quiet service waits (one round trip between threads).
    feeEvaluationPerIntentUs: r.floors.feeEvaluation.loadedUs,
    feeEvaluationRoundTripUs: r.floors.feeEvaluation.medianUs,
    policyEvaluationsPerS: p.policyEvaluation.throughputPerS,
    soakS: p.soak.durationS,
    soakErrors: p.soak.errors,
    rssGrowthPct: p.soak.rssGrowthPct,
    liveHeapGrowthPct: p.soak.liveHeapGrowthPct,
    peakRssMb: p.soak.peakRssMb,
    pgliteP2pSaturatedPerS: r.pglite?.p2pSaturation?.throughputPerS ?? null,
    ...refusalFigures(r),
    ...roundTwoFigures(r),
    loadAvg: { start: r.loadAvgAtStart, end: r.loadAvgAtEnd },
  };
}

/**
 * Settled /s with each refused share against the plain phase before it on the same server
 * (`toPlain`): on PostgreSQL at its one in-flight level, on PGlite the fastest level of each
 * share against the fastest plain one. A refusal that cost no more than a payment would leave
 * 1 − share of the plain rate settled. Printed by partial runs too.
 * @param {BenchResults} r
 */
function refusalFigures(r) {
  /** @param {number | undefined} a @param {number | undefined} b */
  const ratio = (a, b) => (a === undefined || b === undefined || b === 0 ? null : Math.round((a / b) * 100) / 100);
  /** @param {readonly LoadResult[] | undefined} loads @param {number | undefined} share */
  const fastest = (loads, share) => {
    /** @type {LoadResult | undefined} */
    let best;
    for (const x of loads ?? []) if (x.refusedShare === share && (best === undefined || x.throughputPerS > best.throughputPerS)) best = x;
    return best;
  };
  /** @param {readonly LoadResult[] | undefined} loads */
  const figures = (loads) => {
    const plain = fastest(loads, undefined);
    return REFUSED_SHARES.map((share) => {
      const refused = fastest(loads, share);
      return {
        refusedShare: share,
        settledPerS: refused?.throughputPerS ?? null,
        refusedPerS: refused?.refusedPerS ?? null,
        toPlain: ratio(refused?.throughputPerS, plain?.throughputPerS),
      };
    });
  };
  return { postgresWithRefusals: figures(r.postgres?.p2pWithRefusals), pgliteWithRefusals: figures(r.pglite?.p2pWithRefusals) };
}

/**
 * The figures the second round of performance work is judged by (docs/PERFORMANCE.md, Current figures), null
 * where their section did not run: a partial run prints them too.
 * @param {BenchResults} r
 */
function roundTwoFigures(r) {
  const p = r.postgres ?? {};
  const f = r.floors ?? {};
  /**
   * @param {number | undefined} a
   * @param {number | undefined} b
   */
  const ratio = (a, b) => (a === undefined || b === undefined || b === 0 ? null : Math.round((a / b) * 100) / 100);
  return {
    sqlFloorBatch: FLOOR_BATCH,
    sqlFloorBatchServerPerS: f.sqlBatchServer?.throughputPerS ?? null,
    sqlFloorBatchPlainPerS: f.sqlBatchPlain?.throughputPerS ?? null,
    sqlFloorBatchServerToPlain: ratio(f.sqlBatchServer?.throughputPerS, f.sqlBatchPlain?.throughputPerS),
    p2pUniformPerS: p.p2pUniform?.throughputPerS ?? null,
    p2pHotPayeePerS: p.p2pHotPayee?.throughputPerS ?? null,
    hotPayeeToUniform: ratio(p.p2pHotPayee?.throughputPerS, p.p2pUniform?.throughputPerS),
    invoicePairsSaturatedPerS: p.invoiceSaturation?.throughputPerS ?? null,
    invoicePairsSaturatedConcurrency: p.invoiceSaturation?.concurrency ?? null,
    invoicePairsToP2p: ratio(p.invoiceSaturation?.throughputPerS, p.p2pSaturatedPerS),
    cpuPerInvoicePairUs: p.invoiceSaturation?.cpuPerIntent ?? null,
    invoicePairsAtOfferedRates: Object.fromEntries(
      INVOICE_OFFERED_RATES.map((rate) => {
        const found = p.invoiceLatency?.find((x) => x.offeredPerS === rate);
        return [
          rate,
          found === undefined ? null : { achievedPerS: found.throughputPerS, p50: found.latencyMs.p50, p99: found.latencyMs.p99 },
        ];
      }),
    ),
    cpuPerIntentUs: p.p2pUniform?.cpuPerIntent ?? null,
    cpuPerIntentUsHotPayee: p.p2pHotPayee?.cpuPerIntent ?? null,
    // The median of the alternated pairs' ratios, and the medians of each side.
    after200kRatio: median(p.storedAgainstEmpty?.map((x) => x.ratio)),
    after200kRatioPairs: p.storedAgainstEmpty?.map((x) => x.ratio) ?? null,
    p2pAfter200kPerS: median(p.storedAgainstEmpty?.map((x) => x.stored.throughputPerS)),
    p2pEmptyTwinPerS: median(p.storedAgainstEmpty?.map((x) => x.empty.throughputPerS)),
    fullPageImagesPerIntent:
      p.storedAgainstEmpty?.map((x) => ({ stored: x.stored.walPerIntent.fullPageImages, empty: x.empty.walPerIntent.fullPageImages })) ??
      null,
    payoutsConfirmedPerSPerWorkersProcess: r.payouts?.current.confirmedPerS ?? null,
    payoutsSettledPerSPerWorkersProcess: r.payouts?.current.settledPerS ?? null,
    payoutsSimulatorLatencyMs: r.payouts?.simulatorLatencyMs ?? null,
    ...sizeFigures(r),
  };
}

/**
 * The third round's figures of plans and size: fresh-plans' second stretch over its first, and
 * stored-10m's median ratio against the empty twin.
 * @param {BenchResults} r
 */
function sizeFigures(r) {
  const large = r.storedLarge?.pairs;
  return {
    freshPlansSecondToFirst: r.freshPlans?.secondToFirst ?? null,
    freshPlansPerS: r.freshPlans === undefined ? null : [r.freshPlans.first.throughputPerS, r.freshPlans.second.throughputPerS],
    storedLargeCount: r.storedLarge?.stored ?? null,
    storedLargeSeedS: r.storedLarge?.seedS ?? null,
    storedLargeRatio: median(large?.map((x) => x.ratio)),
    storedLargeRatioPairs: large?.map((x) => x.ratio) ?? null,
    p2pStoredLargePerS: median(large?.map((x) => x.stored.throughputPerS)),
    p2pStoredLargeEmptyTwinPerS: median(large?.map((x) => x.empty.throughputPerS)),
    storedLargeFullPageImagesPerIntent:
      large?.map((x) => ({ stored: x.stored.walPerIntent.fullPageImages, empty: x.empty.walPerIntent.fullPageImages })) ?? null,
  };
}

/**
 * @param {readonly number[] | undefined} values
 * @returns {number | null}
 */
function median(values) {
  if (values === undefined || values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  const value = sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
  // The mean of two middle ratios of two decimals each, without the float's tail (0.9099999…).
  return Math.round(value * 1000) / 1000;
}

/** @type {Set<import('node:child_process').ChildProcess>} */
const children = new Set();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});
await main();
