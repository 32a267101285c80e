-- A batch applied event by event, with TigerBeetle's per-event answers: the path of the chains and
-- transfers where ledger_plan_until_refusal (11-plan.sql) found a batch would stop applying as
-- planned, of what follows them past ledger_replans_max (12-write-plan.sql), and of every account
-- batch.
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

-- The last event of the chain that starts at p_start (p_start itself when it is not linked). A
-- chain still open at the batch's end ends at its last event.
CREATE OR REPLACE FUNCTION ledger_chain_end(p_batch jsonb, p_start integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_last integer := jsonb_array_length(p_batch) - 1;
  v_end integer := p_start;
BEGIN
  WHILE v_end < v_last AND ledger_is_linked(ledger_event_flags(p_batch->v_end)) LOOP
    v_end := v_end + 1;
  END LOOP;
  RETURN v_end;
END $$;

-- Applies the events of a batch from p_from (the start of a chain or a single event) through the
-- chain or event that holds p_to, in order, at p_now: the failures only, as [{index, result}] with
-- the batch's indexes, and the ids it applied. Neither locks nor rolls up: its callers do both once
-- per batch. The balance history of what it applied is written before it returns, so that it
-- precedes whatever the caller writes next (13-history.sql).
CREATE OR REPLACE FUNCTION ledger_run_events(p_kind text, p_batch jsonb, p_from integer, p_to integer,
                                             p_now timestamptz, OUT results jsonb, OUT applied uuid[])
LANGUAGE plpgsql AS $$
DECLARE
  v_chain_results jsonb;
  v_chain_applied uuid[];
  v_start integer := p_from;
  v_end integer;
  v_reason text;
  v_last integer := p_from - 1;
BEGIN
  results := '[]';
  applied := '{}';
  WHILE v_start <= p_to LOOP
    v_end := ledger_chain_end(p_batch, v_start);
    IF ledger_is_linked(ledger_event_flags(p_batch->v_end)) THEN
      FOR v_index IN v_start .. v_end LOOP
        results := results || jsonb_build_object('index', v_index, 'result',
          CASE WHEN v_index = v_end THEN 'linked_event_chain_open' ELSE 'linked_event_failed' END);
      END LOOP;
      EXIT;
    END IF;

    IF v_start = v_end THEN
      v_reason := ledger_apply_event(p_kind, p_batch->v_start, p_now);
      IF v_reason IS NOT NULL THEN
        results := results || jsonb_build_object('index', v_start, 'result', v_reason);
      ELSE
        applied := applied || (p_batch->v_start->>'id')::uuid;
      END IF;
    ELSE
      SELECT c.results, c.applied INTO v_chain_results, v_chain_applied
        FROM ledger_run_chain(p_kind, p_batch, v_start, v_end, p_now) AS c;
      results := results || v_chain_results;
      applied := applied || v_chain_applied;
    END IF;
    v_last := v_end;
    v_start := v_end + 1;
  END LOOP;
  IF p_kind = 'transfer' AND cardinality(applied) > 0 THEN
    PERFORM ledger_record_applied_history(p_batch, p_from, v_last, applied);
  END IF;
END $$;

-- Applies a batch of events in order; returns the failures only, as [{index, result}]. The
-- transfers it applied move their unguarded accounts once, at the end (ledger_roll_up).
CREATE OR REPLACE FUNCTION ledger_run_batch(p_kind text, p_batch jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  -- One clock for the whole batch: a pending transfer created and posted in one batch cannot
  -- expire in between, and expiry decisions agree with each other.
  v_now timestamptz := clock_timestamp();
  v_run record;
BEGIN
  IF p_kind = 'transfer' THEN
    PERFORM ledger_lock_for_transfers(p_batch);
  END IF;
  SELECT r.results, r.applied INTO v_run
    FROM ledger_run_events(p_kind, p_batch, 0, jsonb_array_length(p_batch) - 1, v_now) AS r;
  IF p_kind = 'transfer' AND cardinality(v_run.applied) > 0 THEN
    PERFORM ledger_roll_up(v_run.applied);
  END IF;
  RETURN v_run.results;
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
