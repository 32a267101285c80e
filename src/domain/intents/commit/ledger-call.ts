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
