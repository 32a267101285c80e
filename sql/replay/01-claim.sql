-- replay_claim(key, ttl_ms): true the first time `key` is claimed while no earlier claim of it
-- lives, on any instance; false while one does (docs/rules.md R64). The unique key makes two
-- concurrent claims of one key end with exactly one true. Each call also deletes up to
-- prune_max expired rows, so the table holds about one replay window of claims.
CREATE OR REPLACE FUNCTION replay_claim(claim_key text, ttl_ms integer, prune_max integer DEFAULT 10)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  claimed integer;
BEGIN
  DELETE FROM replay_claims
   WHERE key IN (SELECT r.key FROM replay_claims r WHERE r.expires_at <= now() ORDER BY r.expires_at LIMIT prune_max FOR UPDATE SKIP LOCKED);
  INSERT INTO replay_claims AS r (key, expires_at)
  VALUES (claim_key, now() + ttl_ms * interval '1 millisecond')
  ON CONFLICT (key) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE r.expires_at <= now();
  GET DIAGNOSTICS claimed = ROW_COUNT;
  RETURN claimed = 1;
END;
$$;
