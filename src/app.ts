import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import type { Broker } from './adapters/broker.js';
import { createMemorySharedState, type SharedState } from './adapters/shared-state.js';
import type { Database } from './adapters/database.js';
import { DatabaseOutage } from './adapters/database-outage.js';
import { RedisHealth, withDatabaseFallback, withMemoryFallback } from './adapters/redis-fallback.js';
import type { Config } from './config.js';
import type { Ledger } from './ledger/ledger.js';
import type { PspxClient } from './adapters/pspx/pspx-client.js';
import { createMetrics, type Metrics, timedLedger } from './observability/metrics.js';
import { adminIntentRoutes } from './http/routes/admin/intents.js';
import { adminResolveRoutes } from './http/routes/admin/resolve.js';
import { adminReconciliationRoutes } from './http/routes/admin/reconciliation.js';
import { intentStreamRoutes } from './http/routes/intent-stream.js';
import { eventRoutes } from './http/routes/events.js';
import { metricsRoutes } from './http/routes/metrics.js';
import { consoleRoutes } from './http/routes/console.js';
import { BODY_LIMIT_BYTES, registerAuth } from './http/plugins/auth.js';
import { frameworkErrors, registerErrorHandling } from './http/plugins/errors.js';
import { registerOpenApi } from './http/plugins/openapi.js';
import { Throttle } from './http/plugins/throttle.js';
import { createTokenBuckets } from './adapters/token-buckets.js';
import { accountRoutes } from './http/routes/accounts.js';
import { statementRoutes } from './http/routes/statements.js';
import { adminRoutes } from './http/routes/admin/index.js';
import { adminAuditRoutes } from './http/routes/admin/audit.js';
import type { ReloadSecrets } from './http/routes/admin/system.js';
import { policyRoutes } from './http/routes/policies.js';
import { feeDryRunRoutes } from './http/routes/admin/fee-dry-run.js';
import { intentRoutes } from './http/routes/intents.js';
import { invoiceRoutes } from './http/routes/invoices.js';
import { refundRoutes } from './http/routes/refunds.js';
import { RefundCommitter } from './domain/refunds/refund-commit.js';
import type { FeeEngine } from './domain/rules/fees/index.js';
import { sharedAccountLookup } from './domain/accounts/accounts.js';
import { sharedIntentLookup } from './domain/intents/store/intent-store.js';
import { IntentCommitter } from './domain/intents/commit/intent-commit.js';
import { PayerLocks } from './domain/intents/commit/payer-locks.js';
import { StatusPublisher } from './domain/intents/store/status-publisher.js';
import { pspxWalletRoutes } from './http/routes/pspx-wallets.js';
import { healthRoutes, probeRoutes, startEventLoopMonitor } from './http/routes/health.js';
import { createValidatorCompiler } from './http/validation.js';
import { type LogSettings, loggerOptions } from './http/log-options.js';
import { VERSION } from './version.js';
import { REQUEST_ID_HEADER, requestIdOf } from './http/request-id.js';
import { ConfigCache } from './domain/auth/config-cache.js';
import { departureFor } from './adapters/coalesced-reads.js';
import { CursorSeal } from './domain/events/cursor-seal.js';

export interface AppDeps {
  readonly config: Config;
  readonly db: Database;
  readonly ledger: Ledger;
  readonly broker: Broker;
  readonly pspx: PspxClient;
  readonly fees: FeeEngine;
  /** Read per request, so that a reload of CONFIG_FILE rotates secrets without a restart. */
  readonly secrets: () => ReadonlyMap<string, readonly string[]>;
  /** Re-reads CONFIG_FILE's secrets (POST /admin/config/reload); returns the number of services. Absent: that route answers 503. */
  readonly reloadSecrets?: ReloadSecrets;
  /** Absent: no log lines (tests that do not read them). */
  readonly logger?: LogSettings;
  /** Shared with the workers of the process (main.ts); one is made per app when absent. */
  readonly metrics?: Metrics;
  /** Replay caches and rate limits, agreed by every instance through Redis (main.ts); this app's own memory when absent. */
  readonly shared?: SharedState;
}

/**
 * One access line per request, when it completes, with its method and URL; Fastify also writes
 * one when each request arrives, a third of the log lines of a payment.
 */
class CompletionLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}

/** A request whose headers have not all arrived by then is answered 408 (docs/rules.md R61). */
export const HEADERS_TIMEOUT_MS = 10_000;
const CONNECTIONS_CHECKING_INTERVAL_MS = 1_000;

/** Builds the HTTP application; never listens (main.ts and tests decide that). */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: deps.logger === undefined ? false : loggerOptions(deps.logger),
    bodyLimit: BODY_LIMIT_BYTES,
    // Validated by genReqId instead: an unacceptable X-Request-Id gets a new id, not a rejection.
    requestIdHeader: false,
    genReqId: requestIdOf,
    frameworkErrors,
    logController: new CompletionLog({ requestIdLogLabel: 'requestId' }),
    // docs/rules.md R61: a connection that dribbles its headers or body is answered 408 and closed,
    // checked every second rather than Node's 30 s, so held connections cannot pile up.
    requestTimeout: deps.config.requestTimeoutMs,
    http: {
      headersTimeout: Math.min(HEADERS_TIMEOUT_MS, deps.config.requestTimeoutMs),
      connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
    },
  });
  // Past the cap Node closes a new connection as soon as it is accepted: the ones open keep their service.
  app.server.maxConnections = deps.config.maxConnections;
  app.addHook('onRequest', async (request, reply) => {
    reply.header(REQUEST_ID_HEADER, request.id);
  });
  const given = deps.shared ?? createMemorySharedState();
  if (deps.shared === undefined) app.addHook('onClose', async () => given.close());
  // docs/rules.md R64: with Redis, each request-path call is bounded and has its fallback.
  const redisHealth = given.redis === null ? null : new RedisHealth(app.log);
  const shared = redisHealth === null ? given : withDatabaseFallback(given, deps.db, redisHealth);
  app.setValidatorCompiler(createValidatorCompiler());
  const outage = new DatabaseOutage(deps.db, app.log);
  app.addHook('onClose', async () => outage.stop());
  registerErrorHandling(app, deps.config.production, outage);
  const metrics = deps.metrics ?? createMetrics({ sql: deps.db });
  const cursors = new CursorSeal(deps.config.cursorSealSecret);
  const servesApi = deps.config.role !== 'workers';
  if (servesApi) {
    // One per app: every request checks it against the database's config version (config-cache.ts).
    const configCache = new ConfigCache(deps.db, departureFor(deps.db));
    const buckets = redisHealth === null ? createTokenBuckets(shared) : withMemoryFallback(createTokenBuckets(shared), redisHealth);
    const throttle = new Throttle(buckets, metrics, app.log, deps.config.authFailureBurst);
    registerAuth(app, { sql: deps.db, config: configCache, secrets: deps.secrets, adminToken: deps.config.adminToken, shared, throttle });
    await registerOpenApi(app, VERSION);
  }
  metricsRoutes(app, { metrics, token: deps.config.metricsToken });

  const monitor = startEventLoopMonitor();
  app.addHook('onClose', async () => monitor.stop());
  app.addHook('onListen', async () => monitor.restart());

  const databaseFailed = (error: unknown) => outage.failed(error);
  healthRoutes(app, { sql: deps.db, ledger: deps.ledger, version: VERSION, eventLoopDelayMs: monitor.delayMs, databaseFailed });
  probeRoutes(app, { sql: deps.db, databaseFailed, ...(redisHealth === null ? {} : { redisState: () => redisHealth.state }) });
  if (redisHealth !== null) metrics.watchRedis(() => redisHealth.state === 'ok');
  // A workers process answers its probes and its metrics, nothing a client could call.
  if (!servesApi) return app;
  accountRoutes(app, { db: deps.db, ledger: deps.ledger });
  statementRoutes(app, { db: deps.db });
  policyRoutes(app, { db: deps.db });
  await adminRoutes(app, { db: deps.db, feeEngine: deps.fees, reloadSecrets: deps.reloadSecrets, production: deps.config.production });
  const ledger = timedLedger(deps.ledger, metrics);
  const intentDeps = {
    db: deps.db,
    ledger,
    committer: new IntentCommitter(
      deps.db,
      ledger,
      (size) => metrics.observeIntentBatch(size),
      (call, outcome) => metrics.observeIntentBet(call, outcome),
    ),
    accounts: sharedAccountLookup(deps.db),
    intents: sharedIntentLookup(deps.db),
    fees: deps.fees,
    publisher: new StatusPublisher(deps.broker, app.log),
    locks: new PayerLocks(),
    settings: deps.config,
  };
  intentRoutes(app, intentDeps);
  invoiceRoutes(app, intentDeps);
  refundRoutes(app, {
    db: deps.db,
    refunds: new RefundCommitter(deps.db, ledger, deps.config.ledgerPendingTimeoutS),
    intents: intentDeps.intents,
    locks: intentDeps.locks,
  });
  feeDryRunRoutes(app, { fees: deps.fees });
  pspxWalletRoutes(app, { db: deps.db, pspx: deps.pspx });
  adminAuditRoutes(app, { db: deps.db });
  intentStreamRoutes(app, {
    db: deps.db,
    broker: deps.broker,
    cursors,
    openStreams: metrics.liveStreams,
    streamsPerServiceMax: deps.config.sseStreamsPerServiceMax,
    onRefused: () => metrics.rateLimited('streams'),
  });
  eventRoutes(app, { db: deps.db, cursors });
  adminIntentRoutes(app, { db: deps.db });
  adminResolveRoutes(app, { db: deps.db, publisher: intentDeps.publisher });
  adminReconciliationRoutes(app, { db: deps.db, publisher: intentDeps.publisher, pspx: deps.pspx, log: app.log });
  await consoleRoutes(app, { db: deps.db, ledger: deps.ledger, adminTokenConfigured: deps.config.adminToken !== undefined });
  return app;
}
