-- Balance rows. A guarded account (see 01-flags.sql) has one, shard 0, checked in one conditional
-- UPDATE, so concurrent debits cannot overdraw it under READ COMMITTED. An unguarded account
-- (transit, revenue, nostro, equity: no limit, and touched by nearly every payment) has
-- ledger_unguarded_shard_count() rows; each transaction writes one shard that no other
-- transaction holds, so payments do not queue on one row lock. Reads sum the shards: one shard
-- may go negative, only the sum means anything.

-- Changing this needs a numbered migration too: raising it needs rows for the new shards of
-- every existing unguarded account (migrations/006-hot-path.sql did so for 8 -> 32), lowering it
-- needs the extra rows folded into the rest first.
CREATE OR REPLACE FUNCTION ledger_unguarded_shard_count() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 32 $$;

-- The shard of unguarded accounts this transaction writes, claimed by the transaction's first
-- ledger statement (ledger_lock_balances) and kept in a transaction-local setting. The claim is a
-- transaction-scoped advisory lock, tried from a random shard onwards: with a few batches in
-- flight, two drawing the same shard at random waited on each other about one time in ten. Only
-- when every shard is claimed does a transaction share one and wait. Claimed outside any linked
-- chain's sub-transaction, so a chain's rollback cannot release it.
CREATE OR REPLACE FUNCTION ledger_transaction_shard() RETURNS smallint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_shard text := current_setting('ledger.shard', true);
  v_count integer := ledger_unguarded_shard_count();
  v_first integer;
  v_candidate integer;
BEGIN
  IF v_shard IS NULL OR v_shard = '' THEN
    v_first := floor(random() * v_count);
    v_shard := v_first::text;
    FOR v_offset IN 0 .. v_count - 1 LOOP
      v_candidate := (v_first + v_offset) % v_count;
      -- 7310004: payorch's advisory lock classes are 7310001 and up (migrations, payers, recipients).
      IF pg_try_advisory_xact_lock(7310004, hashtext(current_schema() || ':ledger-shard:' || v_candidate)) THEN
        v_shard := v_candidate::text;
        EXIT;
      END IF;
    END LOOP;
    PERFORM set_config('ledger.shard', v_shard, true);
  END IF;
  RETURN v_shard::smallint;
END $$;

-- The balance row an account's movement in this transaction lands on.
CREATE OR REPLACE FUNCTION ledger_pick_shard(p_flags integer) RETURNS smallint
LANGUAGE sql VOLATILE AS $$
  SELECT CASE WHEN ledger_is_guarded(p_flags) THEN 0::smallint ELSE ledger_transaction_shard() END
$$;
