-- The background workers: the PSP worker's claim, lease and schedule on the intent row,
-- and the balance monitor's baseline.

-- psp_state values: the PSP sub-states (docs/rules.md), plus the two ends the worker leaves an intent in
-- (FAILED, MANUAL_REVIEW). NULL for every channel but PSPX_TRANSFER.
ALTER TABLE intents ADD CONSTRAINT intents_psp_state_check CHECK (psp_state IS NULL OR psp_state IN (
  'NEW', 'QUERY_PENDING', 'QUERIED', 'CONFIRM_PENDING', 'INQUIRING', 'CONFIRMED', 'FAILED', 'MANUAL_REVIEW'));

ALTER TABLE intents
  -- The provider's answer to the inquiry; the confirm needs it, also after a restart from QUERIED.
  ADD COLUMN psp_inquiry_ref text,
  -- A claim: the worker that holds it (a token per claim) and until when. Every state write of the
  -- worker checks the token, so a worker whose lease was taken over can no longer write.
  ADD COLUMN psp_lease_owner uuid,
  ADD COLUMN psp_lease_until timestamptz,
  -- Not before: spaces status inquiries and retries after an unknown answer.
  ADD COLUMN psp_next_at timestamptz NOT NULL DEFAULT now();

-- The PSP worker's queue: PSPX intents the worker still has to drive.
CREATE INDEX intents_psp_due_idx ON intents (psp_next_at, created_at)
  WHERE status = 'AUTHORIZED' AND channel = 'PSPX_TRANSFER'
    AND psp_state IN ('NEW', 'QUERY_PENDING', 'QUERIED', 'CONFIRM_PENDING', 'INQUIRING');

-- The balance monitor compares the provider's partner balance with the ledger's nostro. The two
-- differ by what was prefunded outside the ledger; the baseline is that amount, captured once
-- (partner balance + nostro balance at a moment without payouts in flight) and kept across
-- restarts and instances. Deleting the row makes the next reading capture it again.
CREATE TABLE balance_baselines (
  provider text PRIMARY KEY,
  nostro_account varchar(100) NOT NULL,
  baseline bigint NOT NULL,
  captured_at timestamptz NOT NULL DEFAULT now()
);
