-- The ledger's tables: TigerBeetle's accounts and transfers, kept in the same database as the
-- intents so that a ledger movement and the status change that needs it commit together.
--
-- The functions below are their first versions, kept as they ran on existing databases; the
-- current definitions, and the current design (balance shards, lock order, batches written at
-- once), are in sql/ledger/, applied after the migrations (see src/adapters/migrations.ts).
--
-- There are no foreign keys from transfers to accounts: every insert would take a KEY SHARE lock
-- on the hot account rows (multixacts); the functions check that the accounts exist.

CREATE TABLE ledger_accounts (
  id uuid PRIMARY KEY,
  ledger integer NOT NULL CHECK (ledger > 0),
  code integer NOT NULL,
  flags integer NOT NULL CHECK (flags >= 0 AND flags & 6 <> 6),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ledger_balances (
  account_id uuid NOT NULL REFERENCES ledger_accounts (id),
  shard smallint NOT NULL CHECK (shard >= 0),
  debits_pending bigint NOT NULL DEFAULT 0,
  debits_posted bigint NOT NULL DEFAULT 0,
  credits_pending bigint NOT NULL DEFAULT 0,
  credits_posted bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, shard)
);

CREATE TABLE ledger_transfers (
  id uuid PRIMARY KEY,
  debit_account_id uuid NOT NULL,
  credit_account_id uuid NOT NULL,
  amount bigint NOT NULL CHECK (amount >= 0),
  pending_id uuid,
  timeout_s integer NOT NULL DEFAULT 0 CHECK (timeout_s >= 0),
  ledger integer NOT NULL,
  code integer NOT NULL,
  flags integer NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz,
  -- The only mutable column, and only on pending transfers.
  pending_status text CHECK (pending_status IN ('pending', 'posted', 'voided', 'expired')),
  CHECK ((pending_status IS NOT NULL) = (flags & 2 <> 0)),
  CHECK (expires_at IS NULL OR flags & 2 <> 0),
  CHECK ((pending_id IS NOT NULL) = (flags & 12 <> 0))
);
-- The sweeper's queue, and the invariant check's "still pending" sums.
CREATE INDEX ledger_transfers_expiry_idx ON ledger_transfers (expires_at)
  WHERE pending_status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX ledger_transfers_pending_idx ON ledger_transfers (debit_account_id, credit_account_id)
  WHERE pending_status = 'pending';

-- Shards of an unguarded account. Raising it later needs new rows for existing accounts; lowering
-- it needs the extra rows folded into the rest first.
CREATE FUNCTION ledger_unguarded_shard_count() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 8 $$;

CREATE FUNCTION ledger_is_guarded(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_flags & 6 <> 0 $$;

-- The shard of unguarded accounts this transaction writes: one per transaction, chosen at random,
-- so that concurrent transactions spread over the shards while one transaction can lock every row
-- it will touch up front (see ledger_lock_balances).
CREATE FUNCTION ledger_transaction_shard() RETURNS smallint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_shard text := current_setting('ledger.shard', true);
BEGIN
  IF v_shard IS NULL OR v_shard = '' THEN
    v_shard := floor(random() * ledger_unguarded_shard_count())::text;
    PERFORM set_config('ledger.shard', v_shard, true);
  END IF;
  RETURN v_shard::smallint;
END $$;

CREATE FUNCTION ledger_pick_shard(p_flags integer) RETURNS smallint
LANGUAGE sql VOLATILE AS $$
  SELECT CASE WHEN ledger_is_guarded(p_flags) THEN 0::smallint ELSE ledger_transaction_shard() END
$$;

-- Locks, in one statement and in (account, shard) order, every balance row this transaction is
-- about to write for these accounts. Taking them all up front in one global order is what keeps
-- two batches (or a batch and the sweeper) from deadlocking on each other's rows.
CREATE FUNCTION ledger_lock_balances(p_accounts uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_shard smallint := ledger_transaction_shard();
BEGIN
  PERFORM 1
     FROM ledger_balances b JOIN ledger_accounts a ON a.id = b.account_id
    WHERE b.account_id = ANY (p_accounts)
      AND b.shard = CASE WHEN ledger_is_guarded(a.flags) THEN 0 ELSE v_shard END
    ORDER BY b.account_id, b.shard
      FOR UPDATE OF b;
END $$;

-- Lock order for a batch of transfers: first the pending transfers it resolves (by id), then the
-- balance rows of every account it may touch. The sweeper takes the same order.
CREATE FUNCTION ledger_lock_for_transfers(p_batch jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_pending_ids uuid[];
  v_accounts uuid[];
BEGIN
  SELECT array_agg(DISTINCT (e->>'pending_id')::uuid) INTO v_pending_ids
    FROM jsonb_array_elements(p_batch) AS e
   WHERE e->>'pending_id' IS NOT NULL;
  PERFORM 1 FROM ledger_transfers
    WHERE id = ANY (v_pending_ids) AND pending_status = 'pending'
    ORDER BY id
      FOR UPDATE;
  SELECT array_agg(DISTINCT account_id) INTO v_accounts FROM (
    SELECT (e->>'debit_account_id')::uuid AS account_id FROM jsonb_array_elements(p_batch) AS e
    UNION ALL
    SELECT (e->>'credit_account_id')::uuid FROM jsonb_array_elements(p_batch) AS e
    UNION ALL
    SELECT debit_account_id FROM ledger_transfers WHERE id = ANY (v_pending_ids)
    UNION ALL
    SELECT credit_account_id FROM ledger_transfers WHERE id = ANY (v_pending_ids)
  ) AS touched
  WHERE account_id IS NOT NULL;
  PERFORM ledger_lock_balances(v_accounts);
END $$;

-- Adds to one shard. p_guard carries the account flags whose limit this movement must respect
-- (2: debits must not exceed credits, 4: credits must not exceed debits); the check reads the row
-- it updates, so a concurrent writer is waited for and the check re-run on its result.
CREATE FUNCTION ledger_bump(p_account uuid, p_shard smallint, p_dp bigint, p_dpo bigint,
                            p_cp bigint, p_cpo bigint, p_guard integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE ledger_balances
     SET debits_pending = debits_pending + p_dp,
         debits_posted = debits_posted + p_dpo,
         credits_pending = credits_pending + p_cp,
         credits_posted = credits_posted + p_cpo
   WHERE account_id = p_account AND shard = p_shard
     AND (p_guard & 2 = 0 OR debits_pending + debits_posted + p_dp + p_dpo <= credits_posted)
     AND (p_guard & 4 = 0 OR credits_pending + credits_posted + p_cp + p_cpo <= debits_posted);
  RETURN FOUND;
END $$;

-- Moves that cannot break a limit (releases and posts of reserved amounts), on both accounts, in
-- account id order, the same order as ledger_lock_balances.
CREATE FUNCTION ledger_settle(p_debit uuid, p_credit uuid, p_dp bigint, p_dpo bigint,
                              p_cp bigint, p_cpo bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_account uuid;
  v_flags integer;
BEGIN
  FOR v_account, v_flags IN
    SELECT id, flags FROM ledger_accounts WHERE id IN (p_debit, p_credit) ORDER BY id
  LOOP
    IF NOT ledger_bump(v_account, ledger_pick_shard(v_flags),
                       CASE WHEN v_account = p_debit THEN p_dp ELSE 0 END,
                       CASE WHEN v_account = p_debit THEN p_dpo ELSE 0 END,
                       CASE WHEN v_account = p_credit THEN p_cp ELSE 0 END,
                       CASE WHEN v_account = p_credit THEN p_cpo ELSE 0 END, 0) THEN
      RAISE EXCEPTION 'ledger: balance shard missing for account %', v_account;
    END IF;
  END LOOP;
END $$;

-- Releases one pending transfer past its timeout. Returns false when it is not (or no longer)
-- pending and expired, so callers may race the sweeper freely.
CREATE FUNCTION ledger_expire_transfer(p_id uuid, p_now timestamptz) RETURNS boolean
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

CREATE FUNCTION ledger_expire_pending(p_batch_size integer) RETURNS SETOF uuid
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

-- Same id already stored: 'exists' when the event asks for the same transfer, else the first field
-- that differs, in TigerBeetle's order. Post/void may omit what the pending transfer decides.
CREATE FUNCTION ledger_compare_transfer(e jsonb, t ledger_transfers) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_resolves boolean := t.flags & 12 <> 0;
  v_amount bigint := (e->>'amount')::bigint;
BEGIN
  IF coalesce((e->>'flags')::integer, 0) <> t.flags THEN
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
  IF t.flags & 4 <> 0 AND v_amount IS NULL THEN
    -- An omitted post amount meant "all of it".
    SELECT amount INTO v_amount FROM ledger_transfers WHERE id = t.pending_id;
  ELSIF t.flags & 8 <> 0 AND coalesce(v_amount, 0) = 0 THEN
    v_amount := t.amount;
  END IF;
  IF v_amount IS DISTINCT FROM t.amount THEN
    RETURN 'exists_with_different_amount';
  END IF;
  RETURN 'exists';
END $$;

-- A single-phase or pending transfer. Returns NULL when applied, else the reason; on failure
-- nothing it wrote remains.
CREATE FUNCTION ledger_apply_new(e jsonb, p_now timestamptz) RETURNS text
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
  v_debit_shard smallint;
  v_credit_shard smallint;
  v_dp bigint;
  v_dpo bigint;
  v_cp bigint;
  v_cpo bigint;
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

  v_dp := CASE WHEN v_pending THEN v_amount ELSE 0 END;
  v_dpo := v_amount - v_dp;
  v_cp := v_dp;
  v_cpo := v_dpo;
  v_debit_shard := ledger_pick_shard(v_debit_account.flags);
  v_credit_shard := ledger_pick_shard(v_credit_account.flags);
  -- The rows are already locked by ledger_lock_for_transfers; account id order still matters for
  -- the locks' sake when this runs alone (tests, manual repair), and costs nothing.
  IF v_debit < v_credit THEN
    IF NOT ledger_bump(v_debit, v_debit_shard, v_dp, v_dpo, 0, 0, v_debit_account.flags & 2) THEN
      DELETE FROM ledger_transfers WHERE id = v_id;
      RETURN 'exceeds_credits';
    END IF;
    IF NOT ledger_bump(v_credit, v_credit_shard, 0, 0, v_cp, v_cpo, v_credit_account.flags & 4) THEN
      PERFORM ledger_bump(v_debit, v_debit_shard, -v_dp, -v_dpo, 0, 0, 0);
      DELETE FROM ledger_transfers WHERE id = v_id;
      RETURN 'exceeds_debits';
    END IF;
  ELSE
    IF NOT ledger_bump(v_credit, v_credit_shard, 0, 0, v_cp, v_cpo, v_credit_account.flags & 4) THEN
      DELETE FROM ledger_transfers WHERE id = v_id;
      RETURN 'exceeds_debits';
    END IF;
    IF NOT ledger_bump(v_debit, v_debit_shard, v_dp, v_dpo, 0, 0, v_debit_account.flags & 2) THEN
      PERFORM ledger_bump(v_credit, v_credit_shard, 0, 0, -v_cp, -v_cpo, 0);
      DELETE FROM ledger_transfers WHERE id = v_id;
      RETURN 'exceeds_credits';
    END IF;
  END IF;
  RETURN NULL;
END $$;

-- Why a pending transfer can no longer be posted or voided. An expired-by-time one is expired here
-- (released), so the caller sees the same state the sweeper would leave.
CREATE FUNCTION ledger_resolve_refusal(p_pending_id uuid, p_now timestamptz) RETURNS text
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

-- A post or void of a pending transfer. Returns NULL when applied, else the reason.
CREATE FUNCTION ledger_apply_resolve(e jsonb, p_now timestamptz) RETURNS text
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
  PERFORM ledger_settle(v_pending.debit_account_id, v_pending.credit_account_id,
                        -v_pending.amount, CASE WHEN v_post THEN v_posted ELSE 0 END,
                        -v_pending.amount, CASE WHEN v_post THEN v_posted ELSE 0 END);
  RETURN NULL;
END $$;

CREATE FUNCTION ledger_apply_transfer(e jsonb, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_id uuid := (e->>'id')::uuid;
  v_flags integer := coalesce((e->>'flags')::integer, 0);
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
  IF (v_flags & 2 <> 0)::integer + (v_flags & 4 <> 0)::integer + (v_flags & 8 <> 0)::integer > 1 THEN
    RETURN 'flags_are_mutually_exclusive';
  ELSIF v_flags & 12 <> 0 THEN
    RETURN ledger_apply_resolve(e, p_now);
  END IF;
  RETURN ledger_apply_new(e, p_now);
END $$;

-- One account: NULL when created, else the reason.
CREATE FUNCTION ledger_apply_account(e jsonb, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_id uuid := (e->>'id')::uuid;
  v_ledger integer := coalesce((e->>'ledger')::integer, 0);
  v_code integer := coalesce((e->>'code')::integer, 0);
  v_flags integer := coalesce((e->>'flags')::integer, 0);
  v_existing ledger_accounts;
BEGIN
  IF v_id IS NULL OR v_id = '00000000-0000-0000-0000-000000000000' THEN
    RETURN 'id_must_not_be_zero';
  ELSIF v_flags & 6 = 6 THEN
    RETURN 'flags_are_mutually_exclusive';
  ELSIF v_ledger = 0 THEN
    RETURN 'ledger_must_not_be_zero';
  END IF;
  INSERT INTO ledger_accounts (id, ledger, code, flags, created_at)
  VALUES (v_id, v_ledger, v_code, v_flags, p_now)
  ON CONFLICT (id) DO NOTHING;
  IF NOT FOUND THEN
    SELECT * INTO v_existing FROM ledger_accounts WHERE id = v_id;
    IF v_existing.flags <> v_flags THEN
      RETURN 'exists_with_different_flags';
    ELSIF v_existing.ledger <> v_ledger THEN
      RETURN 'exists_with_different_ledger';
    ELSIF v_existing.code <> v_code THEN
      RETURN 'exists_with_different_code';
    END IF;
    RETURN 'exists';
  END IF;
  INSERT INTO ledger_balances (account_id, shard)
  SELECT v_id, shard::smallint
    FROM generate_series(0, CASE WHEN ledger_is_guarded(v_flags) THEN 0
                                 ELSE ledger_unguarded_shard_count() - 1 END) AS shard;
  RETURN NULL;
END $$;

CREATE FUNCTION ledger_apply_event(p_kind text, e jsonb, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  IF p_kind = 'transfer' THEN
    RETURN ledger_apply_transfer(e, p_now);
  ELSIF p_kind = 'account' THEN
    RETURN ledger_apply_account(e, p_now);
  END IF;
  RAISE EXCEPTION 'ledger: unknown event kind %', p_kind;
END $$;

-- Applies a batch of events in order; returns the failures only, as [{index, result}].
-- Chains (flags.linked on every member but the last) apply all-or-nothing: the member that failed
-- names its reason, the others read linked_event_failed. Unlike TigerBeetle, a member that already
-- exists unchanged does not break its chain: a retried chain reads 'exists' for every member, so
-- "no result other than 'exists'" means applied, for chains as for single events.
CREATE FUNCTION ledger_run_batch(p_kind text, p_batch jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  -- One clock for the whole batch: a pending transfer created and posted in one batch cannot
  -- expire in between, and expiry decisions agree with each other.
  v_now timestamptz := clock_timestamp();
  v_count integer := jsonb_array_length(p_batch);
  v_results jsonb := '[]';
  v_chain jsonb;
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
      END IF;
    ELSE
      v_chain := '[]';
      BEGIN
        FOR v_index IN v_start .. v_end LOOP
          v_reason := ledger_apply_event(p_kind, p_batch->v_index, v_now);
          IF v_reason = 'exists' THEN
            v_chain := v_chain || jsonb_build_object('index', v_index, 'result', v_reason);
          ELSIF v_reason IS NOT NULL THEN
            v_fail_index := v_index;
            v_fail_reason := v_reason;
            RAISE EXCEPTION 'ledger: linked chain failed' USING ERRCODE = 'LDG01';
          END IF;
        END LOOP;
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
  RETURN v_results;
END $$;

CREATE FUNCTION ledger_create_transfers(p_batch jsonb) RETURNS jsonb
LANGUAGE sql AS $$ SELECT ledger_run_batch('transfer', p_batch) $$;

CREATE FUNCTION ledger_create_accounts(p_batch jsonb) RETURNS jsonb
LANGUAGE sql AS $$ SELECT ledger_run_batch('account', p_batch) $$;
