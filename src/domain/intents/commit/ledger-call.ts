/**
 * When a batch of new intents sends its ledger call. 'after-open': once intent_open_batch has
 * answered, with the transfers of the intents it opened. 'with-open': right behind it, before its
 * answer, with every intent's transfers, on the bet that all of them open (a duplicate key, a
 * limit or a payer's lock is rare); one round trip fewer per batch. When the bet is lost the
 * transaction is rolled back, nothing of it stays, and the batch runs again 'after-open'.
 */
export type LedgerCall = 'after-open' | 'with-open';

/** The bet of 'with-open' lost: the ledger moved money for an intent that was not opened. */
export class NotEveryIntentOpened extends Error {}
