// node bench/payouts.js [--payouts 2000] [--latency-ms N] [--baseline-root DIR --baseline-payouts 500]
// (or npm run bench -- --only payouts)
//
// PSPX payouts per second of one workers process (docs/PERFORMANCE.md): an `api` process on
// PostgreSQL (a database of its own, BENCH_DB + `_payouts`, dropped first) creates PAYOUTS payouts
// through HTTP while no worker runs; then one `workers` process with its default settings drives
// them against the standalone PSPX simulator (its default latency unless --latency-ms). The rate is
// taken from the audit trail: payouts that reached CONFIRMED (and SETTLED) over the span from the
// first QUERY_PENDING to the last of them, so process start and polling do not count.
// --baseline-root runs the same first with another checkout's build (its dist/ and bin/), for a
// same-run A/B. Figures compare only within one run on one machine.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { DEMO_CONFIG_FILE, readConfigFile, secretsOf } from '../dist/config.js';
import { signedHeaders } from '../dist/domain/auth/signing.js';
import { recreateBenchDatabase } from './fresh-database.js';

const here = fileURLToPath(new URL('..', import.meta.url));
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const DB_NAME = `${process.env.BENCH_DB ?? 'payorch_bench'}_payouts`;
if (!/^[a-z_][a-z0-9_]{0,62}$/.test(DB_NAME)) throw new Error('BENCH_DB must be a lower-case SQL identifier');
const SERVICE = 'wallet-api';
const SECRET = secretsOf(readConfigFile(DEMO_CONFIG_FILE)).get(SERVICE)?.[0] ?? '';
/** Payers, each with a PSPX wallet: payouts spread over them stay far below any per-user limit. */
const PAYERS = 50;
const FIRST_PAYER = 880_001;
const CREATE_CONCURRENCY = 16;
const PAYOUT_AMOUNT = 1_000;
const POLL_MS = 250;
const DRAIN_MS_MAX = 600_000;

/**
 * @typedef {object} PayoutsRun
 * @property {string} build the checkout whose processes ran
 * @property {number} payouts created and driven
 * @property {number} createdPerS creation through the api, for scale
 * @property {number} confirmedPerS payouts CONFIRMED at the provider per second by the one workers process
 * @property {number} settledPerS payouts SETTLED per second (the outbox after the provider)
 * @property {number} confirmSpanS first QUERY_PENDING to last CONFIRMED
 * @property {Record<string, number>} statuses final statuses
 */
/**
 * @typedef {object} PayoutsResult
 * @property {number} simulatorLatencyMs the simulator's delay per request
 * @property {number} workersProcesses always 1
 * @property {PayoutsRun} current
 * @property {PayoutsRun} [baseline]
 * @property {number} [ratio] current.confirmedPerS / baseline.confirmedPerS
 */

/** @param {number} ms */
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const round1 = (/** @type {number} */ x) => Math.round(x * 10) / 10;

/**
 * @param {{ payouts: number, latencyMs?: number, baselineRoot?: string, baselinePayouts?: number, log?: (...m: unknown[]) => void }} options
 * @returns {Promise<PayoutsResult>}
 */
export async function payoutsSection({ payouts, latencyMs, baselineRoot, baselinePayouts, log = console.error }) {
  /** @type {Set<import('node:child_process').ChildProcess>} */
  const children = new Set();
  try {
    const simPort = await freePort();
    const simulator = await startProcess(
      children,
      [join(here, 'dist/adapters/pspx/simulator-main.js')],
      { PSPX_SIM_PORT: String(simPort), PSPX_SIM_ADMIN: '1', PSPX_SIM_BALANCE: '100000000000' },
      /PSPX simulator listening on (http:\/\/[0-9.:]+)/,
    );
    const knobs = await fetch(`${simulator.url}/_sim/knobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(latencyMs === undefined ? {} : { delayMs: latencyMs }),
    });
    const simulatorLatencyMs = Number(/** @type {{ delayMs: number }} */ (await knobs.json()).delayMs);
    log(`payouts: PSPX simulator at ${simulator.url}, latency ${simulatorLatencyMs} ms per request`);
    /** @type {PayoutsResult} */
    const result = { simulatorLatencyMs, workersProcesses: 1, current: /** @type {PayoutsRun} */ (/** @type {unknown} */ (null)) };
    if (baselineRoot !== undefined) {
      result.baseline = await oneRun(children, baselineRoot, baselinePayouts ?? payouts, simulator.url, log);
    }
    result.current = await oneRun(children, here, payouts, simulator.url, log);
    if (result.baseline !== undefined) result.ratio = round1(result.current.confirmedPerS / result.baseline.confirmedPerS);
    return result;
  } finally {
    for (const child of children) child.kill('SIGTERM');
  }
}

/**
 * @param {Set<import('node:child_process').ChildProcess>} children
 * @param {string} root
 * @param {number} payouts
 * @param {string} pspxUrl
 * @param {(...m: unknown[]) => void} log
 * @returns {Promise<PayoutsRun>}
 */
async function oneRun(children, root, payouts, pspxUrl, log) {
  const databaseUrl = await recreateBenchDatabase(PG_ADMIN_URL, DB_NAME);
  const common = { DATABASE_URL: databaseUrl, PSPX_URL: pspxUrl, QR_SIGNING_SECRET: 'bench-payouts-qr', REDIS_URL: '', LOG_LEVEL: 'info' };
  const serve = [join(root, 'bin/payorch.js'), 'serve'];
  const api = await startProcess(
    children,
    serve,
    { ...common, PAYORCH_ROLE: 'api', PORT: '0' },
    /Server listening at (http:\/\/[0-9.:]+)/,
    true,
  );
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    for (let i = 0; i < PAYERS; i += 1) {
      const user = FIRST_PAYER + i;
      await call(api.url, 'POST', '/accounts', user, { userId: user, currency: 'THB' }, [200, 201]);
      await call(api.url, 'POST', '/accounts/register-ipps', user, { ...customer(user) }, [200, 201]);
      await call(
        api.url,
        'POST',
        '/intents',
        user,
        { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: 100_000_000 },
        [201],
      );
    }
    const createStarted = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CREATE_CONCURRENCY }, async () => {
        for (let n = next++; n < payouts; n = next++) {
          const user = FIRST_PAYER + (n % PAYERS);
          await call(
            api.url,
            'POST',
            '/intents',
            user,
            {
              idempotencyKey: randomUUID(),
              operationType: 'PSPX_WITHDRAWAL',
              amount: PAYOUT_AMOUNT,
              metadata: { ipps: { receiverType: 'MSISDN', receiverAccount: `08${String(10_000_000 + n)}` } },
            },
            [201],
          );
        }
      }),
    );
    const createdPerS = round1(payouts / ((performance.now() - createStarted) / 1000));
    log(`payouts (${root}): ${payouts} created at ${createdPerS}/s; one workers process drives them`);

    const workers = await startProcess(
      children,
      serve,
      { ...common, PAYORCH_ROLE: 'workers', PORT: '0' },
      /Server listening at (http:\/\/[0-9.:]+)/,
      true,
    );
    const drainStarted = Date.now();
    for (;;) {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM intents WHERE channel = 'PSPX_TRANSFER' AND status = 'AUTHORIZED'`);
      if (rows[0].n === 0) break;
      if (Date.now() - drainStarted > DRAIN_MS_MAX) throw new Error(`payouts still open after ${DRAIN_MS_MAX} ms`);
      await sleep(POLL_MS);
    }
    workers.stop();
    api.stop();
    const span = await db.query(
      `SELECT extract(epoch FROM max(e.created_at) FILTER (WHERE e.status_to = 'CONFIRMED') - min(e.created_at) FILTER (WHERE e.status_to = 'QUERY_PENDING'))::float8 AS confirm_s,
              extract(epoch FROM max(e.created_at) FILTER (WHERE e.status_to = 'SETTLED') - min(e.created_at) FILTER (WHERE e.status_to = 'QUERY_PENDING'))::float8 AS settle_s,
              count(*) FILTER (WHERE e.status_to = 'CONFIRMED')::int AS confirmed,
              count(*) FILTER (WHERE e.status_to = 'SETTLED')::int AS settled
         FROM intent_events e JOIN intents i ON i.id = e.intent_id WHERE i.channel = 'PSPX_TRANSFER'`,
    );
    const statuses = await db.query(`SELECT status, count(*)::int AS n FROM intents WHERE channel = 'PSPX_TRANSFER' GROUP BY status`);
    const { confirm_s: confirmS, settle_s: settleS, confirmed, settled } = span.rows[0];
    /** @type {PayoutsRun} */
    const run = {
      build: root,
      payouts,
      createdPerS,
      confirmedPerS: round1(confirmed / confirmS),
      settledPerS: round1(settled / settleS),
      confirmSpanS: round1(confirmS),
      statuses: Object.fromEntries(statuses.rows.map((row) => [row.status, row.n])),
    };
    log(`payouts (${root}): ${run.confirmedPerS} confirmed/s, ${run.settledPerS} settled/s per workers process`, run.statuses);
    return run;
  } finally {
    await db.end();
  }
}

/** @param {number} user */
const customer = (user) => ({
  externalUserId: `ext-${user}`,
  customerEnglishName: 'Somchai Jaidee',
  senderTaxId: '1101700203451',
  senderAccountName: 'Somchai Jaidee',
  documentExpiry: '2031-12-31',
  dateOfBirth: '1988-02-29',
  phoneNumber: '0812345678',
  nationality: 'TH',
  address: '99 Sukhumvit Road, Khlong Toei, Bangkok 10110',
});

/**
 * A signed request as the demo config's wallet-api; anything but `expected` statuses throws.
 * @param {string} url @param {string} method @param {string} path @param {number} user @param {unknown} body @param {number[]} expected
 */
async function call(url, method, path, user, body, expected) {
  const raw = JSON.stringify(body);
  const headers = { ...signedHeaders(SERVICE, SECRET, method, path, raw, { userId: user }), 'content-type': 'application/json' };
  const response = await fetch(`${url}${path}`, { method, headers, body: raw });
  if (!expected.includes(response.status)) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

/** @returns {Promise<number>} */
async function freePort() {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = /** @type {import('node:net').AddressInfo} */ (s.address());
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts a node process and answers once a line matches `ready` (its first group: the URL).
 * @param {Set<import('node:child_process').ChildProcess>} children
 * @param {string[]} argv
 * @param {Record<string, string>} env
 * @param {RegExp} ready
 * @param {boolean} [payorch] a payorch process: the demo configuration, HTTP on loopback
 * @returns {Promise<{ url: string, stop(): void }>}
 */
function startProcess(children, argv, env, ready, payorch = false) {
  /** @type {NodeJS.ProcessEnv} */
  const fullEnv = { ...process.env, ...(payorch ? { HOST: '127.0.0.1' } : {}), ...env };
  if (payorch) {
    delete fullEnv.CONFIG_FILE;
    delete fullEnv.NODE_ENV;
  }
  const child = spawn(process.execPath, argv, { env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return new Promise((resolve, reject) => {
    /** @type {string[]} */
    const lines = [];
    const timer = setTimeout(() => reject(new Error(`${argv.join(' ')} did not start:\n${lines.slice(-10).join('\n')}`)), 120_000);
    const onData = (/** @type {Buffer} */ chunk) => {
      for (const line of chunk.toString().split('\n')) {
        if (lines.length < 200) lines.push(line);
        const match = ready.exec(line);
        if (match?.[1] !== undefined) {
          clearTimeout(timer);
          resolve({ url: match[1], stop: () => child.kill('SIGTERM') });
        }
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${argv.join(' ')} exited ${code}:\n${lines.slice(-10).join('\n')}`)));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      payouts: { type: 'string', default: '2000' },
      'latency-ms': { type: 'string' },
      'baseline-root': { type: 'string' },
      'baseline-payouts': { type: 'string' },
    },
  });
  const result = await payoutsSection({
    payouts: Number(values.payouts),
    ...(values['latency-ms'] === undefined ? {} : { latencyMs: Number(values['latency-ms']) }),
    ...(values['baseline-root'] === undefined ? {} : { baselineRoot: values['baseline-root'] }),
    ...(values['baseline-payouts'] === undefined ? {} : { baselinePayouts: Number(values['baseline-payouts']) }),
  });
  console.log(JSON.stringify(result, null, 2));
}
