import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Sql } from './database.js';
import type { Ledger } from '../ledger/ledger.js';

/**
 * Prometheus metrics of one app instance. Each instance owns its registry (tests build several apps
 * in one process, and prom-client's global registry would refuse a second metric of one name).
 * The domain never imports this module: HTTP hooks, the ledger decorator below and the workers'
 * explicit dependencies do the counting.
 */

/** Seconds; from 5 ms (a cached read) to 10 s (a request stuck behind a lock). */
const HTTP_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
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
}

export interface Metrics extends WorkerMetrics {
  readonly registry: Registry;
  observeRequest(labels: { method: string; route: string; statusCode: number }, seconds: number): void;
  intentCreated(operationType: string, channel: string): void;
  /** A POST /intents refused with a 4xx (nothing stored), by error code. */
  intentRefused(operationType: string, error: string): void;
  observeLedgerBatch(result: LedgerBatchResult, seconds: number): void;
  /** Intents committed in one group-commit transaction. */
  observeIntentBatch(size: number): void;
  readonly liveStreams: { inc(): void; dec(): void };
  /** A request refused 401, by a bounded reason (docs/SECURITY.md §5). */
  authFailure(reason: string): void;
  /** A request refused 429: over its service's rate, from a failing source, or past the stream cap. */
  rateLimited(reason: string): void;
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
  /** Where the outbox gauges are read at scrape time; without it they stay absent. */
  readonly sql?: Sql;
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
  const samplers: Array<() => Promise<void>> = [];
  if (options.sql !== undefined) samplers.push(outboxSampler(options.sql, registers), eventFeedSampler(options.sql, registers));

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
    observeLedgerBatch: (result, seconds) => ledgerDuration.observe({ result }, seconds),
    observeIntentBatch: (size) => intentBatch.observe(size),
    pspInFlight: { inc: () => pspInFlight.inc(), dec: () => pspInFlight.dec() },
    pspInquiry: () => pspInquiries.inc(),
    pspEscalation: () => escalations.inc(),
    invoicesExpired: (count) => {
      if (count > 0) expiries.inc(count);
    },
    liveStreams: { inc: () => streams.inc(), dec: () => streams.dec() },
    authFailure: (reason) => authFailures.inc({ reason }),
    rateLimited: (reason) => rateLimited.inc({ reason }),
    async render() {
      await Promise.all(samplers.map((sample) => sample()));
      return registry.metrics();
    },
  };
}

/**
 * Outbox depth and the age of its oldest open job, read with one query at scrape time: the table
 * is the truth across every instance, and the open-job index keeps the query cheap. A failed read
 * sets the depth to -1, so the scrape still answers and a dashboard tells "unknown" from "empty".
 */
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
  return async () => {
    try {
      const { rows } = await sql.query<{ depth: number; oldest_age_s: number }>(
        `SELECT count(*)::int AS depth, COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_age_s
           FROM outbox WHERE done_at IS NULL`,
      );
      depth.set(rows[0]?.depth ?? 0);
      oldestAge.set(Math.max(0, rows[0]?.oldest_age_s ?? 0));
    } catch {
      depth.set(-1);
    }
  };
}

/**
 * The event feed at scrape time (docs/EVENTS.md): changes committed but not yet numbered (a
 * sequencer that stopped shows here), and how many numbered events each background reader (the
 * NATS publisher) has still to handle. -1 when the read failed.
 */
function eventFeedSampler(sql: Sql, registers: Registry[]): () => Promise<void> {
  const unnumbered = new Gauge({
    name: 'payorch_event_feed_unnumbered',
    help: 'Committed status changes the feed has not numbered yet; -1 when the database could not be read.',
    registers,
  });
  const readerLag = new Gauge({
    name: 'payorch_event_feed_reader_lag',
    help: 'Numbered feed events a background reader (e.g. nats:PAYORCH_EVENTS) has not handled yet.',
    labelNames: ['reader'],
    registers,
  });
  return async () => {
    try {
      const { rows } = await sql.query<{ unnumbered: number; reader: string | null; lag: bigint | null }>(
        `SELECT (SELECT count(*) FROM event_feed WHERE seq IS NULL)::int AS unnumbered, r.reader, s.last_seq - r.after_seq AS lag
           FROM event_feed_state s LEFT JOIN event_feed_readers r ON true`,
      );
      unnumbered.set(rows[0]?.unnumbered ?? 0);
      readerLag.reset();
      for (const row of rows) if (row.reader !== null && row.lag !== null) readerLag.set({ reader: row.reader }, Number(row.lag));
    } catch {
      unnumbered.set(-1);
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
