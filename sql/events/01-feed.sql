-- The event feed (docs/EVENTS.md): every status change of an intent enters event_feed in the
-- transaction that makes it, written by a trigger on the audit log. Tables: migrations/013-event-feed.sql,
-- and 020-event-feed-written-once.sql, which fixed each row's place when it is inserted.

-- Which audit events are status changes: the creation (no statusFrom) and a move between intent
-- statuses. The PSP worker's sub-state moves share the audit log (their statusFrom is a sub-state)
-- and are no status change, except the one that also moves the intent: INQUIRING → MANUAL_REVIEW
-- (PSP_TRANSITIONS' intentTo in src/domain/intents/store/state-machine.ts). Sub-states move only
-- while the intent is AUTHORIZED, so that one enters the feed as AUTHORIZED → MANUAL_REVIEW.
CREATE OR REPLACE FUNCTION event_feed_is_intent_status(status text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT status IN ('CREATED', 'VALIDATED', 'AUTHORIZED', 'SETTLING', 'SETTLED', 'FAILED', 'MANUAL_REVIEW', 'CANCELED', 'EXPIRED')
$$;
CREATE OR REPLACE FUNCTION event_feed_is_status_change(status_from text, status_to text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT status_from IS NULL OR event_feed_is_intent_status(status_from) OR status_to = 'MANUAL_REVIEW'
$$;
CREATE OR REPLACE FUNCTION event_feed_status_from(status_from text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN status_from IS NULL OR event_feed_is_intent_status(status_from) THEN status_from ELSE 'AUTHORIZED' END
$$;

-- Statement-level with a transition table: one insert per statement however many events it wrote
-- (group commit writes a batch's events in one statement). A row's place in the feed is
-- (xact, seq): xact the writing transaction's id (pg_current_xact_id: 64 bits, never wraps), taken
-- once per statement, seq the audit event's id; a reader takes only rows whose xact is below the
-- oldest transaction still running. One intent's changes: a later change waited for the earlier
-- one's row lock on the intent, but may have taken its transaction id before it waited, so it can
-- hold the smaller id. Its xact is therefore raised to the largest of the intent's rows already in
-- the feed: after that wait, this statement's snapshot (a new one per statement in READ
-- COMMITTED) sees them. An intent created in this statement (every P2P payment's four events) has
-- no earlier row to read.
--
-- Each event's intent is read by its key, one row at a time (a LATERAL subquery kept apart by
-- OFFSET 0, so the planner cannot turn it into a join), and with sequential scans priced out: the
-- session keeps this statement's plan for its life, and a join planned while `intents` looked
-- empty read the whole table at every batch as it grew (docs/design.md#hot-stable-plans).
CREATE OR REPLACE FUNCTION event_feed_append() RETURNS trigger LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
  INSERT INTO event_feed (xact, seq, event_id, intent_id, service_id, operation_type, status_from, status_to, amount, currency, occurred_at)
  SELECT CASE WHEN e.created_here THEN me.xact
              ELSE greatest(me.xact, (SELECT max(f.xact) FROM event_feed f WHERE f.intent_id = e.intent_id)) END,
         e.id, e.id, e.intent_id, i.service_id, i.operation_type, event_feed_status_from(e.status_from), e.status_to, i.amount, i.currency, e.created_at
    FROM (SELECT a.*, bool_or(a.status_from IS NULL) OVER (PARTITION BY a.intent_id) AS created_here
            FROM appended a
           WHERE event_feed_is_status_change(a.status_from, a.status_to)) e
   CROSS JOIN LATERAL (SELECT n.service_id, n.operation_type, n.amount, n.currency FROM intents n WHERE n.id = e.intent_id OFFSET 0) i
   CROSS JOIN (SELECT pg_current_xact_id()::text::bigint AS xact) me;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS intent_events_feed ON intent_events;
CREATE TRIGGER intent_events_feed AFTER INSERT ON intent_events
  REFERENCING NEW TABLE AS appended
  FOR EACH STATEMENT EXECUTE FUNCTION event_feed_append();
