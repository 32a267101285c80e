-- Matches one run's staged statement lines against the PSPX payouts of its date, set-based
-- (docs/rules.md R59): one pass over the lines joined to intents by primary key, one anti-join
-- for the payouts no line met. The unique indexes of reconciliation_items hold the rules "a line
-- is used at most once" and "a payout is met by at most one line", whatever this text does.
--
-- A line, in lineId order within its intent (a repeated PAYOUT line for one intent is the second):
--   not PAYOUT, or naming no intent                   UNKNOWN_LINE  (the provider's own movement)
--   PAYOUT naming no PSPX intent of ours, or a repeat MISSING_HERE
--   PAYOUT of a payout paid here (SETTLED, or confirmed and settling) on this date or with no
--     provider date (resolved by a person):          MATCHED when the amounts agree, else AMOUNT_MISMATCH
--   PAYOUT of a payout in MANUAL_REVIEW:              MATCHED and resolved CONFIRMED by the run when
--                                                     the amounts agree, else AMOUNT_MISMATCH
--   PAYOUT of any other payout (FAILED, in flight, paid here on another date): STATUS_MISMATCH
-- A payout paid here with this settlement date that no line met: MISSING_AT_PROVIDER.
--
-- The payout's amount is what the provider was asked to pay: amount less the post-fee.

CREATE OR REPLACE FUNCTION reconciliation_paid_here(p_status text, p_psp_state text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_status = 'SETTLED' OR (p_status = 'AUTHORIZED' AND p_psp_state = 'CONFIRMED') $$;

CREATE OR REPLACE FUNCTION reconciliation_match(p_run uuid, p_date char(8)) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO reconciliation_items (run_id, outcome, intent_id, line_id, line_type, amount_here, amount_at_provider, resolved)
  SELECT p_run,
         CASE
           WHEN l.type <> 'PAYOUT' OR l.intent_id IS NULL THEN 'UNKNOWN_LINE'
           WHEN l.nth > 1 OR i.id IS NULL THEN 'MISSING_HERE'
           WHEN i.status = 'MANUAL_REVIEW'
             OR (reconciliation_paid_here(i.status, i.psp_state) AND (i.settlement_date = p_date OR i.settlement_date IS NULL))
             THEN CASE WHEN i.amount - i.post_fee_amount = l.amount THEN 'MATCHED' ELSE 'AMOUNT_MISMATCH' END
           ELSE 'STATUS_MISMATCH'
         END,
         l.intent_id, l.line_id, l.type,
         CASE WHEN l.nth = 1 THEN i.amount - i.post_fee_amount END,
         l.amount,
         coalesce(l.nth = 1 AND i.status = 'MANUAL_REVIEW' AND i.amount - i.post_fee_amount = l.amount, false)
    FROM (SELECT s.*, CASE WHEN s.type = 'PAYOUT' AND s.intent_id IS NOT NULL
                           THEN row_number() OVER (PARTITION BY s.type = 'PAYOUT', s.intent_id ORDER BY s.line_id) ELSE 1 END AS nth
            FROM reconciliation_statement_lines s WHERE s.run_id = p_run) l
    LEFT JOIN intents i ON i.id = l.intent_id AND i.channel = 'PSPX_TRANSFER' AND l.type = 'PAYOUT'
   ORDER BY l.line_id;

  INSERT INTO reconciliation_items (run_id, outcome, intent_id, amount_here)
  SELECT p_run, 'MISSING_AT_PROVIDER', i.id, i.amount - i.post_fee_amount
    FROM intents i
   WHERE i.settlement_date = p_date AND i.channel = 'PSPX_TRANSFER' AND reconciliation_paid_here(i.status, i.psp_state)
     AND NOT EXISTS (SELECT 1 FROM reconciliation_items m
                      WHERE m.run_id = p_run AND m.intent_id = i.id
                        AND m.outcome IN ('MATCHED', 'MISSING_AT_PROVIDER', 'AMOUNT_MISMATCH', 'STATUS_MISMATCH'))
   ORDER BY i.id;
END $$;
