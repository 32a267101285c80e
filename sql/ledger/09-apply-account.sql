-- One account: NULL when created, else the reason. A guarded account gets its one balance row,
-- an unguarded one all of its shards (02-shards.sql).
CREATE OR REPLACE FUNCTION ledger_apply_account(e jsonb, p_now timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_id uuid := (e->>'id')::uuid;
  v_ledger integer := coalesce((e->>'ledger')::integer, 0);
  v_code integer := coalesce((e->>'code')::integer, 0);
  v_flags integer := ledger_event_flags(e);
  v_existing ledger_accounts;
BEGIN
  IF v_id IS NULL OR v_id = '00000000-0000-0000-0000-000000000000' THEN
    RETURN 'id_must_not_be_zero';
  ELSIF ledger_account_flags_clash(v_flags) THEN
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
