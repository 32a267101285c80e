// node bench/reconciliation.js [--lines 1000000]   (or npm run bench -- --only reconciliation)
//
// Reconciliation with the provider at scale (docs/rules.md R59): LINES settled PSPX payouts seeded
// set-based into a database of its own (BENCH_RECON_DB, default bench_recon, dropped first), with
// the nostro's ledger transfer of each stamped inside DATE's Bangkok day and as many again on the
// day before (the books' side is read from the ledger, by time), the
// provider's statement of their day served over HTTP by a stub provider in a process of its own
// (LINES PAYOUT lines, three of them planted breaks, generated as they are sent), and one run of
// the day timed in a third process, which samples its own RSS. Figures compare only within one
// run on one machine.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { recreateBenchDatabase } from './fresh-database.js';

const DATE = '20250110';
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const DB_NAME = process.env.BENCH_RECON_DB ?? 'bench_recon';
if (!/^[a-z_][a-z0-9_]{0,62}$/.test(DB_NAME)) throw new Error('BENCH_RECON_DB must be a lower-case SQL identifier');
/** Lines per chunk the stub writes; it waits for the socket to drain between chunks. */
const STUB_CHUNK_LINES = 2000;
const RSS_SAMPLE_MS = 100;

/** The n-th payout's intent id: the same in SQL (md5(n::text)::uuid) and here. */
function intentIdOf(/** @type {number} */ n) {
  const hex = createHash('md5').update(String(n)).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
const amountOf = (/** @type {number} */ n) => 1000 + (n % 997);

/**
 * @typedef {object} ReconciliationBenchResult
 * @property {number} lines statement lines, and payouts seeded
 * @property {number} seedS
 * @property {number} runS the POST's work: fetch, stage, match, record
 * @property {number} stageS of runS: reading the statement and staging its lines
 * @property {number} matchS of runS: matching and recording the run
 * @property {number} nostroS of matchS: the books' movement, the nostro's ledger transfers of the day
 * @property {number} transfers ledger transfers seeded, half of them on DATE
 * @property {number} rssBeforeMb the reconciling process before the run
 * @property {number} peakRssMb the reconciling process's peak RSS during the run (sampled every 100 ms, and the kernel's max)
 * @property {string} status
 * @property {number} matched
 * @property {number} breakCount
 */

/**
 * Seeds, serves and reconciles; returns the figures.
 * @param {{ lines: number, log?: (...parts: unknown[]) => void }} options
 * @returns {Promise<ReconciliationBenchResult>}
 */
export async function benchReconciliation({ lines, log = console.error }) {
  const databaseUrl = await recreateBenchDatabase(PG_ADMIN_URL, DB_NAME);

  const stub = spawn(process.execPath, [fileURLToPath(import.meta.url), '--serve', '--lines', String(lines)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const stubUrl = await firstLine(stub);
    log('reconciliation: stub provider at', stubUrl);
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--reconcile', '--lines', String(lines)], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, BENCH_RECON_DATABASE_URL: databaseUrl, BENCH_RECON_PSPX_URL: stubUrl },
    });
    const output = await allOutput(child);
    /** @type {ReconciliationBenchResult} */
    const result = JSON.parse(output);
    log('reconciliation:', JSON.stringify(result));
    return result;
  } finally {
    stub.kill('SIGTERM');
  }
}

/** @param {import('node:child_process').ChildProcess} child */
function firstLine(child) {
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout?.on('data', (chunk) => {
      text += chunk;
      const end = text.indexOf('\n');
      if (end >= 0) resolve(text.slice(0, end));
    });
    child.once('exit', (code) => reject(new Error(`stub provider exited (${code})`)));
  });
}

/** @param {import('node:child_process').ChildProcess} child @returns {Promise<string>} */
function allOutput(child) {
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout?.on('data', (chunk) => {
      text += chunk;
    });
    child.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`reconciling process exited (${code})`))));
  });
}

/**
 * The stub provider: the statement of DATE, generated as it is sent. Breaks planted: payout 7's
 * line is missing, payout 11's amount is one satang more, one FEE line names no intent.
 * @param {number} lines
 */
async function serveStatement(lines) {
  const server = createServer(async (request, response) => {
    if (request.url !== `/v1/statements/${DATE}`) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"reason":"statement_not_closed"}');
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' });
    let total = 0n;
    response.write(`{"date":"${DATE}","openingBalance":"0","lines":[`);
    let first = true;
    for (let start = 1; start <= lines; start += STUB_CHUNK_LINES) {
      const parts = [];
      for (let n = start; n < Math.min(start + STUB_CHUNK_LINES, lines + 1); n += 1) {
        if (n === 7) continue;
        const amount = amountOf(n) + (n === 11 ? 1 : 0);
        total += BigInt(amount);
        parts.push(`{"lineId":"L${n}","intentId":"${intentIdOf(n)}","type":"PAYOUT","amount":"${amount}","valueDate":"${DATE}"}`);
      }
      const chunk = (first ? '' : ',') + parts.join(',');
      first = false;
      if (!response.write(chunk)) await new Promise((resolve) => response.once('drain', resolve));
    }
    total += 35n;
    response.end(`,{"lineId":"FEE1","intentId":null,"type":"FEE","amount":"35","valueDate":"${DATE}"}],"closingBalance":"${-total}"}`);
  });
  server.listen(0, '127.0.0.1', () => {
    const address = /** @type {import('node:net').AddressInfo} */ (server.address());
    console.log(`http://127.0.0.1:${address.port}`);
  });
}

/** The measured process: migrate, seed set-based, then one run of DATE. @param {number} lines */
async function reconcile(lines) {
  const { openDatabase } = await import('../dist/adapters/database.js');
  const { migrate } = await import('../dist/adapters/migrations.js');
  const { createPspxClient } = await import('../dist/adapters/pspx/pspx-client.js');
  const { createMemoryBroker } = await import('../dist/adapters/broker.js');
  const { StatusPublisher } = await import('../dist/domain/intents/store/status-publisher.js');
  const { runStatementReconciliation } = await import('../dist/domain/reconciliation/statement-run.js');
  const { ledgerAccountId } = await import('../dist/ledger/account-id.js');
  const { default: pino } = await import('pino');

  const db = await openDatabase(process.env.BENCH_RECON_DATABASE_URL, '');
  await migrate(db);
  const seedStarted = performance.now();
  await db.query(
    `INSERT INTO intents (id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel,
                          from_account_name, to_account_name, amount, status, psp_state, settlement_date, updated_at)
     SELECT md5(n::text)::uuid, md5('k' || n)::uuid, 'bench', 'bench', 1, 'PSPX_WITHDRAWAL', 'PSPX_TRANSFER',
            'user.1.THB', 'system.nostro.pspx.THB', 1000 + n % 997, 'SETTLED', 'CONFIRMED', $1, now()
       FROM generate_series(1, $2::int) AS n`,
    [DATE, lines],
  );
  // The nostro's side of each payout (transit → nostro), spread over DATE in Bangkok (17:00 UTC the
  // day before to 17:00 UTC), then the day before's as many: a day's read must not be the table's.
  const nostro = ledgerAccountId('system.nostro.pspx.THB');
  const transit = ledgerAccountId('system.transit.PSPX.THB');
  for (const [offsetDays, salt] of [
    [-1, 'before'],
    [0, 'day'],
  ]) {
    await db.query(
      `INSERT INTO ledger_transfers (id, debit_account_id, credit_account_id, amount, ledger, code, flags, created_at)
       SELECT md5($5::text || n)::uuid, $3, $4, 1000 + n % 997, 1, 1, 0,
              ((to_date($1, 'YYYYMMDD') - interval '7 hours' + $6::int * interval '1 day') AT TIME ZONE 'UTC')
                + n * (interval '86399 seconds' / $2::int)
         FROM generate_series(1, $2::int) AS n`,
      [DATE, lines, transit, nostro, salt, offsetDays],
    );
  }
  await db.query('ANALYZE intents');
  await db.query('ANALYZE ledger_transfers');
  const seedS = (performance.now() - seedStarted) / 1000;

  /** @type {{ stageMs?: number, matchMs?: number, nostroMs?: number }} */
  const phases = {};
  const log = pino({ level: 'info' }, { write: (/** @type {string} */ line) => Object.assign(phases, pickPhases(line)) });
  const pspx = createPspxClient({ baseUrl: /** @type {string} */ (process.env.BENCH_RECON_PSPX_URL), timeoutMs: 30_000 });
  const rssBeforeMb = process.memoryUsage().rss / 2 ** 20;
  let peakRssMb = rssBeforeMb;
  const sampler = setInterval(() => {
    peakRssMb = Math.max(peakRssMb, process.memoryUsage().rss / 2 ** 20);
  }, RSS_SAMPLE_MS);
  const started = performance.now();
  const run = await runStatementReconciliation(
    { db, pspx, log, publisher: new StatusPublisher(createMemoryBroker(), log) },
    { date: DATE, requestedBy: 'bench' },
  );
  const runS = (performance.now() - started) / 1000;
  clearInterval(sampler);
  peakRssMb = Math.max(peakRssMb, process.resourceUsage().maxRSS / 1024);
  await db.close();
  const round = (/** @type {number} */ x) => Math.round(x * 100) / 100;
  /** @type {ReconciliationBenchResult} */
  const result = {
    lines,
    seedS: round(seedS),
    runS: round(runS),
    stageS: round((phases.stageMs ?? 0) / 1000),
    matchS: round((phases.matchMs ?? 0) / 1000),
    nostroS: round((phases.nostroMs ?? 0) / 1000),
    transfers: 2 * lines,
    rssBeforeMb: round(rssBeforeMb),
    peakRssMb: round(peakRssMb),
    status: run.status,
    matched: run.matched,
    breakCount: run.breakCount,
  };
  console.log(JSON.stringify(result));
}

/** The phases of the run's log line, if this line is it. @param {string} line */
function pickPhases(line) {
  const entry = JSON.parse(line);
  return entry.event === 'reconciliation_run' ? { stageMs: entry.stageMs, matchMs: entry.matchMs, nostroMs: entry.nostroMs } : {};
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { lines: { type: 'string', default: '1000000' }, serve: { type: 'boolean' }, reconcile: { type: 'boolean' } },
  });
  const lines = Number(values.lines);
  if (!Number.isSafeInteger(lines) || lines < 20) throw new Error('--lines must be an integer of at least 20');
  if (values.serve) await serveStatement(lines);
  else if (values.reconcile) await reconcile(lines);
  else console.log(JSON.stringify(await benchReconciliation({ lines }), null, 2));
}
