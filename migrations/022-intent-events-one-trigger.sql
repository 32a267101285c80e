-- One statement trigger on intent_events instead of two. The reference check (017) and the feed
-- (020) each read the statement's intents: the check locked them by array, the feed joined them
-- again once per event, four probes per settled P2P intent. Now one trigger reads each named
-- intent once, by array and FOR KEY SHARE, and takes the feed's columns from that read; on
-- PGlite it also saves one PL/pgSQL call of fixed cost per batch. What it refuses (the same
-- SQLSTATE and message as 017) and what it appends (the same xact and seq as 020) are unchanged;
-- transactions keep 017's trigger. Every statement here may run again over its own result.
CREATE OR REPLACE FUNCTION intent_events_reference_and_feed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  -- An array, so that the lock is an index scan of intents whatever the statement's size
  -- (a transition table has no statistics to plan a join with).
  v_named uuid[] := ARRAY(SELECT DISTINCT intent_id FROM appended);
  v_locked integer;
BEGIN
  -- The feed's rows are inserted before the count is checked: a statement naming a missing
  -- intent fails as a whole, and its feed rows with it.
  WITH named AS MATERIALIZED (
    SELECT i.id, i.service_id, i.operation_type, i.amount, i.currency
      FROM intents i
     WHERE i.id = ANY (v_named)
       FOR KEY SHARE
  ), fed AS (
    -- xact and seq as in 020, whose comment has the argument: an intent not created in this
    -- statement has its xact raised to the largest of its rows already in the feed.
    INSERT INTO event_feed (xact, seq, event_id, intent_id, service_id, operation_type, status_from, status_to, amount, currency, occurred_at)
    SELECT CASE WHEN e.created_here THEN me.xact
                ELSE greatest(me.xact, (SELECT max(f.xact) FROM event_feed f WHERE f.intent_id = e.intent_id)) END,
           e.id, e.id, e.intent_id, i.service_id, i.operation_type, event_feed_status_from(e.status_from), e.status_to, i.amount, i.currency, e.created_at
      FROM (SELECT a.*, bool_or(a.status_from IS NULL) OVER (PARTITION BY a.intent_id) AS created_here
              FROM appended a
             WHERE event_feed_is_status_change(a.status_from, a.status_to)) e
      JOIN named i ON i.id = e.intent_id
     CROSS JOIN (SELECT pg_current_xact_id()::text::bigint AS xact) me
  )
  SELECT count(*) INTO v_locked FROM named;
  IF v_locked <> cardinality(v_named) THEN
    RAISE EXCEPTION 'insert on table "%" names an intent that does not exist', TG_TABLE_NAME
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER intent_events_feed AFTER INSERT ON intent_events
  REFERENCING NEW TABLE AS appended FOR EACH STATEMENT EXECUTE FUNCTION intent_events_reference_and_feed();
DROP TRIGGER IF EXISTS intent_events_intent_exists ON intent_events;
-- No trigger calls it any more; intent_references_lock stays, for transactions.
DROP FUNCTION IF EXISTS event_feed_append();
