// The chaos run (`npm run chaos`, `npm run chaos -- --short` in CI): payorch as two processes, an
// `api` and a `workers`, on a PostgreSQL, Redis and NATS that the run starts for itself (chaos/infra.js),
// a standalone PSPX simulator, and a mixed workload of signed requests (half with a nonce, the
// client's default, half without) from clients that send every 5xx or unanswered request again
// with the same idempotency key. Faults come one scenario at a time: PostgreSQL stopped (fast,
// immediate), SIGKILLed and out for 30 s; Redis down for 30 s; the workers SIGKILLed with payouts
// leased; the api SIGKILLed; the provider slowed and failing. Each scenario is judged on its own
// (docs/RELIABILITY.md, "The chaos run"); afterwards every intent must be final, the audit clean,
// no confirm sent twice, every final status delivered by webhook. Exits 1 on any violation.
//
// Plain ESM over the built dist/ (npm run chaos builds first).

import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createSigner } from '@payorch/client';
import pg from 'pg';
import { openDatabase } from '../dist/adapters/database.js';
import { DEMO_CONFIG_FILE, readConfigFile, secretsOf } from '../dist/config.js';
import { formatViolation, runAudit } from '../dist/domain/audit/audit.js';
import { FINAL_STATUSES } from '../dist/domain/model.js';
import { signedHeaders } from '../dist/domain/auth/signing.js';
import { ledgerAccountId } from '../dist/ledger/account-id.js';
import { freePort, privateNats, privatePostgres, privateRedis } from './infra.js';
import { startWebhookReceiver } from './webhook-receiver.js';

/** @typedef {{ child: import('node:child_process').ChildProcess, exited: Promise<number | NodeJS.Signals | null>, match: RegExpExecArray }} Started */
/** @typedef {{ status: number, body: Record<string, unknown>, retryAfter: string | null }} Answer */
/** @typedef {[name: string, weight: number, run: (user: number) => Promise<unknown>]} Operation */
/**
 * One idempotency key and every answer it got, in order.
 * @typedef {{
 *   kind: 'intent' | 'refund' | 'confirm',
 *   scenario: Scenario,
 *   serviceId: string,
 *   user: number,
 *   path: string,
 *   body: Record<string, unknown>,
 *   payout: boolean,
 *   original?: { id: string, amount: number },
 *   answers: { status: number, code: string, id: string | null, state: string | null, amount: number | null }[],
 * }} KeyRecord
 */
/**
 * What the simulator's GET /_sim/stats answers (src/adapters/pspx/pspx-simulator.ts).
 * @typedef {{
 *   stats: import('../dist/adapters/pspx/pspx-simulator.js').SimulatorStats,
 *   balance: string,
 *   payouts: ReturnType<import('../dist/adapters/pspx/pspx-simulator.js').PspxSimulator['payoutReport']>,
 * }} SimulatorReport
 */
/** @typedef {{ ok: number, refused: number, msList: number[] }} Served */
/**
 * One fault and what it did.
 * @typedef {{
 *   name: string,
 *   kind: 'database' | 'redis' | 'workers' | 'api' | 'provider',
 *   fault: () => Promise<void>,
 *   faultAt: number,
 *   backAt: number,
 *   requests: number,
 *   answers: Record<string, number>,
 *   unreachable: number,
 *   errors500InFault: number,
 *   internalErrors: number,
 *   without503RetryAfter: number,
 *   servingAgainMs: number | null,
 *   nonce: Served,
 *   plain: Served,
 *   leasedAtFault: number,
 *   inflightIds: string[],
 *   leasedIds: Set<string>,
 *   leasedFinalMsMax: number | null,
 *   inflight: number | null,
 *   inflightFinalMsMax: number | null,
 *   inflightLate: number,
 *   audit: string,
 *   keys: number,
 *   lost: number,
 *   contradicted: number,
 *   missing: number,
 *   notFinal: number,
 *   reviewNotReceived: number,
 *   overRefunded: number,
 *   refunds: number,
 *   violations: string[],
 * }} Scenario
 */

const root = fileURLToPath(new URL('../', import.meta.url));
const { values: args } = parseArgs({
  options: {
    short: { type: 'boolean', default: false },
    clients: { type: 'string' },
    only: { type: 'string' },
    'no-docs': { type: 'boolean', default: false },
    'keep-logs': { type: 'boolean', default: false },
  },
});

// ---------------------------------------------------------------------------------------------
// Limits (units last)

const SHORT = args.short;
const CLIENTS = Number(args.clients ?? (SHORT ? 4 : 8));
/** Load before each fault, so that there is something in flight when it strikes. */
const PRE_FAULT_MS = SHORT ? 3_000 : 8_000;
/** Load after the fault has ended, at least. */
const POST_FAULT_MS = SHORT ? 4_000 : 10_000;
/** How long PostgreSQL stays away after a fast or immediate stop, and Redis and PostgreSQL in their outages. */
const BLIP_MS = SHORT ? 1_000 : 3_000;
const OUTAGE_MS = SHORT ? 8_000 : 30_000;
/** The api's and the workers' restart after a SIGKILL comes this long after it. */
const RESTART_PAUSE_MS = 1_000;
/** docs/rules.md R65 and R66: in-flight payouts are final this soon after the database's return or a workers restart. */
const INFLIGHT_FINAL_MS_MAX = 5_000;
/** In-flight payouts are watched this long, beyond the default 30 s lease, so that the figure says how late they were. */
const INFLIGHT_WATCH_MS_MAX = 45_000;
/** The database and workers faults wait at most this long for a payout to be leased. */
const LEASE_WAIT_MS_MAX = 10_000;
/** The provider answers this slowly before the workers SIGKILL, so that confirms are in the air when it strikes. */
const PROVIDER_DELAY_BEFORE_KILL_MS = 1_500;
const PROVIDER_FAULT_MS = 6_000;
/** A 500 answered this soon after the database's return still counts as answered during the outage. */
const OUTAGE_GRACE_MS = 5_000;
const NONCE_SHARE = 0.5;
/** A key is sent again after a 5xx or no answer, after a short pause, for at most this long. */
const KEY_RETRY_MS_MAX = 180_000;
/** @type {[min: number, max: number]} */
const RETRY_PAUSE_MS = [100, 400];
const STARTUP_MS_MAX = 90_000;
const REQUEST_TIMEOUT_MS = 15_000;
/** After the workload, the workers are judged stuck when no intent has become final for this long. */
const QUIET_MS_MAX = 120_000;
const WEBHOOK_REFUSED_SHARE = 0.1;
const WEBHOOK_SETTLE_MS_MAX = 120_000;
const API_SPOT_CHECKS = 200;
const AUDIT_WAIT_MS_MAX = 30_000;
const LIVENESS_TIMEOUT_MS = 5_000;
const USERS = Array.from({ length: 12 }, (_, i) => 9001 + i);
const MERCHANT = 9100;
const SERVICE_ACCOUNT_USER = 900001;
const TOP_UP = 50_000_000;
const DATABASE = 'payorch_chaos';
const RECENT_MAX = 200;
const QUERY_ATTEMPTS_MAX = 5;
// payorch runs with NODE_ENV=production here, which refuses short secrets and the demo's public ones.
const ADMIN_TOKEN = randomBytes(24).toString('base64url');
const QR_SIGNING_SECRET = randomBytes(24).toString('base64url');
const METRICS_TOKEN = randomBytes(24).toString('base64url');
/** @type {ReadonlySet<string | null>} */
const FINAL = new Set(FINAL_STATUSES);
const FINAL_LIST = [...FINAL_STATUSES];

const workDir = await mkdtemp(join(tmpdir(), 'payorch-chaos-'));
const demoConfig = readConfigFile(DEMO_CONFIG_FILE);
const configFile = join(workDir, 'config.json');
const chaosSecrets = Object.fromEntries(Object.keys(demoConfig.secrets).map((id) => [id, randomBytes(24).toString('base64url')]));
/** @type {Map<string, readonly string[]>} */
let secrets = new Map();
const webhooks = await startWebhookReceiver((serviceId) => secrets.get(serviceId)?.[0], WEBHOOK_REFUSED_SHARE);
await writeFile(
  configFile,
  JSON.stringify({
    ...demoConfig,
    secrets: chaosSecrets,
    serviceKeys: demoConfig.serviceKeys.map((key) => ({
      ...key,
      permissions: { ...key.permissions, webhook: { url: webhooks.urlFor(key.serviceId) } },
    })),
  }),
);
secrets = secretsOf(readConfigFile(configFile));
/** @param {string} service */
const secretOf = (service) => secrets.get(service)?.[0] ?? '';
/** @type {Map<string, import('@payorch/client').RequestSigner>} */
const signers = new Map();
/** @param {string} service */
function signerOf(service) {
  let signer = signers.get(service);
  if (signer === undefined) {
    signer = createSigner(service, secretOf(service), 'message');
    signers.set(service, signer);
  }
  return signer;
}

const totals = {
  requests: 0,
  nonceSigned: 0,
  manualReviewResolved: 0,
  confirmsSent: 0,
  duplicateConfirms: 0,
  paidMismatches: 0,
  notFinal: 0,
  apiMismatches: 0,
  overRefundedInDatabase: 0,
  settleS: 0,
  violations: 0,
  webhookFinalMissing: 0,
  webhookOutOfOrder: 0,
  webhookRefundMissing: 0,
  /** @type {Record<string, number>} */
  byStatus: {},
  intents: 0,
  refunds: 0,
};

// ---------------------------------------------------------------------------------------------
// Processes

/** @type {Awaited<ReturnType<typeof privatePostgres>> | null} */
let postgresServer = null;
/** @type {Awaited<ReturnType<typeof privateRedis>> | null} */
let redisServer = null;
/** @type {Awaited<ReturnType<typeof privateNats>> | null} */
let natsServer = null;
/** @template T @param {T | null} server @returns {T} */
const up = (server) => {
  if (server === null) throw new Error('the private services are not started');
  return server;
};
const postgres = () => up(postgresServer);
const redis = () => up(redisServer);
let databaseUrl = '';
/** @type {pg.Pool | null} The run's own reads of the database (statuses, leases), never while it is down. */
let readPool = null;

/**
 * A read of the run's own; retried a few times, since a connection the pool kept from before a
 * restart of the database fails once.
 * @param {string} text
 * @param {unknown[]} [values]
 */
async function query(text, values = []) {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await up(readPool).query(text, values);
    } catch (error) {
      if (attempt >= QUERY_ATTEMPTS_MAX) throw error;
      await sleep(200);
    }
  }
}

async function startServices() {
  postgresServer = await privatePostgres(workDir);
  redisServer = await privateRedis(workDir);
  natsServer = await privateNats(workDir);
  databaseUrl = postgresServer.url(DATABASE);
  readPool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  // An idle client's connection dies with the server it was on: the pool drops it, nothing else to do.
  readPool.on('error', () => {});
}

/**
 * Spawns a node process and resolves with its child once a line matches `ready`.
 * @param {string} name
 * @param {string} file
 * @param {readonly string[]} argv
 * @param {Record<string, string>} env
 * @param {RegExp} ready
 * @returns {Promise<Started>}
 */
function startProcess(name, file, argv, env, ready) {
  const logFile = join(workDir, `${name}.log`);
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(process.execPath, [file, ...argv], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start (log: ${logFile})`)), STARTUP_MS_MAX);
    let buffered = '';
    /** @param {Buffer} chunk */
    const onData = (chunk) => {
      log.write(chunk);
      buffered += chunk.toString();
      const match = ready.exec(buffered);
      if (match !== null) {
        clearTimeout(timer);
        buffered = '';
        child.stdout.off('data', onData);
        child.stdout.on('data', (c) => log.write(c));
        resolve({ child, exited, match });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (c) => log.write(c));
    exited.then((code) => reject(new Error(`${name} exited (${code}) before it was ready (log: ${logFile})`)));
  });
}

let simulatorUrl = '';
/** @type {import('node:child_process').ChildProcess | null} */
let simulatorChild = null;
async function startSimulator() {
  const { child, match } = await startProcess(
    'pspx-simulator',
    'dist/adapters/pspx/simulator-main.js',
    [],
    {
      PSPX_SIM_PORT: '0',
      PSPX_SIM_ADMIN: '1',
      // Held confirms outlast the client's 3000 ms time-out: 9997 and 9998 really time out.
      PSPX_SIM_CONFIRM_HOLD_MS: '3500',
      PSPX_SIM_BALANCE: '100000000000',
    },
    /listening on (http:\/\/\S+)/,
  );
  simulatorUrl = match[1] ?? '';
  simulatorChild = child;
}

/**
 * @param {string} method
 * @param {string} path
 * @param {object} [body]
 * @returns {Promise<unknown>}
 */
async function simulator(method, path, body) {
  const response = await fetch(`${simulatorUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  return response.json();
}

/** @returns {Promise<SimulatorReport>} */
async function simulatorReport() {
  // The simulator is ours: its answer has the shape SimulatorReport takes from its source.
  return /** @type {SimulatorReport} */ (await simulator('GET', '/_sim/stats'));
}

/** @type {{ api: Started | null, workers: Started | null }} */
const processes = { api: null, workers: null };
const ports = { api: 0, workers: 0 };
let serviceUrl = '';

/**
 * One payorch process of a role (docs/SCALING.md): the api serves the workload, the workers move
 * payouts, the outbox and the webhooks. Defaults everywhere that matters to the faults: the PSP
 * lease stays at its 30 s, so that a restarted workers process shows whether it waits it out.
 * @param {'api' | 'workers'} role
 */
async function startRole(role) {
  processes[role] = await startProcess(
    role,
    'bin/payorch.js',
    ['serve'],
    {
      PAYORCH_ROLE: role,
      PORT: String(ports[role]),
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl,
      REDIS_URL: redis().url,
      NATS_URL: up(natsServer).url,
      PSPX_URL: simulatorUrl,
      CONFIG_FILE: configFile,
      ADMIN_TOKEN,
      QR_SIGNING_SECRET,
      METRICS_TOKEN,
      NODE_ENV: 'production',
      // info: the listening line is how the run knows the process is up.
      LOG_LEVEL: 'info',
      PSP_WORKER_INTERVAL_MS: '100',
      OUTBOX_INTERVAL_MS: '100',
      EXPIRY_SWEEP_INTERVAL_MS: '1000',
      BALANCE_MONITOR_INTERVAL_MS: '5000',
      PSP_MAX_INQUIRIES: '3',
      // Startup reconciliation fails internal intents left half-done by a kill; short here so it acts within the run.
      RECONCILE_AGE_S: '5',
      WEBHOOK_RETRY_BASE_MS: '200',
    },
    /"msg":"Server listening at (http:\/\/127\.0\.0\.1:\d+)"/,
  );
  const { child, exited } = processes[role];
  // A process that ends by itself leaves no other trace in the figures: its payouts just stall.
  void exited.then((code) => {
    if (!killedByRun.has(child)) console.log(`  ${role} exited by itself (${code}) at ${new Date().toISOString()}`);
  });
}

/** @type {WeakSet<import('node:child_process').ChildProcess>} The processes the run killed itself. */
const killedByRun = new WeakSet();

/** @param {'api' | 'workers'} role */
async function killRole(role) {
  const started = processes[role];
  if (started === null) return;
  killedByRun.add(started.child);
  started.child.kill('SIGKILL');
  await started.exited;
  processes[role] = null;
}

/**
 * Whether the workers process answers its liveness probe: one that stalls without exiting (its
 * event loop held) is told apart from one that is merely slow to move payouts.
 */
async function workersAnswer() {
  try {
    const response = await fetch(`http://127.0.0.1:${ports.workers}/livez`, { signal: AbortSignal.timeout(LIVENESS_TIMEOUT_MS) });
    return response.ok ? 'answers /livez' : `answers /livez ${response.status}`;
  } catch {
    return `does not answer /livez within ${LIVENESS_TIMEOUT_MS / 1000} s`;
  }
}

// ---------------------------------------------------------------------------------------------
// Scenarios: what each fault does; the checks come after the workload

/**
 * @param {string} name
 * @param {Scenario['kind']} kind
 * @param {() => Promise<void>} fault
 * @returns {Scenario}
 */
function scenario(name, kind, fault) {
  return {
    name,
    kind,
    fault,
    faultAt: 0,
    backAt: 0,
    requests: 0,
    answers: {},
    unreachable: 0,
    errors500InFault: 0,
    internalErrors: 0,
    without503RetryAfter: 0,
    servingAgainMs: null,
    nonce: { ok: 0, refused: 0, msList: [] },
    plain: { ok: 0, refused: 0, msList: [] },
    leasedAtFault: 0,
    inflightIds: [],
    leasedIds: new Set(),
    leasedFinalMsMax: null,
    inflight: null,
    inflightFinalMsMax: null,
    inflightLate: 0,
    audit: 'not run',
    keys: 0,
    lost: 0,
    contradicted: 0,
    missing: 0,
    notFinal: 0,
    reviewNotReceived: 0,
    overRefunded: 0,
    refunds: 0,
    violations: [],
  };
}

/** @type {Scenario | null} Set while a scenario runs; faultAt and backAt are set by its fault. */
let active = null;
/** @returns {Scenario} */
const current = () => {
  if (active === null) throw new Error('no scenario is running');
  return active;
};
/**
 * Payouts in flight when the fault strikes: not final, created before it. The simulator's held
 * confirms (9997, 9998) are left out: their provider answers after 3.5 s by design.
 */
async function faultBegins() {
  const s = current();
  const { rows } = await query(
    `SELECT id, psp_lease_until > now() AS leased FROM intents
      WHERE channel = 'PSPX_TRANSFER' AND status <> ALL($1::text[]) AND status <> 'MANUAL_REVIEW'
        AND coalesce(metadata->'ipps'->>'receiverAccount', '') !~ '999[78]$'`,
    [FINAL_LIST],
  );
  s.inflightIds = rows.map((row) => String(row.id));
  s.leasedIds = new Set(rows.filter((row) => row.leased === true).map((row) => String(row.id)));
  s.leasedAtFault = s.leasedIds.size;
  s.faultAt = Date.now();
}
const faultEnds = () => {
  current().backAt = Date.now();
};

/** Waits, for a bounded time, until a workers process holds a payout: a fault then strikes one in its hands. */
async function leasedPayout() {
  const deadline = Date.now() + LEASE_WAIT_MS_MAX;
  while (Date.now() < deadline) {
    const { rows } = await query("SELECT count(*) AS n FROM intents WHERE status = 'AUTHORIZED' AND psp_lease_until > now()");
    if (Number(rows[0]?.n ?? 0) > 0) return;
    await sleep(50);
  }
}

/**
 * @param {() => Promise<unknown>} stop
 * @param {number} downMs
 */
async function databaseDown(stop, downMs) {
  await leasedPayout();
  await faultBegins();
  await stop();
  await sleep(downMs);
  await postgres().start();
  faultEnds();
}

async function redisDown() {
  await faultBegins();
  await redis().stop();
  await sleep(OUTAGE_MS);
  await redis().start();
  faultEnds();
}

/** SIGKILL while the provider is slow, so that confirms are in the air and their payouts leased. */
async function killWorkersWithLeases() {
  await simulator('POST', '/_sim/knobs', { delayMs: PROVIDER_DELAY_BEFORE_KILL_MS });
  await leasedPayout();
  await faultBegins();
  await killRole('workers');
  await simulator('POST', '/_sim/knobs', { delayMs: 0 });
  await sleep(RESTART_PAUSE_MS);
  await startRole('workers');
  faultEnds();
}

async function killApi() {
  await faultBegins();
  await killRole('api');
  await sleep(RESTART_PAUSE_MS);
  await startRole('api');
  faultEnds();
}

async function providerFaults() {
  await faultBegins();
  await simulator('POST', '/_sim/knobs', { delayMs: 2_000 });
  await sleep(PROVIDER_FAULT_MS);
  await simulator('POST', '/_sim/knobs', { delayMs: 0, failureRate: 0.5 });
  await sleep(PROVIDER_FAULT_MS);
  await simulator('POST', '/_sim/knobs', { failureRate: 0, failNext: 10 });
  faultEnds();
}

const outageS = OUTAGE_MS / 1000;
const ALL_SCENARIOS = [
  scenario('pg-fast', 'database', () => databaseDown(() => postgres().stop('fast'), BLIP_MS)),
  scenario('pg-immediate', 'database', () => databaseDown(() => postgres().stop('immediate'), BLIP_MS)),
  scenario('pg-sigkill', 'database', () => databaseDown(() => postgres().kill(), 0)),
  scenario(`pg-outage-${outageS}s`, 'database', () => databaseDown(() => postgres().stop('fast'), OUTAGE_MS)),
  scenario(`redis-down-${outageS}s`, 'redis', redisDown),
  scenario('workers-sigkill', 'workers', killWorkersWithLeases),
  scenario('api-sigkill', 'api', killApi),
  scenario('provider-slow-failing', 'provider', providerFaults),
];
const SHORT_SCENARIOS = new Set(['pg-immediate', 'pg-sigkill', `pg-outage-${outageS}s`, `redis-down-${outageS}s`, 'workers-sigkill']);
const only = args.only === undefined ? null : new Set(args.only.split(','));
for (const name of only ?? []) {
  if (!ALL_SCENARIOS.some((s) => s.name === name))
    throw new Error(`--only: no scenario ${name} (${ALL_SCENARIOS.map((s) => s.name).join(', ')})`);
}
const SCENARIOS = ALL_SCENARIOS.filter((s) => (only === null ? !SHORT || SHORT_SCENARIOS.has(s.name) : only.has(s.name)));

// ---------------------------------------------------------------------------------------------
// Requests

/** Workload requests are counted in the figures; the verification's polling is not. */
let counting = true;

/**
 * @param {string} method
 * @param {string} path
 * @param {{ service?: string | undefined, user?: number, body?: object, admin?: boolean, nonce?: boolean }} [options]
 * @returns {Promise<Answer>}
 */
async function call(method, path, { service: serviceId = 'wallet-api', user, body, admin = false, nonce = false } = {}) {
  const raw = body === undefined ? '' : JSON.stringify(body);
  const userOption = user === undefined ? {} : { userId: user };
  /** @type {Record<string, string>} */
  const headers = admin
    ? { authorization: `Bearer ${ADMIN_TOKEN}` }
    : nonce
      ? await signerOf(serviceId).sign(method, path, raw, userOption)
      : signedHeaders(serviceId, secretOf(serviceId), method, path, raw, userOption);
  if (raw !== '') headers['content-type'] = 'application/json';
  const counted = counting && !admin ? active : null;
  const sentAt = Date.now();
  /** @type {Answer} */
  let answer;
  try {
    const response = await fetch(`${serviceUrl}${path}`, {
      method,
      headers,
      ...(raw === '' ? {} : { body: raw }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    answer = { status: response.status, body: safeJson(await response.text()), retryAfter: response.headers.get('retry-after') };
  } catch {
    answer = { status: 0, body: {}, retryAfter: null };
  }
  if (counted !== null) countAnswer(counted, { method, path, nonce, sentAt, answer });
  return answer;
}

/**
 * @param {Scenario} s
 * @param {{ method: string, path: string, nonce: boolean, sentAt: number, answer: Answer }} request
 */
function countAnswer(s, { method, path, nonce, sentAt, answer }) {
  const answeredAt = Date.now();
  const { status } = answer;
  const code = typeof answer.body.error === 'string' ? answer.body.error : '';
  totals.requests += 1;
  if (nonce) totals.nonceSigned += 1;
  s.requests += 1;
  if (status === 0) s.unreachable += 1;
  else {
    const label = status >= 400 ? `${status} ${code}`.trim() : String(status);
    s.answers[label] = (s.answers[label] ?? 0) + 1;
  }
  const inFault = s.faultAt > 0 && answeredAt >= s.faultAt && (s.backAt === 0 || answeredAt <= s.backAt);
  if (
    status === 500 &&
    s.kind === 'database' &&
    s.faultAt > 0 &&
    answeredAt >= s.faultAt &&
    (s.backAt === 0 || answeredAt <= s.backAt + OUTAGE_GRACE_MS)
  )
    s.errors500InFault += 1;
  if (status === 500 && code === 'INTERNAL_ERROR') s.internalErrors += 1;
  if (status === 503 && answer.retryAfter === null) s.without503RetryAfter += 1;
  if (s.backAt > 0 && sentAt >= s.backAt && s.servingAgainMs === null && status >= 200 && status < 300)
    s.servingAgainMs = answeredAt - s.backAt;
  if (inFault && s.kind === 'redis' && method === 'POST' && path === '/intents') {
    const served = nonce ? s.nonce : s.plain;
    if (status >= 200 && status < 300) served.ok += 1;
    if (status === 503) served.refused += 1;
    served.msList.push(answeredAt - sentAt);
  }
}

/**
 * @param {string} text
 * @returns {Record<string, unknown>}
 */
function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}

/** @param {Answer} res */
const isRetryable = (res) =>
  res.status === 0 || res.status >= 500 || res.status === 429 || (res.status === 409 && res.body.error === 'TRANSACTION_IN_PROGRESS');

/** @type {Map<string, KeyRecord>} Every idempotency key the workload sent, with its answers. */
const keys = new Map();

/**
 * @param {KeyRecord['kind']} kind
 * @param {string} serviceId
 * @param {number} user
 * @param {string} path
 * @param {Record<string, unknown>} body with a fresh idempotencyKey
 * @param {Partial<Pick<KeyRecord, 'payout' | 'original'>>} [extra]
 * @returns {KeyRecord}
 */
function newKey(kind, serviceId, user, path, body, extra = {}) {
  /** @type {KeyRecord} */
  const record = { kind, scenario: current(), serviceId, user, path, body, payout: false, answers: [], ...extra };
  keys.set(String(body.idempotencyKey), record);
  return record;
}

/**
 * The retrying client: the same request with the same key after every 5xx, 429, unanswered
 * request or R22's 409 TRANSACTION_IN_PROGRESS, until a final answer. Each attempt is signed
 * afresh, half of them with a nonce.
 * @param {KeyRecord} record
 * @returns {Promise<Answer>}
 */
async function send(record) {
  const deadline = Date.now() + KEY_RETRY_MS_MAX;
  for (;;) {
    const res = await call('POST', record.path, {
      service: record.serviceId,
      user: record.user,
      body: record.body,
      nonce: Math.random() < NONCE_SHARE,
    });
    const id = record.kind === 'refund' ? res.body.refundId : res.body.intentId;
    record.answers.push({
      status: res.status,
      code: typeof res.body.error === 'string' ? res.body.error : '',
      id: typeof id === 'string' ? id : null,
      state: typeof res.body.status === 'string' ? res.body.status : null,
      amount: typeof res.body.amount === 'string' || typeof res.body.amount === 'number' ? Number(res.body.amount) : null,
    });
    if (!isRetryable(res) || Date.now() > deadline) return res;
    await sleep(RETRY_PAUSE_MS[0] + Math.random() * (RETRY_PAUSE_MS[1] - RETRY_PAUSE_MS[0]));
  }
}

/**
 * @template T
 * @param {readonly T[]} list
 * @returns {T}
 */
const pick = (list) => {
  const item = list[Math.floor(Math.random() * list.length)];
  if (item === undefined) throw new Error('pick: the list is empty');
  return item;
};
const amount = () => 100 + Math.floor(Math.random() * 20_000);
/** @param {number} user */
const otherThan = (user) => pick(USERS.filter((u) => u !== user));
/**
 * @template T
 * @param {T[]} list
 * @param {T} item
 */
const keepRecent = (list, item) => {
  list.push(item);
  if (list.length > RECENT_MAX) list.shift();
};

/** @type {KeyRecord[]} Recent intent keys, for replays. */
const recent = [];
/** @type {string[]} */
const openInvoices = [];
/** @type {{ id: string, amount: number }[]} Recent settled P2P payments, refunded by the refund operations (docs/rules.md R57). */
const settledPayments = [];

/**
 * @param {string} serviceId
 * @param {number} user
 * @param {Record<string, unknown>} body
 * @param {boolean} [payout]
 */
async function intent(serviceId, user, body, payout = false) {
  const record = newKey('intent', serviceId, user, '/intents', { idempotencyKey: randomUUID(), ...body }, { payout });
  keepRecent(recent, record);
  return send(record);
}

/**
 * A part of a recent payment back to its payer: 201, or 422 once it is all refunded or the payee spent it.
 * @param {{ id: string, amount: number }} original
 * @param {number} refundAmount
 */
function refund(original, refundAmount) {
  const body = { idempotencyKey: randomUUID(), amount: refundAmount, reason: 'chaos' };
  return send(newKey('refund', 'wallet-api', 1, `/intents/${original.id}/refunds`, body, { original }));
}

/** Two to four refunds of 40–60 % each of one payment at once: the remainder check must hold them to the payment. */
async function refundRace() {
  if (settledPayments.length === 0) return;
  const original = pick(settledPayments);
  const racers = 2 + Math.floor(Math.random() * 3);
  await Promise.all(
    Array.from({ length: racers }, () => refund(original, Math.max(1, Math.floor(original.amount * (0.4 + Math.random() * 0.2))))),
  );
}

/**
 * The simulator's outcome by the receiver's last digits (docs/rules.md, Simulator outcomes). Time-outs (9997, 9998) are
 * the rare case, as with a real provider: each holds a confirm for 3.5 s, and five in a row open
 * the client's circuit breaker for everyone.
 */
function receiverEnding() {
  const r = Math.random();
  if (r < 0.1) return '9999';
  if (r < 0.14) return '9998';
  if (r < 0.18) return '9997';
  return pick(['1234', '5678', '0001']);
}

/** @type {[Operation, ...Operation[]]} One operation of the mixed workload: [name, weight, run]. */
const OPERATIONS = [
  [
    'p2p',
    8,
    async (u) => {
      const paid = amount();
      const res = await intent('wallet-api', u, { operationType: 'P2P_TRANSFER', amount: paid, recipientUserId: otherThan(u) });
      if (res.status === 201 && res.body.status === 'SETTLED' && typeof res.body.intentId === 'string')
        keepRecent(settledPayments, { id: res.body.intentId, amount: paid });
      return res;
    },
  ],
  [
    'refund',
    2,
    async () => {
      if (settledPayments.length === 0) return;
      const original = pick(settledPayments);
      await refund(original, 1 + Math.floor(Math.random() * Math.ceil(original.amount / 3)));
    },
  ],
  ['refund-race', 1, () => refundRace()],
  ['topup', 3, (u) => intent('wallet-api', u, { operationType: 'QP_TOPUP', amount: amount() })],
  [
    'withdrawal',
    2,
    (u) => intent('wallet-api', u, { operationType: 'WITHDRAWAL', amount: amount(), externalRef: `wd-${randomUUID().slice(0, 8)}` }),
  ],
  [
    'miniapp-charge',
    2,
    (u) =>
      intent('wallet-api', MERCHANT, {
        operationType: 'MINIAPP_CHARGE',
        amount: amount(),
        metadata: { customerUserId: u, merchantId: MERCHANT },
      }),
  ],
  [
    'miniapp-credit',
    1,
    (u) =>
      intent('wallet-api', MERCHANT, {
        operationType: 'MINIAPP_CREDIT',
        amount: 100,
        metadata: { customerUserId: u, merchantId: MERCHANT },
      }),
  ],
  [
    'service-deposit',
    1,
    (u) =>
      intent('exchange', SERVICE_ACCOUNT_USER, {
        operationType: 'SERVICE_DEPOSIT',
        amount: 100,
        fromAccountName: `service.${SERVICE_ACCOUNT_USER}.THB`,
        metadata: { recipientUserId: u },
      }),
  ],
  [
    'admin-transfer',
    1,
    (u) =>
      intent('admin-panel', 0, {
        operationType: 'ADMIN_TRANSFER',
        amount: amount(),
        fromAccountName: 'system.equity.THB',
        toAccountName: `user.${u}.THB`,
      }),
  ],
  [
    'nfc-charge',
    1,
    (u) =>
      intent('nfc-terminal', u, {
        operationType: 'NFC_CHARGE',
        amount: 100,
        fromAccountName: `user.${u}.THB`,
        toAccountName: `merchant.${MERCHANT}.THB`,
        metadata: { nfcTagId: 42 },
      }),
  ],
  [
    'payout',
    5,
    (u) =>
      intent(
        'wallet-api',
        u,
        {
          operationType: pick(['PSPX_WITHDRAWAL', 'THAI_QR_PAY']),
          amount: amount(),
          metadata: { ipps: { receiverType: 'MSISDN', receiverAccount: `08${pick(['1000', '2000', '3000'])}${receiverEnding()}` } },
        },
        true,
      ),
  ],
  ['invoice', 3, () => issueInvoice()],
  ['confirm', 3, (u) => confirmInvoice(u)],
  ['cancel', 1, () => cancelInvoice()],
  ['replay', 2, () => replay()],
  ['duplicate', 2, (u) => duplicate(u)],
];
const WEIGHT_TOTAL = OPERATIONS.reduce((sum, [, weight]) => sum + weight, 0);
function drawOperation() {
  let r = Math.random() * WEIGHT_TOTAL;
  for (const operation of OPERATIONS) {
    r -= operation[1];
    if (r < 0) return operation;
  }
  return OPERATIONS[0];
}

async function issueInvoice() {
  // Short lives, so that some invoices expire within the run.
  const ttlSeconds = pick([3, 5, 30, 60]);
  const res = await intent('wallet-api', MERCHANT, {
    operationType: 'INVOICE_PAYMENT',
    amount: amount(),
    toLedgerAccountId: ledgerAccountId(`merchant.${MERCHANT}.THB`),
    metadata: { ttlSeconds },
  });
  if (res.status === 201 && typeof res.body.intentId === 'string') openInvoices.push(res.body.intentId);
}

/** @param {number} payer */
async function confirmInvoice(payer) {
  const id = openInvoices.shift();
  if (id === undefined) return issueInvoice();
  const body = { payerLedgerAccountId: ledgerAccountId(`user.${payer}.THB`), payerUserId: payer, idempotencyKey: randomUUID() };
  const record = newKey('confirm', 'wallet-api', payer, `/intents/${id}/confirm`, body);
  // Half the confirms race a copy of themselves.
  if (Math.random() < 0.5) await Promise.all([send(record), send(record)]);
  else await send(record);
}

async function cancelInvoice() {
  const id = openInvoices.shift();
  if (id === undefined) return issueInvoice();
  await call('POST', `/intents/${id}/cancel`, { user: MERCHANT, body: { reason: 'chaos' }, nonce: Math.random() < NONCE_SHARE });
}

async function replay() {
  if (recent.length === 0) return;
  await send(pick(recent));
}

/** @param {number} user */
async function duplicate(user) {
  const body = { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: amount(), recipientUserId: otherThan(user) };
  const record = newKey('intent', 'wallet-api', user, '/intents', body);
  keepRecent(recent, record);
  await Promise.all([send(record), send(record)]);
}

let loadRunning = true;
async function client() {
  while (loadRunning) {
    const [, , run] = drawOperation();
    await run(pick(USERS));
    await sleep(5 + Math.random() * 20);
  }
}

// ---------------------------------------------------------------------------------------------
// During a scenario: in-flight payouts after the fault, the audit at its end

/**
 * How long after the database's return or the workers' restart each payout in flight at the
 * fault became final (its updated_at); MANUAL_REVIEW counts as an end here and is judged apart.
 * @param {Scenario} s
 */
async function watchInflight(s) {
  const ids = s.inflightIds;
  s.inflight = ids.length;
  if (ids.length === 0) return;
  const deadline = s.backAt + INFLIGHT_WATCH_MS_MAX;
  /** @type {Map<string, number>} */
  const endedAt = new Map();
  while (endedAt.size < ids.length && Date.now() < deadline) {
    await sleep(250);
    const done = await query(
      `SELECT id, updated_at FROM intents WHERE id = ANY($1::uuid[]) AND (status = ANY($2::text[]) OR status = 'MANUAL_REVIEW')`,
      [ids, FINAL_LIST],
    );
    for (const row of done.rows) endedAt.set(String(row.id), new Date(row.updated_at).getTime());
  }
  /** @param {string[]} some @returns {number | null} null when one of them did not end within the watch */
  const slowest = (some) => {
    const latencies = some.map((id) => (endedAt.get(id) ?? Number.POSITIVE_INFINITY) - s.backAt);
    return latencies.some((ms) => !Number.isFinite(ms)) ? null : Math.max(0, ...latencies);
  };
  s.inflightFinalMsMax = slowest(ids);
  // The leased ones apart: they show a lease waited out, the others a backlog worked off.
  s.leasedFinalMsMax = s.leasedIds.size === 0 ? null : slowest([...s.leasedIds]);
  s.inflightLate = ids.filter((id) => (endedAt.get(id) ?? Number.POSITIVE_INFINITY) - s.backAt > INFLIGHT_FINAL_MS_MAX).length;
  const unended = ids.filter((id) => !endedAt.has(id));
  // Named in the output, so that their history can be read in the workers' log.
  if (unended.length > 0)
    console.log(`  in flight and not final after ${INFLIGHT_WATCH_MS_MAX / 1000} s: ${unended.slice(0, 5).join(', ')}`);
}

/** GET /admin/audit through the api, retried while the api comes back. @param {Scenario} s */
async function auditThroughApi(s) {
  const deadline = Date.now() + AUDIT_WAIT_MS_MAX;
  while (Date.now() < deadline) {
    const res = await call('GET', '/admin/audit', { admin: true });
    if (res.status === 200) {
      const violations = Array.isArray(res.body.violations) ? res.body.violations.length : -1;
      s.audit = res.body.ok === true ? 'ok' : `${violations} violations`;
      return;
    }
    await sleep(500);
  }
  s.audit = 'unanswered';
}

/** @param {Scenario} s */
async function runScenario(s) {
  active = s;
  console.log(`${new Date().toISOString()} scenario ${s.name}`);
  await sleep(PRE_FAULT_MS);
  await s.fault();
  const watched = s.kind === 'database' || s.kind === 'workers' ? watchInflight(s) : Promise.resolve();
  await Promise.all([watched, sleep(POST_FAULT_MS)]);
  await auditThroughApi(s);
  const inflight =
    s.inflight === null || s.inflight === 0
      ? ''
      : `, in flight ${s.inflight} (final within ${watchedSeconds(s.inflightFinalMsMax)} s${s.leasedAtFault > 0 ? `, the ${s.leasedAtFault} leased: ${watchedSeconds(s.leasedFinalMsMax)} s` : ''}, ${s.inflightLate} later than 5 s)`;
  console.log(
    `  fault ${((s.backAt - s.faultAt) / 1000).toFixed(1)} s, ${s.requests} requests${inflight}, audit ${s.audit}, workers ${await workersAnswer()}`,
  );
}

// ---------------------------------------------------------------------------------------------
// Setup

async function createDatabase() {
  const admin = new pg.Client({ connectionString: postgres().url('postgres') });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${DATABASE}`);
  await admin.end();
}

/**
 * @param {Answer} res
 * @param {string} what
 */
function must(res, what) {
  if (res.status < 200 || res.status >= 300) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
  return res;
}

/**
 * @param {string} service
 * @param {number} user
 * @param {object} body
 */
const seedCall = (service, user, body) => call('POST', '/intents', { service, user, body: { idempotencyKey: randomUUID(), ...body } });

async function seed() {
  for (const user of USERS) {
    must(await call('POST', '/accounts', { user, body: { userId: user, currency: 'THB' } }), `account ${user}`);
    must(await seedCall('wallet-api', user, { operationType: 'QP_TOPUP', amount: TOP_UP }), `top-up ${user}`);
    must(
      await call('POST', '/accounts/register-ipps', {
        user,
        body: {
          externalUserId: `chaos-${user}`,
          customerEnglishName: 'Chaos Test',
          senderTaxId: '1101700203451',
          senderAccountName: 'Chaos Test',
          documentExpiry: '2031-12-31',
          dateOfBirth: '1990-01-01',
          phoneNumber: '0812345678',
          nationality: 'TH',
          address: '1 Test Road',
        },
      }),
      `register ${user}`,
    );
  }
  must(
    await call('POST', '/accounts', {
      service: 'admin-tool',
      user: MERCHANT,
      body: { userId: MERCHANT, currency: 'THB', entityType: 'merchant' },
    }),
    'merchant',
  );
  // Mini-app payments move between user wallets (docs/rules.md, Operation table): the merchant has one besides its merchant wallet.
  must(await call('POST', '/accounts', { user: MERCHANT, body: { userId: MERCHANT, currency: 'THB' } }), 'merchant user wallet');
  must(await seedCall('wallet-api', MERCHANT, { operationType: 'QP_TOPUP', amount: TOP_UP }), 'merchant top-up');
  // The exchange's service account deposits; the admin panel funds it from equity.
  must(
    await seedCall('admin-panel', 0, {
      operationType: 'ADMIN_TRANSFER',
      amount: TOP_UP,
      fromAccountName: 'system.equity.THB',
      toAccountName: `service.${SERVICE_ACCOUNT_USER}.THB`,
    }),
    'service account funding',
  );
}

// ---------------------------------------------------------------------------------------------
// After the workload: settle, then judge every key and every scenario

/** @returns {string[]} the intents that some key got a 2xx for */
function acknowledgedIntents() {
  const ids = new Set();
  for (const record of keys.values()) {
    if (record.kind !== 'intent') continue;
    for (const answer of record.answers) if (answer.status >= 200 && answer.status < 300 && answer.id !== null) ids.add(answer.id);
  }
  return [...ids];
}

/** @returns {Promise<Map<string, string>>} intent id → status */
async function statuses() {
  const { rows } = await query('SELECT id, status FROM intents WHERE id = ANY($1::uuid[])', [acknowledgedIntents()]);
  return new Map(rows.map((row) => [String(row.id), String(row.status)]));
}

/**
 * Polls until `stillToGo` is 0, giving up only when it has not fallen for QUIET_MS_MAX: the
 * backlog the workers drain grows with the workload, so a fixed deadline would end a run whose
 * workers are still making progress.
 * @param {(current: Map<string, string>) => number} stillToGo
 */
async function waitWhileProgressing(stillToGo) {
  let current = await statuses();
  let fewest = stillToGo(current);
  let progressAt = Date.now();
  while (stillToGo(current) > 0 && Date.now() - progressAt < QUIET_MS_MAX) {
    await sleep(1_000);
    current = await statuses();
    const left = stillToGo(current);
    if (left < fewest) {
      fewest = left;
      progressAt = Date.now();
    }
  }
  return current;
}

/**
 * Waits until nothing is left but final intents and MANUAL_REVIEW. A payout in review whose
 * confirm the provider never received is a violation (docs/rules.md R65); the others are resolved
 * through the admin API by what the provider paid.
 */
async function settleEverything() {
  const unfinished = (/** @type {Map<string, string>} */ c) => [...c.values()].filter((s) => !FINAL.has(s) && s !== 'MANUAL_REVIEW').length;
  const quiet = await waitWhileProgressing(unfinished);
  const report = (await simulatorReport()).payouts;
  const scenarioOf = intentScenarios();
  for (const [id, status] of quiet) {
    if (status !== 'MANUAL_REVIEW') continue;
    const confirms = report[id]?.confirms ?? 0;
    const s = scenarioOf.get(id);
    if (confirms === 0 && s !== undefined) s.reviewNotReceived += 1;
    const resolution = report[id]?.paid === true ? 'CONFIRMED' : 'FAILED';
    const res = await call('POST', `/admin/intents/${id}/resolve`, {
      admin: true,
      body: { resolution, reason: 'chaos: settled from the provider report' },
    });
    if (res.status === 200) totals.manualReviewResolved += 1;
  }
  return waitWhileProgressing((c) => [...c.values()].filter((s) => !FINAL.has(s)).length);
}

/** @returns {Map<string, Scenario>} intent id → the scenario its key was first sent in */
function intentScenarios() {
  /** @type {Map<string, Scenario>} */
  const result = new Map();
  for (const record of keys.values()) {
    if (record.kind !== 'intent') continue;
    for (const answer of record.answers) if (answer.id !== null && !result.has(answer.id)) result.set(answer.id, record.scenario);
  }
  return result;
}

/**
 * Every key: a final answer in the end (not lost), never two different payments for one key,
 * never both accepted and refused, never SETTLED and then FAILED; its payment in the database and
 * final; what was answered SETTLED is SETTLED there.
 * @param {Map<string, string>} final intent id → status
 */
async function judgeKeys(final) {
  const refundRows = await query('SELECT id, status FROM refunds');
  const refundStatus = new Map(refundRows.rows.map((row) => [String(row.id), String(row.status)]));
  for (const record of keys.values()) {
    const s = record.scenario;
    s.keys += 1;
    const last = record.answers.at(-1);
    if (last === undefined || isRetryable({ status: last.status, body: { error: last.code }, retryAfter: null })) {
      s.lost += 1;
      continue;
    }
    const accepted = record.answers.filter((a) => a.status >= 200 && a.status < 300);
    const ids = new Set(accepted.map((a) => a.id));
    const states = new Set(accepted.map((a) => a.state));
    const refused = record.answers.some((a) => a.status === 422);
    // A refusal is stored FAILED and replayed as such: only an accepted answer of another status contradicts a 422.
    const acceptedNotFailed = accepted.some((a) => a.state !== 'FAILED');
    let contradicted = ids.size > 1 || (acceptedNotFailed && refused) || (states.has('SETTLED') && states.has('FAILED'));
    const id = accepted[0]?.id ?? null;
    if (id !== null && record.kind === 'intent') {
      const status = final.get(id);
      if (status === undefined) s.missing += 1;
      else if (!FINAL.has(status)) s.notFinal += 1;
      if (states.has('SETTLED') && status !== undefined && status !== 'SETTLED') contradicted = true;
    }
    if (id !== null && record.kind === 'refund') {
      const status = refundStatus.get(id);
      if (status === undefined) s.missing += 1;
      if (states.has('SETTLED') && status !== undefined && status !== 'SETTLED') contradicted = true;
    }
    if (contradicted) s.contradicted += 1;
  }
}

/** Refunds never exceed their original: by what the clients were told, per scenario, and in the database. */
async function judgeRefunds() {
  /** @type {Map<string, { amount: number, refunded: Map<string, number>, scenario: Scenario }>} */
  const byOriginal = new Map();
  for (const record of keys.values()) {
    if (record.kind !== 'refund' || record.original === undefined) continue;
    record.scenario.refunds += 1;
    const entry = byOriginal.get(record.original.id) ?? { amount: record.original.amount, refunded: new Map(), scenario: record.scenario };
    for (const a of record.answers)
      if (a.status >= 200 && a.status < 300 && a.state === 'SETTLED' && a.id !== null) entry.refunded.set(a.id, a.amount ?? 0);
    byOriginal.set(record.original.id, entry);
  }
  for (const entry of byOriginal.values()) {
    const refunded = [...entry.refunded.values()].reduce((sum, x) => sum + x, 0);
    if (refunded > entry.amount) entry.scenario.overRefunded += 1;
  }
  const { rows } = await query(
    `SELECT count(*) AS n FROM intents i
       JOIN (SELECT intent_id, sum(amount) AS refunded FROM refunds WHERE status = 'SETTLED' GROUP BY intent_id) r ON r.intent_id = i.id
      WHERE r.refunded > i.amount`,
  );
  totals.overRefundedInDatabase = Number(rows[0]?.n ?? 0);
  totals.refunds = Number((await query('SELECT count(*) AS n FROM refunds')).rows[0]?.n ?? 0);
}

/** @param {Map<string, string>} final */
async function webhooksOf(final) {
  const deadline = Date.now() + WEBHOOK_SETTLE_MS_MAX;
  const missing = () => [...final].filter(([id, status]) => !webhooks.check(id, status).received);
  while (missing().length > 0 && Date.now() < deadline) await sleep(1_000);
  totals.webhookFinalMissing = missing().length;
  totals.webhookOutOfOrder = [...final].filter(([id, status]) => !webhooks.check(id, status).inOrder).length;
  const { rows } = await query('SELECT id, status FROM refunds');
  const refundsMissing = () => rows.filter((row) => !webhooks.refundReceived(String(row.id), String(row.status)));
  while (refundsMissing().length > 0 && Date.now() < deadline) await sleep(1_000);
  totals.webhookRefundMissing = refundsMissing().length;
}

/** @param {Map<string, string>} final */
async function judgeRun(final) {
  const report = await simulatorReport();
  totals.confirmsSent = report.stats.confirms;
  for (const [id, payout] of Object.entries(report.payouts)) {
    if (payout.confirms > 1) totals.duplicateConfirms += 1;
    const status = final.get(id);
    if (status !== undefined && (status === 'SETTLED') !== payout.paid) totals.paidMismatches += 1;
  }
  totals.intents = final.size;
  for (const status of final.values()) totals.byStatus[status] = (totals.byStatus[status] ?? 0) + 1;
  totals.notFinal = [...final.values()].filter((s) => !FINAL.has(s)).length;
  const spot = [...final.keys()].sort(() => Math.random() - 0.5).slice(0, API_SPOT_CHECKS);
  const serviceOf = new Map([...keys.values()].flatMap((r) => r.answers.map((a) => [a.id, r.serviceId])));
  for (const id of spot) {
    const res = await call('GET', `/intents/${id}`, { service: serviceOf.get(id) });
    if (res.status !== 200 || res.body.status !== final.get(id)) totals.apiMismatches += 1;
  }
  await webhooksOf(final);
  const db = await openDatabase(databaseUrl, '');
  try {
    const audit = await runAudit(db);
    totals.violations = audit.violations.length;
    for (const violation of audit.violations) console.error(`violation: ${formatViolation(violation)}`);
  } finally {
    await db.close();
  }
}

/**
 * The checks of one scenario (docs/RELIABILITY.md, "The chaos run"), each violation in words.
 * @param {Scenario} s
 */
function judgeScenario(s) {
  /** @type {[boolean, string][]} */
  const checks = [
    [s.lost > 0, `${s.lost} keys without a final answer`],
    [s.contradicted > 0, `${s.contradicted} keys answered in contradiction`],
    [s.missing > 0, `${s.missing} acknowledged payments or refunds missing`],
    [s.notFinal > 0, `${s.notFinal} acknowledged intents not final`],
    [s.audit !== 'ok', `audit after the fault: ${s.audit}`],
    [s.reviewNotReceived > 0, `${s.reviewNotReceived} payouts in MANUAL_REVIEW whose confirm the provider never received`],
    [s.errors500InFault > 0, `${s.errors500InFault} answers 500 during the database outage`],
    [s.internalErrors > 0, `${s.internalErrors} answers 500 INTERNAL_ERROR`],
    [s.without503RetryAfter > 0, `${s.without503RetryAfter} answers 503 without Retry-After`],
    [s.kind === 'redis' && s.nonce.ok === 0, 'no nonce-signed payment succeeded while Redis was down'],
    [s.kind === 'redis' && s.nonce.refused > 0, `${s.nonce.refused} nonce-signed payments refused 503 while Redis was down`],
    [s.inflightLate > 0, `${s.inflightLate} of ${s.inflight} in-flight payouts final later than 5 s after the return`],
    [s.overRefunded > 0, `${s.overRefunded} payments refunded beyond their amount`],
  ];
  s.violations = checks.filter(([failed]) => failed).map(([, text]) => text);
}

// ---------------------------------------------------------------------------------------------
// Report

/** @param {number[]} list */
const median = (list) => {
  const sorted = [...list].sort((a, b) => a - b);
  return sorted.length === 0 ? '-' : String(sorted[Math.floor(sorted.length / 2)]);
};
/** @param {Served} served */
const servedText = (served) =>
  `${served.ok} ok, ${served.refused} × 503, median ${median(served.msList)} ms, max ${served.msList.length === 0 ? '-' : Math.max(...served.msList)} ms`;
/** @param {number | null} ms */
const seconds = (ms) => (ms === null ? '-' : (ms / 1000).toFixed(1));

/** @param {number | null} ms */
const watchedSeconds = (ms) => (ms === null ? `> ${INFLIGHT_WATCH_MS_MAX / 1000}` : seconds(ms));

/** @param {Scenario} s */
function scenarioRow(s) {
  const answers = Object.entries(s.answers)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 4)
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ');
  const inflight =
    s.inflight === null
      ? '-'
      : s.inflight === 0
        ? 'none'
        : `${s.inflight}, final within ${watchedSeconds(s.inflightFinalMsMax)} s${s.leasedAtFault > 0 ? ` (the ${s.leasedAtFault} leased: ${watchedSeconds(s.leasedFinalMsMax)} s)` : ''}, ${s.inflightLate} later than 5 s`;
  const redisCell = s.kind === 'redis' ? `nonce: ${servedText(s.nonce)}; no nonce: ${servedText(s.plain)}` : '-';
  return [
    s.name,
    seconds(s.backAt - s.faultAt),
    `${s.requests} (${answers}${s.unreachable > 0 ? `, no answer: ${s.unreachable}` : ''})`,
    `${s.keys} / ${s.lost} / ${s.contradicted}`,
    s.kind === 'database' ? String(s.errors500InFault) : '-',
    seconds(s.servingAgainMs),
    redisCell,
    inflight,
    String(s.reviewNotReceived),
    `${s.refunds} / ${s.overRefunded}`,
    s.audit,
    s.violations.length === 0 ? 'ok' : `**${s.violations.join('; ')}**`,
  ];
}

/**
 * @param {string} startedAt
 * @param {number} durationS
 * @param {string} load
 */
function report(startedAt, durationS, load) {
  const head = [
    'Scenario',
    'Fault (s)',
    'Requests (answers)',
    'Keys / lost / contradicted',
    '500 in outage',
    'Serving again (s)',
    'Payments while Redis was down',
    'Payouts in flight at the fault: final after the return',
    'MANUAL_REVIEW never received',
    'Refunds / over their original',
    'Audit',
    'Verdict',
  ];
  const scenarioTable = [
    `| ${head.join(' | ')} |`,
    `| ${head.map(() => '---').join(' | ')} |`,
    ...SCENARIOS.map((s) => `| ${scenarioRow(s).join(' | ')} |`),
  ];
  const rows = [
    [
      'run',
      `${startedAt}, ${durationS} s${SHORT ? ' (--short)' : ''}, ${CLIENTS} clients, load average ${load}; api + workers on a private PostgreSQL 15, Redis and NATS`,
    ],
    ['workload requests sent (nonce-signed)', `${totals.requests} (${totals.nonceSigned})`],
    ['intents that got a 2xx', totals.intents],
    [
      'final statuses',
      Object.entries(totals.byStatus)
        .sort()
        .map(([k, v]) => `${k}: ${v}`)
        .join(', '),
    ],
    ['refunds stored (SETTLED or FAILED)', totals.refunds],
    ['payments refunded beyond their amount (database)', totals.overRefundedInDatabase],
    ['MANUAL_REVIEW resolved through the admin API', totals.manualReviewResolved],
    ['time for the workers to finish after the workload (s)', totals.settleS],
    ['confirms received by the provider', totals.confirmsSent],
    ['payouts confirmed more than once', totals.duplicateConfirms],
    ['payouts whose provider outcome differs from the intent', totals.paidMismatches],
    ['intents not final at the end', totals.notFinal],
    [`API status differing from the database (${API_SPOT_CHECKS} spot checks)`, totals.apiMismatches],
    ['audit violations at the end', totals.violations],
    [
      'webhook requests (refused on purpose, failing verifyWebhook, repeats)',
      `${webhooks.figures.requests} (${webhooks.figures.refusedOnPurpose}, ${webhooks.figures.invalid}, ${webhooks.figures.repeats})`,
    ],
    ['final statuses missing from the webhooks', totals.webhookFinalMissing],
    ['intents whose webhooks came out of order', totals.webhookOutOfOrder],
    ['refunds missing from the webhooks', totals.webhookRefundMissing],
  ];
  return [...scenarioTable, '', '| Whole run | Value |', '| --- | --- |', ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join('\n');
}

function runIsClean() {
  return (
    totals.violations === 0 &&
    totals.duplicateConfirms === 0 &&
    totals.paidMismatches === 0 &&
    totals.notFinal === 0 &&
    totals.apiMismatches === 0 &&
    totals.overRefundedInDatabase === 0 &&
    totals.webhookFinalMissing === 0 &&
    totals.webhookOutOfOrder === 0 &&
    totals.webhookRefundMissing === 0 &&
    webhooks.figures.invalid === 0
  );
}

/** @param {string} table */
async function writeDocs(table) {
  const file = join(root, 'docs/RELIABILITY.md');
  const text = await readFile(file, 'utf8').catch(() => '');
  const begin = '<!-- chaos:begin -->';
  const end = '<!-- chaos:end -->';
  if (!text.includes(begin) || !text.includes(end)) {
    console.warn('docs/RELIABILITY.md has no chaos markers; figures not written');
    return;
  }
  await writeFile(file, `${text.slice(0, text.indexOf(begin) + begin.length)}\n${table}\n${text.slice(text.indexOf(end))}`);
}

async function loadAverage() {
  const text = await readFile('/proc/loadavg', 'utf8').catch(() => '');
  return text.split(' ').slice(0, 3).join(' ') || 'unknown';
}

async function shutDown() {
  loadRunning = false;
  await killRole('api').catch(() => {});
  await killRole('workers').catch(() => {});
  simulatorChild?.kill('SIGTERM');
  await readPool?.end().catch(() => {});
  await webhooks.close().catch(() => {});
  await Promise.all([postgresServer?.close(), redisServer?.close().catch(() => {}), natsServer?.close()]);
}

async function main() {
  const startedAt = new Date().toISOString();
  const started = Date.now();
  console.log(`chaos: ${SCENARIOS.map((s) => s.name).join(', ')}; ${CLIENTS} clients; logs in ${workDir}`);
  await startServices();
  await createDatabase();
  await startSimulator();
  ports.api = await freePort();
  ports.workers = await freePort();
  serviceUrl = `http://127.0.0.1:${ports.api}`;
  // The api migrates the database; the workers start after it, on the migrated schema.
  await startRole('api');
  await startRole('workers');
  let clean = false;
  try {
    await seed();
    active = SCENARIOS[0] ?? null;
    const clients = Array.from({ length: CLIENTS }, () => client());
    for (const s of SCENARIOS) await runScenario(s);
    loadRunning = false;
    await Promise.all(clients);
    const durationS = Math.round((Date.now() - started) / 1000);
    counting = false;
    await simulator('POST', '/_sim/knobs', { delayMs: 0, failureRate: 0, failNext: 0 });
    const settleStarted = Date.now();
    const final = await settleEverything();
    totals.settleS = Math.round((Date.now() - settleStarted) / 1000);
    await judgeKeys(final);
    await judgeRefunds();
    await judgeRun(final);
    for (const s of SCENARIOS) judgeScenario(s);
    const table = report(startedAt, durationS, await loadAverage());
    console.log(table);
    for (const s of SCENARIOS) for (const v of s.violations) console.log(`violation in ${s.name}: ${v}`);
    clean = runIsClean() && SCENARIOS.every((s) => s.violations.length === 0);
    if (!SHORT && !args['no-docs'] && args.only === undefined) await writeDocs(table);
    console.log(clean ? 'chaos: OK' : 'chaos: FAILED');
  } finally {
    await shutDown();
  }
  // The logs are kept when something failed, to read; the database files are not.
  await rm(join(workDir, 'pg', 'data'), { recursive: true, force: true });
  if (clean && !args['keep-logs']) await rm(workDir, { recursive: true, force: true });
  process.exit(clean ? 0 : 1);
}

main().catch(async (error) => {
  console.error(error);
  await shutDown().catch(() => {});
  process.exit(1);
});
