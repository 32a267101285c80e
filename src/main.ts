import type { FastifyInstance } from 'fastify';
import { createBroker } from './adapters/broker.js';
import { createSharedState } from './adapters/shared-state.js';
import { openDatabase } from './adapters/database.js';
import { migrate } from './adapters/migrations.js';
import { createPspxClient } from './adapters/pspx/pspx-client.js';
import { createSimulatorServer } from './adapters/pspx/pspx-simulator.js';
import { buildApp } from './app.js';
import { type Config, loadConfig, readConfigFile, secretsOf } from './config.js';
import { applyConfig } from './domain/bootstrap.js';
import { SqlLedger } from './ledger/sql-ledger.js';
import { createMetrics, timedLedger } from './adapters/metrics.js';
import { createFeeEngine } from './domain/fees/index.js';
import { startWorkers } from './workers/index.js';
import { StatusPublisher } from './domain/intents/store/status-publisher.js';
import { startExpirySweep } from './workers/expiry-sweep.js';
import { refuseUnsafeProductionSettings } from './production-checks.js';

export interface RunningService {
  readonly app: FastifyInstance;
  readonly address: string;
  /** Stops accepting requests, lets in-flight ones finish, stops workers, closes connections. */
  close(): Promise<void>;
}

/** The whole process: database, migrations, config, HTTP listener. */
export async function startService(config: Config = loadConfig()): Promise<RunningService> {
  refuseUnsafeProductionSettings(config);
  const db = await openDatabase(config.databaseUrl, config.dataDir);
  await migrate(db);
  const ledger = new SqlLedger();
  await applyConfig(db, ledger, config.file);
  const broker = createBroker(config.redisUrl);
  const shared = createSharedState(config.redisUrl);
  let secrets = secretsOf(config.file);
  /** Throws when CONFIG_FILE is unusable; the previous secrets then stay in force. */
  const reloadSecrets = (): number => {
    secrets = secretsOf(readConfigFile(config.configFile));
    return secrets.size;
  };
  // Without PSPX_URL the simulator listens on loopback, so the real HTTP client is used either way.
  const pspxSimulator = config.pspxUrl === undefined ? await createSimulatorServer() : null;
  const pspx = createPspxClient({ baseUrl: config.pspxUrl ?? pspxSimulator?.url ?? '' });

  const fees = await createFeeEngine({ workers: config.feeWorkers });
  // One registry for the app and the workers of this process: /metrics shows both.
  const metrics = createMetrics({ sql: db });
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
  if (pspxSimulator !== null) app.log.info({ url: pspxSimulator.url }, 'PSPX_URL unset: payouts go to the built-in PSPX simulator');
  if (config.qrSigningSecretGenerated) {
    app.log.warn('QR_SIGNING_SECRET is not set: a random one was generated, invoices will not verify after a restart');
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
  const workers = await startWorkers({
    config,
    db,
    ledger: timedLedger(ledger, metrics),
    pspx,
    broker,
    log: app.log,
    metrics,
    secrets: () => secrets,
  });
  const expirySweep = startExpirySweep({
    db,
    publisher: new StatusPublisher(broker, app.log),
    log: app.log,
    intervalMs: config.expirySweepIntervalMs,
    metrics,
  });
  return {
    app,
    address,
    async close() {
      process.off('SIGHUP', onSighup);
      await app.close();
      // Drains: a PSP step or outbox job in progress finishes before the database closes.
      await workers.stop();
      await expirySweep.stop();
      await fees.dispose();
      await pspxSimulator?.close();
      await broker.close();
      await shared.close();
      await db.close();
    },
  };
}
