-- The limit checks (intent_guard, migrations/006) sum a user's settled and reserved intents of
-- the day or month. With the indexes of 002 each of those intents was a heap fetch from a random
-- page, and a busy database with more intents per user per day slowed down in step. With the
-- columns the checks read in the index, a vacuumed page answers from the index alone (see
-- docs/PERFORMANCE.md, Migrations).
-- IF NOT EXISTS: on a large table an operator builds them first with CREATE INDEX CONCURRENTLY
-- (docs/OPERATIONS.md, upgrades), and this migration then only drops the old ones.
CREATE INDEX IF NOT EXISTS intents_from_user_usage_idx ON intents (from_user_id, created_at)
  INCLUDE (amount, currency, operation_type, id) WHERE status IN ('AUTHORIZED', 'SETTLED');
CREATE INDEX IF NOT EXISTS intents_to_user_usage_idx ON intents (to_user_id, created_at)
  INCLUDE (amount, currency, operation_type, id) WHERE status IN ('AUTHORIZED', 'SETTLED');
DROP INDEX IF EXISTS intents_from_user_idx;
DROP INDEX IF EXISTS intents_to_user_idx;
