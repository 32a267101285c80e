-- One transfer event, event by event (the path of a batch that does not apply in full, see
-- 10-run-batch.sql). Each function returns NULL when the event applied, else TigerBeetle's reason;
-- a refused single transfer undoes its own partial writes (no sub-transaction per transfer:
-- sub-transactions that write cost an XID each and overflow the snapshot cache past 64). The
-- transfer row is inserted (ON CONFLICT (id) DO NOTHING) before any balance moves, so a concurrent
-- duplicate id waits on the unique index and then reads 'exists'.

-- Same id already stored: 'exists' when the event asks for the same transfer, else the first field
-- that differs, in TigerBeetle's order. Post/void may omit what the pending transfer decides.
CREATE OR REPLACE FUNCTION ledger_compare_transfer(e jsonb, t ledger_transfers) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_resolves boolean := ledger_resolves_pending(t.flags);
  v_amount bigint := (e->>'amount')::bigint;
BEGIN
  IF ledger_event_flags(e) <> t.flags THEN
    RETURN 'exists_with_different_flags';
  ELSIF (e->>'pending_id')::uuid IS DISTINCT FROM t.pending_id THEN
    RETURN 'exists_with_different_pending_id';
  ELSIF coalesce((e->>'timeout_s')::integer, 0) <> t.timeout_s THEN
    RETURN 'exists_with_different_timeout';
  ELSIF (e->>'debit_account_id')::uuid IS DISTINCT FROM t.debit_account_id
        AND NOT (v_resolves AND e->>'debit_account_id' IS NULL) THEN
    RETURN 'exists_with_different_debit_account_id';
  ELSIF (e->>'credit_account_id')::uuid IS DISTINCT FROM t.credit_account_id
        AND NOT (v_resolves AND e->>'credit_account_id' IS NULL) THEN
    RETURN 'exists_with_different_credit_account_id';
  END IF;
  IF ledger_posts_pending(t.flags) AND v_amount IS NULL THEN
    -- An omitted post amount meant "all of it".
    SELECT amount INTO v_amount FROM ledger_transfers WHERE id = t.pending_id;
  ELSIF ledger_voids_pending(t.flags) AND coalesce(v_amount, 0) = 0 THEN
    v_amount := t.amount;
  END IF;
  IF v_amount IS DISTINCT FROM t.amount THEN
    RETURN 'exists_with_different_amount';
  END IF;
  RETURN 'exists';
END $$;

CREATE OR REPLACE FUNCTION ledger_apply_transfer(e jsonb, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_id uuid := (e->>'id')::uuid;
  v_flags integer := ledger_event_flags(e);
  v_existing ledger_transfers;
BEGIN
  IF v_id IS NULL OR v_id = '00000000-0000-0000-0000-000000000000' THEN
    RETURN 'id_must_not_be_zero';
  END IF;
  -- As in TigerBeetle, a stored id is answered before any validation, so a retry of an event that
  -- succeeded always reads 'exists'.
  SELECT * INTO v_existing FROM ledger_transfers WHERE id = v_id;
  IF FOUND THEN
    RETURN ledger_compare_transfer(e, v_existing);
  END IF;
  IF ledger_transfer_flags_clash(v_flags) THEN
    RETURN 'flags_are_mutually_exclusive';
  ELSIF ledger_resolves_pending(v_flags) THEN
    RETURN ledger_apply_resolve(e, p_now);
  END IF;
  RETURN ledger_apply_new(e, p_now);
END $$;
