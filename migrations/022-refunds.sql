-- Refunds (docs/rules.md R57): money put back along a settled intent (the original), each refund a
-- row of its own. The original's intents row is never written by a refund: what remains refundable
-- is kept in refund_totals, one row per original, created by its first refund.

CREATE TABLE IF NOT EXISTS refunds (
  id uuid PRIMARY KEY,
  service_id varchar(50) NOT NULL,
  idempotency_key uuid NOT NULL,
  request_fingerprint text NOT NULL,
  intent_id uuid NOT NULL REFERENCES intents (id),
  amount bigint NOT NULL CHECK (amount > 0),
  -- The fees returned with it (refundFees), per split of the original in the original's order.
  fee_amount bigint NOT NULL DEFAULT 0 CHECK (fee_amount >= 0),
  fee_shares bigint[] NOT NULL DEFAULT '{}',
  refund_fees boolean NOT NULL,
  currency char(3) NOT NULL,
  status text NOT NULL CHECK (status IN ('SETTLED', 'FAILED')),
  reason varchar(100) NOT NULL,
  failure_reason text,
  requested_by_user_id bigint NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- The ledger transfers that carry it: the original is named by every one of them through this row.
  transfer_ids uuid[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (service_id, idempotency_key),
  CHECK ((status = 'FAILED') = (failure_reason IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS refunds_intent_idx ON refunds (intent_id, created_at, id);

-- The one row a refund of an original locks and changes in its transaction: the conditional update
-- that takes `amount` off `refundable - refunded` is the race's only decision.
CREATE TABLE IF NOT EXISTS refund_totals (
  original_id uuid PRIMARY KEY REFERENCES intents (id),
  -- What the to-account was credited by the original: amount − post fee.
  refundable bigint NOT NULL CHECK (refundable > 0),
  refunded bigint NOT NULL DEFAULT 0,
  -- Fees returned so far, per split of the original, in the original's order.
  fees_returned bigint[] NOT NULL DEFAULT '{}',
  CHECK (refunded >= 0 AND refunded <= refundable)
);

-- A history row of a refund carries the original's intent_id and names the refund; the original's
-- own rows name none. Rows are unique per account and direction within an intent's own rows, and
-- within a refund's: an original refunded twice has two debits of its to-account.
ALTER TABLE transactions ADD COLUMN IF NOT EXISTS refund_id uuid;
ALTER TABLE transactions DROP CONSTRAINT IF EXISTS transactions_intent_id_account_name_direction_key;
CREATE UNIQUE INDEX IF NOT EXISTS transactions_intent_leg_idx ON transactions (intent_id, account_name, direction)
  WHERE refund_id IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS transactions_refund_leg_idx ON transactions (refund_id, account_name, direction)
  WHERE refund_id IS NOT NULL;

-- A refund enters the event feed as an event of its original (intent_id, operation_type) that
-- names it; the intents' rows have none. Written by the refund's own transaction, as the intents'
-- rows are by theirs, with its place fixed then (migrations/020): its seq drawn from the audit
-- log's sequence, so no two rows of one transaction share a place.
ALTER TABLE event_feed ADD COLUMN IF NOT EXISTS refund_id uuid;
