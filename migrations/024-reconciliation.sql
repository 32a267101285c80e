-- Reconciliation with the provider (docs/rules.md R59): each run of a statement date, the
-- statement's lines as the run read them, and its breaks. The matching itself is sql/reconciliation/.

CREATE TABLE IF NOT EXISTS reconciliation_runs (
  id uuid PRIMARY KEY,
  statement_date char(8) NOT NULL,
  status text NOT NULL CHECK (status IN ('RUNNING', 'BALANCED', 'BREAKS')),
  -- Who asked: a service id, 'admin-token', or 'workers' for the daily run.
  requested_by varchar(100) NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  line_count bigint,
  matched bigint,
  break_count bigint,
  resolved bigint,
  opening_balance bigint,
  closing_balance bigint,
  provider_movement bigint,
  nostro_movement bigint
);
-- One run of a date at a time: a second one, from another instance or an operator, is refused.
CREATE UNIQUE INDEX IF NOT EXISTS reconciliation_runs_one_running_idx ON reconciliation_runs (statement_date) WHERE status = 'RUNNING';
CREATE INDEX IF NOT EXISTS reconciliation_runs_started_idx ON reconciliation_runs (started_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS reconciliation_runs_date_idx ON reconciliation_runs (statement_date, started_at DESC);

-- A statement's lines, staged as they stream in and kept as the run's evidence. The key is the
-- rule "a line is used at most once": one row per line, naming at most one intent.
CREATE TABLE IF NOT EXISTS reconciliation_statement_lines (
  run_id uuid NOT NULL,
  line_id varchar(100) NOT NULL,
  intent_id uuid,
  type text NOT NULL CHECK (type IN ('PAYOUT', 'RETURN', 'FEE', 'ADJUSTMENT')),
  amount bigint NOT NULL CHECK (amount > 0),
  value_date char(8) NOT NULL,
  PRIMARY KEY (run_id, line_id)
);

-- What a run found that needs a person: its breaks, and the MATCHED payouts it resolved. A line
-- has at most one item, and a payout at most one (MISSING_HERE and UNKNOWN_LINE name no payout of ours).
CREATE TABLE IF NOT EXISTS reconciliation_items (
  run_id uuid NOT NULL,
  seq bigint GENERATED ALWAYS AS IDENTITY,
  outcome text NOT NULL CHECK (outcome IN ('MATCHED', 'MISSING_AT_PROVIDER', 'MISSING_HERE', 'AMOUNT_MISMATCH', 'STATUS_MISMATCH', 'UNKNOWN_LINE')),
  intent_id uuid,
  line_id varchar(100),
  line_type text,
  amount_here bigint,
  amount_at_provider bigint,
  -- A MANUAL_REVIEW payout the statement shows paid: the run resolved it CONFIRMED.
  resolved boolean NOT NULL DEFAULT false,
  PRIMARY KEY (run_id, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS reconciliation_items_line_idx ON reconciliation_items (run_id, line_id);
CREATE UNIQUE INDEX IF NOT EXISTS reconciliation_items_payout_idx ON reconciliation_items (run_id, intent_id)
  WHERE outcome IN ('MATCHED', 'MISSING_AT_PROVIDER', 'AMOUNT_MISMATCH', 'STATUS_MISMATCH');
CREATE INDEX IF NOT EXISTS reconciliation_items_breaks_idx ON reconciliation_items (run_id, seq) WHERE outcome <> 'MATCHED';

-- The payouts a statement date expects, without reading every intent.
CREATE INDEX IF NOT EXISTS intents_pspx_settlement_date_idx ON intents (settlement_date)
  WHERE channel = 'PSPX_TRANSFER' AND settlement_date IS NOT NULL;
