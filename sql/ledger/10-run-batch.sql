-- A batch applied event by event, with TigerBeetle's per-event answers: the path of a batch that
-- ledger_plan_batch (11-plan.sql) found would not apply in full, and of every account batch.
--
-- Chains (linked on every member but the last) apply all-or-nothing, inside one BEGIN ... EXCEPTION
-- block: the member that failed names its reason, the others read linked_event_failed. Unlike
-- TigerBeetle, a member that already exists unchanged does not break its chain: a retried chain
-- reads 'exists' for every member, so "no result other than 'exists'" means applied, for chains as
-- for single events.

-- One event of either kind: NULL when applied, else the reason.
CREATE OR REPLACE FUNCTION ledger_apply_event(p_kind text, e jsonb, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  IF p_kind = 'transfer' THEN
    RETURN ledger_apply_transfer(e, p_now);
  ELSIF p_kind = 'account' THEN
    RETURN ledger_apply_account(e, p_now);
  END IF;
  RAISE EXCEPTION 'ledger: unknown event kind %', p_kind;
END $$;

-- Applies a batch of events in order; returns the failures only, as [{index, result}]. The
-- transfers it applied move their unguarded accounts once, at the end (ledger_roll_up).
CREATE OR REPLACE FUNCTION ledger_run_batch(p_kind text, p_batch jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  -- One clock for the whole batch: a pending transfer created and posted in one batch cannot
  -- expire in between, and expiry decisions agree with each other.
  v_now timestamptz := clock_timestamp();
  v_count integer := jsonb_array_length(p_batch);
  v_results jsonb := '[]';
  v_chain_results jsonb;
  v_chain_applied uuid[];
  v_applied uuid[] := '{}';
  v_start integer := 0;
  v_end integer;
  v_reason text;
BEGIN
  IF p_kind = 'transfer' THEN
    PERFORM ledger_lock_for_transfers(p_batch);
  END IF;
  WHILE v_start < v_count LOOP
    v_end := v_start;
    WHILE v_end < v_count - 1 AND ledger_is_linked(ledger_event_flags(p_batch->v_end)) LOOP
      v_end := v_end + 1;
    END LOOP;
    IF ledger_is_linked(ledger_event_flags(p_batch->v_end)) THEN
      FOR v_index IN v_start .. v_end LOOP
        v_results := v_results || jsonb_build_object('index', v_index, 'result',
          CASE WHEN v_index = v_end THEN 'linked_event_chain_open' ELSE 'linked_event_failed' END);
      END LOOP;
      EXIT;
    END IF;

    IF v_start = v_end THEN
      v_reason := ledger_apply_event(p_kind, p_batch->v_start, v_now);
      IF v_reason IS NOT NULL THEN
        v_results := v_results || jsonb_build_object('index', v_start, 'result', v_reason);
      ELSE
        v_applied := v_applied || (p_batch->v_start->>'id')::uuid;
      END IF;
    ELSE
      SELECT c.results, c.applied INTO v_chain_results, v_chain_applied
        FROM ledger_run_chain(p_kind, p_batch, v_start, v_end, v_now) AS c;
      v_results := v_results || v_chain_results;
      v_applied := v_applied || v_chain_applied;
    END IF;
    v_start := v_end + 1;
  END LOOP;
  IF p_kind = 'transfer' AND cardinality(v_applied) > 0 THEN
    PERFORM ledger_roll_up(v_applied);
  END IF;
  RETURN v_results;
END $$;

-- One chain, events p_start to p_end: its answers ('exists' only, when it held) and the ids it
-- applied (none, when it failed).
CREATE OR REPLACE FUNCTION ledger_run_chain(p_kind text, p_batch jsonb, p_start integer, p_end integer,
                                            p_now timestamptz, OUT results jsonb, OUT applied uuid[])
LANGUAGE plpgsql AS $$
DECLARE
  v_reason text;
  v_fail_index integer;
  v_fail_reason text;
BEGIN
  results := '[]';
  applied := '{}';
  BEGIN
    FOR v_index IN p_start .. p_end LOOP
      v_reason := ledger_apply_event(p_kind, p_batch->v_index, p_now);
      IF v_reason = 'exists' THEN
        results := results || jsonb_build_object('index', v_index, 'result', v_reason);
      ELSIF v_reason IS NOT NULL THEN
        v_fail_index := v_index;
        v_fail_reason := v_reason;
        RAISE EXCEPTION 'ledger: linked chain failed' USING ERRCODE = 'LDG01';
      ELSE
        applied := applied || (p_batch->v_index->>'id')::uuid;
      END IF;
    END LOOP;
  EXCEPTION WHEN SQLSTATE 'LDG01' THEN
    -- The rollback undid the chain's writes; PL/pgSQL variables are not rolled back with it.
    results := '[]';
    applied := '{}';
    FOR v_index IN p_start .. p_end LOOP
      results := results || jsonb_build_object('index', v_index, 'result',
        CASE WHEN v_index = v_fail_index THEN v_fail_reason ELSE 'linked_event_failed' END);
    END LOOP;
    -- The rollback also undid the expiry that found the pending transfer timed out; it is true
    -- whatever became of the chain, so it is done again outside the chain.
    IF v_fail_reason = 'pending_transfer_expired' THEN
      PERFORM ledger_expire_transfer((p_batch->v_fail_index->>'pending_id')::uuid, p_now);
    END IF;
  END;
END $$;

CREATE OR REPLACE FUNCTION ledger_create_accounts(p_batch jsonb) RETURNS jsonb
LANGUAGE sql AS $$ SELECT ledger_run_batch('account', p_batch) $$;
