import { EVENT_BUS_DEFAULTS } from './adapters/event-bus.js';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { Value } from 'typebox/value';
import { type ConfigFile, ConfigFileSchema } from './domain/bootstrap/config-file.js';
import { FEE_WORKERS_DEFAULT } from './domain/rules/fees/pooled-fee-engine.js';
import { DATABASE_POOL_MODES, type DatabasePoolMode } from './adapters/database.js';

/** R49: which parts of the service this process runs; any number of each may share one PostgreSQL. */
export const PROCESS_ROLES = ['all', 'api', 'workers'] as const;
export type ProcessRole = (typeof PROCESS_ROLES)[number];

export interface Config {
  /** PAYORCH_ROLE: `api` serves HTTP without background workers, `workers` runs them and serves only probes and metrics. */
  readonly role: ProcessRole;
  /** MIGRATE_ON_START=false: `serve` does not migrate, and refuses to start on a database that is behind. */
  readonly migrateOnStart: boolean;
  /** STARTUP_DB_WAIT_S: how long `serve` waits for a database that does not answer at start (docs/rules.md R66). */
  readonly startupDbWaitS: number;
  /** DATABASE_POOL_MODE: `transaction` relies on no session state (PgBouncer in transaction pooling mode). */
  readonly databasePoolMode: DatabasePoolMode;
  readonly port: number;
  readonly host: string;
  readonly databaseUrl: string | undefined;
  readonly dataDir: string;
  readonly redisUrl: string | undefined;
  readonly configFile: string;
  /** True when CONFIG_FILE is unset and the shipped demo config (public secrets) is in use. */
  readonly configFileFromDemo: boolean;
  readonly pspxUrl: string | undefined;
  /** PSPX_SIMULATOR=1: the operator chose the built-in simulator; production refuses it otherwise. */
  readonly pspxSimulatorAllowed: boolean;
  readonly adminToken: string | undefined;
  readonly metricsToken: string | undefined;
  readonly qrSigningSecret: string;
  /** True when QR_SIGNING_SECRET was generated: invoices do not verify across restarts. */
  readonly qrSigningSecretGenerated: boolean;
  /** CURSOR_SECRET as set; undefined: unset. */
  readonly cursorSecret: string | undefined;
  /**
   * The key material of event cursors (docs/rules.md R63): CURSOR_SECRET, else QR_SIGNING_SECRET,
   * so that production (which requires the latter) needs no new setting; with neither, a fixed
   * development value, so that cursors survive a restart of `npm start` (production refuses that).
   */
  readonly cursorSealSecret: string;
  readonly production: boolean;
  readonly logLevel: string;
  readonly pspWorkerIntervalMs: number;
  /** How long a PSP worker's claim on an intent lasts (PSP_LEASE_MS). */
  readonly pspLeaseMs: number;
  /** How long a webhook worker's claim on a delivery lasts without renewal (WEBHOOK_LEASE_MS). */
  readonly webhookLeaseMs: number;
  readonly outboxIntervalMs: number;
  readonly expirySweepIntervalMs: number;
  readonly balanceMonitorIntervalMs: number;
  readonly pspMaxInquiries: number;
  readonly ledgerPendingTimeoutS: number;
  readonly reconcileAgeS: number;
  /** RECONCILE_AT: the Bangkok time of day (HH:MM) from which the day before is reconciled with the provider. */
  readonly reconcileAt: string;
  readonly invoiceMaxTtlS: number;
  readonly invoiceDefaultTtlS: number;
  readonly balanceDriftThreshold: bigint;
  /** Satang of partner balance below which `low_partner_balance` is logged (LOW_PARTNER_BALANCE_FLOOR). */
  readonly lowPartnerBalanceFloor: bigint;
  /** Failed authentications a source may make before it is slowed down (AUTH_FAILURE_BURST, docs/SECURITY.md §5). */
  readonly authFailureBurst: number;
  /** Open live status streams per service on one instance (SSE_STREAMS_PER_SERVICE_MAX). */
  readonly sseStreamsPerServiceMax: number;
  /** Worker threads that evaluate fee rules (FEE_WORKERS). */
  readonly feeWorkers: number;
  /** Days the event feed keeps an event (EVENT_RETENTION_DAYS, docs/EVENTS.md); the audit log keeps everything. */
  readonly eventRetentionDays: number;
  /** How often the event bus publisher reads the feed (EVENT_FEED_INTERVAL_MS). */
  readonly eventFeedIntervalMs: number;
  /** EVENT_BUS_URL: `nats://…` publishes every feed event to NATS JetStream (docs/EVENTS.md); unset: no bus. */
  readonly eventBusUrl: string | undefined;
  /** The first webhook retry waits this long, each further one twice as long (WEBHOOK_RETRY_BASE_MS). */
  readonly webhookRetryBaseMs: number;
  /** EVENT_BUS_STREAM / EVENT_BUS_SUBJECT_PREFIX: the stream and its subjects; other values only to share one NATS account between deployments. */
  readonly eventBusStream: string;
  readonly eventBusSubjectPrefix: string;
  /** A request not received whole within this is answered 408 (REQUEST_TIMEOUT_MS, docs/rules.md R61). */
  readonly requestTimeoutMs: number;
  /** Open connections at most; more are closed at once (MAX_CONNECTIONS, docs/rules.md R61). */
  readonly maxConnections: number;
  readonly file: ConfigFile;
}

export const AUTH_FAILURE_BURST_DEFAULT = 20;
export const REQUEST_TIMEOUT_MS_DEFAULT = 30_000;
/** Far above what one instance serves, far below what its file descriptors allow (docs/SECURITY.md). */
export const MAX_CONNECTIONS_DEFAULT = 10_000;
/** A service watching more payments at once than this should poll the feed, not hold connections. */
export const SSE_STREAMS_PER_SERVICE_MAX_DEFAULT = 100;

export const DEMO_CONFIG_FILE = fileURLToPath(new URL('../config/demo.json', import.meta.url));

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/**
 * Reads CONFIG_FILE and checks its shape; any unknown key or wrong shape stops the start with the
 * path of the fault. What the shape cannot say is checked at the start (configFileProblems).
 */
export function readConfigFile(path: string): ConfigFile {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError(`CONFIG_FILE ${path}: ${(error as Error).message}`);
  }
  if (!Value.Check(ConfigFileSchema, parsed)) {
    const problems = [...Value.Errors(ConfigFileSchema, parsed)].slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message}`);
    throw new ConfigError(`CONFIG_FILE ${path} is invalid: ${problems.join('; ')}`);
  }
  return parsed;
}

/** The secrets map: service id to every secret that currently verifies (more than one during rotation). */
export function secretsOf(file: ConfigFile): Map<string, readonly string[]> {
  return new Map(Object.entries(file.secrets).map(([id, value]) => [id, typeof value === 'string' ? [value] : value]));
}

function timeOfDay(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^(?:[01][0-9]|2[0-3]):[0-5][0-9]$/.test(raw)) throw new ConfigError(`${name} must be a time of day HH:MM (got ${raw})`);
  return raw;
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min) throw new ConfigError(`${name} must be an integer >= ${min} (got ${raw})`);
  return value;
}

function oneOf<const Choices extends readonly string[]>(env: NodeJS.ProcessEnv, name: string, choices: Choices): Choices[number] {
  const raw = nonEmpty(env[name]) ?? choices[0];
  const choice = choices.find((candidate) => candidate === raw);
  if (choice === undefined) throw new ConfigError(`${name} must be one of ${choices.join(', ')} (got ${raw})`);
  return choice;
}

function flag(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = nonEmpty(env[name]);
  if (raw === undefined) return fallback;
  if (raw !== 'true' && raw !== 'false') throw new ConfigError(`${name} must be true or false (got ${raw})`);
  return raw === 'true';
}

/** Long enough for a consumer that was down over a holiday to catch up; the audit log keeps everything anyway. */
export const EVENT_RETENTION_DAYS_DEFAULT = 30;

/** NATS servers, comma-separated as the NATS tools take them; each must be a nats:// address. */
function eventBusUrl(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  for (const server of value.split(',')) {
    if (!/^(nats|tls):\/\/[^\s/]+$/.test(server.trim()))
      throw new ConfigError('EVENT_BUS_URL must be nats://host:port (comma-separated for several servers)');
  }
  return value;
}

function natsName(env: NodeJS.ProcessEnv, name: string, fallback: string, pattern: RegExp): string {
  const value = nonEmpty(env[name]) ?? fallback;
  if (!pattern.test(value)) throw new ConfigError(`${name} must match ${pattern.source}`);
  return value;
}

/** Not a secret: used only outside production, where QR_SIGNING_SECRET may be unset. */
const DEVELOPMENT_CURSOR_SECRET = 'payorch development cursor seal: not for production';

const nonEmpty = (value: string | undefined) => (value === undefined || value === '' ? undefined : value);

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const configFile = nonEmpty(env.CONFIG_FILE) ?? DEMO_CONFIG_FILE;
  const qrSecret = nonEmpty(env.QR_SIGNING_SECRET);
  const config: Config = Object.freeze({
    role: oneOf(env, 'PAYORCH_ROLE', PROCESS_ROLES),
    migrateOnStart: flag(env, 'MIGRATE_ON_START', true),
    databasePoolMode: oneOf(env, 'DATABASE_POOL_MODE', DATABASE_POOL_MODES),
    startupDbWaitS: integer(env, 'STARTUP_DB_WAIT_S', 60),
    port: integer(env, 'PORT', 3000),
    host: nonEmpty(env.HOST) ?? '127.0.0.1',
    databaseUrl: nonEmpty(env.DATABASE_URL),
    dataDir: nonEmpty(env.DATA_DIR) ?? './.data',
    redisUrl: nonEmpty(env.REDIS_URL),
    configFile,
    configFileFromDemo: nonEmpty(env.CONFIG_FILE) === undefined,
    pspxUrl: nonEmpty(env.PSPX_URL),
    pspxSimulatorAllowed: env.PSPX_SIMULATOR === '1',
    adminToken: nonEmpty(env.ADMIN_TOKEN),
    metricsToken: nonEmpty(env.METRICS_TOKEN),
    qrSigningSecret: qrSecret ?? randomBytes(32).toString('hex'),
    qrSigningSecretGenerated: qrSecret === undefined,
    cursorSecret: nonEmpty(env.CURSOR_SECRET),
    cursorSealSecret: nonEmpty(env.CURSOR_SECRET) ?? qrSecret ?? DEVELOPMENT_CURSOR_SECRET,
    production: env.NODE_ENV === 'production',
    logLevel: nonEmpty(env.LOG_LEVEL) ?? 'info',
    pspWorkerIntervalMs: integer(env, 'PSP_WORKER_INTERVAL_MS', 1000, 1),
    // Covers one PSP step: a provider call of 3 attempts × 3000 ms plus backoff, with room to spare.
    pspLeaseMs: integer(env, 'PSP_LEASE_MS', 3_000, 1),
    webhookLeaseMs: integer(env, 'WEBHOOK_LEASE_MS', 3_000, 1),
    outboxIntervalMs: integer(env, 'OUTBOX_INTERVAL_MS', 1000, 1),
    expirySweepIntervalMs: integer(env, 'EXPIRY_SWEEP_INTERVAL_MS', 30_000, 1),
    balanceMonitorIntervalMs: integer(env, 'BALANCE_MONITOR_INTERVAL_MS', 60_000, 1),
    pspMaxInquiries: integer(env, 'PSP_MAX_INQUIRIES', 5, 1),
    ledgerPendingTimeoutS: integer(env, 'LEDGER_PENDING_TIMEOUT_S', 1800, 1),
    reconcileAgeS: integer(env, 'RECONCILE_AGE_S', 300, 0),
    reconcileAt: timeOfDay(env, 'RECONCILE_AT', '02:00'),
    invoiceMaxTtlS: integer(env, 'INVOICE_MAX_TTL_SECONDS', 3600, 1),
    invoiceDefaultTtlS: integer(env, 'INVOICE_DEFAULT_TTL_SECONDS', 600, 1),
    balanceDriftThreshold: BigInt(integer(env, 'BALANCE_DRIFT_THRESHOLD', 10_000)),
    lowPartnerBalanceFloor: BigInt(integer(env, 'LOW_PARTNER_BALANCE_FLOOR', 1_000_000)),
    authFailureBurst: integer(env, 'AUTH_FAILURE_BURST', AUTH_FAILURE_BURST_DEFAULT, 1),
    sseStreamsPerServiceMax: integer(env, 'SSE_STREAMS_PER_SERVICE_MAX', SSE_STREAMS_PER_SERVICE_MAX_DEFAULT, 1),
    feeWorkers: integer(env, 'FEE_WORKERS', FEE_WORKERS_DEFAULT, 1),
    eventRetentionDays: integer(env, 'EVENT_RETENTION_DAYS', EVENT_RETENTION_DAYS_DEFAULT, 1),
    eventFeedIntervalMs: integer(env, 'EVENT_FEED_INTERVAL_MS', 250, 1),
    eventBusUrl: eventBusUrl(nonEmpty(env.EVENT_BUS_URL)),
    webhookRetryBaseMs: integer(env, 'WEBHOOK_RETRY_BASE_MS', 1000, 1),
    eventBusStream: natsName(env, 'EVENT_BUS_STREAM', EVENT_BUS_DEFAULTS.streamName, /^[A-Za-z0-9_-]{1,64}$/),
    eventBusSubjectPrefix: natsName(
      env,
      'EVENT_BUS_SUBJECT_PREFIX',
      EVENT_BUS_DEFAULTS.subjectPrefix,
      /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/,
    ),
    requestTimeoutMs: integer(env, 'REQUEST_TIMEOUT_MS', REQUEST_TIMEOUT_MS_DEFAULT, 1),
    maxConnections: integer(env, 'MAX_CONNECTIONS', MAX_CONNECTIONS_DEFAULT, 1),
    file: readConfigFile(configFile),
  });
  return config;
}
