-- Webhooks (docs/OPERATIONS.md, Webhooks): every event of the feed of a service whose key has
-- permissions.webhook is POSTed to that URL until the receiver acknowledges it.

-- How far each service's feed has been taken into deliveries. Taking a page of events and moving
-- the cursor commit together, so a crash either takes the whole page or none of it: no event is
-- lost and none is taken twice. The row lock also keeps two workers from taking the same page.
CREATE TABLE webhook_cursors (
  service_id varchar(50) PRIMARY KEY,
  -- The feed's opaque cursor of the last event taken; NULL: nothing yet, read from the oldest.
  feed_cursor text,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- One row per event still to be acknowledged: pending, or dead after the retry window. A row is
-- deleted when its receiver answers 2xx, so the table holds only what is owed.
CREATE TABLE webhook_deliveries (
  -- Taken in feed order, one service at a time: within a service (and so within an intent) a
  -- smaller id is an earlier event.
  id bigserial PRIMARY KEY,
  service_id varchar(50) NOT NULL,
  -- The feed's cursor of the event: the Idempotency-Key of every attempt, and the admin routes' key.
  feed_cursor text NOT NULL UNIQUE,
  intent_id uuid NOT NULL,
  -- The request body exactly as first serialized, so every attempt sends (and signs) the same bytes.
  body text NOT NULL,
  occurred_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  -- The retry window runs from the first attempt: an event held back behind an earlier one of its
  -- intent has not started to age.
  first_attempt_at timestamptz,
  last_attempt_at timestamptz,
  -- Not before; while an attempt is in flight, the end of its lease (a worker that died mid-send
  -- leaves the row to be tried again then).
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_outcome varchar(20),
  last_http_status integer,
  dead_at timestamptz
);

-- The workers' queue: rows due for an attempt.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE dead_at IS NULL;
-- "Is an earlier event of this intent still owed?", asked for every candidate.
CREATE INDEX webhook_deliveries_intent_idx ON webhook_deliveries (intent_id, id);
-- GET /admin/webhooks/dead.
CREATE INDEX webhook_deliveries_dead_idx ON webhook_deliveries (id) WHERE dead_at IS NOT NULL;
