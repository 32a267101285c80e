-- Opens a batch of intents in order: the first statement of every group-commit transaction
-- (src/domain/intents/commit/intent-commit.ts), before the ledger call (sql/ledger/12-write-plan.sql).
-- For each element
--   {"intent": {column: value, …}, "payer": bigint|null, "checks": [intent_guard's checks]}
-- it takes the payer's lock and compares the limits (intent_guard, 02-guard.sql), then inserts the
-- intent unless its idempotency key is stored. The guard runs first, so a refused intent never
-- exists, and it runs after the earlier elements were inserted, so their usage counts (two payments
-- to one recipient in one batch meet that recipient's limit as they would one after the other).
-- Returns one element per input, in order: {"createdAt": …}, {"duplicate": true}, the guard's
-- refusal ({"refusal": "locked"} / {"refusal": "limit", …}) or {"refusal": "funds"}.
--
-- Funds are checked here too, as limits are (docs/design.md#hot-funds-at-opening): an element may carry "funds", the
-- transfer that opens its payment with what the batch's earlier payments credit its payer
-- (ledger_surely_exceeds_credits, sql/ledger/14-funds.sql). One the ledger would refuse whatever
-- the rest of the batch does is answered {"refusal": "funds"} once its guard has passed (the
-- guard's refusals come first, as before), and is never inserted: its payment stays out of the
-- ledger call, so a batch holding refusals is planned and written as one that applies, and
-- nothing is deleted again. A refusal that depends on the batch is still the ledger's.
--
-- Recipient limits (checks with side 'to') are exact across concurrent transactions too: the batch
-- first waits for a transaction-scoped lock per such recipient (class p_recipient_lock_class), all
-- taken in one statement in user id order, so two batches never wait for each other in a circle.
-- A payer's lock is only tried (docs/rules.md R22 refuses instead of waiting), so it cannot close a circle either.
--
-- Set-based: the batch is cut into runs in which no intent's limit check counts another intent of
-- the run; each run's guards still run one by one in batch order, then its intents go in with one
-- INSERT. An intent whose check would count an earlier intent of the run starts a new run, so it
-- is guarded after that intent is inserted, exactly as one after the other. (An INSERT per intent
-- was most of the function's time: docs/perf-log/2026-11.md, "2026-11-26, night: PostgreSQL's
-- cost per intent".)

-- Whether a check of p_checks (intent_guard's) counts an intent paying from one of p_from or to
-- one of p_to. A per-transaction check (no since) counts nothing.
CREATE OR REPLACE FUNCTION intent_checks_count_any(p_checks jsonb, p_from bigint[], p_to bigint[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT EXISTS (
    SELECT 1 FROM jsonb_array_elements(coalesce(p_checks, '[]')) AS c
     WHERE c->>'since' IS NOT NULL
       AND CASE c->>'side' WHEN 'from' THEN (c->>'userId')::bigint = ANY (p_from)
                           ELSE (c->>'userId')::bigint = ANY (p_to) END)
$$;

-- Sequential scans priced out for every statement it runs, intent_guard's sums and the key
-- look-ups included: the session keeps their plans for its life (docs/design.md#hot-stable-plans).
CREATE OR REPLACE FUNCTION intent_open_batch(p_lock_class integer, p_recipient_lock_class integer, p_batch jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
DECLARE
  v_size integer := jsonb_array_length(p_batch);
  -- By batch position + 1; NULL until answered.
  v_results jsonb[] := array_fill(NULL::jsonb, ARRAY[v_size]);
  v_start integer := 0;
  v_end integer;
  v_from bigint[];
  v_to bigint[];
  v_item jsonb;
  v_created jsonb;
  -- By batch position + 1.
  v_short_of_funds boolean[];
BEGIN
  PERFORM pg_advisory_xact_lock(p_recipient_lock_class, hashtext(current_schema() || ':' || recipient::text))
     FROM (SELECT DISTINCT (c->>'userId')::bigint AS recipient
             FROM jsonb_array_elements(p_batch) AS e, jsonb_array_elements(e->'checks') AS c
            WHERE c->>'side' = 'to'
            ORDER BY 1) AS recipients;
  -- After the recipients' locks, which another batch may hold a while: the balances are read once they are held.
  IF jsonb_path_exists(p_batch, '$[*].funds') THEN
    v_short_of_funds := ledger_surely_exceeds_credits(
      (SELECT jsonb_agg(coalesce(e->'funds', 'null') ORDER BY ord) FROM jsonb_array_elements(p_batch) WITH ORDINALITY AS x (e, ord)));
  END IF;
  WHILE v_start < v_size LOOP
    -- The run [v_start, v_end): it stops before the first intent a check of which counts one in it.
    v_end := v_start;
    v_from := '{}';
    v_to := '{}';
    LOOP
      v_item := p_batch->v_end;
      EXIT WHEN v_end > v_start AND intent_checks_count_any(v_item->'checks', v_from, v_to);
      v_from := v_from || (v_item->'intent'->>'from_user_id')::bigint;
      v_to := v_to || (v_item->'intent'->>'to_user_id')::bigint;
      v_end := v_end + 1;
      EXIT WHEN v_end = v_size;
    END LOOP;

    FOR v_index IN v_start .. v_end - 1 LOOP
      v_item := p_batch->v_index;
      v_results[v_index + 1] := intent_guard(p_lock_class, (v_item->>'payer')::bigint, (v_item->'intent'->>'id')::uuid, v_item->'checks');
      IF v_results[v_index + 1] IS NULL AND v_short_of_funds[v_index + 1] THEN
        v_results[v_index + 1] := '{"refusal": "funds"}';
      END IF;
    END LOOP;

    -- Only the columns a new intent sets: the rest keep their defaults. In batch order, so of two
    -- intents with one idempotency key the first is stored and the second is the duplicate.
    WITH inserted AS (
      INSERT INTO intents (id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel,
                           from_account_name, to_account_name, from_user_id, to_user_id, external_ref, amount,
                           pre_fee_amount, post_fee_amount, fee_splits, currency, status, psp_state, failure_reason,
                           metadata, from_name, to_name, comment, live, expires_at, reserved_at, qr_signature,
                           issued_by_user_id, transfer_ids)
      SELECT r.id, r.idempotency_key, r.service_id, r.request_fingerprint, r.user_id, r.operation_type, r.channel,
             r.from_account_name, r.to_account_name, r.from_user_id, r.to_user_id, r.external_ref, r.amount,
             r.pre_fee_amount, r.post_fee_amount, r.fee_splits, r.currency, r.status, r.psp_state, r.failure_reason,
             r.metadata, r.from_name, r.to_name, r.comment, r.live, r.expires_at, r.reserved_at, r.qr_signature,
             r.issued_by_user_id, r.transfer_ids
        FROM generate_series(v_start, v_end - 1) AS g (position),
             jsonb_populate_record(NULL::intents, p_batch->g.position->'intent') AS r
       WHERE v_results[g.position + 1] IS NULL
       ORDER BY g.position
      ON CONFLICT (idempotency_key, service_id) DO NOTHING
      RETURNING id, created_at)
    SELECT coalesce(jsonb_object_agg(id::text, created_at), '{}') INTO v_created FROM inserted;

    FOR v_index IN v_start .. v_end - 1 LOOP
      CONTINUE WHEN v_results[v_index + 1] IS NOT NULL;
      v_item := p_batch->v_index->'intent';
      IF v_created ? (v_item->>'id') THEN
        v_results[v_index + 1] := jsonb_build_object('createdAt', v_created->(v_item->>'id'));
        -- A second element with the same id is the duplicate of this one.
        v_created := v_created - (v_item->>'id');
      ELSE
        v_results[v_index + 1] := jsonb_build_object('duplicate', true);
      END IF;
    END LOOP;
    v_start := v_end;
  END LOOP;
  RETURN to_jsonb(v_results);
END $$;
