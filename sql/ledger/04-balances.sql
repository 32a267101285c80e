-- Moving balances. Guarded accounts move transfer by transfer, because their check must see every
-- earlier movement. Unguarded accounts have no check to run: their movements are summed per
-- account and written to this transaction's shard once per batch (ledger_add_movements), since a
-- batch that updated one transit shard ~128 times found the row each time by walking the versions
-- it wrote before, and so cost the square of its size. Expiries move both accounts at once
-- through ledger_settle: they are rare and can happen outside any batch.

-- Adds to one balance row. p_guard carries the account limit this movement must respect
-- (ledger_debit_guard or ledger_credit_guard of the account's flags, or 0); the check reads the
-- row it updates, so a concurrent writer is waited for and the check re-run on its result.
CREATE OR REPLACE FUNCTION ledger_bump(p_account uuid, p_shard smallint, p_dp bigint, p_dpo bigint,
                                       p_cp bigint, p_cpo bigint, p_guard integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE ledger_balances
     SET debits_pending = debits_pending + p_dp,
         debits_posted = debits_posted + p_dpo,
         credits_pending = credits_pending + p_cp,
         credits_posted = credits_posted + p_cpo
   WHERE account_id = p_account AND shard = p_shard
     AND (NOT ledger_debits_must_not_exceed_credits(p_guard)
          OR debits_pending + debits_posted + p_dp + p_dpo <= credits_posted)
     AND (NOT ledger_credits_must_not_exceed_debits(p_guard)
          OR credits_pending + credits_posted + p_cp + p_cpo <= debits_posted);
  RETURN FOUND;
END $$;

-- Moves that cannot break a limit (releases and posts of reserved amounts), on both accounts, in
-- account id order, the same order as ledger_lock_balances. p_guarded_only: inside a batch, the
-- unguarded side is left to the batch's roll-up.
CREATE OR REPLACE FUNCTION ledger_settle_accounts(p_debit uuid, p_credit uuid, p_dp bigint, p_dpo bigint,
                                                  p_cp bigint, p_cpo bigint, p_guarded_only boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_account uuid;
  v_flags integer;
BEGIN
  FOR v_account, v_flags IN
    SELECT id, flags FROM ledger_accounts
     WHERE id IN (p_debit, p_credit) AND (ledger_is_guarded(flags) OR NOT p_guarded_only)
     ORDER BY id
  LOOP
    IF NOT ledger_bump(v_account, ledger_pick_shard(v_flags),
                       CASE WHEN v_account = p_debit THEN p_dp ELSE 0 END,
                       CASE WHEN v_account = p_debit THEN p_dpo ELSE 0 END,
                       CASE WHEN v_account = p_credit THEN p_cp ELSE 0 END,
                       CASE WHEN v_account = p_credit THEN p_cpo ELSE 0 END, 0) THEN
      RAISE EXCEPTION 'ledger: balance row missing for account %', v_account;
    END IF;
  END LOOP;
END $$;

-- Both accounts at once: an expiry, which can happen outside any batch. (PL/pgSQL, not SQL, for
-- its cached plan: PostgreSQL 15 plans a SQL function's body again at every call.)
CREATE OR REPLACE FUNCTION ledger_settle(p_debit uuid, p_credit uuid, p_dp bigint, p_dpo bigint,
                                         p_cp bigint, p_cpo bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM ledger_settle_accounts(p_debit, p_credit, p_dp, p_dpo, p_cp, p_cpo, false);
END $$;

-- The guarded side only: a post or void inside a batch.
CREATE OR REPLACE FUNCTION ledger_settle_guarded(p_debit uuid, p_credit uuid, p_dp bigint, p_dpo bigint,
                                                 p_cp bigint, p_cpo bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM ledger_settle_accounts(p_debit, p_credit, p_dp, p_dpo, p_cp, p_cpo, true);
END $$;

-- A guarded account's movement, checked and applied now; an unguarded one is left to the batch's
-- roll-up. False when the guard refuses.
CREATE OR REPLACE FUNCTION ledger_move_guarded(p_account uuid, p_flags integer, p_dp bigint, p_dpo bigint,
                                               p_cp bigint, p_cpo bigint, p_guard integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ledger_is_guarded(p_flags) THEN
    RETURN true;
  END IF;
  RETURN ledger_bump(p_account, 0::smallint, p_dp, p_dpo, p_cp, p_cpo, p_guard);
END $$;

-- What a transfer moves on each of its accounts (the debit side's debits, the credit side's
-- credits): a reservation adds to pending, a post or void releases the reservation (p_released),
-- a single-phase transfer or a post adds to posted.
CREATE OR REPLACE FUNCTION ledger_pending_delta(p_flags integer, p_amount bigint, p_released bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN ledger_is_pending(p_flags) THEN p_amount ELSE -p_released END $$;

CREATE OR REPLACE FUNCTION ledger_posted_delta(p_flags integer, p_amount bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN ledger_is_pending(p_flags) OR ledger_voids_pending(p_flags) THEN 0 ELSE p_amount END
$$;

-- Every movement of a plan, per account, in batch order (the debit side and the credit side).
-- Only a new transfer can break a limit: posting at most the reserved amount, or releasing it,
-- only lowers exposure. Two scans of the plan, not a LATERAL VALUES list of both sides:
-- PostgreSQL 15 builds a VALUES list's expressions again for every outer row, which cost nine
-- times the two scans (docs/perf-log/2026-11.md, "the server's functions against plain SQL").
CREATE OR REPLACE FUNCTION ledger_plan_movements(p_plan ledger_planned_transfer[])
RETURNS TABLE (idx integer, account_id uuid, dp bigint, dpo bigint, cp bigint, cpo bigint, checks_debits boolean, checks_credits boolean)
LANGUAGE sql IMMUTABLE AS $$
  SELECT p.idx, p.debit_account_id, p.pending_delta, p.posted_delta, 0::bigint, 0::bigint,
         NOT ledger_resolves_pending(p.flags), false
    FROM unnest(p_plan) AS p
  UNION ALL
  SELECT p.idx, p.credit_account_id, 0::bigint, 0::bigint, p.pending_delta, p.posted_delta,
         false, NOT ledger_resolves_pending(p.flags)
    FROM unnest(p_plan) AS p
$$;

-- Adds the movements of a plan to the balance rows: guarded accounts on their one row, unguarded
-- ones on this transaction's shard, named as a value so that the primary key finds the one row
-- (a call of the volatile ledger_transaction_shard() cannot be an index condition: all 32 shards
-- were read, with their dead versions, and filtered). p_unguarded_only: the guarded side has
-- moved already, transfer by transfer.
CREATE OR REPLACE FUNCTION ledger_add_movements(p_plan ledger_planned_transfer[], p_unguarded_only boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_shard smallint := ledger_transaction_shard();
BEGIN
  UPDATE ledger_balances b
     SET debits_pending = b.debits_pending + s.dp,
         debits_posted = b.debits_posted + s.dpo,
         credits_pending = b.credits_pending + s.cp,
         credits_posted = b.credits_posted + s.cpo
    FROM (
      -- Summed per account before the accounts are read, so that each is read once.
      SELECT m.account_id, CASE WHEN ledger_is_guarded(a.flags) THEN 0 ELSE v_shard END AS shard,
             m.dp, m.dpo, m.cp, m.cpo
        FROM (SELECT account_id, sum(dp) AS dp, sum(dpo) AS dpo, sum(cp) AS cp, sum(cpo) AS cpo
                FROM ledger_plan_movements(p_plan)
               GROUP BY account_id) AS m
        JOIN ledger_accounts a ON a.id = m.account_id
       WHERE NOT (p_unguarded_only AND ledger_is_guarded(a.flags))
    ) AS s
   WHERE b.account_id = s.account_id AND b.shard = s.shard;
END $$;

-- The event-by-event path's roll-up: the unguarded movements of the transfers it applied, read
-- back as they were stored. The transfers are the record of what moved: a linked chain that rolled
-- back left no transfer rows behind, so nothing of it is summed, with no bookkeeping that a
-- rollback could miss (PL/pgSQL variables are not rolled back with a sub-transaction).
CREATE OR REPLACE FUNCTION ledger_roll_up(p_transfer_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_applied ledger_planned_transfer[];
BEGIN
  SELECT array_agg(ROW(
           0, t.id, t.debit_account_id, t.credit_account_id, t.amount, t.pending_id, t.timeout_s, t.ledger,
           t.code, t.flags, t.pending_status, coalesce(p.amount, 0), false,
           ledger_pending_delta(t.flags, t.amount, coalesce(p.amount, 0)), ledger_posted_delta(t.flags, t.amount)
         )::ledger_planned_transfer)
    INTO v_applied
    FROM ledger_transfers t LEFT JOIN ledger_transfers p ON p.id = t.pending_id
   WHERE t.id = ANY (p_transfer_ids);
  PERFORM ledger_add_movements(v_applied, true);
END $$;
