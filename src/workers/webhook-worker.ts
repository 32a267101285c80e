import assert from 'node:assert/strict';
import type { Database } from '../adapters/database.js';
import type { CursorSeal } from '../domain/events/cursor-seal.js';
import type { Logger } from '../adapters/logger.js';
import type { WorkerMetrics } from '../observability/metrics.js';
import { webhookSignedHeaders } from '../domain/auth/message-signing.js';
import {
  acknowledgeDelivery,
  type ClaimedDelivery,
  claimDueDeliveries,
  type FailedOutcome,
  recordFailedAttempt,
  servicesWithWebhooks,
  renewDeliveryLeases,
  takeFeedPage,
} from '../domain/events/webhooks/deliveries.js';
import { LeaseHeartbeat } from './lease-heartbeat.js';
import { WEBHOOK_RETRY_WINDOW_MS, webhookIsDead, webhookRetryDelayMs } from '../domain/events/webhooks/retry-schedule.js';

/**
 * The webhook worker (docs/OPERATIONS.md, Webhooks) runs in every workers process: taking the feed
 * into deliveries locks one service's cursor row, claiming deliveries skips rows another process
 * holds, so any number of processes deliver side by side and none has to be elected. Slow
 * receivers (up to the 10 s timeout each) are what limits delivery, so more processes help; a
 * slow receiver delays only its own service, whose lane it holds (docs/rules.md R61).
 */

export interface WebhookWorkerSettings {
  /** Deliveries attempted at once per claim. */
  readonly batchSizeMax: number;
  /** Events taken from one service's feed per run (the feed's own page limit). */
  readonly feedPageSizeMax: number;
  /** Claims per run: each round frees the next event of the intents it delivered. */
  readonly roundsMax: number;
  /** No answer within this is a failed attempt (R55: 10 s). */
  readonly timeoutMs: number;
  /**
   * A claimed row is left alone this long without a heartbeat (WEBHOOK_LEASE_MS); the live worker
   * renews it every third of it for as long as the attempt lasts, so only a dead worker's claim runs out.
   */
  readonly leaseMs: number;
  readonly retryBaseMs: number;
  readonly retryWindowMs: number;
}

export const WEBHOOK_DEFAULTS = {
  batchSizeMax: 50,
  feedPageSizeMax: 500,
  roundsMax: 20,
  timeoutMs: 10_000,
  leaseMs: 3_000,
  retryBaseMs: 1000,
  retryWindowMs: WEBHOOK_RETRY_WINDOW_MS,
} as const satisfies WebhookWorkerSettings;

export interface WebhookWorkerDeps {
  readonly db: Database;
  /** The services' secrets as loaded now (reloads included); the first one listed signs. */
  readonly secrets: () => ReadonlyMap<string, readonly string[]>;
  readonly log: Logger;
  /** Seals the cursor each event body carries (docs/rules.md R63). */
  readonly cursors: CursorSeal;
  readonly settings: WebhookWorkerSettings;
  readonly metrics?: WorkerMetrics;
  readonly fetch?: typeof fetch;
}

export interface WebhookRun {
  readonly taken: number;
  readonly acknowledged: number;
  readonly failed: number;
}

type Delivered = Omit<WebhookRun, 'taken'>;

/**
 * Each service's deliveries go in their own lane (docs/rules.md R61): a lane claims only its
 * service's due deliveries, round after round, and a service whose lane is still busy (a receiver
 * hanging until the timeout) gets no second one, so it holds back only its own queue.
 */
export interface WebhookWorker {
  /** Takes the feeds into deliveries and starts a lane for every service without one; does not wait for them (the loop's tick). */
  dispatch(): Promise<Pick<WebhookRun, 'taken'>>;
  /** As dispatch, then waits for the lanes it started. */
  runOnce(): Promise<WebhookRun>;
  /** Lets each lane finish the attempts it holds, starts no more, and resolves once none is running (shutdown). */
  stop(): Promise<void>;
}

/**
 * The cursor in the event's body, as sealed when the delivery was taken from the feed: the same on
 * every attempt, and not the internal position the row keeps (docs/rules.md R63). A delivery
 * taken before cursors were sealed keeps the key it was first sent with, so a receiver's
 * de-duplication holds across the upgrade.
 */
function idempotencyKeyOf(delivery: ClaimedDelivery): string {
  const { cursor } = JSON.parse(delivery.body) as { cursor: unknown };
  assert.ok(typeof cursor === 'string', 'a webhook body is a feed event with its cursor');
  return cursor;
}

type AttemptResult = { readonly outcome: 'acknowledged' } | { readonly outcome: FailedOutcome; readonly httpStatus?: number };

export function createWebhookWorker(deps: WebhookWorkerDeps): WebhookWorker {
  const { db, settings, log } = deps;
  assert.ok(
    settings.leaseMs > 0 && settings.batchSizeMax > 0 && settings.roundsMax > 0 && settings.feedPageSizeMax > 0,
    'webhook limits must be > 0',
  );
  const send = deps.fetch ?? fetch;
  // Each held delivery with the attempt it was claimed for: a later claim counts another attempt.
  const heartbeat = new LeaseHeartbeat<number>({
    leaseMs: settings.leaseMs,
    renew: (held) => renewDeliveryLeases(db, { ids: [...held.keys()], attempts: [...held.values()] }, settings.leaseMs),
    log,
    name: 'webhook',
  });

  async function attempt(delivery: ClaimedDelivery): Promise<AttemptResult> {
    const secret = deps.secrets().get(delivery.serviceId)?.[0];
    if (secret === undefined) return { outcome: 'no_secret' };
    const url = new URL(delivery.url);
    const headers = {
      'content-type': 'application/json',
      'idempotency-key': idempotencyKeyOf(delivery),
      ...webhookSignedHeaders(secret, url.pathname, delivery.body),
    };
    try {
      // No redirects: a 3xx would send the signed event to a place the key does not name.
      const response = await send(url, {
        method: 'POST',
        headers,
        body: delivery.body,
        redirect: 'manual',
        signal: AbortSignal.timeout(settings.timeoutMs),
      });
      await response.body?.cancel();
      if (response.status >= 200 && response.status < 300) return { outcome: 'acknowledged' };
      return { outcome: 'http_error', httpStatus: response.status };
    } catch (error) {
      return { outcome: error instanceof DOMException && error.name === 'TimeoutError' ? 'timeout' : 'network_error' };
    }
  }

  async function deliver(delivery: ClaimedDelivery): Promise<boolean> {
    const key = delivery.id.toString();
    heartbeat.hold(key, delivery.attempt);
    let result: AttemptResult;
    try {
      result = await attempt(delivery);
    } finally {
      // No renewal may land after the next attempt's time is written below.
      await heartbeat.drop(key, delivery.attempt);
    }
    deps.metrics?.webhookAttempt(result.outcome);
    if (result.outcome === 'acknowledged') {
      await acknowledgeDelivery(db, delivery.id);
      return true;
    }
    const retryInMs = webhookRetryDelayMs(settings.retryBaseMs, delivery.attempt);
    const dead = webhookIsDead(delivery.sinceFirstAttemptMs, retryInMs, settings.retryWindowMs);
    const httpStatus = 'httpStatus' in result ? result.httpStatus : undefined;
    await recordFailedAttempt(db, { id: delivery.id, attempt: delivery.attempt, outcome: result.outcome, httpStatus, retryInMs, dead });
    const fields = { event: dead ? 'webhook_dead' : 'webhook_failed', serviceId: delivery.serviceId, cursor: delivery.cursor };
    const detail = { ...fields, attempt: delivery.attempt, outcome: result.outcome, httpStatus, retryInMs };
    if (dead) log.error(detail, 'webhook delivery is dead: the retry window is over (GET /admin/webhooks/dead)');
    else log.warn(detail, 'webhook attempt failed; tried again later');
    return false;
  }

  /** One lane per service at most in this process: a hanging receiver holds only its own lane. */
  const lanes = new Map<string, Promise<Delivered>>();
  let stopping = false;

  async function runLane(serviceId: string): Promise<Delivered> {
    let acknowledged = 0;
    let failed = 0;
    try {
      for (let round = 0; round < settings.roundsMax && !stopping; round++) {
        const claimed = await claimDueDeliveries(db, settings.batchSizeMax, settings.leaseMs, serviceId);
        if (claimed.length === 0) break;
        const results = await Promise.all(claimed.map(deliver));
        const delivered = results.filter(Boolean).length;
        acknowledged += delivered;
        failed += results.length - delivered;
      }
    } catch (error) {
      // A lane runs unawaited by the loop: its failure is logged here, its claims run out with their lease.
      log.error(
        { event: 'webhook_lane_failed', serviceId, err: error },
        'webhook delivery of one service failed; tried again at the next run',
      );
    }
    return { acknowledged, failed };
  }

  async function dispatch(): Promise<{ taken: number; started: Promise<Delivered>[] }> {
    let taken = 0;
    const started: Promise<Delivered>[] = [];
    for (const serviceId of await servicesWithWebhooks(db)) {
      taken += await takeFeedPage(db, serviceId, settings.feedPageSizeMax, deps.cursors);
      if (lanes.has(serviceId) || stopping) continue;
      const lane = runLane(serviceId).finally(() => lanes.delete(serviceId));
      lanes.set(serviceId, lane);
      started.push(lane);
    }
    return { taken, started };
  }

  return {
    async dispatch() {
      return { taken: (await dispatch()).taken };
    },
    async runOnce() {
      const { taken, started } = await dispatch();
      const lanesDone = await Promise.all(started);
      return {
        taken,
        acknowledged: lanesDone.reduce((sum, lane) => sum + lane.acknowledged, 0),
        failed: lanesDone.reduce((sum, lane) => sum + lane.failed, 0),
      };
    },
    async stop() {
      stopping = true;
      await Promise.all(lanes.values());
    },
  };
}
