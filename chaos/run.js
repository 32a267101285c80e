// The chaos run (`npm run chaos [-- --duration-s 180]`): payorch as a child process on PostgreSQL
// and Redis, a standalone PSPX simulator, a mixed workload from concurrent clients, and faults at
// random moments: the service SIGKILLed and restarted, Redis restarted, the provider slowed and
// made to fail. Afterwards (workers quiet, MANUAL_REVIEW resolved through the admin API) every
// intent that got a 2xx must be final, the invariant audit clean, no confirm may have reached
// the provider twice, and every final status must have reached the webhook receiver, in order. Prints the figures and writes them into docs/RELIABILITY.md.
//
// Plain ESM over the built dist/ (npm run chaos builds first). Needs PostgreSQL and Redis on
// loopback as on the development machine; the database `payorch_chaos` is dropped and recreated.

import { spawn, execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { openDatabase } from '../dist/adapters/database.js';
import { DEMO_CONFIG_FILE, readConfigFile, secretsOf } from '../dist/config.js';
import { formatViolation, runAudit } from '../dist/domain/audit/audit.js';
import { FINAL_STATUSES } from '../dist/domain/model.js';
import { signedHeaders } from '../dist/domain/auth/signing.js';
import { ledgerAccountId } from '../dist/ledger/account-id.js';
import { startWebhookReceiver } from './webhook-receiver.js';

/** @typedef {{ child: import('node:child_process').ChildProcess, exited: Promise<number | NodeJS.Signals | null>, match: RegExpExecArray }} Started */
/** @typedef {{ status: number, body: Record<string, unknown> }} Answer */
/** @typedef {{ serviceId: string, user: number, body: object }} IntentRequest */
/** @typedef {[name: string, weight: number, run: (user: number) => Promise<unknown>]} Operation */
/** @typedef {Map<string, string | null>} Statuses intent id → status; null while unreadable */
/**
 * What the simulator's GET /_sim/stats answers (src/adapters/pspx/pspx-simulator.ts).
 * @typedef {{
 *   stats: import('../dist/adapters/pspx/pspx-simulator.js').SimulatorStats,
 *   balance: string,
 *   payouts: ReturnType<import('../dist/adapters/pspx/pspx-simulator.js').PspxSimulator['payoutReport']>,
 * }} SimulatorReport
 */

const root = fileURLToPath(new URL('../', import.meta.url));
const { values: args } = parseArgs({
  options: {
    'duration-s': { type: 'string', default: '180' },
    clients: { type: 'string', default: '8' },
    'pg-url': { type: 'string', default: process.env.CHAOS_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' },
    'redis-url': { type: 'string', default: process.env.CHAOS_REDIS_URL ?? 'redis://127.0.0.1:6379' },
    'no-docs': { type: 'boolean', default: false },
  },
});

// ---------------------------------------------------------------------------------------------
// Limits (units last)

const DURATION_MS = Number(args['duration-s']) * 1000;
const CLIENTS = Number(args.clients);
const DATABASE = 'payorch_chaos';
const STARTUP_MS_MAX = 60_000;
const REQUEST_TIMEOUT_MS = 15_000;
/** @type {[min: number, max: number]} Pause between two faults, drawn uniformly. */
const FAULT_GAP_MS = [8_000, 20_000];
/** How long a slowed or failing provider stays so. */
const PROVIDER_FAULT_MS = 8_000;
/** After the workload, the workers are judged stuck when no intent has become final for this long. */
const QUIET_MS_MAX = 120_000;
/** Share of valid webhook requests the receiver answers 503, so that deliveries are retried all through the run. */
const WEBHOOK_REFUSED_SHARE = 0.1;
/** After the intents are final, how long their last webhooks may take (retries wait up to a few seconds here). */
const WEBHOOK_SETTLE_MS_MAX = 120_000;
/** Intents whose final status is also read through GET /intents/{id}. */
const API_SPOT_CHECKS = 200;
const USERS = Array.from({ length: 12 }, (_, i) => 9001 + i);
const MERCHANT = 9100;
const SERVICE_ACCOUNT_USER = 900001;
const TOP_UP = 50_000_000;
// payorch runs with NODE_ENV=production here, which refuses short secrets and the demo's public ones.
const ADMIN_TOKEN = randomBytes(24).toString('base64url');
const QR_SIGNING_SECRET = randomBytes(24).toString('base64url');
const METRICS_TOKEN = randomBytes(24).toString('base64url');
const REDIS_START = [
  '--daemonize',
  'yes',
  '--bind',
  '127.0.0.1',
  '-::1',
  '--port',
  // The port of --redis-url, so a run on a private Redis never shuts down a shared one.
  new URL(args['redis-url']).port || '6379',
  '--save',
  '',
  '--appendonly',
  'no',
  '--dir',
  '/var/lib/redis',
  '--logfile',
  '/var/log/redis/ci.log',
];
const UNREACHABLE_PAUSE_MS = 200;
/** @type {ReadonlySet<string | null>} */
const FINAL = new Set(FINAL_STATUSES);

const logDir = await mkdtemp(join(tmpdir(), 'payorch-chaos-'));
const demoConfig = readConfigFile(DEMO_CONFIG_FILE);
const configFile = join(logDir, 'config.json');
const chaosSecrets = Object.fromEntries(Object.keys(demoConfig.secrets).map((id) => [id, randomBytes(24).toString('base64url')]));
/** @type {Map<string, readonly string[]>} */
let secrets = new Map();
// Every service's events go to one receiver, which fails a share of them so that retries happen throughout.
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

const figures = {
  requests: 0,
  /** @type {Record<string, number>} */
  answers: {},
  unreachable: 0,
  serviceKills: 0,
  redisRestarts: 0,
  providerFaults: 0,
  intents: 0,
  /** @type {Record<string, number>} */
  byStatus: {},
  manualReviewResolved: 0,
  confirmsSent: 0,
  duplicateConfirms: 0,
  paidMismatches: 0,
  notFinal: 0,
  apiMismatches: 0,
  settleS: 0,
  violations: 0,
  webhookFinalMissing: 0,
  webhookOutOfOrder: 0,
};

// ---------------------------------------------------------------------------------------------
// Processes

/** @returns {Promise<number>} */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      // Listening on a TCP port: the address is always an AddressInfo.
      const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
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
  const log = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' });
  const child = spawn(process.execPath, [file, ...argv], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start (log: ${join(logDir, `${name}.log`)})`)), STARTUP_MS_MAX);
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
    exited.then((code) => reject(new Error(`${name} exited (${code}) before it was ready (log: ${join(logDir, `${name}.log`)})`)));
  });
}

let simulatorUrl = '';
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
  return child;
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

/**
 * What the simulator was asked and what it paid.
 * @returns {Promise<SimulatorReport>}
 */
async function simulatorReport() {
  // The simulator is ours: its answer has the shape SimulatorReport takes from its source.
  return /** @type {SimulatorReport} */ (await simulator('GET', '/_sim/stats'));
}

/** @type {Started | null} */
let service = null;
let servicePort = 0;
let serviceUrl = '';
let serviceDatabaseUrl = '';
async function startService() {
  const started = await startProcess(
    'payorch',
    'bin/payorch.js',
    ['serve'],
    {
      PORT: String(servicePort),
      HOST: '127.0.0.1',
      DATABASE_URL: serviceDatabaseUrl,
      REDIS_URL: args['redis-url'],
      PSPX_URL: simulatorUrl,
      CONFIG_FILE: configFile,
      ADMIN_TOKEN,
      QR_SIGNING_SECRET,
      METRICS_TOKEN,
      NODE_ENV: 'production',
      // info: the listening line is how the run knows the service is up.
      LOG_LEVEL: 'info',
      PSP_WORKER_INTERVAL_MS: '100',
      OUTBOX_INTERVAL_MS: '100',
      EXPIRY_SWEEP_INTERVAL_MS: '1000',
      BALANCE_MONITOR_INTERVAL_MS: '5000',
      PSP_MAX_INQUIRIES: '3',
      PSP_LEASE_MS: '3000',
      // Startup reconciliation fails internal intents left half-done by a kill; short here so it acts within the run.
      RECONCILE_AGE_S: '5',
      WEBHOOK_RETRY_BASE_MS: '200',
    },
    /"msg":"Server listening at (http:\/\/127\.0\.0\.1:\d+)"|Server listening at (http:\/\/127\.0\.0\.1:\d+)/,
  );
  service = started;
  serviceUrl = `http://127.0.0.1:${servicePort}`;
}

async function killService() {
  if (service === null) return;
  service.child.kill('SIGKILL');
  await service.exited;
  service = null;
}

function restartRedis() {
  try {
    execFileSync('redis-cli', ['-u', args['redis-url'], 'shutdown', 'nosave'], { stdio: 'ignore' });
  } catch {
    // shutdown closes the connection it came on; redis-cli reports that as an error.
  }
}
function startRedis() {
  execFileSync('redis-server', REDIS_START, { stdio: 'ignore' });
}
async function ensureRedis() {
  for (let attempt = 0; attempt < 50; attempt += 1) {
    try {
      if (execFileSync('redis-cli', ['-u', args['redis-url'], 'ping']).toString().trim() === 'PONG') return;
    } catch {
      if (attempt === 0 || attempt % 10 === 0) {
        try {
          startRedis();
        } catch {
          // Still starting or already up: ping again.
        }
      }
    }
    await sleep(100);
  }
  throw new Error('Redis did not come back');
}

// ---------------------------------------------------------------------------------------------
// Requests

/** Workload requests are counted in the figures; the verification's polling is not. */
let counting = true;
/**
 * @param {string} method
 * @param {string} path
 * @param {{ service?: string | undefined, user?: number, body?: object, admin?: boolean }} [options]
 * @returns {Promise<Answer>}
 */
async function call(method, path, { service: serviceId = 'wallet-api', user, body, admin = false } = {}) {
  const raw = body === undefined ? '' : JSON.stringify(body);
  const headers = admin
    ? { authorization: `Bearer ${ADMIN_TOKEN}` }
    : signedHeaders(serviceId, secretOf(serviceId), method, path, raw, user === undefined ? {} : { userId: user });
  if (raw !== '') headers['content-type'] = 'application/json';
  if (counting) figures.requests += 1;
  try {
    const response = await fetch(`${serviceUrl}${path}`, {
      method,
      headers,
      ...(raw === '' ? {} : { body: raw }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await response.text();
    const label = `${response.status}${response.status >= 400 ? ` ${safeJson(text).error ?? ''}` : ''}`.trim();
    if (counting) figures.answers[label] = (figures.answers[label] ?? 0) + 1;
    return { status: response.status, body: safeJson(text) };
  } catch {
    if (counting) figures.unreachable += 1;
    // The service is down (killed, restarting): back off instead of spinning on refused connects.
    await sleep(UNREACHABLE_PAUSE_MS);
    return { status: 0, body: {} };
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

/** @type {Map<string, string>} Every intent that got a 2xx, with the service that owns it. */
const tracked = new Map();
/**
 * @param {Answer} res
 * @param {string} serviceId
 */
function track(res, serviceId) {
  if (res.status >= 200 && res.status < 300 && typeof res.body.intentId === 'string') tracked.set(res.body.intentId, serviceId);
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

/** @type {IntentRequest[]} Recent requests, for replays with the same key. */
const recent = [];
/** @param {IntentRequest} request */
function remember(request) {
  recent.push(request);
  if (recent.length > 200) recent.shift();
}

/** @type {string[]} */
const openInvoices = [];
/** @type {string[]} Recent settled P2P payments, refunded in part by the 'refund' operation (docs/rules.md R57). */
const settledPayments = [];

/** A part of a recent payment back to its payer: 201, or 409 once it is all refunded, or 422 when the payee spent it. */
async function refundRecent() {
  if (settledPayments.length === 0) return;
  const body = { idempotencyKey: randomUUID(), amount: 1 + Math.floor(Math.random() * 10_000), reason: 'chaos' };
  await call('POST', `/intents/${pick(settledPayments)}/refunds`, { user: 1, body });
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
      const res = await intent('wallet-api', u, { operationType: 'P2P_TRANSFER', amount: amount(), recipientUserId: otherThan(u) });
      if (res.status === 201 && res.body.status === 'SETTLED' && typeof res.body.intentId === 'string')
        settledPayments.push(res.body.intentId);
      if (settledPayments.length > 200) settledPayments.shift();
      return res;
    },
  ],
  ['refund', 2, () => refundRecent()],
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
    4,
    (u) =>
      intent('wallet-api', u, {
        operationType: pick(['PSPX_WITHDRAWAL', 'THAI_QR_PAY']),
        amount: amount(),
        metadata: { ipps: { receiverType: 'MSISDN', receiverAccount: `08${pick(['1000', '2000', '3000'])}${receiverEnding()}` } },
      }),
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

/**
 * @param {string} serviceId
 * @param {number} user
 * @param {object} body
 */
async function intent(serviceId, user, body) {
  const request = { serviceId, user, body: { idempotencyKey: randomUUID(), ...body } };
  remember(request);
  const res = await call('POST', '/intents', { service: serviceId, user, body: request.body });
  track(res, serviceId);
  return res;
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
  const once = () => call('POST', `/intents/${id}/confirm`, { user: payer, body });
  // Half the confirms race a copy of themselves.
  if (Math.random() < 0.5) await Promise.all([once(), once()]);
  else await once();
}

async function cancelInvoice() {
  const id = openInvoices.shift();
  if (id === undefined) return issueInvoice();
  await call('POST', `/intents/${id}/cancel`, { user: MERCHANT, body: { reason: 'chaos' } });
}

async function replay() {
  if (recent.length === 0) return;
  const request = pick(recent);
  const res = await call('POST', '/intents', { service: request.serviceId, user: request.user, body: request.body });
  track(res, request.serviceId);
}

/** @param {number} user */
async function duplicate(user) {
  const body = { idempotencyKey: randomUUID(), operationType: 'P2P_TRANSFER', amount: amount(), recipientUserId: otherThan(user) };
  remember({ serviceId: 'wallet-api', user, body });
  const answers = await Promise.all([0, 1].map(() => call('POST', '/intents', { user, body })));
  for (const res of answers) track(res, 'wallet-api');
}

/** @param {number} deadline */
async function client(deadline) {
  while (Date.now() < deadline) {
    const [, , run] = drawOperation();
    await run(pick(USERS));
    await sleep(5 + Math.random() * 20);
  }
}

// ---------------------------------------------------------------------------------------------
// Faults

let restarting = Promise.resolve();
/** @param {number} deadline */
async function faults(deadline) {
  /** @type {string[]} */
  const log = [];
  while (Date.now() < deadline) {
    await sleep(FAULT_GAP_MS[0] + Math.random() * (FAULT_GAP_MS[1] - FAULT_GAP_MS[0]));
    if (Date.now() >= deadline) break;
    const kind = pick(['kill', 'kill', 'redis', 'slow', 'failing', 'fail-next']);
    log.push(`${new Date().toISOString()} ${kind}`);
    switch (kind) {
      case 'kill': {
        figures.serviceKills += 1;
        restarting = (async () => {
          await killService();
          await sleep(Math.random() * 2_000);
          await startService();
        })();
        await restarting;
        break;
      }
      case 'redis':
        figures.redisRestarts += 1;
        restartRedis();
        await sleep(500 + Math.random() * 2_000);
        await ensureRedis();
        break;
      case 'slow':
        figures.providerFaults += 1;
        await simulator('POST', '/_sim/knobs', { delayMs: 1_000 + Math.floor(Math.random() * 3_000) });
        await sleep(PROVIDER_FAULT_MS);
        await simulator('POST', '/_sim/knobs', { delayMs: 0 });
        break;
      case 'failing':
        figures.providerFaults += 1;
        await simulator('POST', '/_sim/knobs', { failureRate: 0.5 });
        await sleep(PROVIDER_FAULT_MS);
        await simulator('POST', '/_sim/knobs', { failureRate: 0 });
        break;
      case 'fail-next':
        figures.providerFaults += 1;
        await simulator('POST', '/_sim/knobs', { failNext: 10 });
        break;
      default:
        throw new Error(`unknown fault ${kind}`);
    }
  }
  return log;
}

// ---------------------------------------------------------------------------------------------
// Setup, run, verdict

async function recreateDatabase() {
  const admin = new pg.Client({ connectionString: args['pg-url'] });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DATABASE}`);
  await admin.end();
  const url = new URL(args['pg-url']);
  url.pathname = `/${DATABASE}`;
  serviceDatabaseUrl = url.toString();
}

/**
 * @param {Answer} res
 * @param {string} what
 */
async function must(res, what) {
  if (res.status < 200 || res.status >= 300) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
  return res;
}

async function seed() {
  for (const user of USERS) {
    await must(await call('POST', '/accounts', { user, body: { userId: user, currency: 'THB' } }), `account ${user}`);
    await must(
      await call('POST', '/intents', { user, body: { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: TOP_UP } }),
      `top-up ${user}`,
    );
    await must(
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
  await must(
    await call('POST', '/accounts', {
      service: 'admin-tool',
      user: MERCHANT,
      body: { userId: MERCHANT, currency: 'THB', entityType: 'merchant' },
    }),
    'merchant',
  );
  // Mini-app payments move between user wallets (docs/rules.md, Operation table): the merchant has one besides its merchant wallet.
  await must(await call('POST', '/accounts', { user: MERCHANT, body: { userId: MERCHANT, currency: 'THB' } }), 'merchant user wallet');
  await must(
    await call('POST', '/intents', { user: MERCHANT, body: { idempotencyKey: randomUUID(), operationType: 'QP_TOPUP', amount: TOP_UP } }),
    'merchant top-up',
  );
  // The exchange's service account deposits; the admin panel funds it from equity.
  await must(
    await call('POST', '/intents', {
      service: 'admin-panel',
      user: 0,
      body: {
        idempotencyKey: randomUUID(),
        operationType: 'ADMIN_TRANSFER',
        amount: TOP_UP,
        fromAccountName: 'system.equity.THB',
        toAccountName: `service.${SERVICE_ACCOUNT_USER}.THB`,
      },
    }),
    'service account funding',
  );
}

/** Statuses of every tracked intent, read from the database in one query (thousands of GETs a second would be load of their own). */
/** @returns {Promise<Statuses>} */
async function statuses() {
  const db = await openDatabase(serviceDatabaseUrl, '');
  try {
    const { rows } = await db.query('SELECT id, status FROM intents WHERE id = ANY($1::uuid[])', [[...tracked.keys()]]);
    /** @type {Statuses} */
    const result = new Map([...tracked.keys()].map((id) => [id, null]));
    for (const row of rows) result.set(String(row.id), String(row.status));
    return result;
  } finally {
    await db.close();
  }
}

/** One intent through the API, as its owner sees it: the final check does not trust the database alone. */
/** @param {string} id */
async function statusOf(id) {
  const res = await call('GET', `/intents/${id}`, { service: tracked.get(id) });
  return res.status === 200 ? res.body.status : null;
}

/**
 * Polls until `done` holds, giving up only when the count of intents still to go has not fallen
 * for QUIET_MS_MAX: the backlog the workers drain grows with the workload's throughput, so a
 * fixed deadline would end a run whose workers are still making progress.
 */
/**
 * @param {(current: Statuses) => boolean} done
 * @param {(current: Statuses) => number} stillToGo
 */
async function waitWhileProgressing(done, stillToGo) {
  let current = await statuses();
  let fewest = stillToGo(current);
  let progressAt = Date.now();
  while (!done(current)) {
    if (Date.now() - progressAt > QUIET_MS_MAX) break;
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
 * @param {Statuses} current
 * @param {(status: string | null) => boolean} [alsoDone]
 */
const pendingCount = (current, alsoDone = () => false) => [...current.values()].filter((s) => !FINAL.has(s) && !alsoDone(s)).length;

/** Waits until nothing is left but final intents and MANUAL_REVIEW; resolves those by what the provider paid. */
async function settleEverything() {
  /** @param {Statuses} current */
  const workersQuiet = (current) => pendingCount(current, (s) => s === 'MANUAL_REVIEW') === 0;
  const current = await waitWhileProgressing(workersQuiet, (c) => pendingCount(c, (s) => s === 'MANUAL_REVIEW'));
  const report = (await simulatorReport()).payouts;
  for (const [id, status] of current) {
    if (status !== 'MANUAL_REVIEW') continue;
    const resolution = report[id]?.paid === true ? 'CONFIRMED' : 'FAILED';
    const res = await call('POST', `/admin/intents/${id}/resolve`, {
      admin: true,
      body: { resolution, reason: 'chaos: settled from the provider report' },
    });
    if (res.status === 200) figures.manualReviewResolved += 1;
  }
  return waitWhileProgressing(
    (c) => pendingCount(c) === 0,
    (c) => pendingCount(c),
  );
}

/**
 * Every final status must reach the webhook receiver, each intent's changes in order; the last
 * ones may still be on their way (a retry after a refusal), so this waits for them.
 * @param {Statuses} final
 */
async function webhooksOf(final) {
  const deadline = Date.now() + WEBHOOK_SETTLE_MS_MAX;
  const missing = () => [...final].filter(([id, status]) => status !== null && !webhooks.check(id, status).received);
  while (missing().length > 0 && Date.now() < deadline) await sleep(1_000);
  figures.webhookFinalMissing = missing().length;
  figures.webhookOutOfOrder = [...final].filter(([id, status]) => status !== null && !webhooks.check(id, status).inOrder).length;
}

/** @param {Statuses} final */
async function verdict(final) {
  const report = await simulatorReport();
  figures.confirmsSent = report.stats.confirms;
  for (const [id, payout] of Object.entries(report.payouts)) {
    if (payout.confirms > 1) figures.duplicateConfirms += 1;
    const status = final.get(id);
    if (status !== undefined && (status === 'SETTLED') !== payout.paid) figures.paidMismatches += 1;
  }
  figures.intents = final.size;
  for (const status of final.values()) figures.byStatus[status ?? 'unreadable'] = (figures.byStatus[status ?? 'unreadable'] ?? 0) + 1;
  figures.notFinal = [...final.values()].filter((s) => !FINAL.has(s)).length;
  for (const id of [...final.keys()].sort(() => Math.random() - 0.5).slice(0, API_SPOT_CHECKS)) {
    if ((await statusOf(id)) !== final.get(id)) figures.apiMismatches += 1;
  }
  await webhooksOf(final);
  const db = await openDatabase(serviceDatabaseUrl, '');
  try {
    const audit = await runAudit(db);
    figures.violations = audit.violations.length;
    for (const violation of audit.violations) console.error(`violation: ${formatViolation(violation)}`);
  } finally {
    await db.close();
  }
}

/**
 * @param {number} durationS
 * @param {string} startedAt
 */
function figuresTable(durationS, startedAt) {
  const rows = [
    ['run', `${startedAt}, ${durationS} s, ${CLIENTS} clients, PostgreSQL + Redis, standalone PSPX simulator`],
    ['workload requests sent', figures.requests],
    [
      'workload answers',
      Object.entries(figures.answers)
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k}: ${v}`)
        .join(', '),
    ],
    ['no answer (service down or killed mid-request)', figures.unreachable],
    ['service SIGKILLs and restarts', figures.serviceKills],
    ['Redis restarts', figures.redisRestarts],
    ['provider faults (slow, 50% failing, next 10 failing)', figures.providerFaults],
    ['intents that got a 2xx', figures.intents],
    [
      'final statuses',
      Object.entries(figures.byStatus)
        .sort()
        .map(([k, v]) => `${k}: ${v}`)
        .join(', '),
    ],
    ['MANUAL_REVIEW resolved through the admin API', figures.manualReviewResolved],
    ['time for the workers to finish after the workload (s)', figures.settleS],
    ['confirms received by the provider', figures.confirmsSent],
    ['payouts confirmed more than once', figures.duplicateConfirms],
    ['payouts whose provider outcome differs from the intent', figures.paidMismatches],
    ['intents not final at the end', figures.notFinal],
    [`API status differing from the database (${API_SPOT_CHECKS} spot checks)`, figures.apiMismatches],
    ['audit violations', figures.violations],
    [
      'webhook requests (refused on purpose, failing verifyWebhook, repeats)',
      `${webhooks.figures.requests} (${webhooks.figures.refusedOnPurpose}, ${webhooks.figures.invalid}, ${webhooks.figures.repeats})`,
    ],
    ['final statuses missing from the webhooks', figures.webhookFinalMissing],
    ['intents whose webhooks came out of order', figures.webhookOutOfOrder],
  ];
  return ['| Figure | Value |', '| --- | --- |', ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join('\n');
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
  const updated = `${text.slice(0, text.indexOf(begin) + begin.length)}\n${table}\n${text.slice(text.indexOf(end))}`;
  await writeFile(file, updated);
}

async function main() {
  const startedAt = new Date().toISOString();
  console.log(`chaos: ${DURATION_MS / 1000} s, ${CLIENTS} clients, logs in ${logDir}`);
  await ensureRedis();
  await recreateDatabase();
  const simulatorChild = await startSimulator();
  servicePort = await freePort();
  await startService();
  let exitCode = 1;
  try {
    await seed();
    const deadline = Date.now() + DURATION_MS;
    const [faultLog] = await Promise.all([faults(deadline), ...Array.from({ length: CLIENTS }, () => client(deadline))]);
    console.log(`faults:\n  ${faultLog.join('\n  ')}`);
    await restarting;
    counting = false;
    await simulator('POST', '/_sim/knobs', { delayMs: 0, failureRate: 0, failNext: 0 });
    await ensureRedis();
    if (service === null) await startService();
    const settleStarted = Date.now();
    const final = await settleEverything();
    figures.settleS = Math.round((Date.now() - settleStarted) / 1000);
    await verdict(final);
    const table = figuresTable(DURATION_MS / 1000, startedAt);
    console.log(table);
    if (!args['no-docs']) await writeDocs(table);
    const ok =
      figures.violations === 0 &&
      figures.duplicateConfirms === 0 &&
      figures.paidMismatches === 0 &&
      figures.notFinal === 0 &&
      figures.apiMismatches === 0 &&
      figures.webhookFinalMissing === 0 &&
      figures.webhookOutOfOrder === 0 &&
      webhooks.figures.invalid === 0;
    console.log(ok ? 'chaos: OK' : 'chaos: FAILED');
    exitCode = ok ? 0 : 1;
  } finally {
    await killService();
    simulatorChild.kill('SIGTERM');
    await webhooks.close();
    await ensureRedis();
  }
  process.exit(exitCode);
}

main().catch(async (error) => {
  console.error(error);
  await killService().catch(() => {});
  await ensureRedis().catch(() => {});
  process.exit(1);
});
