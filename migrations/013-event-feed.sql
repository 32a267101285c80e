-- The event feed (GET /events, the NATS publisher, webhooks): one row per status change of an
-- intent, in an order every reader can follow with a cursor. docs/EVENTS.md has the argument
-- for why a reader following the cursor sees each row exactly once.
--
-- intent_events is the append-only audit log (its trigger refuses UPDATE and DELETE), so it can
-- be neither numbered after commit nor pruned: the feed is a table of its own, filled by a
-- trigger on intent_events, so every path that writes an audit event feeds it in the same
-- transaction, without a second writer to forget.
CREATE TABLE event_feed (
  -- intent_events.id: within one intent, a later change has the larger id (it waited for the
  -- earlier change's row lock on the intent before it wrote its event).
  event_id bigint NOT NULL,
  intent_id uuid NOT NULL,
  service_id varchar(50) NOT NULL,
  operation_type varchar(50) NOT NULL,
  status_from text,
  status_to text NOT NULL,
  amount bigint NOT NULL,
  currency char(3) NOT NULL,
  occurred_at timestamptz NOT NULL,
  -- Given after commit by the one sequencer (src/domain/events/feed.ts); the cursor encodes it.
  seq bigint
);
-- What the sequencer takes, oldest first; a row leaves this index when it is numbered.
CREATE INDEX event_feed_unsequenced_idx ON event_feed (event_id) WHERE seq IS NULL;
-- Readers of every service (the NATS publisher, webhooks) and pruning, in feed order.
CREATE UNIQUE INDEX event_feed_seq_idx ON event_feed (seq) WHERE seq IS NOT NULL;
-- GET /events: one service's events after its cursor.
CREATE INDEX event_feed_service_idx ON event_feed (service_id, seq) WHERE seq IS NOT NULL;
-- A live stream resumed with Last-Event-ID: one intent's events after the cursor.
CREATE INDEX event_feed_intent_idx ON event_feed (intent_id, seq) WHERE seq IS NOT NULL;

-- The sequencer's counter and the pruning mark, one row. last_seq only grows (pruning never
-- lowers it), so a seq is never given twice even when every row is pruned.
CREATE TABLE event_feed_state (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  last_seq bigint NOT NULL DEFAULT 0,
  -- Every row with seq <= this is pruned: a cursor below it has missed events (410 CURSOR_EXPIRED).
  pruned_through_seq bigint NOT NULL DEFAULT 0
);
INSERT INTO event_feed_state DEFAULT VALUES;

-- Where each background reader of the feed stands (the NATS publisher): stored after its work
-- is done, so a crash repeats work instead of losing it.
CREATE TABLE event_feed_readers (
  reader text PRIMARY KEY,
  after_seq bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Which audit events are status changes: the creation (no statusFrom) and a move between intent
-- statuses. The PSP worker's sub-state moves share the audit log (their statusFrom is a sub-state)
-- and are no status change, except the one that also moves the intent: INQUIRING → MANUAL_REVIEW
-- (PSP_TRANSITIONS' intentTo in src/domain/intents/store/state-machine.ts). Sub-states move only
-- while the intent is AUTHORIZED, so that one enters the feed as AUTHORIZED → MANUAL_REVIEW.
CREATE FUNCTION event_feed_is_intent_status(status text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT status IN ('CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLING', 'SETTLED', 'FAILED', 'MANUAL_REVIEW', 'CANCELED', 'EXPIRED')
$$;
CREATE FUNCTION event_feed_is_status_change(status_from text, status_to text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT status_from IS NULL OR event_feed_is_intent_status(status_from) OR status_to = 'MANUAL_REVIEW'
$$;
CREATE FUNCTION event_feed_status_from(status_from text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN status_from IS NULL OR event_feed_is_intent_status(status_from) THEN status_from ELSE 'AUTHORIZED' END
$$;

-- Statement-level with a transition table: one insert per statement however many events it wrote
-- (group commit writes a batch's events in one statement).
CREATE FUNCTION event_feed_append() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_feed (event_id, intent_id, service_id, operation_type, status_from, status_to, amount, currency, occurred_at)
  SELECT e.id, e.intent_id, i.service_id, i.operation_type, event_feed_status_from(e.status_from), e.status_to, i.amount, i.currency, e.created_at
    FROM appended e
    JOIN intents i ON i.id = e.intent_id
   WHERE event_feed_is_status_change(e.status_from, e.status_to);
  RETURN NULL;
END $$;
CREATE TRIGGER intent_events_feed AFTER INSERT ON intent_events
  REFERENCING NEW TABLE AS appended
  FOR EACH STATEMENT EXECUTE FUNCTION event_feed_append();

-- The audit log written before this migration enters the feed too, numbered in event order.
WITH numbered AS (
  INSERT INTO event_feed (event_id, intent_id, service_id, operation_type, status_from, status_to, amount, currency, occurred_at, seq)
  SELECT e.id, e.intent_id, i.service_id, i.operation_type, event_feed_status_from(e.status_from), e.status_to, i.amount, i.currency, e.created_at,
         row_number() OVER (ORDER BY e.id)
    FROM intent_events e
    JOIN intents i ON i.id = e.intent_id
   WHERE event_feed_is_status_change(e.status_from, e.status_to)
  RETURNING seq)
UPDATE event_feed_state SET last_seq = (SELECT coalesce(max(seq), 0) FROM numbered);
