-- Replay and nonce records kept in the database while Redis does not answer (docs/rules.md R64):
-- one row per claimed key, unique, until it expires. Rows past their expiry are taken again by the
-- next claim of the same key and pruned a few at a time by every claim (sql/replay/01-claim.sql).
CREATE TABLE IF NOT EXISTS replay_claims (
  key text PRIMARY KEY,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS replay_claims_expires_at ON replay_claims (expires_at);
