-- A refusal for funds known before the batch is sent. A caller that is about to send a batch of
-- payments (src/domain/intents/commit/intent-commit.ts, by intent_open_batch) asks, for the one
-- new transfer that opens each payment, whether the ledger would answer it 'exceeds_credits'
-- whichever of the batch's earlier events apply: then that payment never enters the ledger call,
-- and the batch is planned and written as one that applies (a batch holding refusals cost 1.5-1.9
-- times a plain one: docs/perf-log/2026-11.md, "what a refused payment costs").
--
-- Event by event (ledger_apply_transfer, ledger_apply_new) such a transfer reads 'exceeds_credits'
-- when every other check passes (its id not stored, the flags, both accounts found on its ledger,
-- its credit account without a limit of its own to answer first) and its debit account, which
-- must not let debits exceed credits, would:
--   debits_pending + debits_posted + amount > credits_posted
-- at its place in the batch. The earlier events can only raise the left side (a debit, or a
-- reservation and its release, which releases at most what it reserved) or raise credits_posted
-- by at most what they credit the account, pending or posted. So with p_events' credited_before
-- (every amount the batch's earlier events credit the debit account, whatever becomes of them)
-- taken off the left side, a transfer still over the limit is refused whatever they do. The
-- caller vouches that no earlier event releases a reservation stored before the batch, which
-- this bound does not see.
--
-- p_events: one element per payment, null or a transfer event as ledger_create_transfers reads it
-- with credited_before added. Answers true for the elements surely refused, false for the rest
-- (null, undecided, or within funds), in order. Read without the balance rows' locks: a concurrent
-- debit only lets a refusal through to the ledger call, which answers it as before; a concurrent
-- credit committed after this read counts as one committed after the payment was refused.
--
-- Nearly every payment of a batch is within funds: each pays one look-up of its payer's balance
-- row; the accounts and the transfer id are read only for those over the bound.
CREATE OR REPLACE FUNCTION ledger_surely_exceeds_credits(p_events jsonb) RETURNS boolean[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN ARRAY(
    WITH e AS (
      SELECT j.ord, (j.x->>'id')::uuid AS id, (j.x->>'debit_account_id')::uuid AS debit,
             (j.x->>'credit_account_id')::uuid AS credit, (j.x->>'amount')::bigint AS amount,
             (j.x->>'pending_id')::uuid AS pending_id, coalesce((j.x->>'timeout_s')::integer, 0) AS timeout_s,
             coalesce((j.x->>'ledger')::integer, 0) AS ledger, ledger_event_flags(j.x) AS flags,
             coalesce((j.x->>'credited_before')::bigint, 0) AS credited_before
        FROM jsonb_array_elements(p_events) WITH ORDINALITY AS j (x, ord)
    ),
    -- Look-ups by primary key per payment (OFFSET 0 keeps each a subquery run per row): joined,
    -- the planner, expecting a hundred rows, could read a whole table.
    over AS (
      SELECT e.* FROM e
        JOIN LATERAL (SELECT s.debits_pending, s.debits_posted, s.credits_posted FROM ledger_balances s
                       WHERE s.account_id = e.debit AND s.shard = 0 OFFSET 0) AS b ON true
       WHERE e.amount > 0 AND b.debits_pending + b.debits_posted + e.amount - e.credited_before > b.credits_posted
    ),
    refused AS (
      SELECT o.ord FROM over o
        JOIN LATERAL (SELECT a.ledger, a.flags FROM ledger_accounts a WHERE a.id = o.debit OFFSET 0) AS d ON true
        JOIN LATERAL (SELECT a.ledger, a.flags FROM ledger_accounts a WHERE a.id = o.credit OFFSET 0) AS c ON true
       WHERE o.debit <> o.credit AND o.pending_id IS NULL AND o.ledger <> 0
         AND NOT ledger_transfer_flags_clash(o.flags) AND NOT ledger_resolves_pending(o.flags)
         AND (o.timeout_s = 0 OR ledger_is_pending(o.flags))
         AND d.ledger = o.ledger AND c.ledger = o.ledger
         AND ledger_debits_must_not_exceed_credits(d.flags) AND NOT ledger_credits_must_not_exceed_debits(c.flags)
         AND NOT EXISTS (SELECT 1 FROM ledger_transfers t WHERE t.id = o.id)
    )
    SELECT r.ord IS NOT NULL FROM e LEFT JOIN refused r ON r.ord = e.ord ORDER BY e.ord);
END $$;
