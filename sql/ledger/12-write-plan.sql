-- Writes a batch planned by ledger_plan_batch. True when written; false when it could not be (one
-- of its ids is stored already, by an earlier call or by another transaction since the plan was
-- made: the plan does not look), and then nothing was: the transfers it inserted are deleted
-- again, as ledger_apply_new does, rather than rolled back with a sub-transaction, which would cost
-- an XID per batch and turn every balance row locked by the batch and updated inside it into a
-- multixact.
CREATE OR REPLACE FUNCTION ledger_write_plan(p_plan ledger_planned_transfer[], p_now timestamptz) RETURNS boolean
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
  RETURN true;
END $$;

-- The batch written at once when it applies in full; otherwise ledger_run_batch, event by event.
-- Nothing was written in that case, and its lock statement finds the rows locked already.
CREATE OR REPLACE FUNCTION ledger_create_transfers(p_batch jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  -- One clock for the plan and its writes, as ledger_run_batch keeps one for its batch.
  v_now timestamptz := clock_timestamp();
  v_plan ledger_planned_transfer[];
BEGIN
  PERFORM ledger_lock_for_transfers(p_batch);
  v_plan := ledger_plan_batch(p_batch, v_now);
  IF v_plan IS NOT NULL AND ledger_write_plan(v_plan, v_now) THEN
    RETURN '[]';
  END IF;
  RETURN ledger_run_batch('transfer', p_batch);
END $$;
