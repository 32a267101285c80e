-- The service's own records. Money lives in the ledger tables (001); these tables say why it moved.

CREATE TABLE accounts (
  id bigserial UNIQUE,
  account_name varchar(100) PRIMARY KEY,
  ledger_account_id uuid NOT NULL UNIQUE,
  ledger_number integer NOT NULL DEFAULT 1,
  account_type text NOT NULL CHECK (account_type IN ('USER_WALLET', 'TRANSIT', 'REVENUE', 'NOSTRO',
    'MERCHANT_WALLET', 'MERCHANT_SETTLEMENT', 'AGENT_WALLET', 'AGENT_SETTLEMENT', 'SERVICE_ACCOUNT', 'EQUITY')),
  user_id bigint,
  currency char(3) NOT NULL DEFAULT 'THB',
  pspx_wallet_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- Ownership (and so the DEBIT/CREDIT side of limit rules) comes from user_id alone.
  CHECK ((account_type IN ('TRANSIT', 'REVENUE', 'NOSTRO', 'EQUITY')) = (user_id IS NULL))
);
CREATE INDEX accounts_user_idx ON accounts (user_id) WHERE user_id IS NOT NULL;

CREATE TABLE service_keys (
  service_id varchar(50) PRIMARY KEY,
  active boolean NOT NULL DEFAULT true,
  permissions jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE routes (
  id bigserial PRIMARY KEY,
  operation_type varchar(50) NOT NULL,
  min_amount bigint NOT NULL DEFAULT 1 CHECK (min_amount >= 0),
  max_amount bigint CHECK (max_amount IS NULL OR max_amount >= min_amount),
  channel text NOT NULL CHECK (channel IN ('INTERNAL_P2P', 'PSPX_TRANSFER', 'MERCHANT_INVOICE', 'SERVICE_TRANSFER', 'ADMIN')),
  priority integer NOT NULL DEFAULT 0,
  active boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX routes_lookup_idx ON routes (operation_type, priority) WHERE active;

CREATE TABLE fee_rules (
  id bigserial PRIMARY KEY,
  name varchar(100) NOT NULL,
  operation_type varchar(50) NOT NULL,
  expression text NOT NULL,
  timing text NOT NULL DEFAULT 'PRE' CHECK (timing IN ('PRE', 'POST')),
  tags_include text[] NOT NULL DEFAULT '{}',
  tags_exclude text[] NOT NULL DEFAULT '{}',
  priority integer NOT NULL DEFAULT 0,
  active boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX fee_rules_lookup_idx ON fee_rules (operation_type, priority, id) WHERE active;

CREATE TABLE limit_rules (
  id bigserial PRIMARY KEY,
  name varchar(100) NOT NULL,
  operation_type varchar(50) NOT NULL DEFAULT '*',
  direction text NOT NULL CHECK (direction IN ('DEBIT', 'CREDIT', 'BOTH')),
  time_window text NOT NULL CHECK (time_window IN ('DAILY', 'MONTHLY', 'PER_TRANSACTION')),
  limit_type text NOT NULL CHECK (limit_type IN ('AMOUNT', 'COUNT')),
  limit_value bigint NOT NULL CHECK (limit_value >= 0),
  currency char(3) NOT NULL DEFAULT 'THB',
  active boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE auth_policies (
  id bigserial PRIMARY KEY,
  scope varchar(80) NOT NULL,
  condition jsonb NOT NULL DEFAULT '{}',
  required_step_up varchar(20) NOT NULL CHECK (required_step_up IN ('NONE', 'PIN', 'BIOMETRIC', 'OTP', 'KYC_UPLIFT', 'BLOCK')),
  reason_code varchar(50) NOT NULL,
  priority integer NOT NULL DEFAULT 100,
  active boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX auth_policies_scope_idx ON auth_policies (scope, priority) WHERE active;

CREATE TABLE intents (
  id uuid PRIMARY KEY,
  idempotency_key uuid NOT NULL,
  service_id varchar(50) NOT NULL,
  -- What the request asked for, to tell an honest replay from a reused key (docs/rules.md R14).
  request_fingerprint text NOT NULL,
  user_id bigint NOT NULL,
  operation_type varchar(50) NOT NULL,
  channel text NOT NULL,
  from_account_name varchar(100),
  to_account_name varchar(100) NOT NULL,
  -- Owners of the two accounts (null for system accounts): limit rules and policies count by them.
  from_user_id bigint,
  to_user_id bigint,
  external_ref varchar(100),
  amount bigint NOT NULL CHECK (amount > 0),
  pre_fee_amount bigint NOT NULL DEFAULT 0 CHECK (pre_fee_amount >= 0),
  post_fee_amount bigint NOT NULL DEFAULT 0 CHECK (post_fee_amount >= 0),
  fee_splits jsonb NOT NULL DEFAULT '[]',
  currency char(3) NOT NULL DEFAULT 'THB',
  status text NOT NULL CHECK (status IN ('CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLING', 'SETTLED', 'FAILED',
    'MANUAL_REVIEW', 'CANCELED', 'EXPIRED')),
  psp_state text,
  psp_inquiries integer NOT NULL DEFAULT 0,
  failure_reason text,
  metadata jsonb NOT NULL DEFAULT '{}',
  from_name varchar(255),
  to_name varchar(255),
  comment varchar(500),
  live boolean NOT NULL DEFAULT false,
  settlement_date char(8),
  version integer NOT NULL DEFAULT 0,
  expires_at timestamptz,
  reserved_at timestamptz,
  canceled_at timestamptz,
  redeemed_at timestamptz,
  cancel_reason varchar(50),
  qr_signature bytea CHECK (qr_signature IS NULL OR length(qr_signature) = 16),
  issued_by_user_id bigint,
  redeemed_by_user_id bigint,
  confirm_idempotency_key uuid,
  transfer_ids uuid[] NOT NULL DEFAULT '{}',
  ledger_number integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (idempotency_key, service_id)
);
CREATE INDEX intents_service_created_idx ON intents (service_id, created_at DESC);
CREATE INDEX intents_in_flight_idx ON intents (status, channel, created_at) WHERE status IN ('CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLING', 'MANUAL_REVIEW');
CREATE INDEX intents_invoice_expiry_idx ON intents (expires_at) WHERE status = 'CREATED' AND operation_type = 'INVOICE_PAYMENT';
-- Limit usage (docs/rules.md R21) counts settled and in-flight intents per owner and window.
CREATE INDEX intents_from_user_idx ON intents (from_user_id, created_at) WHERE status IN ('AUTHORIZED', 'SETTLED');
CREATE INDEX intents_to_user_idx ON intents (to_user_id, created_at) WHERE status IN ('AUTHORIZED', 'SETTLED');

CREATE TABLE intent_events (
  id bigserial PRIMARY KEY,
  intent_id uuid NOT NULL REFERENCES intents (id),
  status_from text,
  status_to text NOT NULL,
  reason text,
  payload jsonb,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX intent_events_intent_idx ON intent_events (intent_id, created_at, id);

-- The audit log is append-only: the database itself refuses to change or remove a row.
CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;
CREATE TRIGGER intent_events_append_only BEFORE UPDATE OR DELETE ON intent_events
  FOR EACH ROW EXECUTE FUNCTION refuse_change();

CREATE TABLE transactions (
  id bigserial PRIMARY KEY,
  intent_id uuid NOT NULL REFERENCES intents (id),
  account_name varchar(100) NOT NULL,
  -- The owner of the account at the time, so user-level limits need no join.
  user_id bigint,
  operation_type varchar(50) NOT NULL,
  direction text NOT NULL CHECK (direction IN ('DEBIT', 'CREDIT')),
  amount bigint NOT NULL,
  fee_amount bigint NOT NULL DEFAULT 0,
  currency char(3) NOT NULL,
  attributes jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (intent_id, account_name, direction)
);
CREATE INDEX transactions_account_idx ON transactions (account_name, created_at DESC, id DESC);
CREATE INDEX transactions_user_debit_idx ON transactions (user_id, currency, created_at) WHERE direction = 'DEBIT';

CREATE TABLE outbox (
  id bigserial PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('post_pending', 'void_pending')),
  intent_id uuid NOT NULL REFERENCES intents (id),
  payload jsonb NOT NULL DEFAULT '{}',
  attempts integer NOT NULL DEFAULT 0,
  run_at timestamptz NOT NULL DEFAULT now(),
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  done_at timestamptz
);
CREATE INDEX outbox_due_idx ON outbox (run_at, id) WHERE done_at IS NULL;
-- One open job of a kind per intent: a retried resolve cannot queue the same work twice.
CREATE UNIQUE INDEX outbox_open_job_idx ON outbox (intent_id, kind) WHERE done_at IS NULL;

CREATE TABLE admin_changes (
  id bigserial PRIMARY KEY,
  actor text NOT NULL,
  entity text NOT NULL,
  entity_id text,
  action text NOT NULL,
  before jsonb,
  after jsonb,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER admin_changes_append_only BEFORE UPDATE OR DELETE ON admin_changes
  FOR EACH ROW EXECUTE FUNCTION refuse_change();
