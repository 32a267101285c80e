-- The ledger's flags by name. These are the only place the SQL spells a flag's bit; every other
-- function asks these. The bits are TigerBeetle's, as src/ledger/ledger.ts names them
-- (TransferFlags, AccountFlags), and test/integration/sql-functions.test.ts checks each predicate
-- against those constants for every combination of bits.
--
-- IMMUTABLE LANGUAGE sql functions of one expression: the planner inlines them, in queries and in
-- PL/pgSQL expressions alike, so `ledger_is_pending(flags)` costs what `flags & 2 <> 0` costs.

-- An event's flags as given; an omitted flags field means none.
CREATE OR REPLACE FUNCTION ledger_event_flags(e jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT coalesce((e->>'flags')::integer, 0) $$;

-- TransferFlags.linked (AccountFlags.linked is the same bit): this event and the next apply
-- together; the last of a chain has it unset.
CREATE OR REPLACE FUNCTION ledger_is_linked(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_flags & 1 <> 0 $$;

-- TransferFlags.pending: a reservation, until posted, voided or expired.
CREATE OR REPLACE FUNCTION ledger_is_pending(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_flags & 2 <> 0 $$;

-- TransferFlags.postPendingTransfer.
CREATE OR REPLACE FUNCTION ledger_posts_pending(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_flags & 4 <> 0 $$;

-- TransferFlags.voidPendingTransfer.
CREATE OR REPLACE FUNCTION ledger_voids_pending(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_flags & 8 <> 0 $$;

-- A post or a void: names a pending transfer, may omit what that transfer decides.
CREATE OR REPLACE FUNCTION ledger_resolves_pending(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT ledger_posts_pending(p_flags) OR ledger_voids_pending(p_flags) $$;

-- More than one of pending, post and void: TigerBeetle's flags_are_mutually_exclusive.
CREATE OR REPLACE FUNCTION ledger_transfer_flags_clash(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT ledger_is_pending(p_flags)::integer + ledger_posts_pending(p_flags)::integer
         + ledger_voids_pending(p_flags)::integer > 1
$$;

-- What a transfer is, by its flags: 'pending' (a reservation), 'post', 'void' or 'single' (posted
-- at once); null when they clash. For readers that check a stored transfer's kind (the audit).
CREATE OR REPLACE FUNCTION ledger_transfer_kind(p_flags integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN ledger_transfer_flags_clash(p_flags) THEN NULL
    WHEN ledger_is_pending(p_flags) THEN 'pending'
    WHEN ledger_posts_pending(p_flags) THEN 'post'
    WHEN ledger_voids_pending(p_flags) THEN 'void'
    ELSE 'single'
  END
$$;

-- AccountFlags.debitsMustNotExceedCredits: debits pending + debits posted never exceed credits
-- posted (a wallet that must not be overdrawn).
CREATE OR REPLACE FUNCTION ledger_debits_must_not_exceed_credits(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_flags & 2 <> 0 $$;

-- AccountFlags.creditsMustNotExceedDebits: the mirror image.
CREATE OR REPLACE FUNCTION ledger_credits_must_not_exceed_debits(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_flags & 4 <> 0 $$;

-- A guarded account: one of the two limits, checked on every movement that could break it.
CREATE OR REPLACE FUNCTION ledger_is_guarded(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT ledger_debits_must_not_exceed_credits(p_flags) OR ledger_credits_must_not_exceed_debits(p_flags)
$$;

-- Both limits at once: TigerBeetle's flags_are_mutually_exclusive for accounts.
CREATE OR REPLACE FUNCTION ledger_account_flags_clash(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT ledger_debits_must_not_exceed_credits(p_flags) AND ledger_credits_must_not_exceed_debits(p_flags)
$$;

-- The limit a debit, or a credit, of an account must respect: its flags reduced to that one
-- limit, or 0 (ledger_bump's p_guard).
CREATE OR REPLACE FUNCTION ledger_debit_guard(p_account_flags integer) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT p_account_flags & 2 $$;

CREATE OR REPLACE FUNCTION ledger_credit_guard(p_account_flags integer) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT p_account_flags & 4 $$;

-- AccountFlags.history: the account keeps the balance after each posting (13-history.sql). Set on
-- guarded accounts only, whose one balance row, locked for the whole batch, orders their postings.
CREATE OR REPLACE FUNCTION ledger_keeps_history(p_flags integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_flags & 8 <> 0 $$;
