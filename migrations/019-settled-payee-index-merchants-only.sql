-- The new-payee check of POST /policies/evaluate asks only "has this payer a settled payment to
-- this merchant?" (src/domain/policy-queries.ts): its equality on metadata->>'merchantUserId'
-- implies the key is not null, so an index of only the settled intents that name a merchant
-- answers it, custom or generic plan. The index of 003 took every settled intent, so every P2P
-- payment (no merchant) paid an entry that no query reads (docs/PERFORMANCE.md, Log, 2026-11-27).
--
-- IF NOT EXISTS under a new name, so that an operator with a large intents table can build it
-- first with CREATE INDEX CONCURRENTLY; this file then only drops the one it replaces
-- (docs/OPERATIONS.md, section 5).
CREATE INDEX IF NOT EXISTS intents_merchant_payee_idx
  ON intents (from_user_id, (metadata->>'merchantUserId'))
  WHERE status = 'SETTLED' AND metadata->>'merchantUserId' IS NOT NULL;
DROP INDEX IF EXISTS intents_settled_payee_idx;
