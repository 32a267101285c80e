-- Matches one run's statement lines against the PSPX payouts of its date, set-based
-- (docs/rules.md R59): one pass over the lines hash-joined to intents, one anti-join for the
-- payouts no line met. A line is one row of reconciliation_statement_lines (its key refuses a
-- second) naming one intent, so it meets at most one payout; a payout is met by the first of its
-- PAYOUT lines only. Only breaks, and the matches the run resolves, are written as items: a
-- million matches cost no million-row insert, and `matched` is their count.
--
-- A line (of several PAYOUT lines naming one intent, the first in lineId order meets it; the rest repeat):
--   not PAYOUT, or naming no intent                   UNKNOWN_LINE  (the provider's own movement)
--   PAYOUT naming no PSPX intent of ours, or a repeat MISSING_HERE
--   PAYOUT of a payout paid here (SETTLED, or confirmed and settling) on this date or with no
--     provider date (resolved by a person):          MATCHED when the amounts agree, else AMOUNT_MISMATCH
--   PAYOUT of a payout in MANUAL_REVIEW:              MATCHED and resolved CONFIRMED by the run when
--                                                     the amounts agree, else AMOUNT_MISMATCH
--   PAYOUT of any other payout (FAILED, in flight, paid here on another date): STATUS_MISMATCH
-- A payout paid here with this settlement date that no line met: MISSING_AT_PROVIDER.
-- A payout a person resolved CONFIRMED (no provider date), whose resolution was booked on this
-- Bangkok day, that no line of this statement met: MISSING_AT_PROVIDER. Those the run itself
-- resolved (reason 'reconciliation') were met by a line of their statement already.
--
-- The payout's amount is what the provider was asked to pay: amount less the post-fee.

CREATE OR REPLACE FUNCTION reconciliation_paid_here(p_status text, p_psp_state text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_status = 'SETTLED' OR (p_status = 'AUTHORIZED' AND p_psp_state = 'CONFIRMED') $$;

-- The first instant of a Bangkok (UTC+7, no daylight saving) calendar day given as YYYYMMDD; the
-- day ends where the next one starts. Spelled with UTC alone, which every build knows.
CREATE OR REPLACE FUNCTION reconciliation_day_start(p_date char(8)) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$ SELECT (to_date(p_date, 'YYYYMMDD') - interval '7 hours') AT TIME ZONE 'UTC' $$;

-- Returns the matched lines' count (its return type is why the old text is dropped first).
DROP FUNCTION IF EXISTS reconciliation_match(uuid, char);
CREATE OR REPLACE FUNCTION reconciliation_match(p_run uuid, p_date char(8)) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_matched bigint;
BEGIN
  -- A day's lines and payouts are hashed in memory rather than sorted on disk (4 MB by default).
  SET LOCAL work_mem = '256MB';
  WITH classified AS (
    SELECT CASE
             WHEN l.type <> 'PAYOUT' OR l.intent_id IS NULL THEN 'UNKNOWN_LINE'
             WHEN l.repeat OR i.id IS NULL THEN 'MISSING_HERE'
             WHEN i.status = 'MANUAL_REVIEW'
               OR (reconciliation_paid_here(i.status, i.psp_state) AND (i.settlement_date = p_date OR i.settlement_date IS NULL))
               THEN CASE WHEN i.amount - i.post_fee_amount = l.amount THEN 'MATCHED' ELSE 'AMOUNT_MISMATCH' END
             ELSE 'STATUS_MISMATCH'
           END AS outcome,
           l.intent_id, l.line_id, l.type,
           CASE WHEN NOT l.repeat THEN i.amount - i.post_fee_amount END AS amount_here,
           l.amount AS amount_at_provider,
           coalesce(NOT l.repeat AND i.status = 'MANUAL_REVIEW' AND i.amount - i.post_fee_amount = l.amount, false) AS resolved
      FROM (SELECT s.*, coalesce(s.line_id <> d.first_line, false) AS repeat
              FROM reconciliation_statement_lines s
              -- Intents named by more than one PAYOUT line (rare): the first in lineId order meets the payout.
              LEFT JOIN (SELECT intent_id, min(line_id) AS first_line FROM reconciliation_statement_lines
                          WHERE run_id = p_run AND type = 'PAYOUT' AND intent_id IS NOT NULL
                          GROUP BY intent_id HAVING count(*) > 1) d
                ON s.type = 'PAYOUT' AND d.intent_id = s.intent_id
             WHERE s.run_id = p_run) l
      LEFT JOIN intents i ON i.id = l.intent_id AND i.channel = 'PSPX_TRANSFER' AND l.type = 'PAYOUT'
  ), kept AS (
    INSERT INTO reconciliation_items (run_id, outcome, intent_id, line_id, line_type, amount_here, amount_at_provider, resolved)
    SELECT p_run, outcome, intent_id, line_id, type, amount_here, amount_at_provider, resolved
      FROM classified WHERE outcome <> 'MATCHED' OR resolved
    RETURNING 1
  )
  SELECT count(*) FILTER (WHERE outcome = 'MATCHED') INTO v_matched FROM classified;

  INSERT INTO reconciliation_items (run_id, outcome, intent_id, amount_here)
  SELECT p_run, 'MISSING_AT_PROVIDER', i.id, i.amount - i.post_fee_amount
    FROM intents i
   WHERE i.settlement_date = p_date AND i.channel = 'PSPX_TRANSFER' AND reconciliation_paid_here(i.status, i.psp_state)
     AND NOT EXISTS (SELECT 1 FROM reconciliation_statement_lines l
                      WHERE l.run_id = p_run AND l.type = 'PAYOUT' AND l.intent_id = i.id);

  INSERT INTO reconciliation_items (run_id, outcome, intent_id, amount_here)
  SELECT p_run, 'MISSING_AT_PROVIDER', i.id, i.amount - i.post_fee_amount
    FROM intents i
   WHERE i.channel = 'PSPX_TRANSFER' AND i.settlement_date IS NULL AND i.status = 'SETTLED'
     AND EXISTS (SELECT 1 FROM intent_events e
                  WHERE e.intent_id = i.id AND e.status_from = 'MANUAL_REVIEW' AND e.status_to = 'SETTLED'
                    AND e.payload->>'resolution' = 'CONFIRMED' AND e.payload->>'reason' IS DISTINCT FROM 'reconciliation'
                    AND e.created_at >= reconciliation_day_start(p_date)
                    AND e.created_at < reconciliation_day_start(p_date) + interval '1 day')
     AND NOT EXISTS (SELECT 1 FROM reconciliation_statement_lines l
                      WHERE l.run_id = p_run AND l.type = 'PAYOUT' AND l.intent_id = i.id);
  RETURN v_matched;
END $$;
