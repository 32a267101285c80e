-- Pending transfers past their timeout. The sweep (ledger_expire_pending) and a post or void that
-- finds its reservation timed out both release it through ledger_expire_transfer, so callers may
-- race the sweep freely.

-- Releases one pending transfer past its timeout. False when it is not (or no longer) pending and
-- expired.
CREATE OR REPLACE FUNCTION ledger_expire_transfer(p_id uuid, p_now timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_debit uuid;
  v_credit uuid;
  v_amount bigint;
BEGIN
  UPDATE ledger_transfers SET pending_status = 'expired'
   WHERE id = p_id AND pending_status = 'pending' AND expires_at <= p_now
  RETURNING debit_account_id, credit_account_id, amount INTO v_debit, v_credit, v_amount;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM ledger_settle(v_debit, v_credit, -v_amount, 0, -v_amount, 0);
  RETURN true;
END $$;

-- Expires up to p_batch_size due transfers, in the lock order of 03-locks.sql; returns their ids.
CREATE OR REPLACE FUNCTION ledger_expire_pending(p_batch_size integer) RETURNS SETOF uuid
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_ids uuid[];
  v_accounts uuid[];
  v_id uuid;
BEGIN
  -- SKIP LOCKED: a transfer being posted or voided right now is that transaction's to settle.
  SELECT array_agg(id) INTO v_ids FROM (
    SELECT id FROM ledger_transfers
     WHERE pending_status = 'pending' AND expires_at <= v_now
     ORDER BY expires_at
     LIMIT p_batch_size
       FOR UPDATE SKIP LOCKED
  ) AS due;
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  SELECT array_agg(DISTINCT account_id) INTO v_accounts FROM (
    SELECT debit_account_id AS account_id FROM ledger_transfers WHERE id = ANY (v_ids)
    UNION ALL
    SELECT credit_account_id FROM ledger_transfers WHERE id = ANY (v_ids)
  ) AS touched;
  PERFORM ledger_lock_balances(v_accounts);
  FOREACH v_id IN ARRAY v_ids LOOP
    IF ledger_expire_transfer(v_id, v_now) THEN
      RETURN NEXT v_id;
    END IF;
  END LOOP;
END $$;
