-- This migration's ledger_* functions are superseded: their current definitions are in sql/ledger/.
-- The hot path of POST /intents (docs/PERFORMANCE.md): cached configuration that still changes on the very
-- next request, and fewer round trips per settled intent.

-- Configuration version. Every statement that changes a table the API caches bumps it, whoever
-- runs it (the admin API, CONFIG_FILE bootstrap, another instance, or an operator's raw SQL), so
-- an instance learns of a change with one cheap read per request instead of re-reading the
-- tables. Statement-level triggers: one bump per statement, not per row.
CREATE TABLE config_version (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version bigint NOT NULL
);
INSERT INTO config_version (version) VALUES (1);

CREATE FUNCTION config_version_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE config_version SET version = version + 1;
  RETURN NULL;
END $$;

CREATE TRIGGER service_keys_config_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON service_keys
  FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
CREATE TRIGGER routes_config_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON routes
  FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
CREATE TRIGGER fee_rules_config_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON fee_rules
  FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
CREATE TRIGGER limit_rules_config_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON limit_rules
  FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();
CREATE TRIGGER auth_policies_config_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON auth_policies
  FOR EACH STATEMENT EXECUTE FUNCTION config_version_bump();

-- docs/rules.md R22 and R21 in one statement: the payer's transaction-scoped advisory lock, then the usage of
-- every limit check under it. A VOLATILE function takes a new snapshot per statement, so the
-- usage is read after the lock is held and sees every committed payment of this payer. The key
-- is the one lockPayerInTransaction uses, so both paths exclude each other.
-- p_checks: [{side: 'from'|'to', userId, since (null: per transaction), currency, operationType, measure: 'AMOUNT'|'COUNT',
--             requested, limit}]. Returns NULL, {"refusal":"locked"} or
-- {"refusal":"limit","index":i,"current":"…"} for the first check that would be exceeded.
CREATE FUNCTION intent_guard(p_lock_class integer, p_payer bigint, p_intent uuid, p_checks jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_check jsonb;
  v_index integer := 0;
  v_user bigint;
  v_since timestamptz;
  v_currency text;
  v_operation text;
  v_sum bigint;
  v_count bigint;
  v_used bigint;
BEGIN
  IF p_payer IS NOT NULL
     AND NOT pg_try_advisory_xact_lock(p_lock_class, hashtext(current_schema() || ':' || p_payer::text)) THEN
    RETURN jsonb_build_object('refusal', 'locked');
  END IF;
  FOR v_check IN SELECT value FROM jsonb_array_elements(coalesce(p_checks, '[]')) LOOP
    v_user := (v_check->>'userId')::bigint;
    v_since := (v_check->>'since')::timestamptz;
    v_currency := v_check->>'currency';
    v_operation := v_check->>'operationType';
    IF v_since IS NULL THEN
      -- PER_TRANSACTION: nothing before this request counts.
      v_sum := 0;
      v_count := 0;
    ELSIF v_check->>'side' = 'from' THEN
      SELECT coalesce(sum(amount), 0)::bigint, count(*) INTO v_sum, v_count FROM intents
       WHERE from_user_id = v_user AND status IN ('AUTHORIZED', 'SETTLED') AND created_at >= v_since
         AND currency = v_currency AND (v_operation = '*' OR operation_type = v_operation) AND id <> p_intent;
    ELSE
      SELECT coalesce(sum(amount), 0)::bigint, count(*) INTO v_sum, v_count FROM intents
       WHERE to_user_id = v_user AND status IN ('AUTHORIZED', 'SETTLED') AND created_at >= v_since
         AND currency = v_currency AND (v_operation = '*' OR operation_type = v_operation) AND id <> p_intent;
    END IF;
    v_used := CASE WHEN v_check->>'measure' = 'AMOUNT' THEN v_sum ELSE v_count END;
    IF v_used + (v_check->>'requested')::bigint > (v_check->>'limit')::bigint THEN
      RETURN jsonb_build_object('refusal', 'limit', 'index', v_index, 'current', v_used::text);
    END IF;
    v_index := v_index + 1;
  END LOOP;
  RETURN NULL;
END $$;

-- 001's version joined ledger_accounts without restricting it to p_accounts, so the planner
-- hash-joined every account: a sequential scan per ledger batch, most of the batch's time and
-- growing with the number of accounts (see docs/PERFORMANCE.md, Migrations). Naming the
-- accounts on both sides of the join lets both use their primary keys. Same rows, same order.
CREATE OR REPLACE FUNCTION ledger_lock_balances(p_accounts uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_shard smallint := ledger_transaction_shard();
BEGIN
  PERFORM 1
     FROM ledger_balances b JOIN ledger_accounts a ON a.id = b.account_id
    WHERE b.account_id = ANY (p_accounts) AND a.id = ANY (p_accounts)
      AND b.shard = CASE WHEN ledger_is_guarded(a.flags) THEN 0 ELSE v_shard END
    ORDER BY b.account_id, b.shard
      FOR UPDATE OF b;
END $$;

-- 8 shards were not enough: with 16 payments in flight, two or more transactions picked the same
-- shard of the transit and revenue accounts most of the time and queued on its row lock for the
-- rest of their transaction (see docs/PERFORMANCE.md, Migrations).
-- 32 shards make that the exception. Reads sum 32 small rows per hot account, which is cheap.
CREATE OR REPLACE FUNCTION ledger_unguarded_shard_count() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 32 $$;

INSERT INTO ledger_balances (account_id, shard)
SELECT a.id, s.shard::smallint
  FROM ledger_accounts a CROSS JOIN generate_series(0, ledger_unguarded_shard_count() - 1) AS s (shard)
 WHERE NOT ledger_is_guarded(a.flags)
ON CONFLICT (account_id, shard) DO NOTHING;
