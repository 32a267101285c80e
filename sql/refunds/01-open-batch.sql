-- Refunds (docs/rules.md R57). The remainder check of a batch of refunds, in the transaction that
-- then makes their ledger call: each original's refund_totals row is locked, the refund's amount is
-- taken off what remains, and the refund is stored, or it is refused and nothing of it is written.
-- Under the row lock a refund of the same original in another transaction sees this one's amount
-- as taken, so no concurrency can refund more than the original credited. A batch holds at most
-- one refund per original (the committer keeps the others for the next batch), which lets one
-- set-based statement check and store them all: a per-refund loop cost as much as the ledger call.
--
-- p_batch: one element per refund, in order: {id, service_id, idempotency_key, fingerprint,
-- intent_id, amount (null: all that remains), refundable, splits (the original's fee splits'
-- amounts, in order), refund_fees, currency, reason, user_id, metadata, transfer_ids (its transfers'
-- ids should it settle: reserve, post, one per fee split, credit)}.
-- Answers one element per refund, in order: {"duplicate": true} (its key is stored),
-- {"exceeds": remaining} (it would refund more than remains; nothing stored) or
-- {"amount", "shares", "createdAt"} (stored SETTLED, with the ids of the transfers it makes: its
-- reserve, post and credit and a fee leg per share that is not 0; the ledger call decides whether it
-- stays so).
--
-- Every look-up is by key, with sequential scans priced out: the session keeps these plans for its
-- life, and one made while the tables looked empty would read them whole as they grew
-- (docs/design.md#hot-stable-plans).
CREATE OR REPLACE FUNCTION refund_open_batch(p_batch jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
DECLARE
  v_results jsonb;
BEGIN
  IF (SELECT count(DISTINCT e->>'intent_id') <> count(*) FROM jsonb_array_elements(p_batch) AS e) THEN
    RAISE EXCEPTION 'refund_open_batch: two refunds of one original in one batch';
  END IF;
  -- Every original's row exists and is locked before any is read, in id order, so that two
  -- batches never wait for each other in a circle.
  INSERT INTO refund_totals (original_id, refundable, fees_returned)
  SELECT x.intent_id, x.refundable, array_fill(0::bigint, ARRAY[jsonb_array_length(e->'splits')])
    FROM jsonb_array_elements(p_batch) AS e,
         LATERAL (SELECT (e->>'intent_id')::uuid AS intent_id, (e->>'refundable')::bigint AS refundable) AS x
   ORDER BY x.intent_id
  ON CONFLICT (original_id) DO NOTHING;
  PERFORM 1 FROM refund_totals
   WHERE original_id = ANY (ARRAY(SELECT (e->>'intent_id')::uuid FROM jsonb_array_elements(p_batch) AS e))
   ORDER BY original_id
     FOR UPDATE;

  WITH items AS (
    SELECT e.ord, (e.v->>'id')::uuid AS id, e.v->>'service_id' AS service_id, (e.v->>'idempotency_key')::uuid AS idempotency_key,
           e.v->>'fingerprint' AS fingerprint, (e.v->>'intent_id')::uuid AS intent_id, (e.v->>'amount')::bigint AS asked,
           (e.v->>'refund_fees')::boolean AS refund_fees, e.v->>'currency' AS currency, e.v->>'reason' AS reason,
           (e.v->>'user_id')::bigint AS user_id, e.v->'metadata' AS metadata, e.v->'splits' AS splits,
           e.v->'transfer_ids' AS transfer_ids
      FROM jsonb_array_elements(p_batch) WITH ORDINALITY AS e (v, ord)
  ), checked AS (
    SELECT i.*, t.refundable, t.refunded, t.fees_returned,
           coalesce(i.asked, t.refundable - t.refunded) AS amount,
           EXISTS (SELECT 1 FROM refunds r WHERE r.service_id = i.service_id AND r.idempotency_key = i.idempotency_key) AS duplicate
      FROM items i JOIN refund_totals t ON t.original_id = i.intent_id
  ), accepted AS (
    SELECT c.*,
           -- Each split's share is floored; the refund that completes the original returns what the
           -- floors left, so that the fees returned over all refunds are the fees paid.
           ARRAY(
             SELECT CASE WHEN NOT c.refund_fees THEN 0
                         WHEN c.refunded + c.amount = c.refundable THEN s.split - s.returned
                         ELSE LEAST(s.split - s.returned, floor(s.split::numeric * c.amount / c.refundable)::bigint) END
               FROM unnest(ARRAY(SELECT value::bigint FROM jsonb_array_elements_text(c.splits)), c.fees_returned)
                    WITH ORDINALITY AS s (split, returned, ord)
              ORDER BY s.ord) AS shares
      FROM checked c
     WHERE NOT c.duplicate AND c.amount > 0 AND c.refunded + c.amount <= c.refundable
  ), stored AS (
    INSERT INTO refunds (id, service_id, idempotency_key, request_fingerprint, intent_id, amount, fee_amount, fee_shares,
                         refund_fees, currency, status, reason, requested_by_user_id, metadata, transfer_ids)
    SELECT a.id, a.service_id, a.idempotency_key, a.fingerprint, a.intent_id, a.amount,
           (SELECT coalesce(sum(s), 0) FROM unnest(a.shares) AS s), a.shares, a.refund_fees, a.currency, 'SETTLED', a.reason,
           a.user_id, a.metadata,
           -- reserve and post, the fee legs of the shares that are not 0, the credit.
           ARRAY(SELECT t.value::uuid FROM jsonb_array_elements_text(a.transfer_ids) WITH ORDINALITY AS t (value, ord)
                  WHERE t.ord <= 2 OR t.ord = jsonb_array_length(a.transfer_ids) OR a.shares[t.ord - 2] <> 0
                  ORDER BY t.ord)
      FROM accepted a
     ORDER BY a.ord
    -- A request with the same key in another transaction that committed meanwhile.
    ON CONFLICT (service_id, idempotency_key) DO NOTHING
    RETURNING id, intent_id, amount, fee_shares, created_at
  ), taken AS (
    UPDATE refund_totals t
       SET refunded = t.refunded + s.amount,
           fees_returned = ARRAY(SELECT r + f FROM unnest(t.fees_returned, s.fee_shares) WITH ORDINALITY AS x (r, f, ord) ORDER BY ord)
      FROM stored s
     WHERE t.original_id = s.intent_id
  )
  SELECT jsonb_agg(
           CASE WHEN c.duplicate OR (a.id IS NOT NULL AND s.id IS NULL) THEN jsonb_build_object('duplicate', true)
                WHEN a.id IS NULL THEN jsonb_build_object('exceeds', (c.refundable - c.refunded)::text)
                ELSE jsonb_build_object('amount', s.amount::text, 'shares', to_jsonb(s.fee_shares::text[]), 'createdAt', s.created_at) END
           ORDER BY c.ord)
    INTO v_results
    FROM checked c
    LEFT JOIN accepted a ON a.id = c.id
    LEFT JOIN stored s ON s.id = c.id;
  RETURN coalesce(v_results, '[]'::jsonb);
END $$;

-- The refunds of a batch whose ledger chain was refused: stored FAILED with their reason and the
-- transfers they did make (none, or the reserve and its void), and what they had taken off their
-- originals' remainders (amount and fee shares) given back.
-- p_failed: [{id, failure_reason, transfer_ids}].
CREATE OR REPLACE FUNCTION refund_fail_batch(p_failed jsonb) RETURNS void
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
DECLARE
  v_refund refunds;
BEGIN
  FOR v_refund IN
    UPDATE refunds r SET status = 'FAILED', failure_reason = x.failure_reason, updated_at = now(),
                         transfer_ids = ARRAY(SELECT jsonb_array_elements_text(x.transfer_ids)::uuid)
      FROM jsonb_to_recordset(p_failed) AS x (id uuid, failure_reason text, transfer_ids jsonb)
     WHERE r.id = x.id AND r.status = 'SETTLED'
    RETURNING r.*
  LOOP
    UPDATE refund_totals
       SET refunded = refunded - v_refund.amount,
           fees_returned = ARRAY(SELECT r - s FROM unnest(fees_returned, v_refund.fee_shares) WITH ORDINALITY AS x (r, s, ord) ORDER BY ord)
     WHERE original_id = v_refund.intent_id;
  END LOOP;
END $$;
