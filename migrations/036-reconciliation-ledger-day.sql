-- Reconciliation reads the books' side of a day from the ledger (docs/rules.md R59): the nostro's
-- posted transfers stamped inside one Bangkok day.
--
-- Transfers are stamped when written, so created_at follows the table's physical order: a BRIN
-- index (a few pages for millions of rows, next to nothing per insert on the ledger's hot path)
-- narrows a day to its block ranges. A B-tree on the nostro's side would be exact but would add
-- two index entries to every transfer the ledger writes, for one read a day.
CREATE INDEX IF NOT EXISTS ledger_transfers_created_brin_idx ON ledger_transfers USING brin (created_at);

-- The payouts a person resolved CONFIRMED (or the run did): paid here with no provider date. They
-- are few; the run of a day reads them all and keeps those whose resolution was booked that day.
-- Keyed by id, which never changes: every column the index reads is already read by another index
-- of intents, so updates of an intent stay HOT (an index on updated_at would end that).
CREATE INDEX IF NOT EXISTS intents_pspx_resolved_paid_idx ON intents (id)
  WHERE channel = 'PSPX_TRANSFER' AND settlement_date IS NULL AND status = 'SETTLED';
