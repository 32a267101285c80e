import { setTimeout as sleep } from 'node:timers/promises';
import type { Database, Tx } from '../../../adapters/database.js';
import { isStampRefusal } from '../../../ledger/ledger.js';

/**
 * The transaction's work was done and its COMMIT sent, and then it failed (a connection cut right
 * then): it may have committed. `cause` is the failure, what the request answers once it knows
 * that nothing of its own was stored. A failure before the COMMIT was sent is thrown as it is:
 * that transaction stored nothing, and its answer need not wait to learn it.
 */
export class CommitUnanswered extends Error {
  override readonly name = 'CommitUnanswered';

  constructor(override readonly cause: unknown) {
    super('the transaction failed after its COMMIT was sent', { cause });
  }
}

/**
 * `db.transaction`, whose failures once `work` has resolved are CommitUnanswered. The statements
 * `work` sent without waiting fail from then on too (a refusal of one of them aborts the whole):
 * they are rare, and the lookup after them answers at once. A COMMIT that balance history's stamp
 * check refused was answered, and rolled back: it is thrown as it is.
 */
export async function committing<T>(db: Database, work: (tx: Tx) => Promise<T>): Promise<T> {
  let commitSent = false;
  try {
    return await db.transaction(async (tx) => {
      const result = await work(tx);
      commitSent = true;
      return result;
    });
  } catch (error) {
    throw commitSent && !(error instanceof CommitUnanswered) && !isStampRefusal(error) ? new CommitUnanswered(error) : error;
  }
}

/**
 * How long the answer to a CommitUnanswered waits to learn whether its commit went through: the
 * failure is often the database going away, and then the lookup would wait on it too.
 */
const OWN_COMMIT_LOOKUP_MS = 1_000;

/**
 * After a failure: what this request stored all the same, as `lookup` finds it, when the failure is
 * a CommitUnanswered; null at once after any other failure, and when the lookup fails or does not
 * answer within OWN_COMMIT_LOOKUP_MS.
 */
export async function storedDespite<T>(error: unknown, lookup: () => Promise<T | null>): Promise<T | null> {
  if (!(error instanceof CommitUnanswered)) return null;
  const found = lookup().catch(() => null);
  return Promise.race([found, sleep(OWN_COMMIT_LOOKUP_MS, null, { ref: false })]);
}

/** What a failure is answered with when nothing of the request's own was stored. */
export const failureOf = (error: unknown): unknown => (error instanceof CommitUnanswered ? error.cause : error);
