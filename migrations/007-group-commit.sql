-- Group commit of POST /intents (docs/PERFORMANCE.md): the intents that arrive while
-- earlier ones are committing share one transaction, so BEGIN, COMMIT, the ledger's lock statement
-- and every round trip are paid once per batch instead of once per intent.

-- Opens a batch of intents in order. For each element
--   {"intent": {column: value, …}, "payer": bigint|null, "checks": [intent_guard's checks]}
-- it takes the payer's lock and compares the limits (intent_guard), then inserts the intent unless
-- its idempotency key is stored. The guard runs first, so a refused intent never exists, and it
-- runs after the earlier elements were inserted, so their usage counts (two payments to one
-- recipient in one batch meet that recipient's limit as they would one after the other).
-- Returns one element per input, in order: {"createdAt": …}, {"duplicate": true} or the guard's
-- refusal ({"refusal": "locked"} / {"refusal": "limit", …}).
--
-- Recipient limits (checks with side 'to') are exact across concurrent transactions too: the batch
-- first waits for a transaction-scoped lock per such recipient (class p_recipient_lock_class), all
-- taken in one statement in user id order, so two batches never wait for each other in a circle.
-- A payer's lock is only tried (docs/rules.md R22 refuses instead of waiting), so it cannot close a circle either.
CREATE FUNCTION intent_open_batch(p_lock_class integer, p_recipient_lock_class integer, p_batch jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_item jsonb;
  v_refusal jsonb;
  v_created timestamptz;
  v_results jsonb := '[]';
BEGIN
  PERFORM pg_advisory_xact_lock(p_recipient_lock_class, hashtext(current_schema() || ':' || recipient::text))
     FROM (SELECT DISTINCT (c->>'userId')::bigint AS recipient
             FROM jsonb_array_elements(p_batch) AS e, jsonb_array_elements(e->'checks') AS c
            WHERE c->>'side' = 'to'
            ORDER BY 1) AS recipients;
  FOR v_index IN 0 .. jsonb_array_length(p_batch) - 1 LOOP
    v_item := p_batch->v_index;
    v_refusal := intent_guard(p_lock_class, (v_item->>'payer')::bigint, (v_item->'intent'->>'id')::uuid, v_item->'checks');
    IF v_refusal IS NOT NULL THEN
      v_results := v_results || jsonb_build_array(v_refusal);
      CONTINUE;
    END IF;
    -- Only the columns a new intent sets: the rest keep their defaults.
    INSERT INTO intents (id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel,
                         from_account_name, to_account_name, from_user_id, to_user_id, external_ref, amount,
                         pre_fee_amount, post_fee_amount, fee_splits, currency, status, psp_state, failure_reason,
                         metadata, from_name, to_name, comment, live, expires_at, reserved_at, qr_signature,
                         issued_by_user_id, transfer_ids)
    SELECT id, idempotency_key, service_id, request_fingerprint, user_id, operation_type, channel,
           from_account_name, to_account_name, from_user_id, to_user_id, external_ref, amount,
           pre_fee_amount, post_fee_amount, fee_splits, currency, status, psp_state, failure_reason,
           metadata, from_name, to_name, comment, live, expires_at, reserved_at, qr_signature,
           issued_by_user_id, transfer_ids
      FROM jsonb_populate_record(NULL::intents, v_item->'intent')
    ON CONFLICT (idempotency_key, service_id) DO NOTHING
    RETURNING created_at INTO v_created;
    IF FOUND THEN
      v_results := v_results || jsonb_build_array(jsonb_build_object('createdAt', v_created));
    ELSE
      v_results := v_results || jsonb_build_array(jsonb_build_object('duplicate', true));
    END IF;
  END LOOP;
  RETURN v_results;
END $$;
