import type { Database } from '../adapters/database.js';
import { lockIntent, releaseReservation } from '../domain/intents/money/deferred-money.js';
import type { StatusPublisher } from '../domain/intents/store/status-publisher.js';
import type { Logger } from '../adapters/logger.js';
import type { Ledger } from '../ledger/ledger.js';

/**
 * Startup reconciliation: an intent of an internal channel that is still CREATED, VALIDATED or
 * AUTHORIZED after RECONCILE_AGE_S was left behind by a process that died in the middle of it
 * (internal channels finish inside one request). It becomes FAILED and its reservation, if any,
 * is voided ('pending_transfer_not_found' is fine: nothing was reserved).
 *
 * Left alone: PSPX_TRANSFER (the PSP worker resumes those, and the provider may have paid), and
 * CREATED invoices (MERCHANT_INVOICE before confirm): they hold no money, and whether they lapse
 * is the expiry sweep's decision on expiresAt, not an age guess. VALIDATED is included although
 * the interface names CREATED and AUTHORIZED: an intent stuck between the two holds no more
 * than an AUTHORIZED one and would otherwise never end.
 *
 * Safe with several instances starting together: each intent is locked and re-checked inside its
 * own transaction, and the void has a deterministic id.
 */

export const RECONCILED_REASON = 'reconciled_at_startup';

export interface ReconciliationDeps {
  readonly db: Database;
  readonly ledger: Ledger;
  readonly publisher: StatusPublisher;
  readonly log: Logger;
  /** RECONCILE_AGE_S. */
  readonly ageS: number;
  readonly batchSizeMax?: number;
  /** Bounds the start-up work; what is left is taken at the next start. */
  readonly batchesMax?: number;
}

const BATCH_SIZE_MAX = 100;
const BATCHES_MAX = 100;

const STUCK_STATUSES = ['CREATED', 'VALIDATED', 'AUTHORIZED'] as const;

/** Returns the ids of the intents it failed. */
export async function reconcileStuckIntents(deps: ReconciliationDeps): Promise<string[]> {
  const batchSizeMax = deps.batchSizeMax ?? BATCH_SIZE_MAX;
  const failed: string[] = [];
  // Ids already tried in this run: one that cannot be reconciled (logged) is not picked again.
  const tried = new Set<string>();
  for (let batch = 0; batch < (deps.batchesMax ?? BATCHES_MAX); batch += 1) {
    const ids = await findStuck(deps, batchSizeMax, [...tried]);
    for (const id of ids) {
      tried.add(id);
      if (await reconcileOne(deps, id)) failed.push(id);
    }
    if (ids.length < batchSizeMax) break;
  }
  if (failed.length > 0) deps.log.warn({ event: 'reconciliation_done', failed: failed.length }, 'stuck intents failed at startup');
  return failed;
}

async function findStuck(deps: ReconciliationDeps, batchSizeMax: number, skip: readonly string[]): Promise<string[]> {
  const { rows } = await deps.db.query<{ id: string }>(
    `SELECT id FROM intents
      WHERE status = ANY($1::text[]) AND channel <> 'PSPX_TRANSFER'
        AND NOT (channel = 'MERCHANT_INVOICE' AND status = 'CREATED')
        AND created_at < now() - $2::bigint * interval '1 second'
        AND NOT (id = ANY($3::uuid[]))
      ORDER BY created_at LIMIT $4`,
    [STUCK_STATUSES, deps.ageS, skip, batchSizeMax],
  );
  return rows.map((row) => row.id);
}

async function reconcileOne(deps: ReconciliationDeps, intentId: string): Promise<boolean> {
  const log = deps.log.child({ traceId: intentId });
  try {
    const result = await deps.db.transaction(async (tx) => {
      const intent = await lockIntent(tx, intentId);
      // Re-checked under the lock: another instance or a late request may have finished it.
      if (intent === null || !(STUCK_STATUSES as readonly string[]).includes(intent.status)) return null;
      const outcome = await releaseReservation(deps.ledger, tx, intent, { fromStatuses: STUCK_STATUSES, reason: RECONCILED_REASON });
      return { intent, outcome };
    });
    if (result === null || result.outcome.kind === 'unchanged') return false;
    log.warn(
      { event: 'intent_reconciled', from: result.outcome.from, to: 'FAILED', reason: RECONCILED_REASON },
      'stuck intent failed and its reservation released',
    );
    if (result.intent.live) void deps.publisher.publish(intentId, ['FAILED'], result.outcome.updatedAt);
    return true;
  } catch (error) {
    // E.g. the reservation was posted although the intent never recorded it: not ours to guess.
    log.error({ event: 'reconciliation_failed', err: error }, 'stuck intent could not be reconciled; it needs an operator');
    return false;
  }
}
