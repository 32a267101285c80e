-- Balance history (docs/rules.md R58): for every ledger account flagged `history` (TigerBeetle's
-- AccountFlags.history, bit 8, set on every account a user owns), the balance after each posting,
-- stamped with the posting's time. Written by the ledger in the transaction of the posting
-- (sql/ledger/13-history.sql); the stamp and why a balance in the past never changes are in
-- docs/design.md, "Balances at a time".
--
-- One index, the primary key: a balance at a time is its last row at or before the time, a
-- statement a range of it, a posting's predecessor its last row. seq orders the rows of one stamp
-- and comes from ledger_history_seq, one value per write statement (rows of a statement take the
-- next 16383 numbers: a batch has at most 8190 transfers, two sides each).
CREATE SEQUENCE IF NOT EXISTS ledger_history_seq INCREMENT BY 16384 MINVALUE 16384 START WITH 16384;
CREATE TABLE IF NOT EXISTS ledger_account_history (
  account_id uuid NOT NULL,
  posted_at timestamptz NOT NULL,
  seq bigint NOT NULL,
  -- NULL on the opening row written below for a balance that predates the history.
  transfer_id uuid,
  -- The user_data_128 of the transfer: the intent it belongs to, NULL when the caller gave none.
  intent_id uuid,
  code integer NOT NULL,
  -- Credits minus debits posted by this posting.
  amount bigint NOT NULL CHECK (amount <> 0),
  balance_after bigint NOT NULL,
  PRIMARY KEY (account_id, posted_at, seq)
);

-- Accounts users own already get the flag, and an opening row with the balance they hold now, so
-- that every account's history replays to its ledger balance from the start.
UPDATE ledger_accounts a SET flags = a.flags | 8
  FROM accounts m
 WHERE m.ledger_account_id = a.id AND m.user_id IS NOT NULL AND a.flags & 8 = 0;
INSERT INTO ledger_account_history (account_id, posted_at, seq, transfer_id, intent_id, code, amount, balance_after)
SELECT a.id, now(), nextval('ledger_history_seq'), NULL, NULL, a.code, b.balance, b.balance
  FROM ledger_accounts a
  JOIN (SELECT account_id, sum(credits_posted - debits_posted)::bigint AS balance FROM ledger_balances GROUP BY account_id) b
    ON b.account_id = a.id
 WHERE a.flags & 8 <> 0 AND b.balance <> 0
   AND NOT EXISTS (SELECT 1 FROM ledger_account_history h WHERE h.account_id = a.id);
