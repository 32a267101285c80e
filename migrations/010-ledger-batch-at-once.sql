-- This migration's functions are superseded (the type stays): their current definitions are in sql/ledger/.
-- A batch of transfers that applies in full is written with a few set statements (docs/PERFORMANCE.md).
--
-- ledger_run_batch applies events one by one in PL/pgSQL: per transfer about a dozen statements
-- (look-ups, the insert, one update per guarded side, a pending transfer's status), three to four
-- transfers per settled intent (see docs/PERFORMANCE.md, Migrations). Nearly every batch
-- that group commit sends applies in full, and for such a batch the order of events matters
-- only to the guarded accounts' checks, which running sums in batch order decide exactly.
--
-- So ledger_create_transfers first plans the whole batch (ledger_plan_batch): if every event would
-- apply, none exists already, every pending transfer it resolves is still pending (or is created
-- earlier in the batch) and every guarded account stays within its limit after each of its
-- events, the batch is written at once: one insert of every transfer, one status update for the
-- pending transfers stored before, one update per balance row. Otherwise nothing has been written
-- and the batch runs event by event (008's ledger_run_batch), with its per-event answers. Both paths leave the
-- same rows, so the answers and balances are the same; the ledger property test holds the
-- event-by-event model against both.

-- One event of a batch as it will be stored: a post or void with its pending transfer's accounts,
-- ledger and amount filled in.
CREATE TYPE ledger_planned_transfer AS (
  idx integer,
  id uuid,
  debit_account_id uuid,
  credit_account_id uuid,
  amount bigint,
  pending_id uuid,
  timeout_s integer,
  ledger integer,
  code integer,
  flags integer,
  -- The status the row is stored with: a reservation posted or voided later in the same batch is
  -- stored as posted or voided.
  pending_status text,
  -- A post or void: the reserved amount it releases.
  released bigint,
  -- A post or void of a pending transfer stored before this batch (its status is updated).
  resolves_stored boolean,
  -- What it moves on its debit account's debits and its credit account's credits.
  pending_delta bigint,
  posted_delta bigint
);

-- What a transfer moves on each of its accounts (the debit side's debits, the credit side's
-- credits): a reservation adds to pending, a post or void releases the reservation (p_released),
-- a single-phase transfer or a post adds to posted. Inlined by the planner wherever it is used.
CREATE FUNCTION ledger_pending_delta(p_flags integer, p_amount bigint, p_released bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN p_flags & 2 <> 0 THEN p_amount ELSE -p_released END $$;

CREATE FUNCTION ledger_posted_delta(p_flags integer, p_amount bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN p_flags & 10 <> 0 THEN 0 ELSE p_amount END $$;

-- 006's lock statement, with each account's shard named before the balance rows are read: with
-- the shard decided by a CASE over the joined account, the index could only find the account, and
-- all 32 shards of the transit and revenue accounts were read (with their dead versions) and
-- filtered. Same rows, same order.
CREATE OR REPLACE FUNCTION ledger_lock_balances(p_accounts uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_shard smallint := ledger_transaction_shard();
BEGIN
  PERFORM 1
     FROM ledger_balances b
    WHERE (b.account_id, b.shard) IN (
            SELECT a.id, CASE WHEN ledger_is_guarded(a.flags) THEN 0 ELSE v_shard END
              FROM ledger_accounts a WHERE a.id = ANY (p_accounts))
    ORDER BY b.account_id, b.shard
      FOR UPDATE OF b;
END $$;

-- Every movement of a plan, per account, in batch order (the debit side and the credit side).
CREATE FUNCTION ledger_plan_movements(p_plan ledger_planned_transfer[])
RETURNS TABLE (idx integer, account_id uuid, dp bigint, dpo bigint, cp bigint, cpo bigint, checks_debits boolean, checks_credits boolean)
LANGUAGE sql IMMUTABLE AS $$
  SELECT p.idx, m.account_id, m.dp, m.dpo, m.cp, m.cpo, m.checks_debits, m.checks_credits
    FROM unnest(p_plan) AS p
   CROSS JOIN LATERAL (VALUES
     (p.debit_account_id, p.pending_delta, p.posted_delta, 0::bigint, 0::bigint, p.flags & 12 = 0, false),
     (p.credit_account_id, 0::bigint, 0::bigint, p.pending_delta, p.posted_delta, false, p.flags & 12 = 0)
   ) AS m (account_id, dp, dpo, cp, cpo, checks_debits, checks_credits)
$$;

-- Adds the movements of a plan to the balance rows: guarded accounts on their one row, unguarded
-- ones on this transaction's shard, named as a value so that the primary key finds the one row
-- (a call of the volatile ledger_transaction_shard() cannot be an index condition: all 32 shards
-- were read, with their dead versions, and filtered). p_unguarded_only: the guarded side has
-- moved already, transfer by transfer.
CREATE FUNCTION ledger_add_movements(p_plan ledger_planned_transfer[], p_unguarded_only boolean) RETURNS void
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
      SELECT m.account_id, CASE WHEN ledger_is_guarded(a.flags) THEN 0 ELSE v_shard END AS shard,
             sum(m.dp) AS dp, sum(m.dpo) AS dpo, sum(m.cp) AS cp, sum(m.cpo) AS cpo
        FROM ledger_plan_movements(p_plan) AS m
        JOIN ledger_accounts a ON a.id = m.account_id
       WHERE NOT (p_unguarded_only AND ledger_is_guarded(a.flags))
       GROUP BY m.account_id, a.flags
    ) AS s
   WHERE b.account_id = s.account_id AND b.shard = s.shard;
END $$;

-- 008's roll-up: the applied transfers, read back as they were stored, through the function above.
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

-- The batch as it would be stored, or NULL when an event would not apply as given (refused,
-- already stored, resolving what is not pending) or a guarded account would break its limit.
CREATE FUNCTION ledger_plan_batch(p_batch jsonb, p_now timestamptz) RETURNS ledger_planned_transfer[]
LANGUAGE plpgsql AS $$
DECLARE
  v_zero constant uuid := '00000000-0000-0000-0000-000000000000';
  v_plan ledger_planned_transfer[];
  v_all_apply boolean;
  v_within_limits boolean;
BEGIN
  IF coalesce((p_batch->-1->>'flags')::integer, 0) & 1 <> 0 THEN
    RETURN NULL;
  END IF;
  WITH e AS (
    SELECT (ord - 1)::integer AS idx, (x->>'id')::uuid AS id,
           (x->>'debit_account_id')::uuid AS debit, (x->>'credit_account_id')::uuid AS credit,
           (x->>'amount')::bigint AS amount, (x->>'pending_id')::uuid AS pending_id,
           coalesce((x->>'timeout_s')::integer, 0) AS timeout_s, coalesce((x->>'ledger')::integer, 0) AS ledger,
           coalesce((x->>'code')::integer, 0) AS code, coalesce((x->>'flags')::integer, 0) AS flags
      FROM jsonb_array_elements(p_batch) WITH ORDINALITY AS j (x, ord)
  ),
  planned AS (
    SELECT e.*,
           e.flags & 12 <> 0 AS resolves,
           s.id IS NOT NULL AS pending_stored,
           -- The pending transfer a post or void resolves: stored and still pending, or created
           -- earlier in this batch.
           coalesce(s.debit_account_id, b.debit) AS p_debit,
           coalesce(s.credit_account_id, b.credit) AS p_credit,
           coalesce(s.amount, b.amount) AS p_amount,
           coalesce(s.ledger, b.ledger) AS p_ledger,
           coalesce(s.code, b.code) AS p_code,
           (s.id IS NOT NULL AND s.flags & 2 <> 0 AND s.pending_status = 'pending'
                AND (s.expires_at IS NULL OR s.expires_at > p_now))
             OR (b.id IS NOT NULL AND b.flags & 14 = 2) AS pending_open,
           da.ledger AS debit_ledger, ca.ledger AS credit_ledger,
           x.id IS NOT NULL AS stored,
           CASE WHEN r.flags & 4 <> 0 THEN 'posted' WHEN r.flags & 8 <> 0 THEN 'voided' END AS resolved_later_as
      FROM e
      -- Look-ups by primary key, one per event. OFFSET 0 keeps each one a subquery run per event:
      -- pulled up into joins, the planner (expecting a hundred events) hashed all the accounts
      -- for a batch of four.
      LEFT JOIN LATERAL (SELECT t.id FROM ledger_transfers t WHERE t.id = e.id OFFSET 0) AS x ON true
      LEFT JOIN LATERAL (SELECT t.* FROM ledger_transfers t WHERE e.flags & 12 <> 0 AND t.id = e.pending_id OFFSET 0) AS s ON true
      LEFT JOIN e AS b ON e.flags & 12 <> 0 AND b.id = e.pending_id AND b.idx < e.idx
      -- Two resolves of one reservation make duplicate rows here, which the count below refuses.
      LEFT JOIN e AS r ON e.flags & 2 <> 0 AND r.pending_id = e.id AND r.flags & 12 <> 0 AND r.idx > e.idx
      LEFT JOIN LATERAL (SELECT a.ledger FROM ledger_accounts a WHERE e.flags & 12 = 0 AND a.id = e.debit OFFSET 0) AS da ON true
      LEFT JOIN LATERAL (SELECT a.ledger FROM ledger_accounts a WHERE e.flags & 12 = 0 AND a.id = e.credit OFFSET 0) AS ca ON true
  ),
  stored_as AS (
    SELECT p.*,
           CASE WHEN NOT p.resolves THEN p.amount WHEN p.flags & 4 <> 0 THEN coalesce(p.amount, p.p_amount) ELSE p.p_amount END AS final_amount,
           CASE WHEN p.resolves THEN p.p_amount ELSE 0 END AS released
      FROM planned AS p
  )
  SELECT
    -- Every rule of ledger_apply_transfer, ledger_apply_new and ledger_apply_resolve that can
    -- refuse, and "already stored".
    coalesce(bool_and(
      p.id IS NOT NULL AND p.id <> v_zero AND NOT p.stored
      AND (p.flags & 2 <> 0)::integer + (p.flags & 4 <> 0)::integer + (p.flags & 8 <> 0)::integer <= 1
      AND CASE WHEN NOT p.resolves THEN
            p.debit IS NOT NULL AND p.debit <> v_zero AND p.credit IS NOT NULL AND p.credit <> v_zero
            AND p.debit <> p.credit AND p.pending_id IS NULL AND (p.timeout_s = 0 OR p.flags & 2 <> 0)
            AND coalesce(p.amount, 0) <> 0 AND p.ledger <> 0
            AND p.debit_ledger IS NOT NULL AND p.credit_ledger IS NOT NULL
            AND p.debit_ledger = p.credit_ledger AND p.ledger = p.debit_ledger
          ELSE
            p.pending_id IS NOT NULL AND p.pending_id <> v_zero AND p.pending_id <> p.id
            AND p.timeout_s = 0 AND NOT (p.flags & 4 <> 0 AND p.amount = 0)
            AND coalesce(p.pending_open, false)
            AND (p.debit IS NULL OR p.debit = p.p_debit) AND (p.credit IS NULL OR p.credit = p.p_credit)
            AND (p.ledger = 0 OR p.ledger = p.p_ledger) AND (p.amount IS NULL OR p.amount <= p.p_amount)
          END), false)
      AND count(DISTINCT p.id) = count(*) AND count(*) = jsonb_array_length(p_batch)
      AND count(DISTINCT p.pending_id) FILTER (WHERE p.resolves) = count(p.pending_id) FILTER (WHERE p.resolves),
    array_agg(ROW(
      p.idx, p.id,
      CASE WHEN p.resolves THEN p.p_debit ELSE p.debit END,
      CASE WHEN p.resolves THEN p.p_credit ELSE p.credit END,
      p.final_amount,
      p.pending_id,
      p.timeout_s,
      CASE WHEN p.resolves THEN p.p_ledger ELSE p.ledger END,
      CASE WHEN p.resolves AND p.code = 0 THEN p.p_code ELSE p.code END,
      p.flags,
      CASE WHEN p.flags & 2 <> 0 THEN coalesce(p.resolved_later_as, 'pending') END,
      p.released,
      p.resolves AND p.pending_stored,
      ledger_pending_delta(p.flags, p.final_amount, p.released),
      ledger_posted_delta(p.flags, p.final_amount)
    )::ledger_planned_transfer ORDER BY p.idx)
    INTO v_all_apply, v_plan
    FROM stored_as p;
  IF NOT coalesce(v_all_apply, false) THEN
    RETURN NULL;
  END IF;

  -- The guarded accounts' checks, in batch order: after each event that could break a limit
  -- (a new transfer debiting a flags-2 or crediting a flags-4 account), the balance before the
  -- batch plus every movement up to that event must stay within it.
  WITH m AS (SELECT * FROM ledger_plan_movements(v_plan)),
  running AS (
    SELECT m.idx, m.checks_debits, m.checks_credits, a.flags AS account_flags,
           b.debits_pending + b.debits_posted + sum(m.dp + m.dpo) OVER w AS debits,
           b.credits_posted + sum(m.cpo) OVER w AS credits_posted,
           b.credits_pending + b.credits_posted + sum(m.cp + m.cpo) OVER w AS credits,
           b.debits_posted + sum(m.dpo) OVER w AS debits_posted
      FROM m
      JOIN ledger_accounts a ON a.id = m.account_id AND ledger_is_guarded(a.flags)
      JOIN ledger_balances b ON b.account_id = m.account_id AND b.shard = 0
    WINDOW w AS (PARTITION BY m.account_id ORDER BY m.idx ROWS UNBOUNDED PRECEDING)
  )
  SELECT NOT EXISTS (
    SELECT 1 FROM running r
     WHERE (r.checks_debits AND r.account_flags & 2 <> 0 AND r.debits > r.credits_posted)
        OR (r.checks_credits AND r.account_flags & 4 <> 0 AND r.credits > r.debits_posted))
    INTO v_within_limits;
  IF NOT v_within_limits THEN
    RETURN NULL;
  END IF;
  RETURN v_plan;
END $$;

-- Writes a batch planned by ledger_plan_batch. True when written; false when it could not be
-- (another transaction stored one of its ids since the plan was made), and then nothing was: the
-- transfers it inserted are deleted again, as ledger_apply_new does, rather than rolled back with a
-- sub-transaction, which would cost an XID per batch and turn every balance row locked by the
-- batch and updated inside it into a multixact.
CREATE FUNCTION ledger_write_plan(p_plan ledger_planned_transfer[], p_now timestamptz) RETURNS boolean
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
    -- Nothing but these inserts has been written; the rows that conflicted are another's.
    DELETE FROM ledger_transfers WHERE id = ANY (v_inserted);
    RETURN false;
  END IF;

  -- The pending transfers were locked by ledger_lock_for_transfers and planned as pending.
  -- (Reservations made in this batch were stored with their final status.)
  SELECT array_agg(p.pending_id) FILTER (WHERE p.flags & 4 <> 0), array_agg(p.pending_id) FILTER (WHERE p.flags & 8 <> 0)
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

-- The batch written at once when it applies in full; otherwise 008's ledger_run_batch, event by
-- event. Nothing was written in that case, and its lock statement finds the rows locked already.
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
