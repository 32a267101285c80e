-- The history rows of refunds by the intent they refund: with transactions_intent_leg_idx (an
-- intent's own rows, migrations/022-refunds.sql) every row naming an intent is found by an index,
-- so the check that an intent deleted is named by none (sql/intents/01-references.sql) reads no
-- more than its rows. Refund rows are few; an intent's own rows need no second index.
CREATE INDEX IF NOT EXISTS transactions_refund_intent_idx ON transactions (intent_id) WHERE refund_id IS NOT NULL;
