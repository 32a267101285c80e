-- A new single-phase or pending transfer, event by event (see 06-apply-transfer.sql). Only guarded
-- accounts move here; unguarded ones move at the end of the batch (ledger_roll_up).

-- A single-phase or pending transfer.
CREATE OR REPLACE FUNCTION ledger_apply_new(e jsonb, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_id uuid := (e->>'id')::uuid;
  v_debit uuid := (e->>'debit_account_id')::uuid;
  v_credit uuid := (e->>'credit_account_id')::uuid;
  v_amount bigint := (e->>'amount')::bigint;
  v_timeout integer := coalesce((e->>'timeout_s')::integer, 0);
  v_ledger integer := coalesce((e->>'ledger')::integer, 0);
  v_flags integer := ledger_event_flags(e);
  v_pending boolean := ledger_is_pending(v_flags);
  v_debit_account ledger_accounts;
  v_credit_account ledger_accounts;
  v_existing ledger_transfers;
  v_pending_amount bigint;
  v_posted_amount bigint;
  v_refusal text;
BEGIN
  IF v_debit IS NULL OR v_debit = '00000000-0000-0000-0000-000000000000' THEN
    RETURN 'debit_account_id_must_not_be_zero';
  ELSIF v_credit IS NULL OR v_credit = '00000000-0000-0000-0000-000000000000' THEN
    RETURN 'credit_account_id_must_not_be_zero';
  ELSIF v_debit = v_credit THEN
    RETURN 'accounts_must_be_different';
  ELSIF e->>'pending_id' IS NOT NULL THEN
    RETURN 'pending_id_must_be_zero';
  ELSIF v_timeout <> 0 AND NOT v_pending THEN
    RETURN 'timeout_reserved_for_pending_transfer';
  ELSIF coalesce(v_amount, 0) = 0 THEN
    RETURN 'amount_must_not_be_zero';
  ELSIF v_ledger = 0 THEN
    RETURN 'ledger_must_not_be_zero';
  END IF;
  SELECT * INTO v_debit_account FROM ledger_accounts WHERE id = v_debit;
  IF NOT FOUND THEN
    RETURN 'debit_account_not_found';
  END IF;
  SELECT * INTO v_credit_account FROM ledger_accounts WHERE id = v_credit;
  IF NOT FOUND THEN
    RETURN 'credit_account_not_found';
  ELSIF v_debit_account.ledger <> v_credit_account.ledger THEN
    RETURN 'accounts_must_have_the_same_ledger';
  ELSIF v_ledger <> v_debit_account.ledger THEN
    RETURN 'transfer_must_have_the_same_ledger_as_accounts';
  END IF;

  INSERT INTO ledger_transfers (id, debit_account_id, credit_account_id, amount, pending_id,
                                timeout_s, ledger, code, flags, created_at, expires_at, pending_status)
  VALUES (v_id, v_debit, v_credit, v_amount, NULL, v_timeout, v_ledger,
          coalesce((e->>'code')::integer, 0), v_flags, p_now,
          CASE WHEN v_timeout > 0 THEN p_now + make_interval(secs => v_timeout) END,
          CASE WHEN v_pending THEN 'pending' END)
  ON CONFLICT (id) DO NOTHING;
  IF NOT FOUND THEN
    -- A concurrent transaction committed the same id while we validated.
    SELECT * INTO v_existing FROM ledger_transfers WHERE id = v_id;
    RETURN ledger_compare_transfer(e, v_existing);
  END IF;

  v_pending_amount := CASE WHEN v_pending THEN v_amount ELSE 0 END;
  v_posted_amount := v_amount - v_pending_amount;
  v_refusal := ledger_move_new_transfer(v_debit_account, v_credit_account, v_pending_amount, v_posted_amount);
  IF v_refusal IS NOT NULL THEN
    DELETE FROM ledger_transfers WHERE id = v_id;
    RETURN v_refusal;
  END IF;
  RETURN NULL;
END $$;

-- A new transfer's guarded movements, in account id order as ledger_lock_balances locks them (for
-- when this runs alone: tests, manual repair). NULL when both sides moved; else the reason, and
-- neither side moved.
CREATE OR REPLACE FUNCTION ledger_move_new_transfer(p_debit ledger_accounts, p_credit ledger_accounts,
                                                    p_pending_amount bigint, p_posted_amount bigint) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  IF p_debit.id < p_credit.id THEN
    IF NOT ledger_move_guarded(p_debit.id, p_debit.flags, p_pending_amount, p_posted_amount, 0, 0,
                               ledger_debit_guard(p_debit.flags)) THEN
      RETURN 'exceeds_credits';
    END IF;
    IF NOT ledger_move_guarded(p_credit.id, p_credit.flags, 0, 0, p_pending_amount, p_posted_amount,
                               ledger_credit_guard(p_credit.flags)) THEN
      PERFORM ledger_move_guarded(p_debit.id, p_debit.flags, -p_pending_amount, -p_posted_amount, 0, 0, 0);
      RETURN 'exceeds_debits';
    END IF;
  ELSE
    IF NOT ledger_move_guarded(p_credit.id, p_credit.flags, 0, 0, p_pending_amount, p_posted_amount,
                               ledger_credit_guard(p_credit.flags)) THEN
      RETURN 'exceeds_debits';
    END IF;
    IF NOT ledger_move_guarded(p_debit.id, p_debit.flags, p_pending_amount, p_posted_amount, 0, 0,
                               ledger_debit_guard(p_debit.flags)) THEN
      PERFORM ledger_move_guarded(p_credit.id, p_credit.flags, 0, 0, -p_pending_amount, -p_posted_amount, 0);
      RETURN 'exceeds_credits';
    END IF;
  END IF;
  RETURN NULL;
END $$;
