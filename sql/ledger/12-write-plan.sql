-- Writes a batch, or its first events, as planned by ledger_plan_until_refusal. True when written;
-- false when it could not be (one of its ids is stored already, by an earlier call or by another
-- transaction since the plan was made: the plan does not look), and then nothing was: the transfers it inserted are deleted
-- again, as ledger_apply_new does, rather than rolled back with a sub-transaction, which would cost
-- an XID per batch and turn every balance row locked by the batch and updated inside it into a
-- multixact.
-- p_events: the batch the plan indexes, for the balance history's user data (13-history.sql).
-- (Dropped first: the version before took no p_events.)
DROP FUNCTION IF EXISTS ledger_write_plan(ledger_planned_transfer[], timestamptz);
CREATE OR REPLACE FUNCTION ledger_write_plan(p_plan ledger_planned_transfer[], p_events jsonb, p_now timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_inserted uuid[];
  v_posted_ids uuid[];
  v_voided_ids uuid[];
BEGIN
  WITH inserted AS (
    INSERT INTO ledger_transfers (id, debit_account_id, credit_account_id, amount, pending_id,
                                  timeout_s, ledger, code, flags, created_at, expires_at, pending_status)
    SELECT p.id, p.debit_account_id, p.credit_account_id, p.amount, p.pending_id, p.timeout_s, p.ledger,
           p.code, p.flags, p_now, CASE WHEN p.timeout_s > 0 THEN p_now + make_interval(secs => p.timeout_s) END,
           p.pending_status
      FROM unnest(p_plan) AS p
     ORDER BY p.idx
    ON CONFLICT (id) DO NOTHING
    RETURNING id
  )
  SELECT array_agg(id) INTO v_inserted FROM inserted;
  IF coalesce(cardinality(v_inserted), 0) <> cardinality(p_plan) THEN
    -- Nothing but these inserts has been written; the rows that conflicted were stored before.
    DELETE FROM ledger_transfers WHERE id = ANY (v_inserted);
    RETURN false;
  END IF;

  -- The pending transfers were locked by ledger_lock_for_transfers and planned as pending.
  -- (Reservations made in this batch were stored with their final status.)
  SELECT array_agg(p.pending_id) FILTER (WHERE ledger_posts_pending(p.flags)), array_agg(p.pending_id) FILTER (WHERE ledger_voids_pending(p.flags))
    INTO v_posted_ids, v_voided_ids
    FROM unnest(p_plan) AS p
   WHERE p.resolves_stored;
  IF v_posted_ids IS NOT NULL THEN
    UPDATE ledger_transfers SET pending_status = 'posted' WHERE id = ANY (v_posted_ids) AND pending_status = 'pending';
  END IF;
  IF v_voided_ids IS NOT NULL THEN
    UPDATE ledger_transfers SET pending_status = 'voided' WHERE id = ANY (v_voided_ids) AND pending_status = 'pending';
  END IF;

  PERFORM ledger_add_movements(p_plan, false);
  PERFORM ledger_record_history(p_plan, p_events);
  RETURN true;
END $$;

-- Plans of the rest of a batch made after the first, at most: a batch that would need more runs
-- the rest event by event. Each re-plan reads the rest again, so a batch with many refusals would
-- otherwise cost more than running it all event by event.
CREATE OR REPLACE FUNCTION ledger_replans_max() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 4 $$;

-- The batch written with a few set statements as far as it applies as planned; the chain or event
-- where it stops applying (refused, or not as planned) runs event by event (ledger_run_events),
-- with the chains or events after it that resolve what it failed to create; then the rest is
-- planned again from the stored state, which holds what was written. The answers are the
-- event-by-event path's, index by index: every event written set-based applied, and a plan cut at
-- a refusal is exact for the events before it (ledger_plan_until_refusal, ledger_plan_prefix).
-- When a write finds an id stored already, nothing of it was written and the rest runs event by
-- event, which answers 'exists' or the difference.
--
-- Generic plans for every statement it runs, nested functions included: PostgreSQL estimates
-- unnest() of an array parameter by the array's length, so on a session whose first batches held
-- one or two payments each custom plan looked cheaper than the generic one, and the statements of
-- ledger_add_movements and ledger_lock_balances were planned again at every call: 1.6 ms a call
-- instead of 0.9 in a quiet service. The generic plans cost no more on batches of 100
-- (docs/design.md#hot-generic-plans). A generic plan is made once, on the tables as they are then:
-- sequential scans are priced out, so that a look-up of pending transfers by id planned while
-- `ledger_transfers` looked empty does not read the whole table for the session's life
-- (docs/design.md#hot-stable-plans).
CREATE OR REPLACE FUNCTION ledger_create_transfers(p_batch jsonb) RETURNS jsonb
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
  -- One clock for the plans and every write, as ledger_run_batch keeps one for its batch.
  v_now timestamptz := clock_timestamp();
  v_count integer := jsonb_array_length(p_batch);
  v_results jsonb := '[]';
  v_applied uuid[] := '{}';
  -- Ids of the chains and events that ran event by event and failed: a later event resolving one
  -- of them is refused too, without a plan to say so.
  v_failed uuid[] := '{}';
  v_rest jsonb := p_batch;
  -- The batch's index of v_rest's first event.
  v_from integer := 0;
  v_replans integer := 0;
  v_plan ledger_planned_transfer[];
  v_refused_at integer;
  v_decided jsonb;
  v_start integer;
  v_end integer;
  v_run record;
BEGIN
  IF v_count = 0 THEN
    RETURN '[]';
  END IF;
  PERFORM ledger_lock_for_transfers(p_batch);
  LOOP
    SELECT p.plan, p.refused_at, p.decided INTO v_plan, v_refused_at, v_decided
      FROM ledger_plan_until_refusal(v_rest, v_now) AS p;
    IF v_refused_at IS NULL THEN
      IF ledger_write_plan(v_plan, v_rest, v_now) THEN
        v_results := v_results || ledger_decided_below(v_decided, v_from, v_count);
        EXIT;
      END IF;
      v_start := v_from;
      v_end := v_count - 1;
    ELSE
      v_start := v_from + v_refused_at;
      WHILE v_start > v_from AND ledger_is_linked(ledger_event_flags(p_batch->(v_start - 1))) LOOP
        v_start := v_start - 1;
      END LOOP;
      v_end := ledger_chain_end(p_batch, v_start);
      IF v_start > v_from AND NOT ledger_write_plan(ledger_plan_prefix(v_plan, v_start - v_from), v_rest, v_now) THEN
        v_start := v_from;
        v_end := v_count - 1;
      ELSIF v_end < v_count - 1 AND v_replans >= ledger_replans_max() THEN
        v_end := v_count - 1;
      END IF;
      -- The refusals decided before the cut hold whatever the rest does; those after it are decided again.
      v_results := v_results || ledger_decided_below(v_decided, v_from, v_start);
    END IF;

    LOOP
      SELECT r.results, r.applied INTO v_run FROM ledger_run_events('transfer', p_batch, v_start, v_end, v_now) AS r;
      v_results := v_results || v_run.results;
      v_applied := v_applied || v_run.applied;
      IF jsonb_path_exists(v_run.results, '$[*] ? (@.result != "exists")') THEN
        v_failed := v_failed || ARRAY(SELECT (p_batch->i->>'id')::uuid FROM generate_series(v_start, v_end) AS i);
      END IF;
      v_from := v_end + 1;
      EXIT WHEN v_from >= v_count;
      v_start := v_from;
      v_end := ledger_chain_end(p_batch, v_start);
      EXIT WHEN NOT EXISTS (SELECT 1 FROM generate_series(v_start, v_end) AS i
                             WHERE (p_batch->i->>'pending_id')::uuid = ANY (v_failed));
    END LOOP;
    EXIT WHEN v_from >= v_count;

    v_replans := v_replans + 1;
    SELECT jsonb_agg(e.x ORDER BY e.ord) INTO v_rest
      FROM jsonb_array_elements(p_batch) WITH ORDINALITY AS e (x, ord)
     WHERE e.ord > v_from;
  END LOOP;
  IF cardinality(v_applied) > 0 THEN
    PERFORM ledger_roll_up(v_applied);
  END IF;
  RETURN v_results;
END $$;
