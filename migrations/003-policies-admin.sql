-- Step-up policies and the admin API.

-- 002 already has these columns; IF NOT EXISTS keeps this file valid whichever lands first.
ALTER TABLE intents ADD COLUMN IF NOT EXISTS from_user_id bigint;
ALTER TABLE intents ADD COLUMN IF NOT EXISTS to_user_id bigint;

-- The new-payee check of POST /policies/evaluate: "has this payer a settled payment to this
-- merchant?" is one probe of this index. The daily-cumulative figure uses
-- transactions_user_debit_idx (user_id, currency, created_at) WHERE direction = 'DEBIT' from 002.
CREATE INDEX IF NOT EXISTS intents_settled_payee_idx
  ON intents (from_user_id, (metadata->>'merchantUserId'))
  WHERE status = 'SETTLED';

-- The admin change log is read per entity, newest first.
CREATE INDEX IF NOT EXISTS admin_changes_entity_idx ON admin_changes (entity, entity_id, id DESC);
