/**
 * When a batch of new intents sends its ledger call. 'after-open': once intent_open_batch has
 * answered, with the transfers of the intents it opened. 'with-open': right behind it, before its
 * answer, with every intent's transfers, on the bet that all of them open (a duplicate key, a
 * limit or a payer's lock is rare); one round trip fewer per batch. 'with-close': the closing
 * statement (audit events, history rows) leaves with them too, on the further bet that every
 * intent's transfers apply, so the database runs the whole batch without waiting for an answer
 * to reach this process in between. When a bet is lost the transaction is rolled back, nothing
 * of it stays, and the batch runs again 'after-open'.
 */
export type LedgerCall = 'after-open' | 'with-open' | 'with-close';

/** A bet of 'with-open' or 'with-close' lost: an intent was not opened, or its transfers did not all apply. */
export class BetLost extends Error {}

/**
 * Batches in a row that must have won the bet, or shown that they would have, before the next
 * one bets again. Why a run of would-be wins rather than a pause that doubles: a batch sent
 * without the bet still shows whether the bet would have stood (every intent opened, every
 * transfer applied), so the rule can wait for that evidence instead of paying for lost bets to
 * probe. A lost bet costs about the batch again (it runs to its end, rolls back and runs again
 * 'after-open'); a won one saved about a tenth of a batch on PGlite (docs/PERFORMANCE.md, Log,
 * "PGlite's batch in one pass"), so betting pays only while fewer than about one batch in ten
 * holds a refusal. With a share p of batches holding one, the rule bets on (1 − p)^8 of the
 * batches and loses p·(1 − p)^8 of them: at most 4.3 % of batches (at p = 1/9) whatever the
 * refusals, none to speak of when most batches hold one, and 92 % of batches still bet when one
 * in a hundred does.
 */
const WINS_BEFORE_BET = 8;

/**
 * Which ledger call the next batch is sent with: `bet` after WINS_BEFORE_BET batches in a row
 * that won it or would have, `fallback` otherwise. It starts betting: one lost bet is all a
 * service that starts into refusals pays.
 */
export class LedgerCallChoice {
  private winsInARow = WINS_BEFORE_BET;

  constructor(
    private readonly bet: LedgerCall,
    private readonly fallback: LedgerCall,
  ) {}

  next(): LedgerCall {
    return this.winsInARow >= WINS_BEFORE_BET ? this.bet : this.fallback;
  }

  /** A batch's end, whatever it was sent with: did every intent open and every transfer apply? */
  record(everyApplied: boolean): void {
    this.winsInARow = everyApplied ? Math.min(this.winsInARow + 1, WINS_BEFORE_BET) : 0;
  }
}
