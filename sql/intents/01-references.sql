-- What the foreign keys from intent_events and transactions to intents held, per statement instead
-- of per row (migrations/017-intent-references-per-statement.sql dropped the foreign keys: they
-- checked every row with a query and a row lock of its own, six per settled P2P intent). The rows
-- a statement adds lock their intents FOR KEY SHARE at once, so no intent they name can be deleted
-- or change its id before they commit, and a statement naming an intent that does not exist fails
-- with the foreign key's SQLSTATE. The other side (an intent deleted, or its id changed, while rows
-- name it) is refused as the foreign key refused it.

-- Sequential scans priced out: the lock's plan lives as long as the session, and one made while
-- `intents` looked empty read the whole table at every statement as it grew (docs/design.md#hot-stable-plans).
CREATE OR REPLACE FUNCTION intent_references_lock() RETURNS trigger LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  -- An array, so that the lock is an index scan of intents whatever the statement's size
  -- (a transition table has no statistics to plan a join with).
  v_named uuid[] := ARRAY(SELECT DISTINCT intent_id FROM referencing);
  v_locked integer;
BEGIN
  SELECT count(*) INTO v_locked FROM (SELECT 1 FROM intents WHERE id = ANY (v_named) FOR KEY SHARE) AS locked;
  IF v_locked <> cardinality(v_named) THEN
    RAISE EXCEPTION 'insert on table "%" names an intent that does not exist', TG_TABLE_NAME
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS intent_events_intent_exists ON intent_events;
CREATE TRIGGER intent_events_intent_exists AFTER INSERT ON intent_events
  REFERENCING NEW TABLE AS referencing FOR EACH STATEMENT EXECUTE FUNCTION intent_references_lock();
DROP TRIGGER IF EXISTS transactions_intent_exists ON transactions;
CREATE TRIGGER transactions_intent_exists AFTER INSERT ON transactions
  REFERENCING NEW TABLE AS referencing FOR EACH STATEMENT EXECUTE FUNCTION intent_references_lock();

CREATE OR REPLACE FUNCTION intent_refuse_id_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.intent_id IS DISTINCT FROM OLD.intent_id THEN
    RAISE EXCEPTION 'the intent_id of a row of "%" does not change', TG_TABLE_NAME USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS transactions_intent_id_fixed ON transactions;
CREATE TRIGGER transactions_intent_id_fixed BEFORE UPDATE OF intent_id ON transactions
  FOR EACH ROW EXECUTE FUNCTION intent_refuse_id_change();

-- Every look-up by an index: the history rows of an intent's own and those of its refunds are
-- indexed apart (partial indexes, migrations/022-refunds.sql and 035), and a condition that names
-- neither side can use neither index. It read the whole of `transactions` at every batch that
-- dropped an intent refused for funds (intent-batch-writer.ts).
CREATE OR REPLACE FUNCTION intents_refuse_referenced_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_deleted uuid[] := ARRAY(SELECT id FROM deleted);
BEGIN
  IF EXISTS (SELECT 1 FROM intent_events WHERE intent_id = ANY (v_deleted))
     OR EXISTS (SELECT 1 FROM transactions WHERE intent_id = ANY (v_deleted) AND refund_id IS NULL)
     OR EXISTS (SELECT 1 FROM transactions WHERE intent_id = ANY (v_deleted) AND refund_id IS NOT NULL) THEN
    RAISE EXCEPTION 'an intent named by audit events or history rows is not deleted' USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS intents_referenced_not_deleted ON intents;
CREATE TRIGGER intents_referenced_not_deleted AFTER DELETE ON intents
  REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION intents_refuse_referenced_delete();

CREATE OR REPLACE FUNCTION intents_refuse_referenced_id_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id IS DISTINCT FROM OLD.id
     AND (EXISTS (SELECT 1 FROM intent_events WHERE intent_id = OLD.id)
          OR EXISTS (SELECT 1 FROM transactions WHERE intent_id = OLD.id AND refund_id IS NULL)
          OR EXISTS (SELECT 1 FROM transactions WHERE intent_id = OLD.id AND refund_id IS NOT NULL)) THEN
    RAISE EXCEPTION 'an intent named by audit events or history rows keeps its id' USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS intents_referenced_id_fixed ON intents;
CREATE TRIGGER intents_referenced_id_fixed BEFORE UPDATE OF id ON intents
  FOR EACH ROW EXECUTE FUNCTION intents_refuse_referenced_id_change();
