/**
 * When a batch's ledger call is sent. 'after-open': once the batch's opening statement has answered
 * (intent_open_batch for new intents, the claim for invoice confirms), with the transfers of the
 * items it let through. 'with-open': right behind it, before its answer, with every item's
 * transfers, on the bet that all of them get through (a duplicate key, a limit, a payer's lock or
 * a lost invoice is rare); one round trip fewer per batch. When the bet is lost the transaction is
 * rolled back, nothing of it stays, and the batch runs again 'after-open'.
 */
export type LedgerCall = 'after-open' | 'with-open';

/** The bet of 'with-open' lost: the ledger moved money for an item the opening statement did not let through. */
export class NotEveryIntentOpened extends Error {}
