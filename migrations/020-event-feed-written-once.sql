-- The event feed written once (docs/EVENTS.md has the argument; docs/PERFORMANCE.md, Log,
-- 2026-11-27 early morning, what it saves). Until now every row was inserted unnumbered and
-- numbered after commit by a sequencer: a second version of every row, never HOT, and entries in
-- three indexes again. Now a row's place in the feed is fixed when it is inserted: (xact, seq),
-- xact the writing transaction's id (raised to the intent's previous row's xact, so one intent's
-- changes keep their order), seq the audit event's id. A reader takes only rows whose xact is
-- below the oldest transaction still running in its own statement's snapshot: every such row has
-- committed or never will, and every row that commits later has a larger xact.
--
-- Upgrading in place keeps every cursor already given: rows numbered before keep their seq and
-- get xact 0, the rows still unnumbered are numbered now in event order (xact 0 too), so an old
-- cursor e{seq} means (0, seq) and every new row comes after all of them. Stop the previous
-- release's processes first: their sequencer and readers know only seq. Every statement here may
-- run again over its own result.
ALTER TABLE event_feed ADD COLUMN IF NOT EXISTS xact bigint NOT NULL DEFAULT 0;
ALTER TABLE event_feed ALTER COLUMN xact DROP DEFAULT;

WITH last AS (
  SELECT last_seq FROM event_feed_state
), numbered AS (
  UPDATE event_feed f SET seq = last.last_seq + w.n
    FROM last, (SELECT event_id, row_number() OVER (ORDER BY event_id) AS n FROM event_feed WHERE seq IS NULL) w
   WHERE f.event_id = w.event_id AND f.seq IS NULL
  RETURNING f.seq
)
UPDATE event_feed_state SET last_seq = greatest(last_seq, (SELECT coalesce(max(seq), 0) FROM numbered));

ALTER TABLE event_feed ALTER COLUMN seq SET NOT NULL;
DROP INDEX IF EXISTS event_feed_unsequenced_idx;
DROP INDEX IF EXISTS event_feed_seq_idx;
DROP INDEX IF EXISTS event_feed_service_idx;
DROP INDEX IF EXISTS event_feed_intent_idx;
-- Readers of every service (the NATS publisher, webhooks) and pruning, in feed order.
CREATE UNIQUE INDEX IF NOT EXISTS event_feed_order_idx ON event_feed (xact, seq);
-- GET /events: one service's events after its cursor.
CREATE INDEX IF NOT EXISTS event_feed_service_order_idx ON event_feed (service_id, xact, seq);
-- One intent's events in order: a live stream resumed with Last-Event-ID, and the trigger's
-- lookup of the intent's newest xact.
CREATE INDEX IF NOT EXISTS event_feed_intent_order_idx ON event_feed (intent_id, xact, seq);

-- last_seq is now the end of the numbering before this migration: a cursor (0, n) above it was
-- never issued (422). The pruning mark becomes a position (pruned_through_xact, pruned_through_seq).
ALTER TABLE event_feed_state ADD COLUMN IF NOT EXISTS pruned_through_xact bigint NOT NULL DEFAULT 0;
-- A background reader's position, (after_xact, after_seq); stored positions were seqs: (0, seq).
ALTER TABLE event_feed_readers ADD COLUMN IF NOT EXISTS after_xact bigint NOT NULL DEFAULT 0;

-- xact is the writing transaction's id (pg_current_xact_id: 64 bits, never wraps), taken once per
-- statement. One intent's changes: a later change waited for the earlier one's row lock on the
-- intent, but may have taken its transaction id before it waited, so it can hold the smaller id.
-- Its xact is therefore raised to the largest of the intent's rows already in the feed: after
-- that wait, this statement's snapshot (a new one per statement in READ COMMITTED) sees them. An
-- intent created in this statement (every P2P payment's four events) has no earlier row to read.
CREATE OR REPLACE FUNCTION event_feed_append() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_feed (xact, seq, event_id, intent_id, service_id, operation_type, status_from, status_to, amount, currency, occurred_at)
  SELECT CASE WHEN e.created_here THEN me.xact
              ELSE greatest(me.xact, (SELECT max(f.xact) FROM event_feed f WHERE f.intent_id = e.intent_id)) END,
         e.id, e.id, e.intent_id, i.service_id, i.operation_type, event_feed_status_from(e.status_from), e.status_to, i.amount, i.currency, e.created_at
    FROM (SELECT a.*, bool_or(a.status_from IS NULL) OVER (PARTITION BY a.intent_id) AS created_here
            FROM appended a
           WHERE event_feed_is_status_change(a.status_from, a.status_to)) e
    JOIN intents i ON i.id = e.intent_id
   CROSS JOIN (SELECT pg_current_xact_id()::text::bigint AS xact) me;
  RETURN NULL;
END $$;
