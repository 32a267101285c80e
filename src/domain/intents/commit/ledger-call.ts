/**
 * When a batch of new intents sends its ledger call. 'after-open': once intent_open_batch has
 * answered, with the transfers of the intents it opened. 'with-open': right behind it, before its
 * answer, with every intent's transfers, on the bet that all of them open (no key already
 * stored, no limit or payer's lock refusing); one round trip fewer per batch. 'with-close': the closing
 * statement (audit events, history rows) leaves with them too, on the further bet that every
 * intent's transfers apply, so the database runs the whole batch without waiting for an answer
 * to reach this process in between. When a bet is lost the transaction is rolled back, nothing
 * of it stays, and the batch runs again 'after-open'.
 */
export type LedgerCall = 'after-open' | 'with-open' | 'with-close';

/** A bet of 'with-open' or 'with-close' lost: an intent was not opened, or its transfers did not all apply. */
export class BetLost extends Error {}

/**
 * Batches in a row that must have won a bet, or shown that they would have, before the next one
 * places it again. Why a run of would-be wins rather than a pause that doubles: a batch sent
 * without a bet still shows whether it would have stood (every intent opened; every transfer
 * applied too), so the rule can wait for that evidence instead of paying for lost bets to probe.
 * A lost bet costs about the batch again (it runs to its end, rolls back and runs again); a won
 * one saves a round trip on PostgreSQL and about a tenth of a batch on PGlite (docs/design.md#hot-ledger-bet), so betting pays only while few batches would lose it. With
 * a share p of batches that would lose, the rule bets on (1 − p)^8 of the batches and loses
 * p·(1 − p)^8 of them: at most 4.3 % of batches (at p = 1/9) whatever the share, none to speak of
 * when most batches would lose, and 92 % of batches still bet when one in a hundred would.
 */
const WINS_BEFORE_BET = 8;

/** What a batch showed, whatever it was sent with. */
export interface BatchEvidence {
  /**
   * No duplicate key and no refusal at the opening (a limit, a payer's lock, funds the ledger would
   * refuse anyway): 'with-open' stood or would have.
   */
  readonly everyOpened: boolean;
  /** Every intent opened and every transfer applied: 'with-close' stood or would have. */
  readonly everyApplied: boolean;
}

/**
 * Which ledger call the next batch is sent with: the boldest allowed whose bet the last
 * WINS_BEFORE_BET batches in a row won or would have won. A refusal of funds the ledger decides (a
 * payer paid earlier in the batch) holds back 'with-close' only; a replay (a key already stored),
 * a limit or a refusal of funds decided at the opening holds back 'with-open' as well, and the
 * batch goes 'after-open': its ledger call then holds only payments that can apply. It starts betting: one lost bet is all a service that starts
 * into refusals or retries pays.
 */
export class LedgerCallChoice {
  private opensInARow = WINS_BEFORE_BET;
  private appliesInARow = WINS_BEFORE_BET;

  constructor(private readonly boldest: 'with-open' | 'with-close') {}

  next(): LedgerCall {
    if (this.boldest === 'with-close' && this.appliesInARow >= WINS_BEFORE_BET) return 'with-close';
    return this.opensInARow >= WINS_BEFORE_BET ? 'with-open' : 'after-open';
  }

  record(batch: BatchEvidence): void {
    this.opensInARow = batch.everyOpened ? Math.min(this.opensInARow + 1, WINS_BEFORE_BET) : 0;
    this.appliesInARow = batch.everyApplied ? Math.min(this.appliesInARow + 1, WINS_BEFORE_BET) : 0;
  }
}
