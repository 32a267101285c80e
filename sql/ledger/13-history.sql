-- Balance history (docs/rules.md R58, docs/design.md "Balances at a time"): every posting to an
-- account flagged history (ledger_keeps_history) adds a row to ledger_account_history with the
-- balance after it, in the transaction of the posting, one statement per write: the set-based
-- write (ledger_write_plan) and the event-by-event path (ledger_run_events) both call
-- ledger_record_history with what they wrote, in batch order.
--
-- Only posted amounts move the balance that is answered (credits posted minus debits posted), so
-- reservations, voids and expiries write nothing.
--
-- The stamp is clock_timestamp() at the write, after the batch has locked the balance rows of
-- its accounts: a later transaction on the same account stamps after this one committed, so the
-- stamps of one account follow its commit order. It is never earlier than the account's last
-- stamp (a clock stepped back does not reorder a history). The commit check below refuses a
-- transaction whose first stamp is older than ledger_history_commit_bound() when it commits, so
-- no posting becomes visible stamped further back than that: a balance at a time more than 5 s
-- in the past is final.

-- The most a posting's stamp may lie behind its commit. What a reader may call final is this
-- plus the time a COMMIT takes once the check ran (5 s in all, docs/rules.md R58).
CREATE OR REPLACE FUNCTION ledger_history_commit_bound() RETURNS interval
LANGUAGE sql IMMUTABLE AS $$ SELECT interval '2 seconds' $$;

-- The postings of a write (p_plan: transfers as written, in batch order; p_events: the batch they
-- came from, indexed by the plan's idx, for each transfer's user_data_128) on the history accounts,
-- each with the balance after it: the account's last balance_after plus the running sum.
CREATE OR REPLACE FUNCTION ledger_record_history(p_plan ledger_planned_transfer[], p_events jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
BEGIN
  -- For the benchmark's A/B alone (bench/statements.js): a server whose connections set
  -- ledger.history=off writes no history, so one run measures what the history costs. A database
  -- written so no longer replays its histories (the audit says so); never set in service.
  IF current_setting('ledger.history', true) = 'off' THEN
    RETURN;
  END IF;
  INSERT INTO ledger_account_history (account_id, posted_at, seq, transfer_id, intent_id, code, amount, balance_after)
  SELECT m.account_id, greatest(v_now, last.posted_at),
         (SELECT nextval('ledger_history_seq')) + row_number() OVER (ORDER BY m.idx, m.account_id) - 1,
         m.id, (p_events->m.idx->>'user_data_128')::uuid, m.code, m.amount,
         coalesce(last.balance_after, 0) + sum(m.amount) OVER (PARTITION BY m.account_id ORDER BY m.idx ROWS UNBOUNDED PRECEDING)
    FROM (
      SELECT p.idx, p.id, p.code, p.debit_account_id AS account_id, -p.posted_delta AS amount
        FROM unnest(p_plan) AS p WHERE p.posted_delta <> 0
      UNION ALL
      SELECT p.idx, p.id, p.code, p.credit_account_id, p.posted_delta
        FROM unnest(p_plan) AS p WHERE p.posted_delta <> 0
    ) AS m
    JOIN ledger_accounts a ON a.id = m.account_id AND ledger_keeps_history(a.flags)
    LEFT JOIN LATERAL (
      SELECT h.posted_at, h.balance_after FROM ledger_account_history h
       WHERE h.account_id = m.account_id
       ORDER BY h.posted_at DESC, h.seq DESC
       LIMIT 1
    ) AS last ON true
   ORDER BY m.idx, m.account_id;
END $$;

-- The event-by-event path's history: the transfers it applied (p_applied, in batch order) read
-- back as stored, with their index in the batch (p_from to p_to).
CREATE OR REPLACE FUNCTION ledger_record_applied_history(p_batch jsonb, p_from integer, p_to integer, p_applied uuid[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_applied ledger_planned_transfer[];
BEGIN
  SELECT array_agg(ROW(
           ev.idx, t.id, t.debit_account_id, t.credit_account_id, t.amount, t.pending_id, t.timeout_s, t.ledger,
           t.code, t.flags, t.pending_status, 0, false, 0, ledger_posted_delta(t.flags, t.amount)
         )::ledger_planned_transfer ORDER BY ev.idx)
    INTO v_applied
    FROM (SELECT DISTINCT ON (e.id) e.id, e.idx
            FROM (SELECT (p_batch->i->>'id')::uuid AS id, i AS idx FROM generate_series(p_from, p_to) AS i) AS e
           WHERE e.id = ANY (p_applied)
           ORDER BY e.id, e.idx) AS ev
    JOIN ledger_transfers t ON t.id = ev.id
   WHERE ledger_posted_delta(t.flags, t.amount) <> 0;
  IF v_applied IS NOT NULL THEN
    PERFORM ledger_record_history(v_applied, p_batch);
  END IF;
END $$;

-- At COMMIT: the first history row of each write statement (seq a multiple of 16384, see
-- migrations/023) is the oldest stamp of that write; a transaction that reaches its COMMIT more
-- than the bound after it is refused and rolls back whole, so that no balance in the past moves.
CREATE OR REPLACE FUNCTION ledger_history_commit_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF clock_timestamp() - NEW.posted_at > ledger_history_commit_bound() THEN
    RAISE EXCEPTION 'ledger: a posting stamped % reached its commit at %, more than % later', NEW.posted_at,
      clock_timestamp(), ledger_history_commit_bound()
      USING ERRCODE = 'LDG02';
  END IF;
  RETURN NULL;
END $$;

-- Written as pg_get_triggerdef prints it, which the SQL sources' test compares.
DROP TRIGGER IF EXISTS ledger_history_commit_check ON ledger_account_history;
CREATE CONSTRAINT TRIGGER ledger_history_commit_check AFTER INSERT ON ledger_account_history
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((new.seq % (16384)::bigint) = 0))
  EXECUTE FUNCTION ledger_history_commit_check();

-- The balance of an account at a time: its last balance_after stamped at or before p_at (0 before
-- its first posting), one descent of the history's primary key. Meant for accounts with history.
-- PL/pgSQL, not SQL: a SQL function with a subquery is not inlined, and PostgreSQL plans its body
-- again at every call (~1 ms, four times the descent); PL/pgSQL keeps the plan for the session.
CREATE OR REPLACE FUNCTION ledger_balance_at(p_account uuid, p_at timestamptz) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN coalesce((SELECT h.balance_after FROM ledger_account_history h
                    WHERE h.account_id = p_account AND h.posted_at <= p_at
                    ORDER BY h.posted_at DESC, h.seq DESC
                    LIMIT 1), 0);
END $$;
