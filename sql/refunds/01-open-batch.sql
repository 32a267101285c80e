-- Refunds (docs/rules.md R57). The remainder check of a batch of refunds, in the transaction that
-- then makes their ledger call: each original's refund_totals row is locked, the refund's amount is
-- taken off what remains, and the refund is stored, or it is refused and nothing of it is written.
-- Under the row lock a second refund of the same original, in this batch or in another transaction,
-- sees the first one's amount as taken, so no concurrency can refund more than the original credited.
--
-- p_batch: one element per refund, in order: {id, service_id, idempotency_key, fingerprint,
-- intent_id, amount (null: all that remains), refundable, splits (the original's fee splits'
-- amounts, in order), refund_fees, currency, reason, user_id, metadata}.
-- Answers one element per refund, in order: {"duplicate": true} (its key is stored),
-- {"exceeds": remaining} (it would refund more than remains; nothing stored) or
-- {"amount", "shares", "createdAt"} (stored SETTLED; the ledger call decides whether it stays so).
--
-- Every look-up is by key, with sequential scans priced out: the session keeps these plans for its
-- life, and one made while the tables looked empty would read them whole as they grew
-- (docs/design.md#hot-stable-plans).
CREATE OR REPLACE FUNCTION refund_open_batch(p_batch jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
DECLARE
  v_results jsonb[] := '{}';
  v_item jsonb;
  v_splits bigint[];
  v_amount bigint;
  v_refundable bigint;
  v_refunded bigint;
  v_returned bigint[];
  v_shares bigint[];
  v_completes boolean;
  v_created timestamptz;
BEGIN
  -- Every original's row exists and is locked before any is read, in id order, so that two
  -- batches never wait for each other in a circle.
  INSERT INTO refund_totals (original_id, refundable, fees_returned)
  SELECT DISTINCT ON (x.intent_id) x.intent_id, x.refundable,
         array_fill(0::bigint, ARRAY[jsonb_array_length(e->'splits')])
    FROM jsonb_array_elements(p_batch) AS e,
         LATERAL (SELECT (e->>'intent_id')::uuid AS intent_id, (e->>'refundable')::bigint AS refundable) AS x
   ORDER BY x.intent_id
  ON CONFLICT (original_id) DO NOTHING;
  PERFORM 1 FROM refund_totals
   WHERE original_id = ANY (ARRAY(SELECT (e->>'intent_id')::uuid FROM jsonb_array_elements(p_batch) AS e))
   ORDER BY original_id
     FOR UPDATE;

  FOR v_item IN SELECT value FROM jsonb_array_elements(p_batch) LOOP
    IF EXISTS (SELECT 1 FROM refunds
                WHERE service_id = v_item->>'service_id' AND idempotency_key = (v_item->>'idempotency_key')::uuid) THEN
      v_results := v_results || jsonb_build_object('duplicate', true);
      CONTINUE;
    END IF;
    SELECT refundable, refunded, fees_returned INTO v_refundable, v_refunded, v_returned
      FROM refund_totals WHERE original_id = (v_item->>'intent_id')::uuid;
    v_amount := coalesce((v_item->>'amount')::bigint, v_refundable - v_refunded);
    IF v_amount <= 0 OR v_refunded + v_amount > v_refundable THEN
      v_results := v_results || jsonb_build_object('exceeds', (v_refundable - v_refunded)::text);
      CONTINUE;
    END IF;
    v_completes := v_refunded + v_amount = v_refundable;
    v_splits := ARRAY(SELECT value::bigint FROM jsonb_array_elements_text(v_item->'splits'));
    -- Each split's share is floored; the refund that completes the original returns what the
    -- floors left, so that the fees returned over all refunds are the fees paid.
    v_shares := ARRAY(
      SELECT CASE WHEN NOT (v_item->>'refund_fees')::boolean THEN 0
                  WHEN v_completes THEN s.split - s.returned
                  ELSE LEAST(s.split - s.returned, floor(s.split::numeric * v_amount / v_refundable)::bigint) END
        FROM unnest(v_splits, v_returned) WITH ORDINALITY AS s (split, returned, ord)
       ORDER BY s.ord);
    INSERT INTO refunds (id, service_id, idempotency_key, request_fingerprint, intent_id, amount, fee_amount, fee_shares,
                         refund_fees, currency, status, reason, requested_by_user_id, metadata)
    VALUES ((v_item->>'id')::uuid, v_item->>'service_id', (v_item->>'idempotency_key')::uuid, v_item->>'fingerprint',
            (v_item->>'intent_id')::uuid, v_amount, (SELECT coalesce(sum(s), 0) FROM unnest(v_shares) AS s), v_shares,
            (v_item->>'refund_fees')::boolean, v_item->>'currency', 'SETTLED', v_item->>'reason',
            (v_item->>'user_id')::bigint, v_item->'metadata')
    -- A request with the same key in another transaction that committed meanwhile.
    ON CONFLICT (service_id, idempotency_key) DO NOTHING
    RETURNING created_at INTO v_created;
    IF NOT FOUND THEN
      v_results := v_results || jsonb_build_object('duplicate', true);
      CONTINUE;
    END IF;
    UPDATE refund_totals
       SET refunded = refunded + v_amount,
           fees_returned = ARRAY(SELECT r + s FROM unnest(fees_returned, v_shares) WITH ORDINALITY AS x (r, s, ord) ORDER BY ord)
     WHERE original_id = (v_item->>'intent_id')::uuid;
    v_results := v_results || jsonb_build_object('amount', v_amount::text, 'shares', to_jsonb(v_shares::text[]), 'createdAt', v_created);
  END LOOP;
  RETURN to_jsonb(v_results);
END $$;

-- The refunds of a batch whose ledger chain was refused: stored FAILED with their reason, and what
-- they had taken off their originals' remainders (amount and fee shares) given back.
-- p_failed: [{id, failure_reason}].
CREATE OR REPLACE FUNCTION refund_fail_batch(p_failed jsonb) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_refund refunds;
BEGIN
  FOR v_refund IN
    UPDATE refunds r SET status = 'FAILED', failure_reason = x.failure_reason, updated_at = now()
      FROM jsonb_to_recordset(p_failed) AS x (id uuid, failure_reason text)
     WHERE r.id = x.id AND r.status = 'SETTLED'
    RETURNING r.*
  LOOP
    UPDATE refund_totals
       SET refunded = refunded - v_refund.amount,
           fees_returned = ARRAY(SELECT r - s FROM unnest(fees_returned, v_refund.fee_shares) WITH ORDINALITY AS x (r, s, ord) ORDER BY ord)
     WHERE original_id = v_refund.intent_id;
  END LOOP;
END $$;
