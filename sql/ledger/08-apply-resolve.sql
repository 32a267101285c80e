-- A post or void of a pending transfer, event by event (see 06-apply-transfer.sql). Only one post,
-- void or expiry wins a pending transfer: its status is changed by a guarded UPDATE.

CREATE OR REPLACE FUNCTION ledger_resolve_refusal(p_pending_id uuid, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_status text;
  v_expires_at timestamptz;
BEGIN
  SELECT pending_status, expires_at INTO v_status, v_expires_at
    FROM ledger_transfers WHERE id = p_pending_id;
  IF v_status = 'posted' THEN
    RETURN 'pending_transfer_already_posted';
  ELSIF v_status = 'voided' THEN
    RETURN 'pending_transfer_already_voided';
  ELSIF v_status = 'expired' THEN
    RETURN 'pending_transfer_expired';
  ELSIF v_status = 'pending' AND v_expires_at <= p_now THEN
    PERFORM ledger_expire_transfer(p_pending_id, p_now);
    RETURN 'pending_transfer_expired';
  END IF;
  RETURN NULL;
END $$;

-- A post or void of a pending transfer.
CREATE OR REPLACE FUNCTION ledger_apply_resolve(e jsonb, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_id uuid := (e->>'id')::uuid;
  v_debit uuid := (e->>'debit_account_id')::uuid;
  v_credit uuid := (e->>'credit_account_id')::uuid;
  v_amount bigint := (e->>'amount')::bigint;
  v_pending_id uuid := (e->>'pending_id')::uuid;
  v_ledger integer := coalesce((e->>'ledger')::integer, 0);
  v_code integer := coalesce((e->>'code')::integer, 0);
  v_flags integer := ledger_event_flags(e);
  v_post boolean := ledger_posts_pending(v_flags);
  v_pending ledger_transfers;
  v_existing ledger_transfers;
  v_posted bigint;
  v_refusal text;
BEGIN
  IF v_debit IS NOT NULL AND v_debit = v_credit THEN
    RETURN 'accounts_must_be_different';
  ELSIF v_pending_id IS NULL OR v_pending_id = '00000000-0000-0000-0000-000000000000' THEN
    RETURN 'pending_id_must_not_be_zero';
  ELSIF v_pending_id = v_id THEN
    RETURN 'pending_id_must_be_different';
  ELSIF coalesce((e->>'timeout_s')::integer, 0) <> 0 THEN
    RETURN 'timeout_reserved_for_pending_transfer';
  ELSIF v_post AND v_amount = 0 THEN
    RETURN 'amount_must_not_be_zero';
  ELSIF v_debit IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ledger_accounts WHERE id = v_debit) THEN
    RETURN 'debit_account_not_found';
  ELSIF v_credit IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ledger_accounts WHERE id = v_credit) THEN
    RETURN 'credit_account_not_found';
  END IF;
  -- Unlocked read: every field used here is immutable; the status is re-checked under lock below.
  SELECT * INTO v_pending FROM ledger_transfers WHERE id = v_pending_id;
  IF NOT FOUND THEN
    RETURN 'pending_transfer_not_found';
  ELSIF NOT ledger_is_pending(v_pending.flags) THEN
    RETURN 'pending_transfer_not_pending';
  ELSIF v_debit IS NOT NULL AND v_debit <> v_pending.debit_account_id THEN
    RETURN 'pending_transfer_has_different_debit_account_id';
  ELSIF v_credit IS NOT NULL AND v_credit <> v_pending.credit_account_id THEN
    RETURN 'pending_transfer_has_different_credit_account_id';
  ELSIF v_ledger <> 0 AND v_ledger <> v_pending.ledger THEN
    RETURN 'pending_transfer_has_different_ledger';
  ELSIF v_amount > v_pending.amount THEN
    RETURN 'exceeds_pending_transfer_amount';
  END IF;
  v_refusal := ledger_resolve_refusal(v_pending_id, p_now);
  IF v_refusal IS NOT NULL THEN
    RETURN v_refusal;
  END IF;

  -- A void always releases the whole reservation, whatever amount it names.
  v_posted := CASE WHEN v_post THEN coalesce(v_amount, v_pending.amount) ELSE v_pending.amount END;
  INSERT INTO ledger_transfers (id, debit_account_id, credit_account_id, amount, pending_id,
                                timeout_s, ledger, code, flags, created_at, expires_at, pending_status)
  VALUES (v_id, v_pending.debit_account_id, v_pending.credit_account_id, v_posted, v_pending_id,
          0, v_pending.ledger, CASE WHEN v_code = 0 THEN v_pending.code ELSE v_code END, v_flags,
          p_now, NULL, NULL)
  ON CONFLICT (id) DO NOTHING;
  IF NOT FOUND THEN
    SELECT * INTO v_existing FROM ledger_transfers WHERE id = v_id;
    RETURN ledger_compare_transfer(e, v_existing);
  END IF;

  RETURN ledger_claim_pending(v_id, v_pending, v_post, v_posted, p_now);
END $$;

-- The resolve stored as p_id takes its pending transfer, and moves the guarded balances. Only one
-- post, void or expiry wins a pending transfer: the status is changed by a guarded UPDATE, and the
-- loser deletes the transfer it stored and answers why it lost. NULL when this one won.
CREATE OR REPLACE FUNCTION ledger_claim_pending(p_id uuid, p_pending ledger_transfers, p_post boolean,
                                                p_posted bigint, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_refusal text;
BEGIN
  UPDATE ledger_transfers SET pending_status = CASE WHEN p_post THEN 'posted' ELSE 'voided' END
   WHERE id = p_pending.id AND pending_status = 'pending'
     AND (expires_at IS NULL OR expires_at > p_now);
  IF NOT FOUND THEN
    DELETE FROM ledger_transfers WHERE id = p_id;
    v_refusal := ledger_resolve_refusal(p_pending.id, p_now);
    IF v_refusal IS NULL THEN
      RAISE EXCEPTION 'ledger: pending transfer % refused without a reason', p_pending.id;
    END IF;
    RETURN v_refusal;
  END IF;

  -- Posting at most the reserved amount can only lower exposure, so no limit is checked here.
  PERFORM ledger_settle_guarded(p_pending.debit_account_id, p_pending.credit_account_id,
                                -p_pending.amount, CASE WHEN p_post THEN p_posted ELSE 0 END,
                                -p_pending.amount, CASE WHEN p_post THEN p_posted ELSE 0 END);
  RETURN NULL;
END $$;
