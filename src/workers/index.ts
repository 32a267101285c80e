import { PSPX_DEFAULTS } from '../adapters/pspx/pspx-client.js';
import type { Broker } from '../adapters/broker.js';
import type { Database } from '../adapters/database.js';
import type { WorkerMetrics } from '../observability/metrics.js';
import type { PspxClient } from '../adapters/pspx/pspx-client.js';
import type { Config } from '../config.js';
import { CursorSeal } from '../domain/events/cursor-seal.js';
import { StatusPublisher } from '../domain/intents/store/status-publisher.js';
import type { Logger } from '../adapters/logger.js';
import type { Ledger } from '../ledger/ledger.js';
import { BALANCE_MONITOR_DEFAULTS, type BalanceReading, createBalanceMonitor } from './balance-monitor.js';
import { startLoop } from './loop.js';
import { createOutboxWorker, OUTBOX_DEFAULTS } from './outbox-worker.js';
import { createPspWorker, type PspWorkerSettings } from './psp-worker.js';
import { reconcileStuckIntents } from './reconciliation.js';
import { createStatementReconciliationWorker, STATEMENT_CHECK_INTERVAL_MS } from './statement-reconciliation.js';
import { createTableMaintenance } from './table-maintenance.js';
import { createWebhookWorker, WEBHOOK_DEFAULTS } from './webhook-worker.js';
import { createEventFeedWorker } from './event-feed-worker.js';
import { connectEventBus } from '../adapters/event-bus.js';
import { createEventBusPublisher, EVENT_BUS_BATCH_SIZE_MAX, type EventBusPublisher } from './event-bus-publisher.js';

export interface WorkersDeps {
  readonly config: Config;
  readonly db: Database;
  readonly ledger: Ledger;
  readonly pspx: PspxClient;
  readonly broker: Broker;
  readonly log: Logger;
  /** The process's metrics (the app's registry), so /metrics shows the workers' counters. */
  readonly metrics?: WorkerMetrics;
  /** The services' secrets as currently loaded (reloads included): webhooks are signed with them. */
  readonly secrets: () => ReadonlyMap<string, readonly string[]>;
}

export interface RunningWorkers {
  /** Stops every timer, waits for the runs in progress (a PSP step, an outbox job), then resigns the outbox leadership. */
  stop(): Promise<void>;
}

const PSP_BATCH_SIZE_MAX = 20;
/** Payouts in flight per workers process: each mostly waits on the provider, so many overlap cheaply. */
const PSP_CONCURRENCY_MAX = 128;
/** After an unknown answer the step waits this many worker intervals. */
const PSP_RETRY_INTERVALS = 5;
/** A confirm needs this much of the reservation's lifetime left (capped at half of it). */
const CONFIRM_MARGIN_S_MAX = 300;
/** Webhooks of acknowledged events free the next ones of their intents within a run; this paces idle polling. */
const WEBHOOK_INTERVAL_MS = 250;
/** Autovacuum's own naptime. */
const TABLE_MAINTENANCE_INTERVAL_MS = 60_000;
/** PGlite: how often the tables' growth is checked for plans made at a smaller size (a query of pg_class). */
const REPLAN_CHECK_INTERVAL_MS = 2_000;
/** Pruning keeps up with a day's events in small steps; retention is counted in days. */
const EVENT_PRUNE_INTERVAL_MS = 60_000;

export function pspWorkerSettings(config: Config): PspWorkerSettings {
  return {
    batchSizeMax: PSP_BATCH_SIZE_MAX,
    leaseMs: config.pspLeaseMs,
    concurrencyMax: PSP_CONCURRENCY_MAX,
    inquiriesMax: config.pspMaxInquiries,
    // One status inquiry per intent per tick.
    inquiryDelayMs: config.pspWorkerIntervalMs,
    retryDelayMs: config.pspWorkerIntervalMs * PSP_RETRY_INTERVALS,
    ledgerPendingTimeoutS: config.ledgerPendingTimeoutS,
    confirmMarginS: Math.min(CONFIRM_MARGIN_S_MAX, Math.floor(config.ledgerPendingTimeoutS / 2)),
    confirmNotReceivedAfterMs: 2 * PSPX_DEFAULTS.timeoutMs,
  };
}

/**
 * Startup reconciliation first (before anything else can pick the intents up), then the PSP
 * worker, the outbox worker (leader or standby) and the balance monitor on their intervals.
 * The invoice expiry sweep is started on its own (src/workers/expiry-sweep.ts).
 */
export async function startWorkers(deps: WorkersDeps): Promise<RunningWorkers> {
  const { config, db, ledger, pspx, log } = deps;
  const publisher = new StatusPublisher(deps.broker, log);

  try {
    await reconcileStuckIntents({ db, ledger, publisher, log: log.child({ worker: 'reconciliation' }), ageS: config.reconcileAgeS });
  } catch (error) {
    // Not fatal: the API already listens, and the stuck intents are still there at the next start.
    log.error({ event: 'reconciliation_failed', err: error }, 'startup reconciliation failed; the workers start anyway');
  }

  const metrics = deps.metrics === undefined ? {} : { metrics: deps.metrics };
  const psp = createPspWorker({ db, pspx, log: log.child({ worker: 'psp' }), settings: pspWorkerSettings(config), ...metrics });
  const outbox = createOutboxWorker({ db, ledger, publisher, log: log.child({ worker: 'outbox' }), settings: OUTBOX_DEFAULTS, ...metrics });
  const monitor = createBalanceMonitor({
    db,
    ledger,
    pspx,
    log: log.child({ worker: 'balance-monitor' }),
    settings: { ...BALANCE_MONITOR_DEFAULTS, driftThreshold: config.balanceDriftThreshold, lowBalanceFloor: config.lowPartnerBalanceFloor },
  });
  const countBalanceCheck = (reading: BalanceReading) =>
    deps.metrics?.balanceChecked(
      reading.event === 'balance_skipped'
        ? { result: 'skipped' }
        : {
            result: reading.event === 'balance_drift' ? 'drift' : 'ok',
            partnerBalance: reading.partnerBalance,
            difference: reading.difference,
          },
    );
  const cursors = new CursorSeal(config.cursorSealSecret);
  const feed = createEventFeedWorker({ db, log: log.child({ worker: 'event-feed' }), retentionDays: config.eventRetentionDays });
  const webhooks = createWebhookWorker({
    db,
    secrets: deps.secrets,
    log: log.child({ worker: 'webhooks' }),
    cursors,
    settings: { ...WEBHOOK_DEFAULTS, retryBaseMs: config.webhookRetryBaseMs, leaseMs: config.webhookLeaseMs },
    ...metrics,
  });
  const statements = createStatementReconciliationWorker({
    db,
    pspx,
    publisher,
    log: log.child({ worker: 'statement-reconciliation' }),
    reconcileAt: config.reconcileAt,
    ...(deps.metrics === undefined ? {} : { onOutcome: (outcome: string) => deps.metrics?.reconciliationRun(outcome) }),
  });
  const loops = [
    startLoop('statement-reconciliation', STATEMENT_CHECK_INTERVAL_MS, () => statements.runOnce(), log),
    startLoop('event-feed-pruning', EVENT_PRUNE_INTERVAL_MS, () => feed.prune(), log),
    psp.start(config.pspWorkerIntervalMs),
    startLoop('outbox-worker', config.outboxIntervalMs, () => outbox.runOnce(), log),
    startLoop('webhooks', WEBHOOK_INTERVAL_MS, () => webhooks.dispatch(), log),
    startLoop('balance-monitor', config.balanceMonitorIntervalMs, () => monitor.runOnce().then(countBalanceCheck), log),
  ];
  const bus = eventBusPublisher(deps);
  if (bus !== null) {
    // In the outbox leader only: one publisher at a time keeps the stream in feed order.
    loops.push(startLoop('event-bus', config.eventFeedIntervalMs, () => (outbox.isLeader ? bus.runOnce() : bus.standBy()), log));
  }
  if (await lacksAutovacuum(db, log)) {
    const maintenance = createTableMaintenance({ db, log: log.child({ worker: 'table-maintenance' }) });
    loops.push(startLoop('table-maintenance', TABLE_MAINTENANCE_INTERVAL_MS, () => maintenance.runOnce(), log));
    // One session plans every statement on PGlite, so dropping its plans reaches them all; a
    // PostgreSQL pool's sessions each keep their own, and autovacuum's ANALYZE replans them.
    if (db.kind === 'pglite') loops.push(startLoop('table-replan', REPLAN_CHECK_INTERVAL_MS, () => maintenance.replanIfGrown(), log));
  }
  return {
    async stop() {
      await Promise.all(loops.map((loop) => loop.stop()));
      await webhooks.stop();
      await bus?.standBy();
      await outbox.stop();
    },
  };
}

function eventBusPublisher(deps: WorkersDeps): EventBusPublisher | null {
  const { config } = deps;
  const url = config.eventBusUrl;
  if (url === undefined) return null;
  const stream = { streamName: config.eventBusStream, subjectPrefix: config.eventBusSubjectPrefix };
  return createEventBusPublisher({
    db: deps.db,
    connect: () => connectEventBus(url, stream),
    log: deps.log.child({ worker: 'event-bus' }),
    cursors: new CursorSeal(config.cursorSealSecret),
    settings: { subjectPrefix: stream.subjectPrefix, readerName: `nats:${stream.streamName}`, batchSizeMax: EVENT_BUS_BATCH_SIZE_MAX },
  });
}

/**
 * PGlite never runs autovacuum, so payorch does its work there (table-maintenance.ts). A
 * PostgreSQL server with autovacuum off is the operator's choice, and several instances would
 * vacuum over each other: it gets a warning instead.
 */
async function lacksAutovacuum(db: Database, log: Logger): Promise<boolean> {
  if (db.kind === 'pglite') return true;
  const { rows } = await db.query<{ autovacuum: string }>('SHOW autovacuum');
  if (rows[0]?.autovacuum !== 'on') {
    log.warn(
      { event: 'autovacuum_off' },
      'PostgreSQL runs without autovacuum: plans and statistics go stale as tables grow; run VACUUM ANALYZE regularly (docs/OPERATIONS.md)',
    );
  }
  return false;
}
