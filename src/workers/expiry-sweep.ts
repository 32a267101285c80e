import type { Database } from '../adapters/database.js';
import type { WorkerMetrics } from '../observability/metrics.js';
import { moveIntents } from '../domain/intents/store/intent-writer.js';
import type { StatusPublisher } from '../domain/intents/store/status-publisher.js';
import type { Logger } from '../adapters/logger.js';

export interface ExpirySweepDeps {
  readonly db: Database;
  readonly publisher: StatusPublisher;
  readonly log: Logger;
  /** EXPIRY_SWEEP_INTERVAL_MS: pause between the end of one run and the start of the next. */
  readonly intervalMs: number;
  readonly batchSizeMax?: number;
  /** Bounds one run, so a backlog is worked off over several ticks instead of one long loop. */
  readonly batchesPerRunMax?: number;
  /** Expiry counters; absent in tests that do not look. */
  readonly metrics?: WorkerMetrics;
}

export interface ExpirySweep {
  /** Ends the timer and waits for a run in progress. */
  stop(): Promise<void>;
  /** One run now; returns how many invoices it expired. */
  runOnce(): Promise<number>;
}

export const EXPIRY_BATCH_SIZE_MAX = 100;
const BATCHES_PER_RUN_MAX = 50;

/**
 * Expires unconfirmed invoices past expiresAt (CREATED → EXPIRED). An unconfirmed invoice holds
 * no reservation, so there is nothing to void. Safe on several instances at once: each batch
 * locks its rows with SKIP LOCKED, and the status guard makes a row that a confirm or cancel
 * won in the meantime drop out of the update.
 */
export function startExpirySweep(deps: ExpirySweepDeps): ExpirySweep {
  const batchSizeMax = deps.batchSizeMax ?? EXPIRY_BATCH_SIZE_MAX;
  const batchesPerRunMax = deps.batchesPerRunMax ?? BATCHES_PER_RUN_MAX;
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  let running: Promise<number> | null = null;

  const runOnce = (): Promise<number> => {
    // One run at a time per process: a manual run during a timed one waits for it and runs after.
    const previous = running ?? Promise.resolve(0);
    const run = previous.catch(() => 0).then(() => sweep(deps, batchSizeMax, batchesPerRunMax));
    running = run;
    return run.finally(() => {
      if (running === run) running = null;
    });
  };

  const tick = async () => {
    try {
      const expired = await runOnce();
      if (expired > 0) deps.log.info({ expired }, 'invoices expired');
    } catch (error) {
      deps.log.error({ err: error }, 'invoice expiry sweep failed; retried at the next tick');
    }
    if (!stopped) timer = setTimeout(() => void tick(), deps.intervalMs);
  };
  timer = setTimeout(() => void tick(), deps.intervalMs);

  return {
    runOnce,
    async stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      await running?.catch(() => 0);
    },
  };
}

async function sweep(deps: ExpirySweepDeps, batchSizeMax: number, batchesPerRunMax: number): Promise<number> {
  let total = 0;
  for (let batch = 0; batch < batchesPerRunMax; batch += 1) {
    const expired = await expireBatch(deps, batchSizeMax);
    total += expired.length;
    deps.metrics?.invoicesExpired(expired.length);
    // The sweep selects INVOICE_PAYMENT intents, which the invoice flow keeps on MERCHANT_INVOICE.
    deps.metrics?.intentFinished('INVOICE_PAYMENT', 'MERCHANT_INVOICE', 'EXPIRED', expired.length);
    for (const row of expired) {
      if (row.live) void deps.publisher.publish(row.id, ['EXPIRED'], row.updatedAt);
    }
    if (expired.length < batchSizeMax) break;
  }
  return total;
}

interface ExpiredRow {
  readonly id: string;
  readonly live: boolean;
  readonly updatedAt: Date;
}

async function expireBatch(deps: ExpirySweepDeps, batchSizeMax: number): Promise<ExpiredRow[]> {
  return deps.db.transaction(async (tx) => {
    const due = await tx.query<{ id: string }>(
      `SELECT id FROM intents
        WHERE status = 'CREATED' AND operation_type = 'INVOICE_PAYMENT' AND expires_at < now()
        ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
      [batchSizeMax],
    );
    const expired = await moveIntents(
      tx,
      due.rows.map((row) => row.id),
      { from: 'CREATED', to: 'EXPIRED', conditions: { expiredInvoice: true } },
    );
    return expired.map((intent) => ({ id: intent.id, live: intent.live, updatedAt: intent.updatedAt }));
  });
}
