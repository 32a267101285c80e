-- docs/rules.md R22 and R21 in one statement: the payer's transaction-scoped advisory lock, then the
-- usage of every limit check under it. A VOLATILE function takes a new snapshot per statement, so
-- the usage is read after the lock is held and sees every committed payment of this payer. The lock
-- class is PAYER_LOCK_CLASS (src/domain/intents/commit/payer-locks.ts); guard.ts beside it builds
-- the checks. Called by intent_open_batch (03-open-batch.sql) for every new
-- intent, and by the invoice confirm (src/domain/intents/commit/confirm-commit.ts) for every payer.
-- The sums read the covering indexes of migrations/011-limit-usage-covering.sql.
-- p_checks: [{side: 'from'|'to', userId, since (null: per transaction), currency, operationType, measure: 'AMOUNT'|'COUNT',
--             requested, limit}]. Returns NULL, {"refusal":"locked"} or
-- {"refusal":"limit","index":i,"current":"…"} for the first check that would be exceeded.
-- The sums' plans live as long as the session: sequential scans are priced out, so that one made
-- while `intents` looked empty does not read the whole table as it grows (docs/design.md#hot-stable-plans).
CREATE OR REPLACE FUNCTION intent_guard(p_lock_class integer, p_payer bigint, p_intent uuid, p_checks jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
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
