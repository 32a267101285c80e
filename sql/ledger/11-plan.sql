-- A batch that applies in full is written with a few set statements (12-write-plan.sql). Applied
-- event by event (10-run-batch.sql), a transfer costs about a dozen statements and ~0.3 ms of the
-- database's CPU; nearly every batch group commit sends applies in full, and for such a batch the
-- order of events matters only to the guarded accounts' checks, which running sums in batch
-- order decide exactly.
--
-- The plan, in stages:
--   ledger_batch_events           the JSON events as columns
--   ledger_plan_lookups           each event with the rows it depends on: the pending transfer a
--                                 post or void resolves (created earlier in the batch, or stored),
--                                 its accounts' ledgers
--   ledger_plan_events            each event as it would be stored, and whether it would apply
--   ledger_plan_first_over_limit  the guarded accounts' running sums
--   ledger_plan_until_refusal     all of it: the batch as it would be stored, and the first event
--                                 from which it would not (NULL when it all applies)
-- The SQL stages are inlined into ledger_plan_until_refusal's one query (LANGUAGE sql, not
-- VOLATILE, one SELECT), so PL/pgSQL still plans and caches that query once per session.

CREATE OR REPLACE FUNCTION ledger_batch_events(p_batch jsonb)
RETURNS TABLE (idx integer, id uuid, debit uuid, credit uuid, amount bigint, pending_id uuid,
               timeout_s integer, ledger integer, code integer, flags integer)
LANGUAGE sql IMMUTABLE AS $$
  SELECT (ord - 1)::integer, (x->>'id')::uuid,
         (x->>'debit_account_id')::uuid, (x->>'credit_account_id')::uuid,
         (x->>'amount')::bigint, (x->>'pending_id')::uuid,
         coalesce((x->>'timeout_s')::integer, 0), coalesce((x->>'ledger')::integer, 0),
         coalesce((x->>'code')::integer, 0), ledger_event_flags(x)
    FROM jsonb_array_elements(p_batch) WITH ORDINALITY AS j (x, ord)
$$;

-- Columns prefixed pending_: the pending transfer a post or void resolves, created earlier in this
-- batch, or else stored and still pending. resolved_later_as: what a later event of the batch does
-- to this reservation ('posted', 'voided').
--
-- Whether an event is stored already is not looked up here: ledger_write_plan's insert finds it
-- (ON CONFLICT, which it needs anyway for a transfer stored by another transaction since), writes
-- nothing and hands the batch to ledger_run_batch, which answers 'exists' or the difference. A
-- reservation created earlier in the batch is not looked up in the table either: if it were
-- stored, its own insert would find it so. The accounts are read once each, not once per event
-- side. (Dropped first: this version returns one column fewer, which CREATE OR REPLACE cannot do.)
DROP FUNCTION IF EXISTS ledger_plan_lookups(jsonb, timestamptz);
CREATE FUNCTION ledger_plan_lookups(p_batch jsonb, p_now timestamptz)
RETURNS TABLE (idx integer, id uuid, debit uuid, credit uuid, amount bigint, pending_id uuid,
               timeout_s integer, ledger integer, code integer, flags integer, resolves boolean,
               pending_stored boolean, pending_open boolean, pending_debit uuid,
               pending_credit uuid, pending_amount bigint, pending_ledger integer, pending_code integer,
               debit_ledger integer, credit_ledger integer, resolved_later_as text)
LANGUAGE sql STABLE AS $$
  WITH e AS (SELECT * FROM ledger_batch_events(p_batch)),
  -- By an array, so that the accounts are one index scan whatever the batch's estimated size.
  accounts AS (
    SELECT a.id, a.ledger FROM ledger_accounts a
     WHERE a.id = ANY (ARRAY(SELECT e.debit FROM e WHERE NOT ledger_resolves_pending(e.flags)
                             UNION SELECT e.credit FROM e WHERE NOT ledger_resolves_pending(e.flags)))
  )
  SELECT e.*, ledger_resolves_pending(e.flags), s.id IS NOT NULL,
         (s.id IS NOT NULL AND ledger_is_pending(s.flags) AND s.pending_status = 'pending'
              AND (s.expires_at IS NULL OR s.expires_at > p_now))
           OR (b.id IS NOT NULL AND ledger_is_pending(b.flags) AND NOT ledger_resolves_pending(b.flags)),
         coalesce(s.debit_account_id, b.debit), coalesce(s.credit_account_id, b.credit),
         coalesce(s.amount, b.amount), coalesce(s.ledger, b.ledger), coalesce(s.code, b.code),
         da.ledger, ca.ledger,
         CASE WHEN ledger_posts_pending(r.flags) THEN 'posted' WHEN ledger_voids_pending(r.flags) THEN 'voided' END
    FROM e
    LEFT JOIN e AS b ON ledger_resolves_pending(e.flags) AND b.id = e.pending_id AND b.idx < e.idx
    -- A look-up by primary key per event. OFFSET 0 keeps it a subquery run per event: pulled up
    -- into a join, the planner (expecting a hundred events) hashed the whole table.
    LEFT JOIN LATERAL (SELECT t.* FROM ledger_transfers t
                        WHERE ledger_resolves_pending(e.flags) AND b.id IS NULL AND t.id = e.pending_id
                       OFFSET 0) AS s ON true
    -- Two resolves of one reservation make duplicate rows here, which ledger_plan_until_refusal finds.
    LEFT JOIN e AS r ON ledger_is_pending(e.flags) AND r.pending_id = e.id AND ledger_resolves_pending(r.flags)
                    AND r.idx > e.idx
    LEFT JOIN accounts AS da ON NOT ledger_resolves_pending(e.flags) AND da.id = e.debit
    LEFT JOIN accounts AS ca ON NOT ledger_resolves_pending(e.flags) AND ca.id = e.credit
$$;

-- Each event as it would be stored (a post or void with its pending transfer's accounts, ledger
-- and amount filled in), and whether it would apply: every rule of ledger_apply_transfer,
-- ledger_apply_new and ledger_apply_resolve that can refuse, but "already stored" (the write finds
-- that, ledger_plan_lookups).
CREATE OR REPLACE FUNCTION ledger_plan_events(p_batch jsonb, p_now timestamptz)
RETURNS TABLE (idx integer, id uuid, debit_account_id uuid, credit_account_id uuid, amount bigint,
               pending_id uuid, timeout_s integer, ledger integer, code integer, flags integer,
               resolves boolean, resolves_stored boolean, pending_status text, released bigint, applies boolean)
LANGUAGE sql STABLE AS $$
  SELECT p.idx, p.id,
         CASE WHEN p.resolves THEN p.pending_debit ELSE p.debit END,
         CASE WHEN p.resolves THEN p.pending_credit ELSE p.credit END,
         CASE WHEN NOT p.resolves THEN p.amount
              WHEN ledger_posts_pending(p.flags) THEN coalesce(p.amount, p.pending_amount)
              ELSE p.pending_amount END,
         p.pending_id, p.timeout_s,
         CASE WHEN p.resolves THEN p.pending_ledger ELSE p.ledger END,
         CASE WHEN p.resolves AND p.code = 0 THEN p.pending_code ELSE p.code END,
         p.flags, p.resolves, p.resolves AND p.pending_stored,
         CASE WHEN ledger_is_pending(p.flags) THEN coalesce(p.resolved_later_as, 'pending') END,
         CASE WHEN p.resolves THEN p.pending_amount ELSE 0 END,
         p.id IS NOT NULL AND p.id <> '00000000-0000-0000-0000-000000000000'
         AND NOT ledger_transfer_flags_clash(p.flags)
         AND CASE WHEN NOT p.resolves THEN
               p.debit IS NOT NULL AND p.debit <> '00000000-0000-0000-0000-000000000000'
               AND p.credit IS NOT NULL AND p.credit <> '00000000-0000-0000-0000-000000000000'
               AND p.debit <> p.credit AND p.pending_id IS NULL
               AND (p.timeout_s = 0 OR ledger_is_pending(p.flags))
               AND coalesce(p.amount, 0) <> 0 AND p.ledger <> 0
               AND p.debit_ledger IS NOT NULL AND p.credit_ledger IS NOT NULL
               AND p.debit_ledger = p.credit_ledger AND p.ledger = p.debit_ledger
             ELSE
               p.pending_id IS NOT NULL AND p.pending_id <> '00000000-0000-0000-0000-000000000000'
               AND p.pending_id <> p.id AND p.timeout_s = 0
               -- A post that omits its amount posts all of it.
               AND NOT (ledger_posts_pending(p.flags) AND coalesce(p.amount, -1) = 0)
               AND coalesce(p.pending_open, false)
               AND (p.debit IS NULL OR p.debit = p.pending_debit)
               AND (p.credit IS NULL OR p.credit = p.pending_credit)
               AND (p.ledger = 0 OR p.ledger = p.pending_ledger)
               AND (p.amount IS NULL OR p.amount <= p.pending_amount)
             END
    FROM ledger_plan_lookups(p_batch, p_now) AS p
$$;

-- The guarded accounts' checks, in batch order: after each event that could break a limit (a new
-- transfer debiting a debits-must-not-exceed-credits account, or crediting the mirror image), the
-- balance before the batch plus every movement up to that event must stay within it. The first
-- event that breaks one, or NULL. Exact for an event when every event before it applies: the
-- running sums hold the movements up to it only. Each account and its balance row are read once
-- (by an array, one index scan each), not once per movement. (The boolean it replaces is dropped.)
DROP FUNCTION IF EXISTS ledger_plan_within_limits(ledger_planned_transfer[]);
CREATE OR REPLACE FUNCTION ledger_plan_first_over_limit(p_plan ledger_planned_transfer[]) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
  RETURN (
    WITH m AS (SELECT * FROM ledger_plan_movements(p_plan)),
    guarded AS (
      SELECT a.id, a.flags, b.debits_pending, b.debits_posted, b.credits_pending, b.credits_posted
        FROM ledger_accounts a
        JOIN ledger_balances b ON b.account_id = a.id AND b.shard = 0
       WHERE a.id = ANY (ARRAY(SELECT DISTINCT m.account_id FROM m)) AND ledger_is_guarded(a.flags)
    ),
    running AS (
      SELECT m.idx, m.checks_debits, m.checks_credits, g.flags AS account_flags,
             g.debits_pending + g.debits_posted + sum(m.dp + m.dpo) OVER w AS debits,
             g.credits_posted + sum(m.cpo) OVER w AS credits_posted,
             g.credits_pending + g.credits_posted + sum(m.cp + m.cpo) OVER w AS credits,
             g.debits_posted + sum(m.dpo) OVER w AS debits_posted
        FROM m
        JOIN guarded g ON g.id = m.account_id
      WINDOW w AS (PARTITION BY m.account_id ORDER BY m.idx ROWS UNBOUNDED PRECEDING)
    )
    SELECT min(r.idx) FROM running r
     WHERE (r.checks_debits AND ledger_debits_must_not_exceed_credits(r.account_flags) AND r.debits > r.credits_posted)
        OR (r.checks_credits AND ledger_credits_must_not_exceed_debits(r.account_flags) AND r.credits > r.debits_posted));
END $$;

-- The first event whose id an earlier event of the batch has, or whose reservation an earlier
-- event resolves, or NULL. (A reservation resolved twice later in the batch comes twice in the
-- plan, with one index: not a repeat.)
CREATE OR REPLACE FUNCTION ledger_plan_first_repeat(p_plan ledger_planned_transfer[]) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT min(d.idx) FROM (
    SELECT p.idx, ledger_resolves_pending(p.flags) AS resolves,
           min(p.idx) OVER (PARTITION BY p.id) AS first_of_id,
           min(p.idx) OVER (PARTITION BY CASE WHEN ledger_resolves_pending(p.flags) THEN p.pending_id END) AS first_resolve
      FROM unnest(p_plan) AS p
  ) AS d
   WHERE d.first_of_id < d.idx OR (d.resolves AND d.first_resolve < d.idx)
$$;

-- Refusals for funds decided from the plan, without running them: a new transfer, alone in its
-- chain, that debits a debits-must-not-exceed-credits account beyond what that account could hold
-- at its place in the batch whichever earlier events apply (every earlier release and credit
-- posted counted, no earlier debit). Event by event it would read 'exceeds_credits' there
-- (ledger_apply_transfer: every other check passes, its id is not stored, and its credit account
-- has no limit to answer first), and the chains that resolve it 'pending_transfer_not_found' on
-- their first event and 'linked_event_failed' on the rest. None of them writes anything, so the rest
-- of the batch applies as if they were not in it: they are answered here and left out of the plan,
-- instead of cutting the batch and planning its rest again (docs/design.md#hot-decided-refusals).
-- Conservative: an event it cannot decide so (in a chain, an id stored, a resolve of it that is
-- not first in its chain or that is itself resolved) is left to the plan's own refusal. Needs a
-- plan with one row per event (no id or resolve repeated). The answers, by the plan's indexes.
CREATE OR REPLACE FUNCTION ledger_plan_decided_refusals(p_plan ledger_planned_transfer[], p_unapplied integer[])
RETURNS TABLE (idx integer, result text)
LANGUAGE sql STABLE AS $$
  WITH p AS (
    -- The chain an event belongs to: how many chains ended before it.
    SELECT e.*, coalesce(count(*) FILTER (WHERE NOT ledger_is_linked(e.flags))
                           OVER (ORDER BY e.idx ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS chain
      FROM unnest(p_plan) AS e
  ),
  chains AS (
    SELECT p.chain, min(p.idx) AS first, count(*) AS members,
           count(*) FILTER (WHERE ledger_resolves_pending(p.flags)) AS resolves,
           ledger_is_linked((array_agg(p.flags ORDER BY p.idx DESC))[1]) AS open
      FROM p GROUP BY p.chain
  ),
  m AS (SELECT * FROM ledger_plan_movements(p_plan)),
  guarded AS (
    SELECT a.id, b.debits_pending + b.debits_posted - b.credits_posted AS exposure
      FROM ledger_accounts a
      JOIN ledger_balances b ON b.account_id = a.id AND b.shard = 0
     WHERE a.id = ANY (ARRAY(SELECT DISTINCT m.account_id FROM m)) AND ledger_debits_must_not_exceed_credits(a.flags)
  ),
  -- The least exposure a new transfer's debit can meet: an earlier event counts only when it
  -- lowers it: a credit posted, or the release of a stored reservation (all of it: an expiry
  -- releases what a post would partly post). A reservation made earlier in the batch and resolved
  -- before this transfer raises the exposure by at least what its resolve releases, so neither counts.
  least_exposure AS (
    SELECT m.idx, g.exposure + m.dp + m.dpo
             + coalesce(sum(CASE WHEN ledger_resolves_pending(e.flags) AND NOT e.resolves_stored THEN 0 ELSE least(m.dp, 0) END
                            + least(m.dpo, 0) - greatest(m.cpo, 0))
                          OVER (PARTITION BY m.account_id ORDER BY m.idx ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
             AS exposure, m.checks_debits
      FROM m JOIN guarded g ON g.id = m.account_id JOIN p e ON e.idx = m.idx
  ),
  candidates AS (
    SELECT p.idx, p.id FROM p
      JOIN least_exposure x ON x.idx = p.idx AND x.checks_debits AND x.exposure > 0
      JOIN chains c ON c.chain = p.chain AND c.members = 1 AND NOT c.open
      JOIN ledger_accounts credited ON credited.id = p.credit_account_id
     WHERE p.idx <> ALL (p_unapplied) AND NOT ledger_credits_must_not_exceed_debits(credited.flags)
       AND NOT EXISTS (SELECT 1 FROM ledger_transfers t WHERE t.id = p.id)
  ),
  dependents AS (
    SELECT c.idx AS refused, d.idx, d.id, d.chain FROM candidates c
      JOIN p d ON ledger_resolves_pending(d.flags) AND d.pending_id = c.id
  ),
  decided AS (
    SELECT c.idx FROM candidates c
     WHERE NOT EXISTS (
       SELECT 1 FROM dependents d JOIN chains ch ON ch.chain = d.chain
        WHERE d.refused = c.idx
          AND (ch.first <> d.idx OR ch.open OR ch.resolves > 1 OR d.idx = ANY (p_unapplied)
               OR EXISTS (SELECT 1 FROM ledger_transfers t WHERE t.id = d.id)
               OR EXISTS (SELECT 1 FROM p member JOIN p o ON ledger_resolves_pending(o.flags) AND o.pending_id = member.id
                           WHERE member.chain = d.chain)))
  )
  SELECT c.idx, 'exceeds_credits' FROM decided c
  UNION ALL
  SELECT member.idx, CASE WHEN member.idx = d.idx THEN 'pending_transfer_not_found' ELSE 'linked_event_failed' END
    FROM decided c JOIN dependents d ON d.refused = c.idx JOIN p member ON member.chain = d.chain
$$;

-- The batch as it would be stored, and the first event from which it does not apply as planned
-- (NULL when it all does): one refused (ledger_plan_events), repeating an id or a resolve (those
-- read 'exists' or already posted, event by event), breaking a limit, or the last of a chain left
-- open. Every event before that one applies as planned; the plan of the events after it is not
-- exact (it counts the movements of the refused, and a post of a refused reservation reads as
-- applying). An event already stored is found by ledger_write_plan. decided: the answers of the
-- refusals ledger_plan_decided_refusals decides ([{index, result}], by index), which are left out
-- of the plan and of refused_at; worked out only when the batch does not apply in full, so a batch
-- that does pays nothing for it. (The function that answered the plan or NULL is dropped, and this
-- one's earlier version without decided.)
DROP FUNCTION IF EXISTS ledger_plan_batch(jsonb, timestamptz);
DROP FUNCTION IF EXISTS ledger_plan_until_refusal(jsonb, timestamptz);
CREATE FUNCTION ledger_plan_until_refusal(p_batch jsonb, p_now timestamptz, OUT plan ledger_planned_transfer[],
                                          OUT refused_at integer, OUT decided jsonb)
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer := jsonb_array_length(p_batch);
  v_once boolean;
  v_unapplied integer[];
  v_left_out integer[];
BEGIN
  decided := '[]';
  SELECT coalesce(array_agg(p.idx) FILTER (WHERE p.applies IS NOT TRUE), '{}'),
         count(DISTINCT p.id) = count(*) AND count(*) = v_count
           AND count(DISTINCT p.pending_id) FILTER (WHERE p.resolves) = count(p.pending_id) FILTER (WHERE p.resolves),
         array_agg(ROW(
           p.idx, p.id, p.debit_account_id, p.credit_account_id, p.amount, p.pending_id, p.timeout_s,
           p.ledger, p.code, p.flags, p.pending_status, p.released, p.resolves_stored,
           ledger_pending_delta(p.flags, p.amount, p.released), ledger_posted_delta(p.flags, p.amount)
         )::ledger_planned_transfer ORDER BY p.idx)
    INTO v_unapplied, v_once, plan
    FROM ledger_plan_events(p_batch, p_now) AS p;
  refused_at := (SELECT min(u) FROM unnest(v_unapplied) AS u);
  IF ledger_is_linked(ledger_event_flags(p_batch->-1)) THEN
    refused_at := least(refused_at, v_count - 1);
  END IF;
  IF NOT v_once THEN
    refused_at := least(refused_at, ledger_plan_first_repeat(plan));
  END IF;
  refused_at := least(refused_at, ledger_plan_first_over_limit(plan));
  IF refused_at IS NULL OR NOT v_once THEN
    RETURN;
  END IF;

  SELECT coalesce(jsonb_agg(jsonb_build_object('index', d.idx, 'result', d.result) ORDER BY d.idx), '[]'), array_agg(d.idx)
    INTO decided, v_left_out
    FROM ledger_plan_decided_refusals(plan, v_unapplied) AS d;
  IF v_left_out IS NULL THEN
    RETURN;
  END IF;
  plan := ARRAY(SELECT ROW(p.*)::ledger_planned_transfer FROM unnest(plan) AS p WHERE p.idx <> ALL (v_left_out) ORDER BY p.idx);
  -- Decided chains are closed, so a chain left open is still the batch's last.
  refused_at := (SELECT min(u) FROM unnest(v_unapplied) AS u WHERE u <> ALL (v_left_out));
  IF ledger_is_linked(ledger_event_flags(p_batch->-1)) THEN
    refused_at := least(refused_at, v_count - 1);
  END IF;
  refused_at := least(refused_at, ledger_plan_first_over_limit(plan));
END $$;

-- The decided answers (ledger_plan_until_refusal's decided) of a batch planned from p_offset on,
-- moved to the whole batch's indexes, those below p_end only.
CREATE OR REPLACE FUNCTION ledger_decided_below(p_decided jsonb, p_offset integer, p_end integer) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(jsonb_agg(jsonb_build_object('index', (d.x->>'index')::integer + p_offset, 'result', d.x->'result') ORDER BY d.ord), '[]')
    FROM jsonb_array_elements(p_decided) WITH ORDINALITY AS d (x, ord)
   WHERE (d.x->>'index')::integer + p_offset < p_end
$$;

-- The plan of a batch's first p_end events on their own, cut from the plan of a longer batch that
-- applies as planned up to p_end at least. Only a reservation's stored status depends on later
-- events (a post or void after the cut leaves it pending), and a reservation resolved twice after
-- the cut comes twice.
CREATE OR REPLACE FUNCTION ledger_plan_prefix(p_plan ledger_planned_transfer[], p_end integer) RETURNS ledger_planned_transfer[]
LANGUAGE sql IMMUTABLE AS $$
  WITH prefix AS (
    SELECT DISTINCT ON (p.idx) p.* FROM unnest(p_plan) AS p WHERE p.idx < p_end ORDER BY p.idx
  )
  SELECT array_agg(ROW(
           p.idx, p.id, p.debit_account_id, p.credit_account_id, p.amount, p.pending_id, p.timeout_s,
           p.ledger, p.code, p.flags,
           CASE WHEN ledger_is_pending(p.flags) THEN
             coalesce(CASE WHEN ledger_posts_pending(r.flags) THEN 'posted' WHEN ledger_voids_pending(r.flags) THEN 'voided' END, 'pending')
           END,
           p.released, p.resolves_stored, p.pending_delta, p.posted_delta
         )::ledger_planned_transfer ORDER BY p.idx)
    FROM prefix p
    -- Within a prefix that applies, a reservation is resolved once at most.
    LEFT JOIN prefix r ON ledger_is_pending(p.flags) AND ledger_resolves_pending(r.flags)
                      AND r.pending_id = p.id AND r.idx > p.idx
$$;
