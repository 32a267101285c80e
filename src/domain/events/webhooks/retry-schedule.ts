/**
 * When a failed webhook is tried again (docs/OPERATIONS.md, Webhooks): attempt n waits
 * base × 2^(n−1), jittered by at most ±25 % so that receivers that failed together are not
 * retried together, never more than an hour; after the window the delivery is dead.
 */

/** However many attempts failed, a receiver that comes back waits at most this long. */
export const WEBHOOK_RETRY_DELAY_MAX_MS = 60 * 60 * 1000;
export const WEBHOOK_RETRY_JITTER = 0.25;
/** How long a delivery is attempted, counted from its first attempt. */
export const WEBHOOK_RETRY_WINDOW_MS = 72 * 60 * 60 * 1000;

/** The wait after failed attempt `attempt` (1 for the first); `random` in [0, 1). */
export function webhookRetryDelayMs(baseMs: number, attempt: number, random: () => number = Math.random): number {
  const unjitteredMs = Math.min(WEBHOOK_RETRY_DELAY_MAX_MS, baseMs * 2 ** (attempt - 1));
  const jitter = (random() * 2 - 1) * WEBHOOK_RETRY_JITTER;
  return Math.round(Math.min(WEBHOOK_RETRY_DELAY_MAX_MS, unjitteredMs * (1 + jitter)));
}

/** Dead once the next attempt would start outside the window: no attempt is made after it. */
export const webhookIsDead = (sinceFirstAttemptMs: number, retryInMs: number, windowMs: number): boolean =>
  sinceFirstAttemptMs + retryInMs > windowMs;
