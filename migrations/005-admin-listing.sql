-- GET /admin/intents pages newest first on (created_at, id) with keyset cursors. Without a
-- filter it walks this index; with a status filter (the common operator question: "what is in
-- MANUAL_REVIEW / AUTHORIZED?") the second. Other filters are checked along the walk.
-- IF NOT EXISTS: on a large table an operator builds them first with CREATE INDEX CONCURRENTLY
-- (docs/OPERATIONS.md, upgrades), and this migration then has nothing left to do.
CREATE INDEX IF NOT EXISTS intents_created_id_idx ON intents (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS intents_status_created_id_idx ON intents (status, created_at DESC, id DESC);
