-- Refunds (docs/rules.md R57). The remainder check of a batch of refunds, in the transaction that
-- then makes their ledger call: each original's refund_totals row is locked, the refund's amount is
-- taken off what remains, and the refund is stored, or it is refused and nothing of it is written.
-- Under the row lock a refund of the same original in another transaction sees this one's amount
-- as taken, so no concurrency can refund more than the original credited.
--
-- A batch may hold several refunds of one original: they are checked in batch order, each against
-- what the earlier ones left (a walk over each original's refunds, one step per rank, every
-- original at once), as they would be one after the other. Keeping them in separate batches made
-- refunds of a busy original wait a batch each (perf-log 2026-11). What the walk cannot know is a
-- later refusal by the ledger, which gives an amount back: the committer checks refunds of one
-- original again one by one when one of them is refused (refund-commit.ts).
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
  v_walk_broken boolean;
BEGIN
  -- Every original's row exists and is locked before any is read, in id order, so that two
  -- batches never wait for each other in a circle.
  INSERT INTO refund_totals (original_id, refundable, fees_returned)
  SELECT DISTINCT ON (x.intent_id) x.intent_id, x.refundable, array_fill(0::bigint, ARRAY[jsonb_array_length(e->'splits')])
    FROM jsonb_array_elements(p_batch) AS e,
         LATERAL (SELECT (e->>'intent_id')::uuid AS intent_id, (e->>'refundable')::bigint AS refundable) AS x
   ORDER BY x.intent_id
  ON CONFLICT (original_id) DO NOTHING;
  PERFORM 1 FROM refund_totals
   WHERE original_id = ANY (ARRAY(SELECT (e->>'intent_id')::uuid FROM jsonb_array_elements(p_batch) AS e))
   ORDER BY original_id
     FOR UPDATE;

  WITH RECURSIVE items AS (
    SELECT x.*, row_number() OVER (PARTITION BY x.intent_id ORDER BY x.ord) AS step,
           EXISTS (SELECT 1 FROM refunds r WHERE r.service_id = x.service_id AND r.idempotency_key = x.idempotency_key) AS duplicate
      FROM (SELECT e.ord, (e.v->>'id')::uuid AS id, e.v->>'service_id' AS service_id,
                   (e.v->>'idempotency_key')::uuid AS idempotency_key, e.v->>'fingerprint' AS fingerprint,
                   (e.v->>'intent_id')::uuid AS intent_id, (e.v->>'amount')::bigint AS asked,
                   (e.v->>'refund_fees')::boolean AS refund_fees, e.v->>'currency' AS currency, e.v->>'reason' AS reason,
                   (e.v->>'user_id')::bigint AS user_id, e.v->'metadata' AS metadata,
                   ARRAY(SELECT value::bigint FROM jsonb_array_elements_text(e.v->'splits')) AS splits,
                   e.v->'transfer_ids' AS transfer_ids
              FROM jsonb_array_elements(p_batch) WITH ORDINALITY AS e (v, ord)) AS x
  ), walk AS (
    -- Step 0 of each original: its row as locked. Step n: its n-th refund of the batch, checked
    -- against what steps before it left (refunded, fees_returned: the state after this step).
    SELECT t.original_id AS intent_id, 0::bigint AS step, NULL::bigint AS ord, t.refundable, t.refunded, t.fees_returned,
           NULL::bigint AS remaining, NULL::bigint AS amount, false AS accepted, NULL::bigint[] AS shares
      FROM refund_totals t
     WHERE t.original_id IN (SELECT i.intent_id FROM items i)
    UNION ALL
    SELECT w.intent_id, i.step, i.ord, w.refundable,
           w.refunded + CASE WHEN o.accepted THEN o.amount ELSE 0 END,
           CASE WHEN o.accepted
                THEN ARRAY(SELECT r + f FROM unnest(w.fees_returned, s.shares) WITH ORDINALITY AS y (r, f, ord) ORDER BY y.ord)
                ELSE w.fees_returned END,
           w.refundable - w.refunded, o.amount, o.accepted, s.shares
      FROM walk w
      JOIN items i ON i.intent_id = w.intent_id AND i.step = w.step + 1
     CROSS JOIN LATERAL (
       SELECT a.amount, NOT i.duplicate AND a.amount > 0 AND w.refunded + a.amount <= w.refundable AS accepted
         FROM (SELECT coalesce(i.asked, w.refundable - w.refunded) AS amount) AS a
     ) AS o
     CROSS JOIN LATERAL (
       -- Each split's share is floored; the refund that completes the original returns what the
       -- floors left, so that the fees returned over all refunds are the fees paid.
       SELECT ARRAY(
                SELECT CASE WHEN NOT i.refund_fees THEN 0
                            WHEN w.refunded + o.amount = w.refundable THEN p.split - p.returned
                            ELSE LEAST(p.split - p.returned, floor(p.split::numeric * o.amount / w.refundable)::bigint) END
                  FROM unnest(i.splits, w.fees_returned) WITH ORDINALITY AS p (split, returned, ord)
                 ORDER BY p.ord) AS shares
     ) AS s
  ), checked AS (
    SELECT i.*, w.remaining, w.amount, w.accepted, w.shares
      FROM items i JOIN walk w ON w.ord = i.ord
  ), stored AS (
    INSERT INTO refunds (id, service_id, idempotency_key, request_fingerprint, intent_id, amount, fee_amount, fee_shares,
                         refund_fees, currency, status, reason, requested_by_user_id, metadata, transfer_ids)
    SELECT c.id, c.service_id, c.idempotency_key, c.fingerprint, c.intent_id, c.amount,
           (SELECT coalesce(sum(s), 0) FROM unnest(c.shares) AS s), c.shares, c.refund_fees, c.currency, 'SETTLED', c.reason,
           c.user_id, c.metadata,
           -- reserve and post, the fee legs of the shares that are not 0, the credit.
           ARRAY(SELECT t.value::uuid FROM jsonb_array_elements_text(c.transfer_ids) WITH ORDINALITY AS t (value, ord)
                  WHERE t.ord <= 2 OR t.ord = jsonb_array_length(c.transfer_ids) OR c.shares[t.ord - 2] <> 0
                  ORDER BY t.ord)
      FROM checked c
     WHERE c.accepted
     ORDER BY c.ord
    -- A request with the same key in another transaction that committed meanwhile.
    ON CONFLICT (service_id, idempotency_key) DO NOTHING
    RETURNING id, intent_id, amount, fee_shares, created_at
  ), taken_per_split AS (
    SELECT s.intent_id, x.ord, sum(x.share) AS share
      FROM stored s, unnest(s.fee_shares) WITH ORDINALITY AS x (share, ord)
     GROUP BY s.intent_id, x.ord
  ), taken AS (
    -- What was stored, not what the walk accepted: a refund that met its key stored took nothing.
    UPDATE refund_totals t
       SET refunded = t.refunded + (SELECT sum(s.amount) FROM stored s WHERE s.intent_id = t.original_id)::bigint,
           fees_returned = ARRAY(SELECT y.r + coalesce((SELECT p.share FROM taken_per_split p
                                                         WHERE p.intent_id = t.original_id AND p.ord = y.ord), 0)::bigint
                                   FROM unnest(t.fees_returned) WITH ORDINALITY AS y (r, ord) ORDER BY y.ord)
     WHERE t.original_id IN (SELECT s.intent_id FROM stored s)
  )
  SELECT jsonb_agg(
           CASE WHEN c.duplicate OR (c.accepted AND s.id IS NULL) THEN jsonb_build_object('duplicate', true)
                WHEN NOT c.accepted THEN jsonb_build_object('exceeds', c.remaining::text)
                ELSE jsonb_build_object('amount', s.amount::text, 'shares', to_jsonb(s.fee_shares::text[]), 'createdAt', s.created_at) END
           ORDER BY c.ord),
         -- A refund the walk took that met its key stored took nothing after all, but the later
         -- refunds of its original were checked as if it had.
         coalesce(bool_or(c.accepted AND s.id IS NULL
                          AND EXISTS (SELECT 1 FROM checked later WHERE later.intent_id = c.intent_id AND later.ord > c.ord)), false)
    INTO v_results, v_walk_broken
    FROM checked c
    LEFT JOIN stored s ON s.id = c.id;
  IF v_walk_broken THEN
    RAISE EXCEPTION 'refund_open_batch: a refund of the batch met its key stored by another transaction';
  END IF;
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
