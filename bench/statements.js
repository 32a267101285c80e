// The 'statements' section of npm run bench (docs/rules.md R58, docs/PERFORMANCE.md):
// - P2P throughput with balance history on and off in the same run: a second payorch on the same
//   database whose connections set ledger.history=off (a bench-only switch, sql/ledger/13-history.sql),
//   the two loaded in turn with the load generator's closed loop, in AB_ROUNDS rounds whose order
//   alternates (on-off, off-on, ...) so that a machine growing busier or calmer favours neither
//   side; the figure is the median of the rounds' on/off ratios, which one disturbed phase cannot move;
// - the balance at a time on an account with 1,000,000 postings (seeded set-based), p50/p99 of the
//   SQL query alone and of the signed HTTP request;
// - a 1,000,000-line csv statement of that account, streamed over HTTP: its time, payorch's RSS
//   sampled every 100 ms, and V8's live heap after its last full collection (what a leak would
//   grow; RSS also holds garbage not yet collected).
// Figures compare within one run only.
import { createHash, createHmac } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { ledgerAccountId } from '../dist/ledger/account-id.js';
import { seedWallets } from './seed.js';

/** The account whose history is seeded: past the load's users. */
const HEAVY_USER = 9_000_001;
const HEAVY_POSTINGS = 1_000_000;
const BALANCE_AT_QUERIES = 2_000;
/** Rounds of the history A/B, each one phase on and one off. */
const AB_ROUNDS = 4;
/** Stamps of the seeded postings, a millisecond apart, ending this long before the seed. */
const SEED_END_BEFORE_MS = 3_600_000;

/**
 * @typedef {{ url: string, pid: number, status(): { rssMb: number, peakRssMb: number }, heap(): Promise<{ liveBytesAfterMarkCompact: number | null } | null>, stop(): Promise<void> }} Server
 * @typedef {{
 *   databaseUrl: string,
 *   configFile: string,
 *   server: Server,
 *   db: import('../dist/adapters/database.js').Database,
 *   ledger: import('../dist/ledger/sql-ledger.js').SqlLedger,
 *   base: { secret: string, service: string, users: [number, number], durationS: number },
 *   concurrency: number,
 *   startPayorch(env: Record<string, string>, label: string): Promise<Server>,
 *   p2p(url: string, concurrency: number): Promise<{ throughputPerS?: number }>,
 *   log(...m: unknown[]): void,
 * }} StatementsContext
 */

/** @param {readonly number[]} sorted @param {number} q */
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
/** @param {number} ms */
const round2 = (ms) => Math.round(ms * 100) / 100;

/** @param {StatementsContext} context */
export async function statementsSection(context) {
  const { log } = context;
  const historyAb = await historyOnOff(context);
  log(
    'history on / off P2P by round:',
    historyAb.onPerS.map((on, i) => `${on}/${historyAb.offPerS[i]}`).join(', '),
    '/s; ratios',
    historyAb.ratios.join(', '),
    '; median',
    historyAb.ratio,
  );
  const heavy = await seedHeavyAccount(context);
  const balanceAt = await balanceAtLatency(context, heavy);
  log(
    'balance at a time, 1,000,000 postings: SQL p50/p99',
    balanceAt.sql.p50,
    '/',
    balanceAt.sql.p99,
    'ms; HTTP',
    balanceAt.http.p50,
    '/',
    balanceAt.http.p99,
    'ms',
  );
  const csv = await csvStatement(context, heavy);
  log(
    'csv statement',
    csv.lines,
    'lines in',
    csv.seconds,
    's;',
    csv.megabytes,
    'MB; payorch RSS',
    csv.rssMb,
    'MB; live heap after full collections',
    csv.liveHeapMb,
    'MB',
  );
  return { historyAb, balanceAt, csv };
}

/** @param {StatementsContext} context */
async function historyOnOff(context) {
  const off = new URL(context.databaseUrl);
  off.searchParams.set('options', '-c ledger.history=off');
  const offServer = await context.startPayorch({ DATABASE_URL: off.toString(), CONFIG_FILE: context.configFile }, 'postgres-history-off');
  try {
    /** @type {number[]} */
    const onPerS = [];
    /** @type {number[]} */
    const offPerS = [];
    const phase = async (/** @type {string} */ url) => (await context.p2p(url, context.concurrency)).throughputPerS ?? Number.NaN;
    for (let round = 0; round < AB_ROUNDS; round++) {
      if (round % 2 === 0) {
        onPerS.push(await phase(context.server.url));
        offPerS.push(await phase(offServer.url));
      } else {
        offPerS.push(await phase(offServer.url));
        onPerS.push(await phase(context.server.url));
      }
    }
    const ratios = onPerS.map((on, i) => Math.round((on / (offPerS[i] ?? Number.NaN)) * 1000) / 1000);
    const sorted = [...ratios].sort((a, b) => a - b);
    const median = ((sorted[(sorted.length - 1) >> 1] ?? Number.NaN) + (sorted[sorted.length >> 1] ?? Number.NaN)) / 2;
    return { concurrency: context.concurrency, onPerS, offPerS, ratios, ratio: Math.round(median * 1000) / 1000 };
  } finally {
    await offServer.stop();
  }
}

/**
 * One wallet with HEAVY_POSTINGS postings of 1 satang from equity, written set-based: the history
 * rows, and the balance rows that agree with them.
 * @param {StatementsContext} context
 */
async function seedHeavyAccount(context) {
  const { db, ledger, log } = context;
  const name = `user.${HEAVY_USER}.THB`;
  const id = ledgerAccountId(name);
  await seedWallets(db, ledger, { prefix: 'user', type: 'USER_WALLET', first: HEAVY_USER, count: 1, balance: 0 });
  log('seeding', HEAVY_POSTINGS, 'postings on', name);
  const { rows } = await db.query(
    `WITH seeded AS (
       INSERT INTO ledger_account_history (account_id, posted_at, seq, transfer_id, intent_id, code, amount, balance_after)
       -- seq never a multiple of 16384: these rows are not a write's first, which the commit check reads.
       SELECT $1, now() - $3 * interval '1 millisecond' - ($2 - i) * interval '1 millisecond', i * 16384 + 1,
              NULL, NULL, 5, 1, i
         FROM generate_series(1, $2::bigint) AS i
       RETURNING posted_at
     )
     SELECT min(posted_at) AS first, max(posted_at) AS last FROM seeded`,
    [id, HEAVY_POSTINGS, SEED_END_BEFORE_MS],
  );
  await db.query('UPDATE ledger_balances SET credits_posted = credits_posted + $2 WHERE account_id = $1 AND shard = 0', [
    id,
    HEAVY_POSTINGS,
  ]);
  await db.query('UPDATE ledger_balances SET debits_posted = debits_posted + $2 WHERE account_id = $1 AND shard = 0', [
    ledgerAccountId('system.equity.THB'),
    HEAVY_POSTINGS,
  ]);
  await db.query('ANALYZE ledger_account_history');
  const range = /** @type {{ first: Date, last: Date }} */ (rows[0]);
  return { name, id, first: range.first, last: range.last };
}

/**
 * @param {StatementsContext} context
 * @param {{ name: string, id: string, first: Date, last: Date }} heavy
 */
async function balanceAtLatency(context, heavy) {
  const span = heavy.last.getTime() - heavy.first.getTime();
  const instant = () => new Date(heavy.first.getTime() + Math.random() * span).toISOString();
  const client = new pg.Client({ connectionString: context.databaseUrl });
  await client.connect();
  /** @type {number[]} */
  const sql = [];
  /** @type {number[]} */
  const http = [];
  try {
    for (let i = 0; i < BALANCE_AT_QUERIES; i++) {
      const started = performance.now();
      await client.query('SELECT ledger_balance_at($1, $2::timestamptz)', [heavy.id, instant()]);
      sql.push(performance.now() - started);
    }
    for (let i = 0; i < BALANCE_AT_QUERIES; i++) {
      const path = `/accounts/${heavy.name}/balance?at=${encodeURIComponent(instant())}`;
      const started = performance.now();
      const res = await fetch(context.server.url + path, { headers: signed(context, 'GET', path) });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`balance at a time answered ${res.status}`);
      http.push(performance.now() - started);
    }
  } finally {
    await client.end();
  }
  const figures = (/** @type {number[]} */ xs) => {
    const sorted = [...xs].sort((a, b) => a - b);
    return { p50: round2(quantile(sorted, 0.5)), p99: round2(quantile(sorted, 0.99)), max: round2(sorted.at(-1) ?? Number.NaN) };
  };
  return { postings: HEAVY_POSTINGS, queries: BALANCE_AT_QUERIES, sql: figures(sql), http: figures(http) };
}

/**
 * @param {StatementsContext} context
 * @param {{ name: string, first: Date, last: Date }} heavy
 */
async function csvStatement(context, heavy) {
  const from = heavy.first.toISOString();
  const to = new Date(heavy.last.getTime() + 1).toISOString();
  const path = `/accounts/${heavy.name}/statement?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}&format=csv`;
  const heapBefore = await context.server.heap();
  const rssBefore = context.server.status().rssMb;
  let rssMax = rssBefore;
  const sampler = setInterval(() => {
    rssMax = Math.max(rssMax, context.server.status().rssMb);
  }, 100);
  const started = performance.now();
  let lines = 0;
  let bytes = 0;
  try {
    const res = await fetch(context.server.url + path, { headers: signed(context, 'GET', path) });
    if (res.status !== 200 || res.body === null) throw new Error(`csv statement answered ${res.status}`);
    for await (const chunk of res.body) {
      bytes += chunk.length;
      for (const byte of chunk) if (byte === 10) lines++;
    }
  } finally {
    clearInterval(sampler);
  }
  const seconds = Math.round((performance.now() - started) / 10) / 100;
  const rssAfter = context.server.status().rssMb;
  const heapAfter = await context.server.heap();
  const mb = (/** @type {number | null | undefined} */ bytes) => (bytes == null ? null : Math.round(bytes / 1e5) / 10);
  return {
    lines,
    seconds,
    megabytes: Math.round(bytes / 1e5) / 10,
    rssMb: { before: rssBefore, max: rssMax, after: rssAfter },
    liveHeapMb: { before: mb(heapBefore?.liveBytesAfterMarkCompact), after: mb(heapAfter?.liveBytesAfterMarkCompact) },
  };
}

/**
 * The X-Signature headers of a bodiless request (docs/rules.md R1), as bench/load.js signs.
 * @param {StatementsContext} context
 * @param {string} method
 * @param {string} path
 */
function signed(context, method, path) {
  const ts = String(Math.floor(Date.now() / 1000));
  const bodyHash = createHash('sha256').update('').digest('hex');
  const signature = createHmac('sha256', context.base.secret).update(`${ts}\n${method}\n${path}\n${bodyHash}`).digest('hex');
  return { 'x-service-id': context.base.service, 'x-timestamp': ts, 'x-signature': signature };
}
