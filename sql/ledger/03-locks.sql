-- Lock order. A batch first locks the pending transfers it resolves (by id), then every balance
-- row it may write (by account, shard), each set in one statement; the expiry sweep takes the
-- same order. Taking them all up front in one global order is what keeps two batches (or a batch
-- and the sweep) from deadlocking on each other's rows. Two calls in one transaction, or
-- duplicate ids in opposite orders, can still deadlock; PostgreSQL then aborts one transaction
-- (40P01) and the caller retries it.
--
-- There are no foreign keys from transfers to accounts: every insert would take a KEY SHARE lock
-- on the hot account rows (multixacts); the functions check that the accounts exist.

-- Locks, in one statement and in (account, shard) order, every balance row this transaction is
-- about to write for these accounts: a guarded account's one row, an unguarded account's shard
-- of this transaction. Each account's shard is named before the balance rows are read, and the
-- accounts are restricted to p_accounts on both sides, so both look-ups use their primary keys
-- (a CASE over the joined account, or an unrestricted join, read every shard or every account).
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

-- Lock order for a batch of transfers: first the pending transfers it resolves (by id), then the
-- balance rows of every account it may touch. The events are read once, and the resolved
-- transfers once, each for both of their accounts (two columns, not a LATERAL VALUES list of two
-- rows: ledger_plan_movements says why).
CREATE OR REPLACE FUNCTION ledger_lock_for_transfers(p_batch jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_pending_ids uuid[];
  v_debits uuid[];
  v_credits uuid[];
  v_resolved_debits uuid[];
  v_resolved_credits uuid[];
BEGIN
  SELECT array_agg((e->>'pending_id')::uuid) FILTER (WHERE e->>'pending_id' IS NOT NULL),
         array_agg((e->>'debit_account_id')::uuid) FILTER (WHERE e->>'debit_account_id' IS NOT NULL),
         array_agg((e->>'credit_account_id')::uuid) FILTER (WHERE e->>'credit_account_id' IS NOT NULL)
    INTO v_pending_ids, v_debits, v_credits
    FROM jsonb_array_elements(p_batch) AS e;
  PERFORM 1 FROM ledger_transfers
    WHERE id = ANY (v_pending_ids) AND pending_status = 'pending'
    ORDER BY id
      FOR UPDATE;
  SELECT array_agg(t.debit_account_id), array_agg(t.credit_account_id) INTO v_resolved_debits, v_resolved_credits
    FROM ledger_transfers t
   WHERE t.id = ANY (v_pending_ids);
  -- ledger_lock_balances reads each account once however often the array names it.
  PERFORM ledger_lock_balances(v_debits || v_credits || v_resolved_debits || v_resolved_credits);
END $$;
