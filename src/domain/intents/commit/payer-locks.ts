import { apiError } from '../../errors.js';

/** Two-key advisory locks live apart from single-key ones (migrations, outbox leader). */
export const PAYER_LOCK_CLASS = 7_310_002;
/** Held while a payment's recipient-side limits are checked and its intent stored (sql/intents/03-open-batch.sql). */
export const RECIPIENT_LIMIT_LOCK_CLASS = 7_310_003;

/**
 * One payment at a time per payer (docs/rules.md R22). Within this process a set answers at once (PGlite runs
 * one transaction at a time, so a database lock alone would make the second caller wait instead
 * of refusing); across instances a transaction-scoped advisory lock does the same on PostgreSQL.
 */
export class PayerLocks {
  private readonly held = new Set<number>();
  private readonly inFlightKeys = new Map<string, Promise<unknown>>();

  async withPayer<T>(payerUserId: number | null, work: () => Promise<T>): Promise<T> {
    if (payerUserId === null) return work();
    if (this.held.has(payerUserId)) throw transactionInProgress(payerUserId);
    this.held.add(payerUserId);
    try {
      return await work();
    } finally {
      this.held.delete(payerUserId);
    }
  }

  /**
   * Runs requests that share an idempotency key one after another, so that a concurrent
   * duplicate waits for the first and then replays it instead of racing it.
   */
  async oneAtATime<T>(key: string, work: () => Promise<T>): Promise<T> {
    for (let running = this.inFlightKeys.get(key); running !== undefined; running = this.inFlightKeys.get(key)) {
      await running.catch(() => undefined);
    }
    const promise = work();
    this.inFlightKeys.set(key, promise);
    try {
      return await promise;
    } finally {
      this.inFlightKeys.delete(key);
    }
  }
}

export const transactionInProgress = (payerUserId: number | null) =>
  apiError('TRANSACTION_IN_PROGRESS', `a payment is already running for user ${payerUserId}`);
