import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ageSampler } from './age-metrics.js';
import type { PoolStats, Sql } from '../adapters/database.js';
import type { Ledger } from '../ledger/ledger.js';
import type { AttemptOutcome, CircuitBreaker, PspxOperation } from '../adapters/pspx/pspx-client.js';
import { VERSION } from '../version.js';
import { FEED_HORIZON_SQL } from '../domain/events/feed.js';
import type { LedgerCall } from '../domain/intents/commit/ledger-call.js';
import type { BetOutcome } from '../domain/intents/commit/intent-commit.js';

/**
 * Prometheus metrics of one app instance. Each instance owns its registry (tests build several apps
 * in one process, and prom-client's global registry would refuse a second metric of one name).
 * The domain never imports this module: HTTP hooks, the ledger decorator below and the workers'
 * explicit dependencies do the counting.
 */

/** Seconds; from 5 ms (a cached read) to 10 s (a request stuck behind a lock). */
const HTTP_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** A PSPX attempt: a healthy provider answers in tens of ms; the client gives up at 3 s by default. */
const PSPX_BUCKETS_S = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
/** payorch_pspx_circuit_breaker_state's values: ordered, so `> 0` means "not sending freely". */
const BREAKER_STATE_VALUES = { closed: 0, 'half-open': 1, open: 2 } as const;
/** A ledger batch is one database round trip; finer at the low end than the HTTP buckets. */
const LEDGER_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** What the workers may update; a narrow view so that a worker's deps name only these. */
export interface WorkerMetrics {
  /** An intent reached a final status (SETTLED, FAILED, CANCELED, EXPIRED) outside an HTTP request. */
  intentFinished(operationType: string, channel: string, status: string, count?: number): void;
  /** PSPX payouts the PSP worker is processing right now, in this process. */
  readonly pspInFlight: { inc(): void; dec(): void };
  /** One status inquiry sent to the provider. */
  pspInquiry(): void;
  /** A payout moved to MANUAL_REVIEW: an operator has to resolve it. */
  pspEscalation(): void;
  /** Invoices the expiry sweep moved to EXPIRED. */
  invoicesExpired(count: number): void;
  /** One balance monitor check: `ok`/`drift` with the readings (satang), or `skipped` (no answer from PSPX). */
  balanceChecked(
    check:
      | { readonly result: 'ok' | 'drift'; readonly partnerBalance: bigint; readonly difference: bigint }
      | { readonly result: 'skipped' },
  ): void;
  /** One webhook POST and how it ended (acknowledged, or why not). */
  webhookAttempt(outcome: string): void;
  /** One attempt of the daily reconciliation with the provider: balanced, breaks, not_closed or failed. */
  reconciliationRun(outcome: string): void;
}

export interface Metrics extends WorkerMetrics {
  readonly registry: Registry;
  observeRequest(labels: { method: string; route: string; statusCode: number }, seconds: number): void;
  intentCreated(operationType: string, channel: string): void;
  /** A POST /intents refused with a 4xx (nothing stored), by error code. */
  intentRefused(operationType: string, error: string): void;
  /** POST /intents/{id}/refunds, by outcome: SETTLED, FAILED (stored), or the error code of a refusal that stored nothing. */
  refundOutcome(outcome: string): void;
  observeLedgerBatch(result: LedgerBatchResult, seconds: number): void;
  /** Intents committed in one group-commit transaction. */
  observeIntentBatch(size: number): void;
  /** A batch of new intents sent with a bet on its ledger call (docs/OPERATIONS.md, Metrics), and how the bet ended. */
  observeIntentBet(call: LedgerCall, outcome: BetOutcome): void;
  readonly liveStreams: { inc(): void; dec(): void };
  /** A request refused 401, by a bounded reason (docs/SECURITY.md §5). */
  authFailure(reason: string): void;
  /** A request refused 429: over its service's rate, from a failing source, or past the stream cap. */
  rateLimited(reason: string): void;
  /** One attempt sent to PSPX (the client's `observeAttempt`). */
  observePspxAttempt(operation: PspxOperation, outcome: AttemptOutcome, seconds: number): void;
  /** The breaker whose state the breaker gauge shows at each scrape. */
  watchPspxBreaker(breaker: Pick<CircuitBreaker, 'state'>): void;
  /** Whether the request path last found Redis answering, for payorch_redis_up (docs/rules.md R64). */
  watchRedis(answers: () => boolean): void;
  /** Runs the scrape-time samplers (one SQL query for the outbox) and renders the text format. */
  render(): Promise<string>;
  readonly contentType: string;
}

/**
 * ok: every transfer applied; rejected: the ledger returned at least one result (a refusal, or
 * `exists` on a retried step); error: the call threw.
 */
export type LedgerBatchResult = 'ok' | 'rejected' | 'error';

export interface MetricsOptions {
  /**
   * Where the outbox gauges are read at scrape time; without it they stay absent. A database with
   * a pool (PostgreSQL) also gets the pool gauges; PGlite, one connection, has none.
   */
  readonly sql?: Sql & { readonly poolStats?: () => PoolStats };
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  const registers = [registry];
  // Process metrics, among them nodejs_eventloop_lag_* (the same signal as the health probe's 503).
  collectDefaultMetrics({ register: registry });

  const httpDuration = new Histogram({
    name: 'payorch_http_request_duration_seconds',
    help: 'HTTP request latency by route pattern, method and status code.',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: HTTP_BUCKETS_S,
    registers,
  });
  const created = new Counter({
    name: 'payorch_intents_created_total',
    help: 'Intents stored by POST /intents (replays excluded), by operation type and channel.',
    labelNames: ['operation_type', 'channel'] as const,
    registers,
  });
  const finished = new Counter({
    name: 'payorch_intents_finished_total',
    help: 'Intents that reached SETTLED, FAILED, CANCELED or EXPIRED, by operation type, channel and final status.',
    labelNames: ['operation_type', 'channel', 'status'] as const,
    registers,
  });
  const refused = new Counter({
    name: 'payorch_intents_refused_total',
    help: 'POST /intents answered with a 4xx (nothing stored), by operation type and error code.',
    labelNames: ['operation_type', 'error'] as const,
    registers,
  });
  const refunds = new Counter({
    name: 'payorch_refunds_total',
    help: 'POST /intents/{id}/refunds answered (replays excluded), by outcome: SETTLED or FAILED (stored), or the error code of a refusal that stored nothing.',
    labelNames: ['outcome'] as const,
    registers,
  });
  const ledgerDuration = new Histogram({
    name: 'payorch_ledger_create_transfers_duration_seconds',
    help: 'Latency of one ledger createTransfers batch, by result.',
    labelNames: ['result'] as const,
    buckets: LEDGER_BUCKETS_S,
    registers,
  });
  const intentBatch = new Histogram({
    name: 'payorch_intent_commit_batch_size',
    help: 'Intents stored by one group-commit transaction of POST /intents.',
    buckets: [1, 2, 4, 8, 16, 32, 64],
    registers,
  });
  const intentBets = new Counter({
    name: 'payorch_intent_commit_bets_total',
    help: 'Group-commit transactions of POST /intents by the ledger call they were sent with (with-open: a bet on every intent opening; with-close: on every transfer applying too; after-open: no bet) and whether the bet stood (none: no bet).',
    labelNames: ['ledger_call', 'outcome'] as const,
    registers,
  });
  const pspInFlight = new Gauge({
    name: 'payorch_psp_in_flight',
    help: 'PSPX payouts the PSP worker of this process is processing.',
    registers,
  });
  const pspInquiries = new Counter({ name: 'payorch_psp_inquiries_total', help: 'Status inquiries sent to the PSPX provider.', registers });
  const escalations = new Counter({ name: 'payorch_psp_escalations_total', help: 'PSPX payouts moved to MANUAL_REVIEW.', registers });
  const expiries = new Counter({
    name: 'payorch_invoice_expiries_total',
    help: 'Invoices moved to EXPIRED by the expiry sweep.',
    registers,
  });
  const streams = new Gauge({ name: 'payorch_live_streams_open', help: 'Open GET /intents/{id}/stream connections.', registers });
  const authFailures = new Counter({
    name: 'payorch_auth_failures_total',
    help: 'Requests refused 401 UNAUTHORIZED, by reason.',
    labelNames: ['reason'] as const,
    registers,
  });
  const rateLimited = new Counter({
    name: 'payorch_rate_limited_total',
    help: 'Requests refused 429 RATE_LIMITED, by reason.',
    labelNames: ['reason'] as const,
    registers,
  });
  new Gauge({
    name: 'payorch_build_info',
    help: 'Always 1; the labels name the running build, so a dashboard shows which version serves.',
    labelNames: ['version', 'nodejs_version'] as const,
    registers,
  }).set({ version: VERSION, nodejs_version: process.versions.node }, 1);
  const pspxDuration = new Histogram({
    name: 'payorch_pspx_request_duration_seconds',
    help: 'Latency of one attempt sent to PSPX, by operation and outcome (answer, timeout, network, http_5xx, bad_response).',
    labelNames: ['operation', 'outcome'] as const,
    buckets: PSPX_BUCKETS_S,
    registers,
  });
  const poolStats = options.sql?.poolStats;
  let pspxBreaker: Pick<CircuitBreaker, 'state'> | undefined;
  new Gauge({
    name: 'payorch_pspx_circuit_breaker_state',
    help: 'The PSPX circuit breaker of this process: 0 closed, 1 half-open (one trial call), 2 open (nothing sent).',
    registers,
    collect() {
      if (pspxBreaker !== undefined) this.set(BREAKER_STATE_VALUES[pspxBreaker.state]);
    },
  });
  let redisAnswers: (() => boolean) | undefined;
  new Gauge({
    name: 'payorch_redis_up',
    help: 'With REDIS_URL: 1 while the request path finds Redis answering within 100 ms, 0 while it uses the fallbacks (docs/rules.md R64).',
    registers,
    collect() {
      if (redisAnswers !== undefined) this.set(redisAnswers() ? 1 : 0);
    },
  });
  if (poolStats !== undefined) {
    const poolGauge = (name: string, help: string, read: (stats: PoolStats) => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read(poolStats()));
        },
      });
    poolGauge('payorch_db_pool_connections', 'PostgreSQL connections the pool holds open, in use or idle.', (stats) => stats.total);
    poolGauge('payorch_db_pool_connections_idle', 'PostgreSQL connections of the pool not in use.', (stats) => stats.idle);
    poolGauge('payorch_db_pool_waiting', 'Queries and transactions waiting for a pool connection.', (stats) => stats.waiting);
  }
  const balanceChecks = new Counter({
    name: 'payorch_balance_checks_total',
    help: 'Balance monitor checks of the PSPX partner balance against the ledger, by result (ok, drift, skipped).',
    labelNames: ['result'] as const,
    registers,
  });
  const partnerBalance = new Gauge({
    name: 'payorch_pspx_partner_balance',
    help: 'The PSPX partner balance at the last balance check, in satang.',
    registers,
  });
  const balanceDifference = new Gauge({
    name: 'payorch_pspx_balance_difference',
    help: 'Partner balance minus what the ledger expects at the last balance check, in satang; 0 inside the expected range.',
    registers,
  });
  const webhookAttempts = new Counter({
    name: 'payorch_webhook_attempts_total',
    help: 'Webhook POSTs by outcome: acknowledged (2xx), http_error, timeout, network_error, no_secret.',
    labelNames: ['outcome'] as const,
    registers,
  });
  const reconciliationRuns = new Counter({
    name: 'payorch_reconciliation_runs_total',
    help: 'Attempts of the daily reconciliation with the provider by outcome: balanced, breaks, not_closed (tried again later), failed.',
    labelNames: ['outcome'] as const,
    registers,
  });
  const samplers: Array<() => Promise<void>> = [];
  if (options.sql !== undefined)
    samplers.push(
      outboxSampler(options.sql, registers),
      webhookSampler(options.sql, registers),
      eventFeedSampler(options.sql, registers),
      reconciliationSampler(options.sql, registers),
      ageSampler(options.sql, registers),
    );

  return {
    registry,
    contentType: registry.contentType,
    observeRequest: ({ method, route, statusCode }, seconds) =>
      httpDuration.observe({ method, route, status_code: String(statusCode) }, seconds),
    intentCreated: (operationType, channel) => created.inc({ operation_type: operationType, channel }),
    intentFinished: (operationType, channel, status, count = 1) => {
      if (count > 0) finished.inc({ operation_type: operationType, channel, status }, count);
    },
    intentRefused: (operationType, error) => refused.inc({ operation_type: operationType, error }),
    refundOutcome: (outcome) => refunds.inc({ outcome }),
    observeLedgerBatch: (result, seconds) => ledgerDuration.observe({ result }, seconds),
    observeIntentBatch: (size) => intentBatch.observe(size),
    observeIntentBet: (call, outcome) => intentBets.inc({ ledger_call: call, outcome }),
    pspInFlight: { inc: () => pspInFlight.inc(), dec: () => pspInFlight.dec() },
    pspInquiry: () => pspInquiries.inc(),
    pspEscalation: () => escalations.inc(),
    invoicesExpired: (count) => {
      if (count > 0) expiries.inc(count);
    },
    balanceChecked: (check) => {
      balanceChecks.inc({ result: check.result });
      if (check.result === 'skipped') return;
      partnerBalance.set(Number(check.partnerBalance));
      balanceDifference.set(Number(check.difference));
    },
    webhookAttempt: (outcome) => webhookAttempts.inc({ outcome }),
    reconciliationRun: (outcome) => reconciliationRuns.inc({ outcome }),
    liveStreams: { inc: () => streams.inc(), dec: () => streams.dec() },
    authFailure: (reason) => authFailures.inc({ reason }),
    rateLimited: (reason) => rateLimited.inc({ reason }),
    observePspxAttempt: (operation, outcome, seconds) => pspxDuration.observe({ operation, outcome }, seconds),
    watchPspxBreaker: (breaker) => {
      pspxBreaker = breaker;
    },
    watchRedis: (answers) => {
      redisAnswers = answers;
    },
    async render() {
      await Promise.all(samplers.map((sample) => sample()));
      return registry.metrics();
    },
  };
}

/**
 * Outbox depth, the age of its oldest open job and the MANUAL_REVIEW queue, read with one query at scrape time: the table
 * is the truth across every instance, and the open-job index keeps the query cheap. A failed read
 * sets the depth to -1, so the scrape still answers and a dashboard tells "unknown" from "empty".
 */
/**
 * The latest finished reconciliation run (docs/rules.md R59), read at scrape time: its breaks by
 * kind, and the age in days of the statement date it covered, so an alert sees both a day with
 * breaks and days that were never reconciled. -1 when the database could not be read.
 */
function reconciliationSampler(sql: Sql, registers: Registry[]): () => Promise<void> {
  const breaks = new Gauge({
    name: 'payorch_reconciliation_breaks',
    help: 'Breaks of the latest finished reconciliation run, by kind; -1 when the database could not be read.',
    labelNames: ['kind'] as const,
    registers,
  });
  const age = new Gauge({
    name: 'payorch_reconciliation_latest_date_age_days',
    help: 'Days from the statement date of the latest finished reconciliation run to today (UTC); -1 when there is none.',
    registers,
  });
  // A day whose lines all match can still be BREAKS: the provider's movement differs from the
  // nostro's posted movement (docs/rules.md R59), which no break kind counts.
  const movementDifference = new Gauge({
    name: 'payorch_reconciliation_movement_difference',
    help: "Satang by which the provider's movement of the latest finished reconciliation run differs from the nostro's posted movement (provider − books); 0 when there is none.",
    registers,
  });
  const kinds = ['MISSING_AT_PROVIDER', 'MISSING_HERE', 'AMOUNT_MISMATCH', 'STATUS_MISMATCH', 'UNKNOWN_LINE'] as const;
  return async () => {
    try {
      const { rows } = await sql.query<{ kind: string | null; count: number; age_days: number; difference: string | null }>(
        `WITH latest AS (SELECT id, statement_date, provider_movement - nostro_movement AS difference
                           FROM reconciliation_runs WHERE status <> 'RUNNING'
                          ORDER BY statement_date DESC, finished_at DESC LIMIT 1)
         SELECT b.outcome AS kind, count(b.outcome)::int AS count,
                (current_date - to_date(latest.statement_date, 'YYYYMMDD'))::int AS age_days,
                latest.difference::text AS difference
           FROM latest LEFT JOIN reconciliation_items b ON b.run_id = latest.id AND b.outcome <> 'MATCHED'
          GROUP BY b.outcome, latest.statement_date, latest.difference`,
      );
      for (const kind of kinds) breaks.set({ kind }, rows.find((row) => row.kind === kind)?.count ?? 0);
      age.set(rows[0]?.age_days ?? -1);
      movementDifference.set(Number(rows[0]?.difference ?? 0));
    } catch {
      for (const kind of kinds) breaks.set({ kind }, -1);
    }
  };
}

function outboxSampler(sql: Sql, registers: Registry[]): () => Promise<void> {
  const depth = new Gauge({
    name: 'payorch_outbox_depth',
    help: 'Open outbox jobs (not done); -1 when the database could not be read.',
    registers,
  });
  const oldestAge = new Gauge({
    name: 'payorch_outbox_oldest_job_age_seconds',
    help: 'Age of the oldest open outbox job; 0 when the outbox is empty.',
    registers,
  });
  const manualReview = new Gauge({
    name: 'payorch_intents_manual_review',
    help: 'Intents in MANUAL_REVIEW, waiting for an operator; -1 when the database could not be read.',
    registers,
  });
  return async () => {
    try {
      // The MANUAL_REVIEW count reads the partial index of in-flight intents, not the table.
      const { rows } = await sql.query<{ depth: number; oldest_age_s: number; manual_review: number }>(
        `SELECT count(*)::int AS depth, COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_age_s,
                (SELECT count(*)::int FROM intents WHERE status = 'MANUAL_REVIEW') AS manual_review
           FROM outbox WHERE done_at IS NULL`,
      );
      depth.set(rows[0]?.depth ?? 0);
      oldestAge.set(Math.max(0, rows[0]?.oldest_age_s ?? 0));
      manualReview.set(rows[0]?.manual_review ?? 0);
    } catch {
      depth.set(-1);
      manualReview.set(-1);
    }
  };
}

/**
 * Webhooks still owed, read at scrape time like the outbox: the backlog (not yet acknowledged, not
 * dead), the age of its oldest event (what an alert watches: a receiver down, or delivery stuck),
 * and the dead ones waiting for an operator. -1 when the database could not be read.
 */
function webhookSampler(sql: Sql, registers: Registry[]): () => Promise<void> {
  const backlog = new Gauge({
    name: 'payorch_webhook_backlog',
    help: 'Webhook events not yet acknowledged and not dead; -1 when the database could not be read.',
    registers,
  });
  const oldestAge = new Gauge({
    name: 'payorch_webhook_oldest_undelivered_age_seconds',
    help: 'Age of the oldest webhook event not yet acknowledged and not dead (from when it occurred); 0 when none.',
    registers,
  });
  const dead = new Gauge({
    name: 'payorch_webhook_dead',
    help: 'Webhook deliveries dead after the retry window, waiting for redelivery; -1 when the database could not be read.',
    registers,
  });
  return async () => {
    try {
      const { rows } = await sql.query<{ backlog: number; dead: number; oldest_age_s: number }>(
        `SELECT count(*) FILTER (WHERE dead_at IS NULL)::int AS backlog, count(*) FILTER (WHERE dead_at IS NOT NULL)::int AS dead,
                COALESCE(EXTRACT(EPOCH FROM now() - min(occurred_at) FILTER (WHERE dead_at IS NULL)), 0)::float8 AS oldest_age_s
           FROM webhook_deliveries`,
      );
      backlog.set(rows[0]?.backlog ?? 0);
      dead.set(rows[0]?.dead ?? 0);
      oldestAge.set(Math.max(0, rows[0]?.oldest_age_s ?? 0));
    } catch {
      backlog.set(-1);
      dead.set(-1);
    }
  };
}

/** Counts stop here: a scrape stays one bounded index scan however far behind a reader is. */
const FEED_COUNT_MAX = 1_000_000;

/**
 * The event feed at scrape time (docs/EVENTS.md): committed changes no reader can take yet
 * because an older transaction is still running (one held open shows here, and how long the
 * oldest has been open), and how many events each background reader (the NATS publisher) has
 * still to handle. -1 when the read failed.
 */
function eventFeedSampler(sql: Sql, registers: Registry[]): () => Promise<void> {
  const heldBack = new Gauge({
    name: 'payorch_event_feed_held_back',
    help: `Committed status changes readers of the feed cannot take yet: an older transaction is still running (up to ${FEED_COUNT_MAX}); -1 when the database could not be read.`,
    registers,
  });
  const oldestSeconds = new Gauge({
    name: 'payorch_event_feed_oldest_transaction_seconds',
    help: "How long the oldest transaction that holds a transaction id (this database role's sessions, and prepared transactions) has been open: the feed's readers wait for it.",
    registers,
  });
  const readerLag = new Gauge({
    name: 'payorch_event_feed_reader_lag',
    help: `Feed events a background reader (e.g. nats:PAYORCH_EVENTS) could take and has not handled yet (up to ${FEED_COUNT_MAX}).`,
    labelNames: ['reader'],
    registers,
  });
  return async () => {
    try {
      const { rows } = await sql.query<{ held_back: number; oldest_s: number; reader: string | null; lag: number | null }>(
        `WITH h AS MATERIALIZED (SELECT ${FEED_HORIZON_SQL} AS horizon)
         SELECT (SELECT count(*) FROM (SELECT 1 FROM event_feed, h WHERE xact >= h.horizon LIMIT $1) held)::int AS held_back,
                (SELECT coalesce(extract(epoch FROM now() - least(
                   (SELECT min(xact_start) FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()),
                   (SELECT min(prepared) FROM pg_prepared_xacts))), 0))::float8 AS oldest_s,
                r.reader,
                (SELECT count(*) FROM (SELECT 1 FROM event_feed, h
                   WHERE (xact, seq) > (r.after_xact, r.after_seq) AND xact < h.horizon LIMIT $1) lagging)::int AS lag
           FROM (SELECT 1) one LEFT JOIN event_feed_readers r ON true`,
        [FEED_COUNT_MAX],
      );
      heldBack.set(rows[0]?.held_back ?? 0);
      oldestSeconds.set(Math.max(0, rows[0]?.oldest_s ?? 0));
      readerLag.reset();
      for (const row of rows) if (row.reader !== null && row.lag !== null) readerLag.set({ reader: row.reader }, row.lag);
    } catch {
      heldBack.set(-1);
    }
  };
}

/** Times every createTransfers batch; the other calls pass through unchanged. */
export function timedLedger(inner: Ledger, metrics: Pick<Metrics, 'observeLedgerBatch'>): Ledger {
  return {
    createAccounts: (sql, accounts) => inner.createAccounts(sql, accounts),
    async createTransfers(sql, transfers) {
      const startedAt = performance.now();
      let result: LedgerBatchResult = 'error';
      try {
        const failures = await inner.createTransfers(sql, transfers);
        result = failures.length === 0 ? 'ok' : 'rejected';
        return failures;
      } finally {
        metrics.observeLedgerBatch(result, (performance.now() - startedAt) / 1000);
      }
    },
    lookupAccounts: (sql, ids) => inner.lookupAccounts(sql, ids),
    lookupTransfers: (sql, ids) => inner.lookupTransfers(sql, ids),
    expirePendingTransfers: (sql, batchSizeMax) => inner.expirePendingTransfers(sql, batchSizeMax),
  };
}
