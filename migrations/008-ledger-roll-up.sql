-- This migration's functions are superseded: their current definitions are in sql/ledger/.
-- Unguarded balances roll up once per batch (docs/PERFORMANCE.md "Hot accounts").
--
-- Until now every transfer updated both of its accounts' balance rows at once. A settled P2P intent
-- with a fee moves the channel's transit account four times and revenue once, so a group-commit
-- batch of 32 updated one transit shard ~128 times in one transaction; each update found the row by
-- walking the versions that the same transaction wrote before it, so a batch cost grew with the
-- square of its size (ledger_bump was most of the ledger's time in the profile).
--
-- Now only guarded accounts (flags 2 or 4) move per transfer, because their check must see every
-- earlier movement. Unguarded accounts (transit, revenue, nostro, equity) have no check to run, so
-- ledger_run_batch adds their movements up from the transfers it applied and writes each one's
-- shard once, at the end of the batch. The transfers are the record of what moved: a linked chain
-- that rolled back left no transfer rows behind, so nothing of it is summed, with no bookkeeping
-- that a rollback could miss (PL/pgSQL variables are not rolled back with a sub-transaction).
-- Within one batch call nobody reads these balances; outside it the totals are the same as before.
--
-- Expiries (ledger_expire_transfer, from the sweeper or a post/void that found its reservation
-- timed out) still move both accounts at once through ledger_settle: they are rare and can happen
-- outside any batch.

-- A guarded account's movement, checked and applied now; an unguarded one is left to
-- ledger_roll_up. False when the guard refuses.
CREATE FUNCTION ledger_move_guarded(p_account uuid, p_flags integer, p_dp bigint, p_dpo bigint,
                                    p_cp bigint, p_cpo bigint, p_guard integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ledger_is_guarded(p_flags) THEN
    RETURN true;
  END IF;
  RETURN ledger_bump(p_account, 0::smallint, p_dp, p_dpo, p_cp, p_cpo, p_guard);
END $$;

-- The unguarded accounts' movements of the given (applied) transfers, summed per account and
-- written to this transaction's shard, whose rows ledger_lock_balances locked up front.
--   single-phase: posted += amount          pending: pending += amount
--   post: pending -= reserved, posted += amount     void: pending -= reserved
CREATE FUNCTION ledger_roll_up(p_transfer_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE ledger_balances b
     SET debits_pending = b.debits_pending + d.dp,
         debits_posted = b.debits_posted + d.dpo,
         credits_pending = b.credits_pending + d.cp,
         credits_posted = b.credits_posted + d.cpo
    FROM (
      SELECT m.account_id, sum(m.dp) AS dp, sum(m.dpo) AS dpo, sum(m.cp) AS cp, sum(m.cpo) AS cpo
        FROM (
          SELECT t.debit_account_id, t.credit_account_id,
                 CASE WHEN t.flags & 2 <> 0 THEN t.amount ELSE -coalesce(p.amount, 0) END AS pending_delta,
                 CASE WHEN t.flags & 10 <> 0 THEN 0 ELSE t.amount END AS posted_delta
            FROM ledger_transfers t LEFT JOIN ledger_transfers p ON p.id = t.pending_id
           WHERE t.id = ANY (p_transfer_ids)
        ) AS t
        CROSS JOIN LATERAL (VALUES
          (t.debit_account_id, t.pending_delta, t.posted_delta, 0::bigint, 0::bigint),
          (t.credit_account_id, 0::bigint, 0::bigint, t.pending_delta, t.posted_delta)
        ) AS m (account_id, dp, dpo, cp, cpo)
        JOIN ledger_accounts a ON a.id = m.account_id
       WHERE NOT ledger_is_guarded(a.flags)
       GROUP BY m.account_id
    ) AS d
   WHERE b.account_id = d.account_id AND b.shard = ledger_transaction_shard();
END $$;

-- As 001, with the balance moves through ledger_move_guarded.
CREATE OR REPLACE FUNCTION ledger_apply_new(e jsonb, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_id uuid := (e->>'id')::uuid;
  v_debit uuid := (e->>'debit_account_id')::uuid;
  v_credit uuid := (e->>'credit_account_id')::uuid;
  v_amount bigint := (e->>'amount')::bigint;
  v_timeout integer := coalesce((e->>'timeout_s')::integer, 0);
  v_ledger integer := coalesce((e->>'ledger')::integer, 0);
  v_flags integer := coalesce((e->>'flags')::integer, 0);
  v_pending boolean := v_flags & 2 <> 0;
  v_debit_account ledger_accounts;
  v_credit_account ledger_accounts;
  v_existing ledger_transfers;
  v_pending_amount bigint;
  v_posted_amount bigint;
  v_first_ok boolean;
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
  -- Account id order, as ledger_lock_balances locks them, for when this runs alone.
  IF v_debit < v_credit THEN
    v_first_ok := ledger_move_guarded(v_debit, v_debit_account.flags, v_pending_amount, v_posted_amount, 0, 0,
                                      v_debit_account.flags & 2);
    IF NOT v_first_ok THEN
      DELETE FROM ledger_transfers WHERE id = v_id;
      RETURN 'exceeds_credits';
    END IF;
    IF NOT ledger_move_guarded(v_credit, v_credit_account.flags, 0, 0, v_pending_amount, v_posted_amount,
                               v_credit_account.flags & 4) THEN
      PERFORM ledger_move_guarded(v_debit, v_debit_account.flags, -v_pending_amount, -v_posted_amount, 0, 0, 0);
      DELETE FROM ledger_transfers WHERE id = v_id;
      RETURN 'exceeds_debits';
    END IF;
  ELSE
    v_first_ok := ledger_move_guarded(v_credit, v_credit_account.flags, 0, 0, v_pending_amount, v_posted_amount,
                                      v_credit_account.flags & 4);
    IF NOT v_first_ok THEN
      DELETE FROM ledger_transfers WHERE id = v_id;
      RETURN 'exceeds_debits';
    END IF;
    IF NOT ledger_move_guarded(v_debit, v_debit_account.flags, v_pending_amount, v_posted_amount, 0, 0,
                               v_debit_account.flags & 2) THEN
      PERFORM ledger_move_guarded(v_credit, v_credit_account.flags, 0, 0, -v_pending_amount, -v_posted_amount, 0);
      DELETE FROM ledger_transfers WHERE id = v_id;
      RETURN 'exceeds_credits';
    END IF;
  END IF;
  RETURN NULL;
END $$;

-- ledger_settle for a post or void inside a batch: releases and posts of a reserved amount cannot
-- break a limit, and the unguarded side is left to ledger_roll_up.
CREATE FUNCTION ledger_settle_guarded(p_debit uuid, p_credit uuid, p_dp bigint, p_dpo bigint,
                                      p_cp bigint, p_cpo bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_account uuid;
  v_flags integer;
BEGIN
  FOR v_account, v_flags IN
    SELECT id, flags FROM ledger_accounts WHERE id IN (p_debit, p_credit) AND ledger_is_guarded(flags) ORDER BY id
  LOOP
    IF NOT ledger_bump(v_account, 0::smallint,
                       CASE WHEN v_account = p_debit THEN p_dp ELSE 0 END,
                       CASE WHEN v_account = p_debit THEN p_dpo ELSE 0 END,
                       CASE WHEN v_account = p_credit THEN p_cp ELSE 0 END,
                       CASE WHEN v_account = p_credit THEN p_cpo ELSE 0 END, 0) THEN
      RAISE EXCEPTION 'ledger: balance row missing for account %', v_account;
    END IF;
  END LOOP;
END $$;

-- As 001, with the balance moves through ledger_settle_guarded.
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
  v_flags integer := coalesce((e->>'flags')::integer, 0);
  v_post boolean := v_flags & 4 <> 0;
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
  ELSIF v_pending.flags & 2 = 0 THEN
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

  -- The guard: only one post, void or expiry wins a pending transfer.
  UPDATE ledger_transfers SET pending_status = CASE WHEN v_post THEN 'posted' ELSE 'voided' END
   WHERE id = v_pending_id AND pending_status = 'pending'
     AND (expires_at IS NULL OR expires_at > p_now);
  IF NOT FOUND THEN
    DELETE FROM ledger_transfers WHERE id = v_id;
    v_refusal := ledger_resolve_refusal(v_pending_id, p_now);
    IF v_refusal IS NULL THEN
      RAISE EXCEPTION 'ledger: pending transfer % refused without a reason', v_pending_id;
    END IF;
    RETURN v_refusal;
  END IF;

  -- Posting at most the reserved amount can only lower exposure, so no limit is checked here.
  PERFORM ledger_settle_guarded(v_pending.debit_account_id, v_pending.credit_account_id,
                                -v_pending.amount, CASE WHEN v_post THEN v_posted ELSE 0 END,
                                -v_pending.amount, CASE WHEN v_post THEN v_posted ELSE 0 END);
  RETURN NULL;
END $$;

-- As 001, plus the applied transfers' ids, rolled up into the unguarded balances at the end.
CREATE OR REPLACE FUNCTION ledger_run_batch(p_kind text, p_batch jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  -- One clock for the whole batch: a pending transfer created and posted in one batch cannot
  -- expire in between, and expiry decisions agree with each other.
  v_now timestamptz := clock_timestamp();
  v_count integer := jsonb_array_length(p_batch);
  v_results jsonb := '[]';
  v_chain jsonb;
  v_chain_applied uuid[];
  v_applied uuid[] := '{}';
  v_start integer := 0;
  v_end integer;
  v_index integer;
  v_reason text;
  v_fail_index integer;
  v_fail_reason text;
BEGIN
  IF p_kind = 'transfer' THEN
    PERFORM ledger_lock_for_transfers(p_batch);
  END IF;
  WHILE v_start < v_count LOOP
    v_end := v_start;
    WHILE v_end < v_count - 1 AND coalesce((p_batch->v_end->>'flags')::integer, 0) & 1 <> 0 LOOP
      v_end := v_end + 1;
    END LOOP;
    IF coalesce((p_batch->v_end->>'flags')::integer, 0) & 1 <> 0 THEN
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
      v_chain := '[]';
      v_chain_applied := '{}';
      BEGIN
        FOR v_index IN v_start .. v_end LOOP
          v_reason := ledger_apply_event(p_kind, p_batch->v_index, v_now);
          IF v_reason = 'exists' THEN
            v_chain := v_chain || jsonb_build_object('index', v_index, 'result', v_reason);
          ELSIF v_reason IS NOT NULL THEN
            v_fail_index := v_index;
            v_fail_reason := v_reason;
            RAISE EXCEPTION 'ledger: linked chain failed' USING ERRCODE = 'LDG01';
          ELSE
            v_chain_applied := v_chain_applied || (p_batch->v_index->>'id')::uuid;
          END IF;
        END LOOP;
        -- Reached only when the chain held: its transfers are stored and count.
        v_applied := v_applied || v_chain_applied;
      EXCEPTION WHEN SQLSTATE 'LDG01' THEN
        v_chain := '[]';
        FOR v_index IN v_start .. v_end LOOP
          v_chain := v_chain || jsonb_build_object('index', v_index, 'result',
            CASE WHEN v_index = v_fail_index THEN v_fail_reason ELSE 'linked_event_failed' END);
        END LOOP;
        -- The rollback undid the expiry that found the pending transfer timed out; it is true
        -- whatever became of the chain, so it is done again outside the chain.
        IF v_fail_reason = 'pending_transfer_expired' THEN
          PERFORM ledger_expire_transfer((p_batch->v_fail_index->>'pending_id')::uuid, v_now);
        END IF;
      END;
      v_results := v_results || v_chain;
    END IF;
    v_start := v_end + 1;
  END LOOP;
  IF p_kind = 'transfer' AND cardinality(v_applied) > 0 THEN
    PERFORM ledger_roll_up(v_applied);
  END IF;
  RETURN v_results;
END $$;
