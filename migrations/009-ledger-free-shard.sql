-- This migration's function is superseded: its current definition is in sql/ledger/02-shards.sql.
-- A transaction writes unguarded accounts on a shard no other transaction holds (docs/PERFORMANCE.md).
--
-- 006 picked the shard at random: with batches in flight, two of them drew the same shard of the
-- transit and revenue accounts often enough that the later one's waits on the earlier one's row
-- locks showed under load (see docs/PERFORMANCE.md, Migrations). Each transaction now claims a
-- shard with a transaction-scoped advisory lock, starting from a random one and moving on while
-- they are taken; only when every shard is claimed does it share one and wait, as before. The
-- claim is made by the first ledger statement of the transaction (ledger_lock_balances), outside
-- any linked chain's sub-transaction, so a chain's rollback cannot release it.
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
