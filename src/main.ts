import type { FastifyInstance } from 'fastify';
import { type Broker, createBroker } from './adapters/broker.js';
import type { Logger } from './adapters/logger.js';
import type { PspxClient } from './adapters/pspx/pspx-client.js';
import type { Ledger } from './ledger/ledger.js';
import { createSharedState, evictionPolicyOf } from './adapters/shared-state.js';
import { type Database, openDatabase } from './adapters/database.js';
import { waitForDatabase } from './adapters/database-outage.js';
import { assertMigrated, migrate } from './adapters/migrations.js';
import { createPspxClient } from './adapters/pspx/pspx-client.js';
import { createSimulatorServer, type SimulatorServer } from './adapters/pspx/pspx-simulator.js';
import { simulatorRailsFeed } from './adapters/pspx/simulator-rails.js';
import { buildApp } from './app.js';
import { type Config, ConfigError, loadConfig, readConfigFile, secretsOf } from './config.js';
import { applyConfig, type ServiceKeyDecision } from './domain/bootstrap/apply-config.js';
import { configFileProblems } from './domain/bootstrap/config-file.js';
import { logServiceKeyDecisions } from './domain/bootstrap/service-key-owner.js';
import { SqlLedger } from './ledger/sql-ledger.js';
import { createMetrics, type Metrics, timedLedger } from './observability/metrics.js';
import { createFeeEngine } from './domain/rules/fees/index.js';
import { startWorkers } from './workers/index.js';
import { BALANCE_MONITOR_DEFAULTS } from './workers/balance-monitor.js';
import { StatusPublisher } from './domain/intents/store/status-publisher.js';
import { startExpirySweep } from './workers/expiry-sweep.js';
import { refuseUnsafeProductionSettings, refuseUnstatedSigningInDatabase } from './production-checks.js';
import { keepsSessions, SESSION_POOLING_REQUIRED } from './adapters/pool-mode-probe.js';

export interface RunningService {
  readonly app: FastifyInstance;
  readonly address: string;
  /** Stops accepting requests, lets in-flight ones finish, stops workers, closes connections. */
  close(): Promise<void>;
}

/**
 * The whole process: database, migrations, config, HTTP listener. `start.log` receives the lines
 * written before the app's own logger exists (the wait for the database); `start.signal` ends that wait.
 */
export async function startService(
  config: Config = loadConfig(),
  start: { readonly log?: Logger; readonly signal?: AbortSignal } = {},
): Promise<RunningService> {
  refuseUnsafeProductionSettings(config);
  const [problem] = configFileProblems(config.file);
  if (problem !== undefined) throw new ConfigError(`CONFIG_FILE ${config.configFile}: ${problem}`);
  const db = await openDatabase(config.databaseUrl, config.dataDir, config.databasePoolMode);
  try {
    if (start.log !== undefined) {
      await waitForDatabase(db, {
        waitS: config.startupDbWaitS,
        log: start.log,
        ...(start.signal === undefined ? {} : { signal: start.signal }),
      });
    }
    // Probed once the database answers: a start that waits for it must not fail on the probe first.
    await refuseSessionModeBehindTransactionPooling(config);
    if (config.migrateOnStart) await migrate(db);
    else await assertMigrated(db);
  } catch (error) {
    await db.close();
    throw error;
  }
  const ledger = new SqlLedger();
  let keyDecisions: ServiceKeyDecision[];
  try {
    keyDecisions = await applyConfig(db, ledger, config.file);
    await refuseUnstatedSigningInDatabase(config, db);
  } catch (error) {
    await db.close();
    throw error;
  }
  const broker = createBroker(config.redisUrl);
  const shared = createSharedState(config.redisUrl);
  let secrets = secretsOf(config.file);
  /** Throws when CONFIG_FILE is unusable; the previous secrets then stay in force. */
  const reloadSecrets = (): number => {
    secrets = secretsOf(readConfigFile(config.configFile));
    return secrets.size;
  };
  // Without PSPX_URL the simulator listens on loopback, so the real HTTP client is used either way.
  const pspxSimulator = config.pspxUrl === undefined ? await startDemoSimulator(db) : null;
  // One registry for the app and the workers of this process: /metrics shows both.
  const metrics = createMetrics({ sql: db });
  const pspx = createPspxClient({
    baseUrl: config.pspxUrl ?? pspxSimulator?.url ?? '',
    observeAttempt: (operation, outcome, seconds) => metrics.observePspxAttempt(operation, outcome, seconds),
  });
  metrics.watchPspxBreaker(pspx.breaker);

  const fees = await createFeeEngine({ workers: config.feeWorkers });
  const app = await buildApp({
    config,
    db,
    ledger,
    metrics,
    broker,
    shared,
    pspx,
    fees,
    secrets: () => secrets,
    reloadSecrets,
    logger: { level: config.logLevel },
  });
  logServiceKeyDecisions(app.log, keyDecisions);
  if (pspxSimulator !== null) app.log.info({ url: pspxSimulator.url }, 'PSPX_URL unset: payouts go to the built-in PSPX simulator');
  if (config.qrSigningSecretGenerated) {
    app.log.warn('QR_SIGNING_SECRET is not set: a random one was generated, invoices will not verify after a restart');
  }
  if (shared.redis !== null) {
    // Not awaited: a Redis that is down at start must not hold the start (docs/rules.md R64).
    void evictionPolicyOf(shared.redis).then((policy) => {
      if (policy !== null && policy !== 'noeviction') {
        app.log.warn(
          { maxmemoryPolicy: policy },
          'Redis evicts keys when full (maxmemory-policy is not noeviction): a replay record could be dropped inside its window; set maxmemory-policy noeviction',
        );
      }
    });
  }
  const onSighup = () => {
    try {
      app.log.info({ services: reloadSecrets() }, 'secrets reloaded');
    } catch (error) {
      app.log.error({ err: error }, 'secrets reload failed; the previous secrets stay in force');
    }
  };
  process.on('SIGHUP', onSighup);

  const address = await app.listen({ port: config.port, host: config.host });
  app.log.info({ role: config.role }, `process role: ${config.role}`);
  const background =
    config.role === 'api'
      ? null
      : await startBackgroundWork(config, { db, ledger, metrics, pspx, broker, log: app.log, secrets: () => secrets });
  return {
    app,
    address,
    async close() {
      process.off('SIGHUP', onSighup);
      await app.close();
      // Drains: a PSP step or outbox job in progress finishes before the database closes.
      await background?.stop();
      await fees.dispose();
      await pspxSimulator?.close();
      await broker.close();
      await shared.close();
      await db.close();
    },
  };
}

/** Every worker and the invoice expiry sweep: what a `workers` (or `all`) process runs beside HTTP. */
async function startBackgroundWork(
  config: Config,
  deps: {
    db: Database;
    ledger: Ledger;
    metrics: Metrics;
    pspx: PspxClient;
    broker: Broker;
    log: Logger;
    secrets: () => ReadonlyMap<string, readonly string[]>;
  },
): Promise<{ stop(): Promise<void> }> {
  const { db, metrics, broker, log } = deps;
  const workers = await startWorkers({
    config,
    db,
    ledger: timedLedger(deps.ledger, metrics),
    pspx: deps.pspx,
    broker,
    log,
    metrics,
    secrets: deps.secrets,
  });
  const expirySweep = startExpirySweep({
    db,
    publisher: new StatusPublisher(broker, log),
    log,
    intervalMs: config.expirySweepIntervalMs,
    metrics,
  });
  return {
    async stop() {
      await workers.stop();
      await expirySweep.stop();
    },
  };
}

/**
 * The built-in provider, with its balance fed the top-ups and withdrawals it would see on real
 * rails (simulator-rails.ts), so the balance monitor of a demo reports balance_ok.
 */
async function startDemoSimulator(db: Database): Promise<SimulatorServer> {
  const since = new Date();
  // Each process starts a fresh simulator at its initial balance: a baseline captured against an
  // earlier one does not hold for it, so the monitor captures a new one.
  await db.query('DELETE FROM balance_baselines WHERE provider = $1', [BALANCE_MONITOR_DEFAULTS.provider]);
  let bookRails: (() => Promise<void>) | undefined;
  const server = await createSimulatorServer({ beforeBalance: async () => bookRails?.() });
  bookRails = simulatorRailsFeed(db, server.simulator, BALANCE_MONITOR_DEFAULTS.nostroAccount, since);
  return server;
}

/** docs/rules.md R68: without DATABASE_POOL_MODE=transaction behind transaction pooling, requests would fail one by one with SQL errors. */
async function refuseSessionModeBehindTransactionPooling(config: Config): Promise<void> {
  const url = config.databaseUrl;
  if (config.databasePoolMode !== 'session' || url === undefined || !/^postgres(ql)?:\/\//.test(url)) return;
  if (!(await keepsSessions(url))) throw new ConfigError(SESSION_POOLING_REQUIRED);
}
